"""Layers 1–4 (§4) through an in-process engine: every check, operator and field, and the batch rules."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attest_engine import layer_schema, layer_trace
from attest_engine.config import EngineConfig

from .conftest import INITIALIZE, assertion, batch, evaluate, refund_trace, request, results, run_engine

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12",
    "type": "object",
    "required": ["status", "amount"],
    "properties": {"status": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
}


def one(kind: str, trace: Any = None, **spec: Any) -> dict[str, Any]:
    """The single result of one assertion on `trace` (default: the spec's refund trace)."""
    return results(refund_trace() if trace is None else trace, assertion("a", kind, **spec))["a"]


def batch_error(trace: Any, *assertions: dict[str, Any]) -> dict[str, Any]:
    response = evaluate(trace, *assertions)
    assert "result" not in response, response
    data = response["error"]["data"]
    assert set(data) == {"error_type", "retryable", "detail"} and data["detail"]
    return response["error"]


def spec_error(kind: str, **spec: Any) -> str:
    error = batch_error(refund_trace(), assertion("a", kind, **spec))
    assert error["code"] == 1002 and error["data"]["error_type"] == "ASSERTION_ERROR"
    assert error["data"]["retryable"] is False
    return error["message"]


# ------------------------------------------------------------------------------------------------ layer 1


def test_schema_pass_on_the_spec_example() -> None:
    result = one("schema", target="steps[?name=='lookup_order'].result", schema=SCHEMA)
    assert result == {
        "assertion_id": "a",
        "status": "pass",
        "score": 1.0,
        "explanation": "steps[1].result matches schema; required fields status, amount present.",
        "cost": 0.0,
        "duration_ms": result["duration_ms"],
        "type": "schema",
        "layer": 1,
    }
    assert isinstance(result["duration_ms"], int) and result["duration_ms"] >= 0


def test_schema_failure_names_the_value() -> None:
    trace = refund_trace()
    trace["output"]["structured"]["confidence"] = 1.23
    schema = {
        "type": "object",
        "required": ["refund_id", "confidence"],
        "properties": {
            "refund_id": {"type": "string", "pattern": "^RFD-\\d+$"},
            "confidence": {"type": "number", "minimum": 0.0, "maximum": 1.0},
        },
        "additionalProperties": False,
    }
    result = one("schema", trace, target="output.structured", schema=schema)
    assert result["status"] == "hard_fail" and result["score"] == 0.0
    assert result["explanation"] == (
        "output.structured failed schema validation: confidence: 1.23 is greater than the maximum of 1.0."
    )
    soft = one("schema", trace, target="output.structured", schema=schema, soft=True)
    assert soft["status"] == "soft_fail"


def test_schema_counts_further_errors_and_checks_every_match() -> None:
    trace = refund_trace()
    trace["steps"].append({"type": "tool_call", "name": "lookup_order", "result": {"status": 3}})
    result = one("schema", trace, target="steps[?name=='lookup_order'].result", schema=SCHEMA)
    assert result["status"] == "hard_fail"
    assert result["explanation"].startswith("steps[3].result failed schema validation: ")
    assert "(and 1 more)" in result["explanation"]


def test_schema_target_missing_fails() -> None:
    result = one("schema", target="steps[?name=='refund_all'].args", schema=SCHEMA)
    assert result["status"] == "hard_fail"
    assert result["explanation"] == (
        "steps[?name=='refund_all'].args not found in trace: no step with name == 'refund_all' in steps."
    )


def test_schema_is_always_2020_12() -> None:
    # prefixItems exists only in 2020-12: an older draft would ignore it and pass.
    trace = refund_trace()
    trace["output"]["structured"] = {"pair": ["a", 1]}
    schema = {"properties": {"pair": {"prefixItems": [{"type": "string"}, {"type": "string"}]}}}
    assert one("schema", trace, target="output.structured", schema=schema)["status"] == "hard_fail"
    assert one("schema", target="output", schema=True)["status"] == "pass"


def test_schema_spec_errors() -> None:
    assert spec_error("schema", target="output", schema={"type": "bogus"}).startswith(
        "assertion 'a' failed: malformed JSON Schema at $.type:"
    )
    assert spec_error("schema", target="output", schema="object") == (
        "assertion 'a' failed: spec.schema must be a JSON Schema object, got 'object'"
    )
    assert spec_error("schema", target="output", schema={"$ref": "https://example.com/s.json"}).startswith(
        "assertion 'a' failed: schema $ref cannot be resolved"
    )
    assert spec_error("schema", schema=SCHEMA) == "assertion 'a' failed: spec.target is required"
    assert spec_error("schema", target="steps[*]", schema=SCHEMA) == (
        "assertion 'a' failed: unsupported JSONPath expression 'steps[*]': expected '?', a quoted key or an "
        "index at column 7"
    )


CATASTROPHIC = "^(a+)+$"  # exponential for a backtracking engine on "aaa...ab", linear for RE2


def structured(value: Any) -> dict[str, Any]:
    trace = refund_trace()
    trace["output"]["structured"] = value
    return trace


@pytest.mark.parametrize(("text", "status"), [("a" * 40 + "b", "hard_fail"), ("a" * 40, "pass")])
def test_schema_pattern_is_matched_with_re2(text: str, status: str) -> None:
    schema = {"properties": {"name": {"pattern": CATASTROPHIC}}}
    assert one("schema", structured({"name": text}), target="output.structured", schema=schema)["status"] == status
    names = {"propertyNames": {"pattern": CATASTROPHIC}}
    assert one("schema", structured({text: 1}), target="output.structured", schema=names)["status"] == status


@pytest.mark.parametrize(("key", "status"), [("a" * 40 + "b", "hard_fail"), ("a" * 40, "pass")])
def test_schema_pattern_properties_are_matched_with_re2(key: str, status: str) -> None:
    schema = {"patternProperties": {CATASTROPHIC: {"type": "integer"}}, "additionalProperties": False}
    result = one("schema", structured({key: 1}), target="output.structured", schema=schema)
    assert result["status"] == status
    typed = {"patternProperties": {CATASTROPHIC: {"type": "string"}}}  # applies to the matching key only
    expected = "pass" if status == "hard_fail" else "hard_fail"
    assert one("schema", structured({key: 1}), target="output.structured", schema=typed)["status"] == expected


SAFE_PATTERNS = st.sampled_from(["^a", "b$", "a.c", "^$", "[bc]+", "^(ab)*$"])  # same language in re and RE2


@given(
    patterns=st.dictionaries(SAFE_PATTERNS, st.sampled_from([True, False, {"type": "integer"}]), max_size=3),
    additional=st.sampled_from([None, True, False, {"type": "string"}]),
    pattern=st.none() | SAFE_PATTERNS,
    instance=st.dictionaries(st.text("abc", max_size=4), st.integers(0, 2) | st.text("abc", max_size=4), max_size=4),
)
def test_schema_re2_keywords_agree_with_jsonschema(
    patterns: dict[str, Any], additional: Any, pattern: str | None, instance: dict[str, Any]
) -> None:
    schema: dict[str, Any] = {"patternProperties": patterns, "properties": {"a": {"type": "integer"}}}
    if additional is not None:
        schema["additionalProperties"] = additional
    if pattern is not None:
        schema["propertyNames"] = {"pattern": pattern}
    ours = layer_schema._validator(json.dumps(schema))
    reference = jsonschema.Draft202012Validator(schema)
    assert ours.is_valid(instance) is reference.is_valid(instance)
    assert sorted(error.message for error in ours.iter_errors(instance)) == sorted(
        error.message for error in reference.iter_errors(instance)
    )


def test_schema_pattern_outside_re2_is_a_spec_error() -> None:
    for schema in ({"properties": {"x": {"pattern": "(a)\\1"}}}, {"patternProperties": {"(?=a)": {}}}):
        message = spec_error("schema", target="output", schema=schema)
        assert message.startswith("assertion 'a' failed: malformed JSON Schema at $."), message
        assert "RE2" in message


def test_schema_unevaluated_properties_with_pattern_properties_is_a_spec_error() -> None:
    # jsonschema would match these patterns with Python's backtracking `re` while finding unevaluated keys.
    schema = {"patternProperties": {CATASTROPHIC: True}, "unevaluatedProperties": False}
    message = spec_error("schema", target="output", schema=schema)
    assert "unevaluatedProperties" in message and "patternProperties" in message
    plain = {"properties": {"message": True, "structured": True}, "unevaluatedProperties": False}
    assert one("schema", target="output", schema=plain)["status"] == "pass"


# ------------------------------------------------------------------------------------------------ layer 2


@pytest.mark.parametrize(
    ("operator", "value", "status"),
    [
        ("lt", 0.0067, "hard_fail"),
        ("lt", 0.0068, "pass"),
        ("lte", 0.0067, "pass"),
        ("lte", 0.0066, "hard_fail"),
        ("gt", 0.0067, "hard_fail"),
        ("gt", 0.006, "pass"),
        ("gte", 0.0067, "pass"),
        ("gte", 0.01, "hard_fail"),
        ("eq", 0.0067, "pass"),
        ("eq", 0.007, "hard_fail"),
    ],
)
def test_constraint_operators(operator: str, value: float, status: str) -> None:
    result = one("constraint", field="metadata.cost_usd", operator=operator, value=value)
    assert result["status"] == status
    verdict = "satisfied" if status == "pass" else "violated"
    assert result["explanation"] == f"metadata.cost_usd = 0.0067, constraint {operator} {value} {verdict}."


def test_constraint_between_is_inclusive() -> None:
    assert one("constraint", field="metadata.total_tokens", operator="between", min=100, max=1350)["status"] == "pass"
    assert one("constraint", field="metadata.total_tokens", operator="between", min=1350, max=2000)["status"] == "pass"
    result = one("constraint", field="metadata.total_tokens", operator="between", min=100, max=1349, soft=True)
    assert result["status"] == "soft_fail"
    assert result["explanation"] == "metadata.total_tokens = 1350, constraint between 100 and 1349 violated."


def test_constraint_counts_steps() -> None:
    assert one("constraint", field="steps.length", operator="eq", value=3)["status"] == "pass"
    result = one("constraint", field="steps[?type=='tool_call'].length", operator="lte", value=1)
    assert result["status"] == "hard_fail"
    assert result["explanation"] == "steps[?type=='tool_call'].length = 2, constraint lte 1 violated."
    empty = refund_trace()
    empty["steps"] = []
    assert (
        one("constraint", empty, field="steps[?type=='tool_call'].length", operator="eq", value=0)["status"] == "pass"
    )


@pytest.mark.parametrize("absent", [{}, {"steps": None}], ids=["omitted", "null"])
def test_trace_without_steps_has_no_steps(absent: dict[str, Any]) -> None:
    # §3.2: `steps` is optional ("May be empty"); omitted, or null (§7: null counts as absent), it is [].
    trace = refund_trace()
    del trace["steps"]
    trace.update(absent)
    for field in ("steps.length", "steps[?type=='tool_call'].length"):
        result = one("constraint", trace, field=field, operator="eq", value=0)
        assert (result["status"], result["explanation"]) == ("pass", f"{field} = 0, constraint eq 0 satisfied."), field
    assert one("trace", trace, check="required_tools", tools=["lookup_order"])["status"] == "hard_fail"


def test_sub_trace_without_steps_has_no_steps() -> None:
    trace = refund_trace()
    sub = {key: value for key, value in refund_trace().items() if key != "steps"}
    trace["steps"].append({"type": "agent_call", "name": "helper", "sub_trace": sub})
    result = one("constraint", trace, field="steps[?name=='helper'].sub_trace.steps.length", operator="eq", value=0)
    assert result["status"] == "pass", result


def test_constraint_on_every_selected_value() -> None:
    field = "steps[?type=='tool_call'].metadata.duration_ms"
    assert one("constraint", field=field, operator="lte", value=120)["status"] == "pass"
    result = one("constraint", field=field, operator="lt", value=100)
    assert result["explanation"] == "steps[2].metadata.duration_ms = 120, constraint lt 100 violated."


def test_constraint_missing_or_non_numeric_field_fails() -> None:
    trace = refund_trace()
    del trace["metadata"]["latency_ms"]
    result = one("constraint", trace, field="metadata.latency_ms", operator="lte", value=5000, soft=True)
    assert result["status"] == "soft_fail"
    assert result["explanation"] == "metadata.latency_ms not found in trace: metadata has no field 'latency_ms'."
    result = one("constraint", field="metadata.model", operator="eq", value=1)
    assert result["explanation"] == "metadata.model = 'gpt-4.1' is not a number; constraint eq 1 not met."


def test_constraint_spec_errors() -> None:
    assert spec_error("constraint", field="metadata.cost_usd", operator="ne", value=1) == (
        "assertion 'a' failed: unknown constraint operator 'ne'"
    )
    assert spec_error("constraint", field="metadata.cost_usd", operator="lte") == (
        "assertion 'a' failed: spec.value is required"
    )
    assert spec_error("constraint", field="metadata.cost_usd", operator="lte", value=True) == (
        "assertion 'a' failed: spec.value must be a number, got true"
    )
    assert spec_error("constraint", field="metadata.cost_usd", operator="between", min=1) == (
        "assertion 'a' failed: spec.max is required"
    )
    assert spec_error("constraint", field="metadata.cost_usd", operator="between", min=2, max=1) == (
        "assertion 'a' failed: spec.min 2 is greater than spec.max 1"
    )
    assert spec_error("constraint", operator="lt", value=1) == "assertion 'a' failed: spec.field is required"


# ------------------------------------------------------------------------------------------------ layer 3


def loop_trace() -> dict[str, Any]:
    trace = refund_trace()
    trace["steps"] = [
        {"type": "tool_call", "name": "lookup_order"},
        {"type": "llm_call", "name": "think"},
        {"type": "tool_call", "name": "lookup_order"},
        {"type": "retrieval", "name": "kb"},
        {"type": "tool_call", "name": "process_refund"},
        {"type": "tool_call", "name": "notify"},
    ]
    return trace


def test_contains_in_order() -> None:
    result = one("trace", check="contains_in_order", tools=["lookup_order", "process_refund"])
    assert result["explanation"] == "Tool sequence ['lookup_order', 'process_refund'] found in order at steps [1, 2]."
    assert one("trace", loop_trace(), check="contains_in_order", tools=["lookup_order", "notify"])["status"] == "pass"
    result = one("trace", check="contains_in_order", tools=["process_refund", "lookup_order"])
    assert result["status"] == "hard_fail"
    assert result["explanation"] == (
        "Tool sequence ['process_refund', 'lookup_order'] not found in order: 'lookup_order' not called after "
        "step 2 (1 of 2 matched); tool calls were ['lookup_order', 'process_refund']."
    )


def test_exact_order() -> None:
    trace = loop_trace()
    assert one("trace", trace, check="exact_order", tools=["lookup_order", "lookup_order"])["status"] == "pass"
    result = one("trace", trace, check="exact_order", tools=["lookup_order", "process_refund", "notify"])
    assert result["explanation"] == (
        "Tool sequence ['lookup_order', 'process_refund', 'notify'] found contiguously at steps [2, 4, 5]."
    )  # the llm_call and retrieval steps in between are not tool calls
    result = one("trace", trace, check="exact_order", tools=["lookup_order", "notify"])
    assert result["status"] == "hard_fail"
    assert "not found as a contiguous run; tool calls were ['lookup_order', 'lookup_order'" in result["explanation"]


def test_loop_detection() -> None:
    trace = loop_trace()
    assert one("trace", trace, check="loop_detection", tool="lookup_order", max_repetitions=2)["status"] == "pass"
    result = one("trace", trace, check="loop_detection", tool="lookup_order", max_repetitions=1)
    assert result["explanation"] == "'lookup_order' called 2 times (max_repetitions 1) at steps [0, 2]."
    assert one("trace", trace, check="loop_detection", tool="absent", max_repetitions=0)["status"] == "pass"


def test_no_duplicates() -> None:
    assert one("trace", check="no_duplicates")["status"] == "pass"
    result = one("trace", loop_trace(), check="no_duplicates", soft=True)
    assert result["status"] == "soft_fail"
    assert result["explanation"] == "Tools called more than once: 'lookup_order' ×2."


def test_required_and_forbidden_tools() -> None:
    assert one("trace", check="required_tools", tools=["process_refund"])["status"] == "pass"
    result = one("trace", check="required_tools", tools=["lookup_order", "verify_identity"])
    assert result["explanation"] == (
        "Required tools not called: ['verify_identity']; tool calls were ['lookup_order', 'process_refund']."
    )
    assert one("trace", check="forbidden_tools", tools=["delete_account"])["status"] == "pass"
    result = one("trace", check="forbidden_tools", tools=["process_refund", "reasoning"])
    assert result["explanation"] == "Forbidden tools called: ['process_refund'] at steps [2]."  # llm_call is no tool


def test_trace_spec_errors() -> None:
    assert spec_error("trace", check="ordered") == "assertion 'a' failed: unknown trace check 'ordered'"
    assert spec_error("trace", check="required_tools", tools=[]) == (
        "assertion 'a' failed: spec.tools must be a non-empty array of strings, got []"
    )
    assert spec_error("trace", check="exact_order", tools=["a", 1]) == (
        "assertion 'a' failed: spec.tools must be a non-empty array of strings, got [\"a\",1]"
    )
    assert (
        spec_error("trace", check="loop_detection", max_repetitions=1) == "assertion 'a' failed: spec.tool is required"
    )
    assert spec_error("trace", check="loop_detection", tool="x", max_repetitions=-1) == (
        "assertion 'a' failed: spec.max_repetitions must be >= 0, got -1"
    )
    assert spec_error("trace", tools=["x"]) == "assertion 'a' failed: spec.check is required"


# ------------------------------------------------------------------------------------------------ layer 4


@pytest.mark.parametrize(
    ("spec", "status", "explanation"),
    [
        ({"check": "contains", "value": "refund"}, "pass", "output.message contains 'refund'."),
        ({"check": "contains", "value": "REFUND ID"}, "pass", "output.message contains 'REFUND ID'."),
        ({"check": "contains", "value": "REFUND ID", "case_sensitive": True}, "hard_fail", None),
        (
            {"check": "not_contains", "value": "cannot process"},
            "pass",
            "output.message does not contain 'cannot process'.",
        ),
        ({"check": "not_contains", "value": "PROCESSED"}, "hard_fail", None),
        (
            {"check": "regex_match", "value": "RFD-\\d{3,}"},
            "pass",
            "output.message matches /RFD-\\d{3,}/ at 'RFD-001'.",
        ),
        ({"check": "regex_match", "value": "rfd-\\d+"}, "hard_fail", None),
        ({"check": "regex_match", "value": "(?i)rfd-\\d+"}, "pass", None),
        ({"check": "keyword_all", "values": ["refund", "business days", "RFD-"]}, "pass", None),
        (
            {"check": "keyword_all", "values": ["refund", "manager", "apology"]},
            "hard_fail",
            "output.message is missing 2 of 3 keywords: 'manager', 'apology'.",
        ),
        (
            {"check": "keyword_any", "values": ["manager", "Business Days"]},
            "pass",
            "output.message contains keyword 'Business Days'.",
        ),
        (
            {"check": "keyword_any", "values": ["manager", "apology"]},
            "hard_fail",
            "output.message contains none of the keywords 'manager', 'apology'.",
        ),
        ({"check": "forbidden", "values": ["kill", "harm", "illegal", "bomb"]}, "pass", None),
        (
            {"check": "forbidden", "values": ["kill", "PROCESSED"]},
            "hard_fail",
            "output.message contains forbidden terms 'PROCESSED'.",
        ),
        ({"check": "forbidden", "values": ["PROCESSED"], "case_sensitive": True}, "pass", None),
    ],
)
def test_content_checks(spec: dict[str, Any], status: str, explanation: str | None) -> None:
    result = one("content", target="output.message", **spec)
    assert result["status"] == status, result
    assert result["score"] == (1.0 if status == "pass" else 0.0)
    if explanation is not None:
        if status == "pass":
            assert result["explanation"] == explanation
        else:
            assert result["explanation"].startswith(explanation)
    if status != "pass":
        assert 'Text: "Your refund of $89.99' in result["explanation"]  # the value involved


def test_content_soft_failure_and_case_folding() -> None:
    assert one("content", target="output.message", check="contains", value="xyz", soft=True)["status"] == "soft_fail"
    trace = refund_trace()
    trace["output"]["message"] = "STRASSE"
    assert one("content", trace, target="output.message", check="contains", value="straße")["status"] == "pass"


def test_content_targets_structured_fields_and_step_results() -> None:
    assert one("content", target="output.structured.refund_id", check="regex_match", value="^RFD-\\d+$")["status"] == (
        "pass"
    )
    result = one("content", target="steps[?name=='lookup_order'].result.status", check="contains", value="deliver")
    assert result["explanation"] == "steps[1].result.status contains 'deliver'."
    # Non-string values are read as compact JSON text.
    result = one("content", target="steps[?name=='lookup_order'].result", check="contains", value='"amount":89.99')
    assert result["status"] == "pass"
    assert one("content", target="output.structured.confidence", check="contains", value="0.95")["status"] == "pass"


def test_content_target_missing_fails_for_every_check() -> None:
    trace = refund_trace()
    del trace["output"]["message"]
    for spec in ({"check": "not_contains", "value": "x"}, {"check": "forbidden", "values": ["x"]}):
        result = one("content", trace, target="output.message", **spec)
        assert result["status"] == "hard_fail"
        assert result["explanation"] == "output.message not found in trace: output has no field 'message'."


def test_content_spec_errors() -> None:
    assert spec_error("content", target="output.message", check="regex_match", value="[unclosed") == (
        "assertion 'a' failed: invalid regex '[unclosed': missing ]: [unclosed"
    )
    assert spec_error("content", target="output.message", check="regex_match", value="(?=lookahead)").startswith(
        "assertion 'a' failed: invalid regex '(?=lookahead)'"
    )
    assert spec_error("content", target="output.message", check="equals", value="x") == (
        "assertion 'a' failed: unknown content check 'equals'"
    )
    assert spec_error("content", target="output.message", check="contains") == (
        "assertion 'a' failed: spec.value is required"
    )
    assert spec_error("content", target="output.message", check="forbidden", value="x") == (
        "assertion 'a' failed: spec.values is required"
    )
    assert spec_error("content", target="output.message", check="contains", value="x", case_sensitive="no") == (
        "assertion 'a' failed: spec.case_sensitive must be a boolean, got 'no'"
    )


def test_invalid_regex_matches_the_spec_example() -> None:
    error = batch_error(
        refund_trace(),
        assertion("assert_007", "content", target="output.message", check="regex_match", value="[unclosed"),
    )
    assert error["code"] == 1002
    assert error["message"].startswith("assertion 'assert_007' failed: invalid regex '[unclosed'")
    assert error["data"] == {
        "error_type": "ASSERTION_ERROR",
        "retryable": False,
        "detail": "The regex pattern '[unclosed' is not valid RE2 syntax. Fix the regex in assertion spec.",
    }


# ------------------------------------------------------------------------------------------------ batches


def test_results_come_in_request_order_with_totals() -> None:
    response = evaluate(
        refund_trace(),
        assertion("c", "content", target="output.message", check="contains", value="refund"),
        assertion("t", "trace", check="no_duplicates"),
        assertion("s", "schema", target="output", schema={"type": "object"}),
        assertion("k", "constraint", field="steps.length", operator="eq", value=3),
    )
    result = response["result"]
    assert [item["assertion_id"] for item in result["results"]] == ["c", "t", "s", "k"]
    assert [item["layer"] for item in result["results"]] == [4, 3, 1, 2]
    assert result["total_cost"] == 0.0
    assert isinstance(result["total_duration_ms"], int)
    empty = evaluate(refund_trace())["result"]
    assert empty["results"] == [] and empty["total_cost"] == 0.0


def test_request_ids_are_echoed_and_cached() -> None:
    spec = {"field": "metadata.cost_usd", "operator": "lte", "value": 0.01}
    first = {"assertion_id": "a1", "type": "constraint", "spec": spec, "request_id": "req_1"}
    again = {"assertion_id": "a2", "type": "constraint", "spec": spec, "request_id": "req_1"}
    other = {**again, "assertion_id": "a3", "spec": {**spec, "value": 0.001}}
    responses = run_engine(
        [
            request(0, "initialize", INITIALIZE),
            batch(1, refund_trace(), first),
            batch(2, refund_trace(), again),
            batch(3, refund_trace(), other),
            batch(4, {**refund_trace(), "trace_id": "trc_other"}, again),
        ],
        sequential=True,
    )
    computed = responses[1]["result"]["results"][0]
    assert computed["request_id"] == "req_1" and "cached" not in computed
    cached = responses[2]["result"]["results"][0]
    assert cached == {**computed, "assertion_id": "a2", "cost": 0.0, "duration_ms": 0, "cached": True}
    for response in responses[3:]:
        assert response["error"]["code"] == 1002
        assert "request_id 'req_1' was already used for a different assertion or trace" in response["error"]["message"]


def test_same_request_id_twice_in_one_batch() -> None:
    spec = {"check": "no_duplicates"}
    a = {"assertion_id": "a", "type": "trace", "spec": spec, "request_id": "r"}
    b = {"assertion_id": "b", "type": "trace", "spec": spec, "request_id": "r"}
    by_id = results(refund_trace(), a, b)
    assert by_id["b"]["cached"] is True and by_id["b"]["status"] == by_id["a"]["status"]
    c = {"assertion_id": "c", "type": "trace", "spec": {"check": "required_tools", "tools": ["x"]}, "request_id": "r"}
    error = batch_error(refund_trace(), a, c)
    assert error["message"] == "assertion 'c' failed: request_id 'r' is used for two different assertions"


def test_idempotency_cache_can_be_disabled() -> None:
    spec = {"check": "no_duplicates"}
    a = {"assertion_id": "a", "type": "trace", "spec": spec, "request_id": "r"}
    responses = run_engine(
        [request(0, "initialize", INITIALIZE), batch(1, refund_trace(), a), batch(2, refund_trace(), a)],
        EngineConfig(idempotency_cache_entries=0),
        sequential=True,
    )
    assert "cached" not in responses[2]["result"]["results"][0]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("schema", "assertion #0 failed: an assertion must be an object, got 'schema'"),
        ({"type": "schema", "spec": {}}, "assertion #0 failed: assertion_id must be a non-empty string"),
        (
            {"assertion_id": "x", "type": "trace_tree", "spec": {}},
            "assertion 'x' failed: unknown assertion type 'trace_tree'",
        ),
        (
            {"assertion_id": "x", "type": ["schema"], "spec": {}},
            "assertion 'x' failed: unknown assertion type [\"schema\"]",
        ),
        ({"assertion_id": "x", "type": "trace"}, "assertion 'x' failed: spec must be an object, got null"),
        (
            {"assertion_id": "x", "type": "trace", "spec": {"check": "no_duplicates", "soft": "yes"}},
            "assertion 'x' failed: spec.soft must be a boolean, got 'yes'",
        ),
        (
            {"assertion_id": "x", "type": "trace", "spec": {"check": "no_duplicates"}, "request_id": 5},
            "assertion 'x' failed: request_id must be a string, got 5",
        ),
    ],
)
def test_malformed_assertions(item: Any, message: str) -> None:
    error = batch_error(refund_trace(), item)
    assert (error["code"], error["message"]) == (1002, message)


def test_unknown_assertion_type_detail() -> None:
    error = batch_error(refund_trace(), {"assertion_id": "x", "type": "plugin", "spec": {}})
    assert "Gate newer assertion types on capability checks" in error["data"]["detail"]


def test_duplicate_assertion_ids() -> None:
    item = assertion("x", "trace", check="no_duplicates")
    error = batch_error(refund_trace(), item, item)
    assert error["message"] == "assertion 'x' failed: assertion_id is not unique within the batch"


def test_trace_is_validated_before_assertions() -> None:
    trace = refund_trace()
    del trace["trace_id"]
    error = batch_error(trace, {"assertion_id": "x", "type": "nonsense", "spec": {}})
    assert error["code"] == 1001 and error["message"] == "trace missing required field: trace_id"
    assert error["data"] == {
        "error_type": "INVALID_TRACE",
        "retryable": False,
        "detail": "Every trace must include a non-empty trace_id string.",
    }


def test_params_errors() -> None:
    responses = run_engine(
        [
            request(0, "initialize", INITIALIZE),
            request(1, "evaluate_batch", {"assertions": []}),
            request(2, "evaluate_batch", {"trace": refund_trace(), "assertions": {}}),
            request(3, "evaluate_batch", [refund_trace()]),
            request(4, "evaluate_batch", {"trace": "trc_abc"}),
        ],
        sequential=True,
    )
    assert [(r["id"], r["error"]["code"]) for r in responses[1:]] == [(1, 1001), (2, -32602), (3, -32602), (4, 1001)]
    assert responses[1]["error"]["message"] == "evaluate_batch params missing required field: trace"
    assert responses[4]["error"]["message"] == "trace must be a JSON object, got string"


def test_explanations_are_bounded() -> None:
    trace = refund_trace()
    trace["output"]["message"] = "word " * 20_000
    values = [f"missing-keyword-{i}" * 20 for i in range(50)]
    result = one("content", trace, target="output.message", check="keyword_all", values=values)
    assert len(result["explanation"]) <= 1000


def test_internal_faults_are_engine_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault inside evaluation is answered with ENGINE_ERROR (3001); the engine keeps serving."""

    def broken(spec: Any) -> Any:
        def check(view: Any) -> Any:
            raise RuntimeError("bug")

        return check

    monkeypatch.setitem(layer_trace.CHECKS, "no_duplicates", broken)
    responses = run_engine(
        [
            request(0, "initialize", INITIALIZE),
            batch(1, refund_trace(), assertion("x", "trace", check="no_duplicates")),
            batch(2, refund_trace(), assertion("y", "trace", check="required_tools", tools=["lookup_order"])),
        ],
        sequential=True,
    )
    assert responses[1]["error"] == {
        "code": 3001,
        "message": "internal engine error: RuntimeError",
        "data": {
            "error_type": "ENGINE_ERROR",
            "retryable": False,
            "detail": "This is an engine bug; the engine logged the traceback on stderr. Report it with the request.",
        },
    }
    assert responses[2]["result"]["results"][0]["status"] == "pass"


def test_response_lines_stay_within_the_sdk_line_limit() -> None:
    """attest-ai reads responses with a 64 KiB line limit: explanations shrink to keep a batch under it."""
    trace = refund_trace()
    trace["output"]["message"] = "é" * 5000
    values = [f"absent-keyword-{i}-" * 10 for i in range(40)]
    assertions = [
        assertion(f"a{i}", "content", target="output.message", check="keyword_all", values=values) for i in range(150)
    ]
    response = evaluate(trace, *assertions)
    line = json.dumps(response, separators=(",", ":"))
    assert len(line) < 64 * 1024
    explanation = response["result"]["results"][0]["explanation"]
    assert explanation.startswith("output.message is missing 40 of 40 keywords") and explanation.endswith("…")
