"""Conformance: the execution primitives of SDK spec §5 against `primitives/*.yaml` (FIXTURE-SCHEMA.md §C)."""

from __future__ import annotations

from typing import Any

import pytest

from oatf.conditions import evaluate_condition, evaluate_predicate
from oatf.durations import parse_duration
from oatf.effective_state import compute_effective_state
from oatf.errors import OATFParseError, ParseErrorKind
from oatf.extractors import evaluate_extractor
from oatf.model import Extractor, MatchCondition, Phase, ProtocolEvent, Trigger
from oatf.paths import NOT_FOUND, resolve_simple_path, resolve_wildcard_path
from oatf.protocols import extract_protocol
from oatf.responses import select_response
from oatf.templates import interpolate_template, interpolate_value
from oatf.triggers import TriggerState, evaluate_trigger
from oatf.values import deep_equal
from tests.oatf.conformance.fixtures import suite_cases


def _same(actual: Any, expected: Any) -> bool:
    """Fixture equality: JSON deep equality, and the same JSON type (so `1` is not `1.0`... nor `True`)."""
    return deep_equal(actual, expected) and type(actual) is type(expected)


@pytest.mark.parametrize("case", suite_cases("primitives/resolve-simple-path.yaml"))
def test_resolve_simple_path(case: dict[str, Any]) -> None:
    actual = resolve_simple_path(case["input"]["path"], case["input"]["value"])
    expected = case["expected"]
    # FIXTURE-SCHEMA §C: `null` means "not found"; a found null is written {found: true, value: null}.
    if expected is None:
        assert actual is NOT_FOUND
    elif isinstance(expected, dict) and expected.get("found") is True and set(expected) == {"found", "value"}:
        assert actual is not NOT_FOUND
        assert _same(actual, expected["value"])
    else:
        assert _same(actual, expected)


@pytest.mark.parametrize("case", suite_cases("primitives/resolve-wildcard-path.yaml"))
def test_resolve_wildcard_path(case: dict[str, Any]) -> None:
    actual = resolve_wildcard_path(case["input"]["path"], case["input"]["value"])
    assert deep_equal(actual, case["expected"]["values"])


# FIXTURE-SCHEMA.md §C documents the input as `{duration: "30s"}` and the expected value as a bare integer;
# parse-duration.yaml has a bare string input and `{seconds: N}` / `{error: true}`. We follow the fixtures.
@pytest.mark.parametrize("case", suite_cases("primitives/parse-duration.yaml"))
def test_parse_duration(case: dict[str, Any]) -> None:
    expected = case["expected"]
    if expected.get("error"):
        with pytest.raises(OATFParseError) as raised:
            parse_duration(case["input"])
        assert [e.kind for e in raised.value.errors] == [ParseErrorKind.SYNTAX]
    else:
        assert parse_duration(case["input"]).total_seconds() == expected["seconds"]


@pytest.mark.parametrize("case", suite_cases("primitives/evaluate-condition.yaml"))
def test_evaluate_condition(case: dict[str, Any]) -> None:
    condition, value = case["input"]["condition"], case["input"]["value"]
    assert evaluate_condition(condition, value) is case["expected"]
    if isinstance(condition, dict):  # the same condition as the model's MatchCondition
        assert evaluate_condition(MatchCondition.from_dict(condition), value) is case["expected"]


@pytest.mark.parametrize("case", suite_cases("primitives/evaluate-predicate.yaml"))
def test_evaluate_predicate(case: dict[str, Any]) -> None:
    predicate, value = case["input"]["predicate"], case["input"]["value"]
    assert evaluate_predicate(predicate, value) is case["expected"]
    parsed = Trigger.from_dict({"event": "e", "match": predicate}).match  # conditions as MatchCondition
    assert evaluate_predicate(parsed, value) is case["expected"]


@pytest.mark.parametrize("case", suite_cases("primitives/interpolate-template.yaml"))
def test_interpolate_template(case: dict[str, Any]) -> None:
    given = case["input"]
    text, _ = interpolate_template(given["template"], given["extractors"], given.get("request"), given.get("response"))
    assert text == case["expected"]


@pytest.mark.parametrize("case", suite_cases("primitives/interpolate-value.yaml"))
def test_interpolate_value(case: dict[str, Any]) -> None:
    given = case["input"]
    value, _ = interpolate_value(given["value"], given["extractors"], given.get("request"), given.get("response"))
    assert _same(value, case["expected"])


@pytest.mark.parametrize("case", suite_cases("primitives/evaluate-extractor.yaml"))
def test_evaluate_extractor(case: dict[str, Any]) -> None:
    given = case["input"]
    extractor = Extractor.from_dict(given["extractor"])
    assert evaluate_extractor(extractor, given["message"], given["direction"]) == case["expected"]


# The fixtures expect the selected entry without its `when` key (see oatf/responses.py).
@pytest.mark.parametrize("case", suite_cases("primitives/select-response.yaml"))
def test_select_response(case: dict[str, Any]) -> None:
    actual = select_response(case["input"]["entries"], case["input"]["request"])
    if case["expected"] is None:
        assert actual is None
    else:
        assert _same(actual, case["expected"])


@pytest.mark.parametrize("case", suite_cases("primitives/evaluate-trigger.yaml"))
def test_evaluate_trigger(case: dict[str, Any]) -> None:
    given, expected = case["input"], case["expected"]
    event = None if given["event"] is None else ProtocolEvent(**given["event"])
    state = TriggerState(**given["state"])
    result = evaluate_trigger(Trigger.from_dict(given["trigger"]), event, parse_duration(given["elapsed"]), state)
    assert result.advanced is (expected["result"] == "advanced")
    assert result.reason == expected.get("reason")
    assert state.event_count == expected["state"]["event_count"]


# extract-protocol.yaml cites SDK spec §5.10 and compute-effective-state.yaml §5.11; the spec numbers them
# §5.9 and §5.10.
@pytest.mark.parametrize("case", suite_cases("primitives/extract-protocol.yaml"))
def test_extract_protocol(case: dict[str, Any]) -> None:
    assert extract_protocol(case["input"]["mode"]) == case["expected"]


@pytest.mark.parametrize("case", suite_cases("primitives/compute-effective-state.yaml"))
def test_compute_effective_state(case: dict[str, Any]) -> None:
    phases = tuple(Phase.from_dict(phase) for phase in case["input"]["phases"])
    assert _same(compute_effective_state(phases, case["input"]["phase_index"]), case["expected"])
