"""§7 trace validation: every rule, every limit, the validation order, and the trace builder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from attest_engine import InvalidTraceError, TraceLimits, build_trace, make_step, validate_trace
from attest_engine.trace_validation import is_rfc3339, json_size

from .conftest import refund_trace


def message_of(trace: Any, **kwargs: Any) -> str | None:
    error = validate_trace(trace, **kwargs)
    return None if error is None else error.message


def nested(depth: int) -> dict[str, Any]:
    """A trace whose agent_call sub-traces nest `depth` levels deep."""
    trace: dict[str, Any] = {"schema_version": 1, "trace_id": f"trc_{depth}", "output": {"message": "done"}}
    for level in range(depth - 1, -1, -1):
        step = {"type": "agent_call", "name": f"agent_{level}", "sub_trace": trace}
        trace = {"schema_version": 1, "trace_id": f"trc_{level}", "steps": [step], "output": {"message": "ok"}}
    return trace


def test_the_spec_example_is_valid() -> None:
    assert validate_trace(refund_trace()) is None


def test_not_an_object() -> None:
    assert message_of([1]) == "trace must be a JSON object, got array"
    assert message_of(None) == "trace must be a JSON object, got null"


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("1", "trace schema_version must be an integer, got string"),
        (True, "trace schema_version must be an integer, got boolean"),
        (1.5, "trace schema_version must be an integer, got number"),
        (2, "unsupported schema_version 2: engine supports schema versions 0 and 1"),
        (-1, "schema_version -1 is no longer supported: engine supports schema versions 0 and 1"),
    ],
)
def test_schema_version_window(version: Any, message: str) -> None:
    trace = refund_trace()
    trace["schema_version"] = version
    assert message_of(trace) == message


def test_schema_version_missing() -> None:
    trace = refund_trace()
    del trace["schema_version"]
    assert message_of(trace) == "trace missing required field: schema_version"


def test_previous_schema_version_is_accepted_with_a_deprecation_warning() -> None:
    trace = refund_trace()
    trace["schema_version"] = 0
    warnings: list[str] = []
    assert validate_trace(trace, warn=warnings.append) is None
    assert warnings == ["trace schema_version 0 is deprecated; migrate to 1"]
    trace["schema_version"] = 1.0  # a JSON integer written with a fraction part
    assert validate_trace(trace) is None


def test_required_fields() -> None:
    for field, value, message in [
        ("trace_id", None, "trace missing required field: trace_id"),
        ("trace_id", "   ", "trace trace_id must be a non-empty, non-whitespace string"),
        ("trace_id", 7, "trace trace_id must be a non-empty, non-whitespace string"),
        ("output", None, "trace missing required field: output"),
        ("output", {}, "trace output must be an object with at least one field, got an empty object"),
        ("output", "hi", "trace output must be an object with at least one field, got string"),
    ]:
        trace = refund_trace()
        trace[field] = value
        assert message_of(trace) == message
        error = validate_trace(trace)
        assert error is not None and error.detail
    trace = refund_trace()
    del trace["trace_id"]
    error = validate_trace(trace)
    assert error is not None
    assert error.message == "trace missing required field: trace_id"
    assert error.detail == "Every trace must include a non-empty trace_id string."


def test_size_limit_uses_the_given_wire_size() -> None:
    trace = refund_trace()
    assert message_of(trace, size_bytes=12_000_000) == "trace exceeds max size: 12000000 > 10485760 bytes"
    assert message_of(trace, size_bytes=10_485_760) is None
    error = validate_trace(trace, size_bytes=12_000_000)
    assert error is not None and "10485760 bytes (10 MB)" in error.detail


def test_size_limit_measures_compact_json_without_a_wire_size() -> None:
    trace = refund_trace()
    size = len(json.dumps(trace, separators=(",", ":"), ensure_ascii=False).encode())
    assert json_size(trace) == size
    limits = TraceLimits(max_trace_size_bytes=size - 1)
    assert message_of(trace, limits=limits) == f"trace exceeds max size: {size} > {size - 1} bytes"
    assert message_of(trace, limits=TraceLimits(max_trace_size_bytes=size)) is None


def test_step_count_limit() -> None:
    trace = refund_trace()
    trace["steps"] = [{"type": "tool_call", "name": "t"}] * 10_001
    assert message_of(trace) == "trace exceeds max steps: 10001 > 10000"
    trace["steps"] = trace["steps"][:10_000]
    assert message_of(trace) is None


def test_output_message_limit_counts_characters() -> None:
    trace = refund_trace()
    trace["output"]["message"] = "é" * 500_001
    assert message_of(trace) == "output.message length 500001 exceeds 500000 characters"
    trace["output"]["message"] = "é" * 500_000  # 1,000,000 bytes but 500,000 characters
    assert message_of(trace) is None


def test_step_result_limit() -> None:
    trace = refund_trace()
    trace["steps"][2]["result"] = {"blob": "x" * 1_200_000}
    actual = json_size(trace["steps"][2]["result"])
    assert message_of(trace) == f"trace step 'process_refund' result exceeds 1048576 bytes (actual: {actual} bytes)"
    error = validate_trace(trace)
    assert error is not None and "Truncate the 'result' field for step 'process_refund'" in error.detail
    trace["steps"][2]["result"] = {"blob": "x" * (1_048_576 - len('{"blob":""}'))}
    assert message_of(trace) is None


def test_sub_trace_depth_limit() -> None:
    assert message_of(nested(5)) is None
    assert message_of(nested(6)) == "trace nesting depth 6 exceeds maximum 5"
    assert message_of(nested(9)) == "trace nesting depth 9 exceeds maximum 5"


def test_field_types() -> None:
    for field, value, message in [
        ("agent_id", 3, "trace field agent_id must be a string, got number"),
        ("input", "hi", "trace field input must be an object, got string"),
        ("steps", {}, "trace field steps must be an array, got object"),
        ("metadata", [], "trace field metadata must be an object, got array"),
        ("parent_trace_id", "", "trace parent_trace_id must be a non-empty string or null, got an empty string"),
        ("parent_trace_id", 5, "trace parent_trace_id must be a non-empty string or null, got number"),
    ]:
        trace = refund_trace()
        trace[field] = value
        assert message_of(trace) == message, field
    trace = refund_trace()
    for field in ("agent_id", "input", "steps", "metadata", "parent_trace_id"):
        trace[field] = None  # null counts as absent
    assert message_of(trace) is None


@pytest.mark.parametrize(
    "timestamp",
    ["2026-02-18T10:30:00Z", "2026-02-18t10:30:00.123456+02:00", "2024-02-29T23:59:60-05:30", "2026-12-31T00:00:00z"],
)
def test_rfc3339_accepted(timestamp: str) -> None:
    assert is_rfc3339(timestamp)
    trace = refund_trace()
    trace["metadata"]["timestamp"] = timestamp
    assert message_of(trace) is None


@pytest.mark.parametrize(
    "timestamp",
    [
        "2026-02-18",
        "2026-02-18 10:30:00Z",
        "2026-02-18T10:30:00",
        "2026-02-30T10:30:00Z",
        "2026-13-01T10:30:00Z",
        "2026-02-18T24:00:00Z",
        "2026-02-18T10:60:00Z",
        "2026-02-18T10:30:00+24:00",
        "18/02/2026",
        "2026-02-18T10:30:00.Z",
    ],
)
def test_rfc3339_rejected(timestamp: str) -> None:
    assert not is_rfc3339(timestamp)
    trace = refund_trace()
    trace["metadata"]["timestamp"] = timestamp
    assert message_of(trace) == f"trace metadata.timestamp {json.dumps(timestamp)} is not RFC 3339"


def test_timestamp_must_be_a_string() -> None:
    trace = refund_trace()
    trace["metadata"]["timestamp"] = 1739874600
    assert message_of(trace) == 'trace metadata.timestamp "number" is not RFC 3339'


def test_step_level_rules() -> None:
    cases = [
        ("not a step", "trace step #1 must be an object, got string"),
        ({"name": "x"}, "trace step 'x' type must be a non-empty string"),
        ({"type": "tool_call"}, "trace step #1 name must be a non-empty string"),
        ({"type": "tool_call", "name": ""}, "trace step #1 name must be a non-empty string"),
        ({"type": "tool_call", "name": "x", "args": [1]}, "trace step 'x' args must be an object, got array"),
        ({"type": "tool_call", "name": "x", "result": "ok"}, "trace step 'x' result must be an object, got string"),
        ({"type": "tool_call", "name": "x", "metadata": 1}, "trace step 'x' metadata must be an object, got number"),
        (
            {"type": "tool_call", "name": "x", "sub_trace": {"schema_version": 1}},
            "trace step 'x' has a sub_trace but its type is 'tool_call'",
        ),
        ({"type": "agent_call", "name": "x", "sub_trace": []}, "trace step 'x' sub_trace must be an object, got array"),
    ]
    for step, message in cases:
        trace = refund_trace()
        trace["steps"][1] = step
        assert message_of(trace) == message


def test_unknown_step_types_strict_and_lax() -> None:
    trace = refund_trace()
    trace["steps"][1]["type"] = "memory_write"
    assert message_of(trace) is None  # lax mode (default): tolerated as an opaque step (§6 rule 6)
    assert message_of(trace, strict_step_types=True) == "trace step 'lookup_order' has unknown type 'memory_write'"


def test_sub_traces_are_validated_too() -> None:
    trace = nested(2)
    trace["steps"][0]["sub_trace"]["steps"][0]["sub_trace"]["trace_id"] = ""
    assert message_of(trace) == (
        "sub-trace at steps[0].sub_trace.steps[0].sub_trace trace_id must be a non-empty, non-whitespace string"
    )
    trace = nested(1)
    trace["steps"][0]["sub_trace"]["output"]["message"] = "x" * 500_001
    assert message_of(trace) == (
        "sub-trace at steps[0].sub_trace: output.message length 500001 exceeds 500000 characters"
    )


def test_validation_order() -> None:
    """§7 "Validation Order": the first failing rule in the documented order is the one reported."""
    trace = refund_trace()
    trace["schema_version"] = 9
    del trace["trace_id"]  # rule 3 also fails, but rule 2 comes first
    assert message_of(trace, size_bytes=20_000_000).startswith("unsupported schema_version 9")
    trace["schema_version"] = 1
    assert message_of(trace, size_bytes=20_000_000) == "trace missing required field: trace_id"  # 3 before 4
    trace["trace_id"] = "trc"
    trace["metadata"]["timestamp"] = "yesterday"
    assert message_of(trace, size_bytes=20_000_000).startswith("trace exceeds max size")  # 4 before 5
    trace["steps"][0]["name"] = ""
    assert message_of(trace).startswith("trace metadata.timestamp")  # 5 before 6
    trace["metadata"]["timestamp"] = "2026-02-18T10:30:00Z"
    trace["steps"].append({"type": "agent_call", "name": "deep", "sub_trace": nested(6)})
    assert message_of(trace) == "trace step #0 name must be a non-empty string"  # 6 before 7
    trace["steps"][0]["name"] = "reasoning"
    assert message_of(trace) == "trace nesting depth 7 exceeds maximum 5"


def test_build_trace_for_producers() -> None:
    sub = build_trace(trace_id="trc_sub", parent_trace_id="trc_root", output={"resolution": "approved"})
    trace = build_trace(
        trace_id="trc_root",
        agent_id="agent",
        input={"user_message": "hi"},
        steps=(
            make_step("tool_call", "lookup", args={"id": (1, 2)}, result={"ok": True}),
            make_step("agent_call", "escalate", sub_trace=sub, metadata={"duration_ms": 5}),
        ),
        output={"message": "done"},
        metadata={"timestamp": "2026-02-18T10:30:00Z"},
    )
    assert trace["steps"][0] == {"type": "tool_call", "name": "lookup", "args": {"id": [1, 2]}, "result": {"ok": True}}
    assert trace["steps"][1]["sub_trace"]["parent_trace_id"] == "trc_root"
    assert trace["parent_trace_id"] is None and trace["schema_version"] == 1
    assert validate_trace(trace) is None
    json.dumps(trace, allow_nan=False)


def test_build_trace_rejects_invalid_data() -> None:
    with pytest.raises(InvalidTraceError) as caught:
        build_trace(trace_id="", output={"message": "x"})
    assert caught.value.error.message == "trace trace_id must be a non-empty, non-whitespace string"
    with pytest.raises(InvalidTraceError, match="unknown type 'tools/call'"):
        build_trace(trace_id="t", output={"m": 1}, steps=[make_step("tools/call", "x")])
    assert build_trace(trace_id="t", output={"m": 1}, steps=[make_step("x", "y")], strict_step_types=False)
    with pytest.raises(InvalidTraceError, match="not JSON data"):
        build_trace(trace_id="t", output={"m": float("nan")})
    with pytest.raises(InvalidTraceError, match="not JSON data"):
        build_trace(trace_id="t", output={"m": object()})
    with pytest.raises(InvalidTraceError, match="exceeds max steps"):
        build_trace(
            trace_id="t",
            output={"m": 1},
            steps=[make_step("tool_call", "x")] * 3,
            limits=TraceLimits(max_steps_per_trace=2),
        )
