"""Observed sessions → Attest v1 traces → our `attest-engine` evaluating Attest assertions on them.

The recordings are the real-peer sessions of the wire fixtures (official `mcp`, `a2a-sdk`, AG-UI peers)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from addon.recordings import decode_recordings
from attest_engine.trace_validation import validate_trace
from oatf_engine.attest_traces import TraceCollector
from oatf_engine.events import UNINSPECTED_EVENT
from testing.paths import WIRE_FIXTURES

FIXTURES = WIRE_FIXTURES
ENGINE = Path(sys.executable).parent / "attest-engine"


def traces_of(*names: str) -> list[dict[str, Any]]:
    events, _ = decode_recordings([str(FIXTURES / n) for n in names])
    collector = TraceCollector()
    for event in events:
        collector.observe(event)
    return collector.traces()


@pytest.mark.parametrize("fixture", ["mcp_http.mitm", "mcp_sse.mitm", "a2a_v03.mitm", "a2a_v1.mitm", "ag_ui.mitm"])
def test_every_recorded_session_exports_a_valid_trace(fixture: str) -> None:
    traces = traces_of(fixture)
    assert traces
    for trace in traces:
        assert validate_trace(trace) is None
        assert trace["output"] and trace["metadata"]["source"] == "oatf-watch"


def test_mcp_tool_calls_become_tool_call_steps() -> None:
    steps = [s for t in traces_of("mcp_http.mitm") for s in t["steps"]]
    assert steps and all(s["type"] == "tool_call" and s["metadata"]["protocol"] == "mcp" for s in steps)
    assert all(isinstance(s["args"], dict) and "content" in s["result"] for s in steps if not s["metadata"]["is_error"])


def test_the_decoders_marks_of_traffic_not_inspected_are_no_messages_of_a_trace() -> None:
    """A mark (`UNINSPECTED_EVENT`) is where a message was not read, not a message: it adds nothing to a trace."""
    events, _ = decode_recordings([str(FIXTURES / "mcp_http.mitm")])
    marks = [dataclasses.replace(e, event_type=UNINSPECTED_EVENT, content={"code": "oversize_body", "message": ""},
                                 session_keys={"mcp_session": "only-marks"}) for e in events]
    with_marks, without = TraceCollector(), TraceCollector()
    for event in events:
        without.observe(event)
    for event in [*events, *marks]:
        with_marks.observe(event)
    assert with_marks.traces() == without.traces() and with_marks.traces()


def test_a2a_delegations_become_agent_calls_with_sub_traces() -> None:
    for fixture in ("a2a_v03.mitm", "a2a_v1.mitm"):
        steps = [s for t in traces_of(fixture) for s in t["steps"]]
        assert steps and all(s["type"] == "agent_call" for s in steps), fixture
        assert all(validate_trace(s["sub_trace"]) is None for s in steps)


def test_ag_ui_runs_give_input_tool_calls_and_text_output() -> None:
    [trace] = traces_of("ag_ui.mitm")[:1]
    assert "messages" in (trace.get("input") or {})
    assert trace["output"]["message"] or trace["steps"]


def rpc(lines: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Send JSON-RPC requests to a fresh attest-engine over stdio; its answers by id."""
    payload = "".join(json.dumps(m, separators=(",", ":")) + "\n" for m in lines)
    done = subprocess.run([str(ENGINE), "--log-level=warn"], input=payload, capture_output=True, text=True,
                          timeout=60, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {a["id"]: a for a in answers}


def test_attest_assertions_run_on_a_captured_session() -> None:
    trace = next(t for t in traces_of("mcp_http.mitm") if t["steps"])
    tool = trace["steps"][0]["name"]
    assertions = [
        {"assertion_id": "called", "type": "trace", "spec": {"check": "required_tools", "tools": [tool]}},
        {"assertion_id": "never_shell", "type": "trace", "spec": {"check": "forbidden_tools", "tools": ["shell"]}},
        {"assertion_id": "not_called", "type": "trace", "spec": {"check": "forbidden_tools", "tools": [tool]}},
    ]
    answers = rpc([
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "sdk_name": "oatf-watch-test", "sdk_version": "0.1.0", "protocol_version": 1,
            "required_capabilities": ["layers_1_4"], "preferred_encoding": "json"}},
        {"jsonrpc": "2.0", "id": 2, "method": "evaluate_batch", "params": {"trace": trace, "assertions": assertions}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": {}},
    ])
    assert answers[1]["result"]["compatible"] is True
    results = {r["assertion_id"]: r["status"] for r in answers[2]["result"]["results"]}
    assert results == {"called": "pass", "never_shell": "pass", "not_called": "hard_fail"}
