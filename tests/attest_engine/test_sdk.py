"""End to end with the real Attest Python SDK (attest-ai) as the client of our engine.

The SDK finds the engine through ATTEST_ENGINE_PATH (an executable file) and starts it as
`<path> --log-level=warn`; here that path is a small wrapper script that execs `python -m attest_engine`.
The module-scoped `attest_engine` fixture below overrides the SDK pytest plugin's session fixture of the
same name so the SDK's own `attest` fixture (and its `evaluate`) drive our engine.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from attest import AgentResult, Trace, TraceBuilder, expect
from attest import plugin as attest_plugin
from attest._proto.codec import ProtocolError
from attest.client import AttestClient
from attest.engine_manager import EngineManager
from attest.plugin import AttestEngineFixture

from .conftest import ROOT, StubProvider


def write_wrapper(directory: Path, *extra_args: str) -> Path:
    """An executable that records its arguments and execs our engine, as ATTEST_ENGINE_PATH expects."""
    wrapper = directory / "attest-engine"
    extra = " ".join(f"'{arg}'" for arg in extra_args)
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{directory}/argv.log"\n'
        f'PYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -m attest_engine "$@" {extra}\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper


def refund_trace() -> Trace:
    """The §2.2 refund example, built with the SDK's TraceBuilder."""
    return (
        TraceBuilder(agent_id="customer-service-agent")
        .set_trace_id("trc_abc123")
        .set_input(user_message="I want a refund for order ORD-123", context={})
        .add_llm_call(
            "reasoning",
            args={"model": "gpt-4.1", "prompt": "You are a customer service agent."},
            result={"completion": "I need to look up the order to verify eligibility."},
            metadata={"duration_ms": 1200, "cost_usd": 0.003},
        )
        .add_tool_call(
            "lookup_order",
            args={"order_id": "ORD-123"},
            result={"status": "delivered", "amount": 89.99, "eligible_for_refund": True},
            metadata={"duration_ms": 45},
        )
        .add_tool_call(
            "process_refund",
            args={"order_id": "ORD-123", "amount": 89.99},
            result={"refund_id": "RFD-001", "estimated_days": 3},
            metadata={"duration_ms": 120},
        )
        .set_output(
            message="Your refund of $89.99 has been processed. You'll see it in 3 business days. Refund ID: RFD-001.",
            structured={"refund_id": "RFD-001", "confidence": 0.95},
        )
        .set_metadata(
            total_tokens=1350, cost_usd=0.0067, latency_ms=4200, model="gpt-4.1", timestamp="2026-02-18T10:30:00Z"
        )
        .build()
    )


@pytest.fixture(scope="module")
def engine_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attest-engine")


@pytest.fixture(scope="module")
def attest_engine(engine_dir: Path) -> Iterator[AttestEngineFixture]:
    """Overrides the SDK plugin's fixture: the SDK's own engine discovery, pointed at our wrapper."""
    patch = pytest.MonkeyPatch()
    patch.setenv("ATTEST_ENGINE_PATH", str(write_wrapper(engine_dir)))
    patch.setenv("ATTEST_ENGINE_NO_DOWNLOAD", "1")
    fixture = AttestEngineFixture()
    fixture.start()
    yield fixture
    fixture.stop()
    patch.undo()
    # The SDK's pytest plugin prints a diagnostic block at the end of the run for every result that did not
    # pass, even in tests that expected the failure; these tests check failures on purpose.
    attest_plugin._session_results.clear()


def statuses(result: AgentResult) -> list[str]:
    return [item.status for item in result.assertion_results]


def test_the_sdk_starts_the_engine_as_documented(attest: AttestEngineFixture, engine_dir: Path) -> None:
    assert (engine_dir / "argv.log").read_text().split() == ["--log-level=warn"]
    assert attest._manager is not None and attest._manager._init_result is not None
    init = attest._manager._init_result
    assert init.compatible and "layers_1_4" in init.capabilities
    assert (init.max_concurrent_requests, init.max_trace_size_bytes, init.max_steps_per_trace) == (
        64,
        10485760,
        10000,
    )


def test_refund_example_passes(attest: AttestEngineFixture) -> None:
    chain = (
        expect(refund_trace())
        .output_matches_schema(
            {
                "type": "object",
                "required": ["refund_id", "confidence"],
                "properties": {
                    "refund_id": {"type": "string", "pattern": "^RFD-\\d+$"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
            }
        )
        .tool_args_match_schema("process_refund", {"type": "object", "required": ["order_id", "amount"]})
        .tool_result_matches_schema("lookup_order", {"type": "object", "required": ["status", "amount"]})
        .cost_under(0.01)
        .latency_under(5000, soft=True)
        .tokens_between(100, 2000)
        .step_count("eq", 3)
        .tool_call_count("lte", 2)
        .tools_called_in_order(["lookup_order", "process_refund"])
        .tools_called_exactly(["lookup_order", "process_refund"])
        .no_tool_loops("lookup_order", max_repetitions=1)
        .no_duplicate_tools()
        .required_tools(["process_refund"])
        .forbidden_tools(["delete_account"])
        .output_contains("refund")
        .output_not_contains("cannot process", soft=True)
        .output_matches_regex(r"RFD-\d{3,}")
        .output_has_all_keywords(["refund", "business days", "RFD-"], soft=True)
        .output_has_any_keyword(["refund", "credit"])
        .output_forbids(["kill", "harm", "illegal", "bomb"])
        .content_contains("steps[?name=='lookup_order'].result.status", "delivered")
    )
    result = attest.evaluate(chain)
    assert result.passed, result.render_diagnostics()
    assert result.pass_count == 21 and result.total_cost == 0.0
    first = result.assertion_results[0]
    assert first.layer == 1 and first.type == "schema" and first.explanation.startswith("output.structured matches")


def test_failing_variants(attest: AttestEngineFixture) -> None:
    chain = (
        expect(refund_trace())
        .tools_called_in_order(["process_refund", "lookup_order"])
        .cost_under(0.001)
        .latency_under(1000, soft=True)
        .output_matches_regex(r"REF-\d+")
        .output_contains("apolog", soft=True)
        .forbidden_tools(["process_refund"])
    )
    result = attest.evaluate(chain)
    assert not result.passed
    assert statuses(result) == ["hard_fail", "hard_fail", "soft_fail", "hard_fail", "soft_fail", "hard_fail"]
    assert len(result.hard_failures) == 4 and len(result.soft_failures) == 2
    explanations = [item.explanation for item in result.failed_assertions]
    assert "metadata.cost_usd = 0.0067, constraint lte 0.001 violated." in explanations
    assert "metadata.latency_ms = 4200, constraint lte 1000 violated." in explanations
    diagnostics = result.render_diagnostics()
    assert "constraint lte 0.001 violated" in diagnostics


def test_failing_trace_shapes(attest: AttestEngineFixture) -> None:
    trace = refund_trace()
    trace.steps.append(trace.steps[1])  # lookup_order again, after the refund
    trace.output["structured"]["confidence"] = 1.23
    result = attest.evaluate(
        expect(trace)
        .output_matches_schema({"properties": {"confidence": {"maximum": 1.0}}})
        .no_tool_loops("lookup_order", max_repetitions=1)
        .no_duplicate_tools(soft=True)
        .tools_called_exactly(["lookup_order", "process_refund", "delete"])
        .tool_call_count("eq", 2)
    )
    assert statuses(result) == ["hard_fail", "hard_fail", "soft_fail", "hard_fail", "hard_fail"]
    assert result.assertion_results[0].explanation == (
        "output.structured failed schema validation: confidence: 1.23 is greater than the maximum of 1.0."
    )
    assert result.assertion_results[1].explanation == (
        "'lookup_order' called 2 times (max_repetitions 1) at steps [1, 3]."
    )


def test_engine_errors_reach_the_sdk_as_protocol_errors(attest: AttestEngineFixture) -> None:
    with pytest.raises(ProtocolError) as caught:
        attest.evaluate(expect(refund_trace()).output_contains("refund").output_matches_regex("[unclosed"))
    assert caught.value.code == 1002
    assert caught.value.data is not None and caught.value.data.error_type == "ASSERTION_ERROR"
    assert "invalid regex '[unclosed'" in caught.value.error_message
    # Assertion types beyond protocol v1 are refused, not passed.
    with pytest.raises(ProtocolError, match="unknown assertion type 'trace_tree'"):
        attest.evaluate(expect(refund_trace()).agent_called("billing-agent"))
    # No provider is configured here: a judge assertion is an error, never a fabricated pass.
    with pytest.raises(ProtocolError, match="llm_judge assertions need capability layers_5_6"):
        attest.evaluate(expect(refund_trace()).passes_judge("Is the refund confirmed?"))
    trace = refund_trace()
    trace.trace_id = "   "
    with pytest.raises(ProtocolError) as caught:
        attest.evaluate(expect(trace).output_contains("refund"))
    assert caught.value.code == 1001
    assert attest.evaluate(expect(refund_trace()).output_contains("refund")).passed  # still serving


def test_sdk_client_concurrency_and_plugin_results(engine_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's AttestClient reader loop: concurrent batches matched by id, and submit_plugin_result."""
    monkeypatch.setenv("ATTEST_ENGINE_PATH", str(write_wrapper(engine_dir)))

    async def scenario() -> tuple[list[Any], bool, int | None]:
        manager = EngineManager()
        await manager.start()
        client = AttestClient(manager)
        client.start_reader()
        chains = [expect(refund_trace()).output_contains("refund").cost_under(0.001 * (i % 20)) for i in range(40)]
        results = await asyncio.gather(*(client.evaluate_batch(c.trace, c.assertions) for c in chains))
        accepted = await client.submit_plugin_result(
            "trc_abc123", "safety_checker", "plugin_assert_001", "pass", 0.88, "Classifier score 0.88."
        )
        await client.stop_reader()
        await manager.stop()
        assert manager._process is not None
        return results, accepted, manager._process.returncode

    results, accepted, returncode = asyncio.run(scenario())
    assert accepted is True and returncode == 0
    for i, result in enumerate(results):
        expected = "pass" if 0.001 * (i % 20) >= 0.0067 else "hard_fail"
        assert [r.status for r in result.results] == ["pass", expected]


def test_sdk_with_providers(tmp_path: Path, stub: StubProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """Layers 5–6 through the SDK, with the engine configured (by the wrapper) for a stub provider."""
    config = stub.config_file(tmp_path / "engine.json")
    monkeypatch.setenv("ATTEST_ENGINE_PATH", str(write_wrapper(tmp_path, "--config", str(config))))
    fixture = AttestEngineFixture()
    fixture.start()
    try:
        assert fixture._manager is not None and fixture._manager._init_result is not None
        assert "layers_5_6" in fixture._manager._init_result.capabilities
        stub.judge_score = 0.92
        result = fixture.evaluate(
            expect(refund_trace())
            .passes_judge("Does the reply confirm the refund with an ID?")
            .output_similar_to("Your refund of $89.99 has been processed. Refund ID: RFD-001.", threshold=0.7)
        )
        assert statuses(result) == ["pass", "pass"], result.render_diagnostics()
        stub.judge_score = 0.3
        failed = fixture.evaluate(expect(refund_trace()).passes_judge("Is it a poem?", soft=True))
        assert statuses(failed) == ["soft_fail"]
        with pytest.raises(ProtocolError, match="threshold must be a number"):
            fixture.evaluate(expect(refund_trace()).output_similar_to("refund", threshold="dynamic"))
    finally:
        fixture.stop()
        attest_plugin._session_results.clear()
    judge_calls = [body for path, body in stub.requests if path.endswith("/chat/completions")]
    assert "Criterion: Does the reply confirm the refund with an ID?" in judge_calls[0]["messages"][1]["content"]
    assert json.loads(json.dumps(judge_calls))  # plain JSON bodies
    assert os.environ.get("ATTEST_SIMULATION", "") in ("", "0")  # results came from the engine, not simulation
