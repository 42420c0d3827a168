"""The protocol over a real subprocess pipe (§1, §2, §5, §6): every method, every error code, the lifecycle."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    INITIALIZE,
    EngineProcess,
    StubProvider,
    assertion,
    batch,
    error_of,
    refund_trace,
    request,
)

CONTAINS_REFUND = assertion("a1", "content", target="output.message", check="contains", value="refund")


def slow_trace(marker: str) -> dict[str, Any]:
    trace = refund_trace()
    trace["trace_id"] = f"trc_{marker}"
    trace["output"]["message"] += f" {marker}"
    return trace


def judged(request_id: int, marker: str) -> dict[str, Any]:
    """A batch whose llm_judge call the stub delays by the marker in its output message."""
    return batch(request_id, slow_trace(marker), assertion("j", "llm_judge", rubric="tone"))


def assert_stdout_is_json_lines(engine: EngineProcess) -> None:
    for line in engine.raw_stdout:
        assert line.endswith(b"\n") and b"\n" not in line[:-1]
        assert isinstance(json.loads(line), dict)


# ------------------------------------------------------------------------------------------ initialize


def test_initialize_negotiates_and_advertises_limits(engine: EngineProcess) -> None:
    response = engine.initialize(required_capabilities=["layers_1_4", "soft_failures"])
    assert response["result"] == {
        "engine_version": "0.1.0",
        "protocol_version": 1,
        "capabilities": ["layers_1_4", "soft_failures"],
        "missing": [],
        "compatible": True,
        "encoding": "json",
        "max_concurrent_requests": 64,
        "max_trace_size_bytes": 10485760,
        "max_steps_per_trace": 10000,
    }


def test_unknown_request_fields_are_ignored(engine: EngineProcess) -> None:
    response = engine.call({**request(1, "initialize", {**INITIALIZE, "future_field": 1}), "extension": {}})
    assert response["result"]["compatible"] is True


@pytest.mark.parametrize("args", [("--log-level", "warn"), ("--log-level=warn",), ("--log-level=error",), ()])
def test_log_level_flag_forms(spawn: Any, args: tuple[str, ...]) -> None:
    engine = spawn(*args)
    assert engine.initialize()["result"]["compatible"] is True
    engine.call(request(9, "shutdown", {}))
    assert engine.wait() == 0
    assert engine.stderr == b""  # nothing is logged at warn or above in a normal session


def test_debug_logs_are_structured_json_on_stderr(spawn: Any) -> None:
    engine = spawn("--log-level", "debug")
    engine.initialize()
    engine.call(batch(1, refund_trace(), CONTAINS_REFUND))
    engine.call(request(2, "shutdown"))
    assert engine.wait() == 0
    records = [json.loads(line) for line in engine.stderr.decode().splitlines()]
    assert {"engine started", "request", "evaluation complete", "engine stopped"} <= {r["msg"] for r in records}
    for record in records:
        assert record["logger"] == "engine" and record["level"] in {"debug", "info"}
        assert record["ts"].endswith("Z") and len(record["ts"]) == 24
    completed = next(r for r in records if r["msg"] == "evaluation complete")
    assert completed["trace_id"] == "trc_abc123" and isinstance(completed["duration_ms"], int)


@pytest.mark.parametrize("version", [0, 1])
def test_version_window_accepts_current_and_previous(engine: EngineProcess, version: int) -> None:
    assert engine.initialize(protocol_version=version)["result"]["protocol_version"] == version


@pytest.mark.parametrize("version", [2, 3, -1])
def test_versions_outside_the_window_are_session_errors(engine: EngineProcess, version: int) -> None:
    error = error_of(engine.initialize(protocol_version=version), 3003)
    assert error["message"] == f"protocol version {version} not supported; engine supports versions 0 and 1"
    assert error["data"]["error_type"] == "SESSION_ERROR" and error["data"]["retryable"] is False
    if version > 1:
        assert error["data"]["detail"] == "Upgrade the engine binary or downgrade the SDK protocol_version"
    assert engine.initialize()["result"]["compatible"] is True  # the session was not established


def test_missing_capabilities_make_the_session_incompatible(engine: EngineProcess) -> None:
    result = engine.initialize(required_capabilities=["layers_1_4", "simulation", "multi_agent", "simulation"])
    assert result["result"]["compatible"] is False
    assert result["result"]["missing"] == ["simulation", "multi_agent"]
    error_of(engine.call(batch(1, refund_trace(), CONTAINS_REFUND)), 3003)
    assert engine.initialize()["result"]["compatible"] is True
    assert "result" in engine.call(batch(2, refund_trace(), CONTAINS_REFUND))


def test_initialize_twice(engine: EngineProcess) -> None:
    engine.initialize()
    error = error_of(engine.initialize(), 3003)
    assert error["message"] == "initialize called twice"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (None, "initialize params must be an object"),
        ({**INITIALIZE, "protocol_version": "1"}, "initialize params.protocol_version must be an integer"),
        ({**INITIALIZE, "sdk_name": None}, "initialize params.sdk_name must be a string"),
        (
            {**INITIALIZE, "required_capabilities": "layers_1_4"},
            "initialize params.required_capabilities must be an array of strings",
        ),
    ],
)
def test_initialize_invalid_params(engine: EngineProcess, params: Any, message: str) -> None:
    error = error_of(engine.call(request(1, "initialize", params)), -32602)
    assert error["message"] == message and error["data"]["error_type"] == "INVALID_PARAMS"


# ------------------------------------------------------------------------------------- session errors


def test_evaluate_batch_before_initialize(engine: EngineProcess) -> None:
    response = engine.call(batch(5, refund_trace(), CONTAINS_REFUND))
    assert response == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {
            "code": 3003,
            "message": "evaluate_batch called before initialize",
            "data": {
                "error_type": "SESSION_ERROR",
                "retryable": False,
                "detail": "Call initialize first to establish a session before sending evaluate_batch requests.",
            },
        },
    }


def test_submit_plugin_result_before_initialize(engine: EngineProcess) -> None:
    error = error_of(engine.call(request(1, "submit_plugin_result", {})), 3003)
    assert error["message"] == "submit_plugin_result called before initialize"


@pytest.mark.parametrize("method", ["query_drift", "generate_user_message", "evaluate", ""])
def test_unknown_methods(engine: EngineProcess, method: str) -> None:
    if method:
        error = error_of(engine.call(request(1, method, {})), -32601)  # before initialize
        assert error["message"] == f"method not found: {method}"
        assert error["data"]["error_type"] == "METHOD_NOT_FOUND"
        engine.initialize()
        error_of(engine.call(request(2, method)), -32601)
    else:
        error_of(engine.call(request(1, method)), -32600)


# ------------------------------------------------------------------------------------ malformed input


@pytest.mark.parametrize(
    ("line", "code", "response_id"),
    [
        (b"not json", -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"initialize"', -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"v":NaN}}', -32700, None),
        (b'\xff\xfe{"jsonrpc":"2.0"}', -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"x"} {"second":1}', -32700, None),
        (b"[]", -32600, None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"initialize"}]', -32600, None),
        (b"42", -32600, None),
        (b'"initialize"', -32600, None),
        (b"null", -32600, None),
        (b'{"jsonrpc":"1.0","id":3,"method":"initialize"}', -32600, 3),
        (b'{"id":4,"method":"initialize"}', -32600, 4),
        (b'{"jsonrpc":"2.0","id":5}', -32600, 5),
        (b'{"jsonrpc":"2.0","id":6,"method":7}', -32600, 6),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"initialize"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":"abc","method":"initialize","params":[1]}', -32602, "abc"),
    ],
)
def test_malformed_messages_are_answered_and_the_engine_keeps_serving(
    engine: EngineProcess, line: bytes, code: int, response_id: Any
) -> None:
    engine.send_raw(line + b"\n")
    response = engine.read()
    assert response["id"] == response_id
    error_of(response, code)
    assert engine.initialize()["result"]["compatible"] is True


def test_notifications_are_not_answered(engine: EngineProcess) -> None:
    engine.send({"jsonrpc": "2.0", "method": "initialize", "params": INITIALIZE})
    engine.send({"jsonrpc": "2.0", "method": "no_such_method"})
    engine.send_raw(b"\n   \n")  # blank lines are skipped
    response = engine.call(request("after", "evaluate_batch", {"trace": refund_trace(), "assertions": []}))
    error_of(response, 3003)  # the notification did not initialize the session


def test_string_and_null_ids_are_echoed(engine: EngineProcess) -> None:
    assert engine.call(request("init-1", "initialize", INITIALIZE))["id"] == "init-1"
    engine.send(request(None, "evaluate_batch", {"trace": refund_trace(), "assertions": [CONTAINS_REFUND]}))
    assert engine.read()["id"] is None


# ------------------------------------------------------------------------------------- evaluate_batch


def test_the_spec_batch_over_the_pipe(engine: EngineProcess) -> None:
    engine.initialize()
    assertions = [
        {
            "assertion_id": "assert_001",
            "type": "schema",
            "request_id": "req_001",
            "spec": {
                "target": "steps[?name=='lookup_order'].result",
                "schema": {
                    "$schema": "https://json-schema.org/draft/2020-12",
                    "type": "object",
                    "required": ["status", "amount"],
                    "properties": {"status": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
                },
            },
        },
        {
            "assertion_id": "assert_002",
            "type": "constraint",
            "request_id": "req_002",
            "spec": {"field": "metadata.cost_usd", "operator": "lte", "value": 0.01},
        },
        {
            "assertion_id": "assert_003",
            "type": "trace",
            "request_id": "req_003",
            "spec": {"check": "contains_in_order", "tools": ["lookup_order", "process_refund"]},
        },
        {
            "assertion_id": "assert_004",
            "type": "content",
            "request_id": "req_004",
            "spec": {"target": "output.message", "check": "contains", "value": "refund"},
        },
        {
            "assertion_id": "assert_005",
            "type": "content",
            "request_id": "req_005",
            "spec": {"target": "output.message", "check": "not_contains", "value": "cannot process", "soft": True},
        },
    ]
    response = engine.call(batch(2, refund_trace(), *assertions))
    results = response["result"]["results"]
    assert [(r["assertion_id"], r["status"], r["request_id"]) for r in results] == [
        (f"assert_00{i}", "pass", f"req_00{i}") for i in range(1, 6)
    ]
    assert results[1]["explanation"] == "metadata.cost_usd = 0.0067, constraint lte 0.01 satisfied."
    assert results[2]["explanation"] == (
        "Tool sequence ['lookup_order', 'process_refund'] found in order at steps [1, 2]."
    )
    assert results[3]["explanation"] == "output.message contains 'refund'."
    assert results[4]["explanation"] == "output.message does not contain 'cannot process'."
    assert response["result"]["total_cost"] == 0.0


def test_invalid_trace_over_the_pipe(engine: EngineProcess) -> None:
    engine.initialize()
    trace = refund_trace()
    trace["steps"][2]["result"] = {"blob": "x" * 1_200_000}
    error = error_of(engine.call(batch(2, trace, CONTAINS_REFUND)), 1001)
    assert error["message"] == "trace step 'process_refund' result exceeds 1048576 bytes (actual: 1200011 bytes)"
    assert error["data"]["error_type"] == "INVALID_TRACE" and error["data"]["retryable"] is False


def test_trace_size_is_measured_on_the_wire(engine: EngineProcess) -> None:
    engine.initialize()
    trace = refund_trace()
    trace["steps"] = [{"type": "tool_call", "name": "t", "result": {"blob": "é" * 500_000}}] * 12  # 2-byte chars
    size = len(json.dumps(trace, separators=(",", ":"), ensure_ascii=False).encode())
    line = json.dumps(batch(2, trace, CONTAINS_REFUND), separators=(",", ":"), ensure_ascii=False).encode()
    engine.send_raw(line + b"\n")
    error = error_of(engine.read(), 1001)
    assert error["message"] == f"trace exceeds max size: {size} > 10485760 bytes"
    assert "Max allowed: 10485760 bytes (10 MB)" in error["data"]["detail"]


def test_a_50_mb_line_is_answered_and_the_engine_keeps_serving(engine: EngineProcess) -> None:
    engine.initialize()
    trace = refund_trace()
    trace["steps"] = [{"type": "tool_call", "name": "t", "result": {"blob": "x" * 500_000}}] * 100
    line = json.dumps(batch(7, trace, CONTAINS_REFUND), separators=(",", ":")).encode() + b"\n"
    assert len(line) > 50_000_000
    writer = threading.Thread(target=engine.send_raw, args=(line,))
    writer.start()
    error = error_of(engine.read(timeout=60), 1001)
    writer.join()
    assert engine.proc.poll() is None
    assert error["message"] == (
        f"trace exceeds max size: request of {len(line) - 1} bytes > the 33554432-byte message limit "
        "(max trace size 10485760 bytes)"
    )
    assert engine.call(batch(8, refund_trace(), CONTAINS_REFUND))["result"]["results"][0]["status"] == "pass"
    huge_other = b'{"jsonrpc":"2.0","id":9,"method":"no_such","params":"' + b"x" * 40_000_000 + b'"}\n'
    engine.send_raw(huge_other)
    error = error_of(engine.read(timeout=60), -32600)
    assert error["message"].startswith(f"invalid request: message of {len(huge_other) - 1} bytes exceeds")


# ------------------------------------------------------------------------------- submit_plugin_result


def test_submit_plugin_result_and_the_report(spawn: Any, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    config = tmp_path / "engine.json"
    config.write_text(json.dumps({"report_path": str(report)}))
    engine = spawn("--log-level=warn", "--config", str(config))
    engine.initialize()
    params = {
        "trace_id": "trc_abc123",
        "plugin_name": "my_custom_safety_checker",
        "assertion_id": "plugin_assert_001",
        "result": {
            "status": "pass",
            "score": 0.88,
            "explanation": "Custom safety classifier returned score 0.88; above threshold 0.75.",
            "metadata": {"classifier_version": "2.1.0", "categories_checked": ["hate_speech", "violence", "pii"]},
        },
    }
    assert engine.call(request(10, "submit_plugin_result", params)) == {
        "jsonrpc": "2.0",
        "id": 10,
        "result": {"accepted": True},
    }
    for broken, message in [
        ({**params, "trace_id": ""}, "submit_plugin_result params.trace_id must be a non-empty string"),
        (
            {**params, "result": {**params["result"], "status": "ok"}},
            "submit_plugin_result result.status must be one of pass, soft_fail, hard_fail",
        ),
        (
            {**params, "result": {**params["result"], "score": 1.5}},
            "submit_plugin_result result.score must be a number from 0.0 to 1.0",
        ),
        (
            {**params, "result": {**params["result"], "explanation": None}},
            "submit_plugin_result result.explanation must be a string",
        ),
        (
            {**params, "result": {**params["result"], "metadata": []}},
            "submit_plugin_result result.metadata must be an object",
        ),
        ({**params, "result": None}, "submit_plugin_result params.result must be an object"),
    ]:
        assert error_of(engine.call(request(11, "submit_plugin_result", broken)), -32602)["message"] == message
    engine.call(batch(12, refund_trace(), CONTAINS_REFUND))
    response = engine.call(request(13, "shutdown", {}))
    assert response["result"] == {"sessions_completed": 1, "assertions_evaluated": 1}
    assert engine.wait() == 0
    written = json.loads(report.read_text())
    assert written["status_counts"] == {"pass": 2, "soft_fail": 0, "hard_fail": 0}
    assert written["sessions_completed"] == 1 and written["results_recorded"] == 2
    recorded = {item["assertion_id"]: item for item in written["traces"]["trc_abc123"]}
    assert recorded["plugin_assert_001"]["plugin_name"] == "my_custom_safety_checker"
    assert recorded["plugin_assert_001"]["plugin"] is True and recorded["plugin_assert_001"]["score"] == 0.88
    assert recorded["a1"]["status"] == "pass"


# ------------------------------------------------------------------------------------------- lifecycle


def test_shutdown_counters_and_clean_exit(engine: EngineProcess) -> None:
    engine.initialize()
    engine.call(batch(1, refund_trace(), CONTAINS_REFUND, assertion("a2", "trace", check="no_duplicates")))
    engine.call(batch(2, refund_trace(), CONTAINS_REFUND))
    assert engine.call(request(99, "shutdown", {}))["result"] == {"sessions_completed": 1, "assertions_evaluated": 3}
    assert engine.wait() == 0
    assert engine.no_more_output()
    assert_stdout_is_json_lines(engine)


def test_shutdown_before_initialize(engine: EngineProcess) -> None:
    assert engine.call(request(1, "shutdown"))["result"] == {"sessions_completed": 0, "assertions_evaluated": 0}
    assert engine.wait() == 0


def test_end_of_input_ends_cleanly(engine: EngineProcess) -> None:
    engine.initialize()
    engine.send(batch(1, refund_trace(), CONTAINS_REFUND))
    engine.close_stdin()
    assert engine.read()["id"] == 1  # in-flight work is finished before exit
    assert engine.wait() == 0
    assert engine.stderr == b""


def test_stdin_closed_mid_request(engine: EngineProcess) -> None:
    engine.initialize()
    line = json.dumps(batch(1, refund_trace(), CONTAINS_REFUND)).encode()
    engine.send_raw(line[: len(line) // 2])
    engine.close_stdin()
    assert engine.wait() == 0
    error_of(engine.read(), -32700)  # the cut-off request is answered as what it is
    assert_stdout_is_json_lines(engine)


def test_sigterm_ends_cleanly(engine: EngineProcess) -> None:
    engine.initialize()
    engine.proc.send_signal(signal.SIGTERM)
    assert engine.wait() == 0


def test_flood_of_requests(engine: EngineProcess) -> None:
    engine.initialize()
    count = 3000
    lines = []
    for i in range(1, count + 1):
        if i % 3 == 0:
            lines.append(json.dumps(request(i, "no_such_method")))
        else:
            lines.append(json.dumps(batch(i, refund_trace(), CONTAINS_REFUND)))
    writer = threading.Thread(target=engine.send_raw, args=("\n".join(lines).encode() + b"\n",))
    writer.start()
    seen = {}
    for _ in range(count):
        response = engine.read(timeout=60)
        seen[response["id"]] = response
    writer.join()
    assert sorted(seen) == list(range(1, count + 1))
    assert all(("error" in seen[i]) == (i % 3 == 0) for i in seen)
    assert engine.call(request(0, "shutdown"))["result"]["assertions_evaluated"] == 2000


# ------------------------------------------------------------------------------------------ concurrency


@pytest.fixture
def judged_engine(spawn: Any, stub: StubProvider, tmp_path: Path) -> Any:
    def start(**config: Any) -> EngineProcess:
        engine = spawn("--log-level=warn", "--config", str(stub.config_file(tmp_path / "engine.json", **config)))
        assert "layers_5_6" in engine.initialize()["result"]["capabilities"]
        return engine

    return start


def test_responses_come_out_of_order_matched_by_id(judged_engine: Any, stub: StubProvider) -> None:
    stub.delays = {"SLOW": 1.0}
    engine = judged_engine()
    engine.send(judged(1, "SLOW"))
    engine.send(judged(2, "FAST"))
    engine.send(batch(3, refund_trace(), CONTAINS_REFUND))
    order = [engine.read()["id"] for _ in range(3)]
    assert order[-1] == 1 and sorted(order) == [1, 2, 3]


def test_in_flight_cap_applies_back_pressure(judged_engine: Any, stub: StubProvider) -> None:
    stub.delay_s = 0.6
    engine = judged_engine(max_concurrent_requests=2)
    for i in (1, 2, 3, 4):
        engine.send(judged(i, f"M{i}"))
    engine.send(request(5, "no_such_method"))
    started = time.monotonic()
    order = [engine.read()["id"] for _ in range(5)]
    # Two batches run; the rest wait unread in the pipe, so request 5 is only read once a slot frees.
    assert set(order[:2]) == {1, 2}
    assert order[2] == 5
    assert set(order[3:]) == {3, 4}
    assert time.monotonic() - started >= 1.0


def test_an_id_already_in_flight_is_rejected(judged_engine: Any, stub: StubProvider) -> None:
    stub.delays = {"SLOW": 1.0}
    engine = judged_engine()
    engine.send(judged(1, "SLOW"))
    engine.send(judged(1, "SLOW"))
    error = error_of(engine.read(), -32600)
    assert error["message"] == "invalid request: id 1 is already in flight"
    assert "result" in engine.read()


def test_shutdown_drains_in_flight_evaluations(judged_engine: Any, stub: StubProvider) -> None:
    stub.delay_s = 0.5
    engine = judged_engine()
    engine.send(judged(1, "A"))
    engine.send(judged(2, "B"))
    engine.send(request(3, "shutdown"))
    responses = [engine.read() for _ in range(3)]
    assert [r["id"] for r in responses][-1] == 3
    assert responses[-1]["result"] == {"sessions_completed": 1, "assertions_evaluated": 2}
    assert all("result" in r for r in responses)
    assert engine.wait() == 0


def test_drain_is_bounded(judged_engine: Any, stub: StubProvider) -> None:
    stub.delay_s = 5.0
    engine = judged_engine(drain_timeout_s=0.3)
    engine.send(judged(1, "STUCK"))
    time.sleep(0.2)
    started = time.monotonic()
    engine.send(request(2, "shutdown"))
    error = error_of(engine.read(), 3002)
    assert error["data"]["retryable"] is True and "shutting down" in error["data"]["detail"]
    assert engine.read()["id"] == 2
    assert engine.wait() == 0
    assert time.monotonic() - started < 3.0


def test_eval_timeout_flag(spawn: Any, stub: StubProvider, tmp_path: Path) -> None:
    stub.delay_s = 3.0
    config = stub.config_file(tmp_path / "engine.json")
    engine = spawn("--log-level=warn", "--config", str(config), "--eval-timeout", "300ms")
    engine.initialize()
    error = error_of(engine.call(judged(1, "X")), 3002)
    assert error["message"] == "evaluation timed out after 300ms"
    assert error["data"] == {
        "error_type": "TIMEOUT",
        "retryable": True,
        "detail": "LLM-backed assertions (layers 5-6) can be slow. Reduce batch size or increase the engine "
        "timeout via --eval-timeout flag.",
    }


def test_provider_error_over_the_pipe(judged_engine: Any, stub: StubProvider) -> None:
    engine = judged_engine()
    stub.failures = [429, 429, 429]
    error = error_of(engine.call(judged(1, "X")), 2001)
    assert error["message"] == f"llm_judge provider at {stub.base_url} returned HTTP 429: Too Many Requests"
    assert error["data"]["error_type"] == "PROVIDER_ERROR" and error["data"]["retryable"] is True
