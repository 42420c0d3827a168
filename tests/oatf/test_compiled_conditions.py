"""Compiled conditions and wildcard paths (`compile_condition`, `compile_wildcard_path`) and the fast pattern
evaluation built on them agree with a straightforward reference: a small, independent implementation of
SDK spec §5.1.2 (wildcard resolution), §5.3 (conditions, deep equality, type coercion) and §4.2
(`evaluate_pattern`), written for clarity rather than speed and used here as the test oracle."""

from __future__ import annotations

import json
from typing import Any

import pytest
import re2
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from oatf.conditions import SCREEN_SEPARATOR, compile_condition, evaluate_condition, evaluate_predicate
from oatf.errors import EvaluationError, EvaluationErrorKind
from oatf.evaluation import MAX_RESOLVED_VALUES, evaluate_indicator, evaluate_pattern
from oatf.model import Indicator, IndicatorResult, MatchCondition, PatternMatch
from oatf.paths import MAX_WILDCARD_DEPTH, compile_wildcard_path, resolve_wildcard_path
from oatf.regex import RegexSyntaxError, is_context_free

# --- the reference -------------------------------------------------------------------------------------

OPERATORS = ("contains", "starts_with", "ends_with", "regex", "any_of", "gt", "lt", "gte", "lte", "exists")


def ref_resolve(path: str, value: Any) -> list[Any]:
    """§5.1.2, segment by segment: a field keeps the objects holding it, `[*]` fans arrays out."""
    if path == "":
        return [value]
    steps: list[str | None] = []
    for segment in path.split("."):
        if segment.endswith("[*]"):
            if segment[:-3]:
                steps.append(segment[:-3])
            steps.append(None)
        else:
            steps.append(segment)
    if len(steps) > MAX_WILDCARD_DEPTH:
        return []
    nodes = [value]
    for step in steps:
        if step is None:
            nodes = [element for node in nodes if isinstance(node, list | tuple) for element in node]
        else:
            nodes = [node[step] for node in nodes if isinstance(node, dict) and step in node]
    return nodes


def ref_is_number(value: Any) -> bool:
    return type(value) in (int, float)


def ref_equal(a: Any, b: Any) -> bool:
    """§5.3 deep equality: numbers by value (booleans are not numbers), NaN equal to nothing."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if ref_is_number(a) or ref_is_number(b):
        return ref_is_number(a) and ref_is_number(b) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(ref_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(ref_equal(a[key], b[key]) for key in a)
    return False


def ref_text(value: Any) -> str | None:
    """§5.3 type coercion: a string as it is, anything else as compact JSON with sorted keys."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None


def ref_regex(pattern: str, text: str) -> bool:
    return re2.compile(pattern).search(text.encode("utf-8", "surrogatepass")) is not None


def ref_operators(condition: Any) -> dict[str, Any] | None:
    if isinstance(condition, MatchCondition):
        return {name: getattr(condition, name) for name in OPERATORS if getattr(condition, name) is not None}
    if isinstance(condition, dict) and any(name in condition for name in OPERATORS):
        return {name: operand for name, operand in condition.items() if operand is not None}
    return None


def ref_condition(condition: Any, value: Any) -> bool:
    """§5.3 `evaluate_condition`: the operators in order, with AND (the order decides which is reached)."""
    operators = ref_operators(condition)
    if operators is None:
        return ref_equal(value, condition)
    for name, operand in operators.items():
        if name in ("contains", "starts_with", "ends_with", "regex"):
            text = ref_text(value)
            if not isinstance(operand, str) or text is None:
                return False
            if name == "contains":
                holds = operand in text
            elif name == "starts_with":
                holds = text.startswith(operand)
            elif name == "ends_with":
                holds = text.endswith(operand)
            else:
                holds = ref_regex(operand, text)
        elif name == "any_of":
            holds = isinstance(operand, list | tuple) and any(ref_equal(value, item) for item in operand)
        elif name == "exists":
            holds = bool(operand)
        elif name in ("gt", "lt", "gte", "lte"):
            holds = ref_is_number(value) and ref_is_number(operand) and {
                "gt": value > operand, "lt": value < operand, "gte": value >= operand, "lte": value <= operand
            }[name]
        else:
            holds = False
        if not holds:
            return False
    return True


def ref_pattern(condition: Any, target: str, message: Any) -> bool:
    """§4.2 `evaluate_pattern` for conditions that cannot raise: `exists` alone by resolution, else any."""
    values = ref_resolve(target, message)
    operators = ref_operators(condition)
    if operators is not None and operators.keys() == {"exists"}:
        return bool(operators["exists"]) == bool(values)
    return any(ref_condition(condition, value) for value in values)


# --- strategies ----------------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c", "tools", "text", "a[*]", ""])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet="ab\n{}\"\\é\ud800", max_size=6)
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=25,
)
PATH_SEGMENTS = st.sampled_from(["a", "b", "c", "a[*]", "b[*]", "[*]", "tools[*]", "text", "a[*][*]"])
PATHS = st.just("") | st.lists(PATH_SEGMENTS, min_size=1, max_size=6).map(".".join)
REGEXES = st.sampled_from([
    "a", "ab", "(?i)A", "b+", "[0-9]+", "a.b", "(?s)a.b", "a\nb", "x|y", "(a)(b)?", "", ".*",
    "^a", "a$", "^$", "\\ba", "\\Bb", "\\Aa", "a\\z", "(?m)^b", "\\{", "\"", "[^a]", "\\C",
])
OPERAND = st.one_of(
    st.text(alphabet="ab\n{}\"", max_size=3),
    st.integers(min_value=-5, max_value=5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(SCALARS, max_size=3),
    st.lists(SCALARS, max_size=3).map(tuple),
)
OPERATOR_ITEMS = st.lists(
    st.tuples(st.sampled_from([name for name in OPERATORS if name != "regex"] + ["regex", "nope"]), OPERAND)
    | st.tuples(st.just("regex"), REGEXES),
    min_size=1,
    max_size=3,
    unique_by=lambda item: item[0],
)
OPERATOR_MAPPINGS = OPERATOR_ITEMS.map(dict).filter(lambda mapping: any(name in mapping for name in OPERATORS))
MATCH_CONDITIONS = OPERATOR_ITEMS.map(
    lambda items: MatchCondition(**{name: operand for name, operand in items if name in OPERATORS})
)
CONDITIONS = JSON | OPERATOR_MAPPINGS | MATCH_CONDITIONS


# --- paths ---------------------------------------------------------------------------------------------


@given(PATHS, JSON)
def test_compiled_wildcard_path_agrees_with_reference(path: str, value: Any) -> None:
    expected = ref_resolve(path, value)
    for actual in (compile_wildcard_path(path)(value), resolve_wildcard_path(path, value)):
        assert len(actual) == len(expected)
        assert all(a is b for a, b in zip(actual, expected, strict=True))  # the very nodes, in document order


@given(st.lists(st.dictionaries(st.sampled_from(["d", "e"]), SCALARS, max_size=2) | SCALARS, max_size=6))
def test_fan_out_field_over_mixed_arrays(items: list[Any]) -> None:
    message = {"t": items, "u": tuple(items)}
    for path in ("t[*].d", "u[*].d"):
        actual = compile_wildcard_path(path)(message)
        expected = ref_resolve(path, message)
        assert len(actual) == len(expected) and all(a is b for a, b in zip(actual, expected, strict=True))


def test_compiled_wildcard_path_limits_and_non_json() -> None:
    class Weird(dict):  # a mapping subclass is read through its own `get`
        def get(self, key: Any, default: Any = None) -> Any:
            return "weird"

    assert resolve_wildcard_path("a[*].b", {"a": [Weird(b=1), {"b": 2}, {"c": 3}]}) == ["weird", 2]
    assert resolve_wildcard_path("a[*].b", {"a": [{"b": 1}, {"b": 2}]}) == [1, 2]
    assert resolve_wildcard_path(".".join(["a"] * (MAX_WILDCARD_DEPTH + 1)), {"a": None}) == []
    assert resolve_wildcard_path("a[*]." * 32 + "a", {"a": []}) == []  # 65 levels: over the limit
    result = resolve_wildcard_path("a", {"a": 1})
    result.append(2)
    assert resolve_wildcard_path("a", {"a": 1}) == [1]  # a fresh list at each call


# --- conditions ----------------------------------------------------------------------------------------


@settings(max_examples=400)
@given(CONDITIONS, JSON)
def test_compiled_condition_agrees_with_reference(condition: Any, value: Any) -> None:
    expected = ref_condition(condition, value)
    compiled = compile_condition(condition)
    assert compiled.test(value) is expected
    assert compiled(value) is expected
    assert evaluate_condition(condition, value) is expected


@given(CONDITIONS, st.lists(JSON, max_size=6), st.integers(min_value=0, max_value=7))
def test_find_agrees_with_reference(condition: Any, values: list[Any], start: int) -> None:
    compiled = compile_condition(condition)
    expected = next(
        (
            index
            for index in range(start, len(values))
            if (compiled.reads_text and type(values[index]) is not str) or ref_condition(condition, values[index])
        ),
        len(values),
    )
    assert compiled.find(values, start) == expected


TEXTS = st.text(alphabet="ab\nAx0{\ud800é", max_size=5)


@settings(max_examples=400)
@given(REGEXES, st.lists(TEXTS, min_size=1, max_size=6), OPERATOR_ITEMS)
def test_screen_only_rules_out_true_mismatches(pattern: str, texts: list[str], others: list[Any]) -> None:
    condition = {name: operand for name, operand in others if name != "regex"} | {"regex": pattern}
    compiled = compile_condition(condition)
    operators = ref_operators(condition)
    assert operators is not None
    screenable = "any_of" not in operators and type(operators.get("exists", True)) is bool
    assert (compiled.screen is not None) is (is_context_free(pattern) and screenable)
    if compiled.screen is not None and not compiled.screen(SCREEN_SEPARATOR.join(texts)):
        assert not any(ref_condition(condition, text) for text in texts)


@settings(max_examples=300)
@given(CONDITIONS, PATHS, JSON)
def test_evaluate_pattern_agrees_with_reference(condition: Any, target: str, message: Any) -> None:
    assume(condition is not None)  # a pattern without a condition is an error
    outcome = evaluate_pattern(PatternMatch(target=target, condition=condition), message)
    assert outcome is ref_pattern(condition, target, message)


@settings(max_examples=300)
@given(REGEXES, st.lists(TEXTS, min_size=3, max_size=12))
def test_screened_pattern_agrees_with_reference(pattern: str, texts: list[str]) -> None:
    message = {"tools": [{"text": text} for text in texts]}
    for condition in ({"regex": pattern}, MatchCondition(regex=pattern), {"regex": pattern, "contains": "a"}):
        outcome = evaluate_pattern(PatternMatch(target="tools[*].text", condition=condition), message)
        assert outcome is ref_pattern(condition, "tools[*].text", message)


# --- what compilation must not change ------------------------------------------------------------------


def test_equal_but_different_operands_are_not_conflated() -> None:
    # 1 == True == 1.0 in Python, not in OATF: caching must not mix them up
    assert evaluate_condition(MatchCondition(gt=0), 1) is True
    assert evaluate_condition(MatchCondition(gt=False), 1) is False  # a boolean is not a number
    assert evaluate_condition(MatchCondition(any_of=(1,)), 1.0) is True
    assert evaluate_condition(MatchCondition(any_of=(True,)), 1.0) is False
    assert evaluate_condition(1, 1.0) is True
    assert evaluate_condition(True, 1) is False
    assert evaluate_condition(1, True) is False
    assert evaluate_condition(1.0, 1) is True
    assert evaluate_condition(float("nan"), float("nan")) is False
    assert evaluate_condition("x", "x") is True
    assert evaluate_condition(MatchCondition(any_of=("x", 1)), "x") is True
    assert evaluate_condition(MatchCondition(any_of=("x", 1)), "y") is False
    assert evaluate_condition(MatchCondition(exists=True, contains="b"), "abc") is True
    assert evaluate_condition(MatchCondition(exists=False, contains="b"), "abc") is False


def test_mutable_conditions_are_read_afresh() -> None:
    mapping: dict[str, Any] = {"contains": "a"}
    assert evaluate_condition(mapping, "abc") is True
    mapping["contains"] = "z"
    assert evaluate_condition(mapping, "abc") is False
    listed: list[Any] = ["a"]
    condition = MatchCondition(any_of=listed)  # type: ignore[arg-type]  # a list, not the model's tuple
    assert evaluate_condition(condition, "b") is False
    listed.append("b")
    assert evaluate_condition(condition, "b") is True
    bare: list[Any] = [1]
    assert evaluate_condition(bare, [1]) is True
    bare.append(2)
    assert evaluate_condition(bare, [1]) is False


def test_invalid_regex_raises_only_when_reached() -> None:
    assert evaluate_condition({"starts_with": "zz", "regex": "("}, "abc") is False
    with pytest.raises(RegexSyntaxError):
        evaluate_condition({"regex": "(", "starts_with": "zz"}, "abc")
    with pytest.raises(RegexSyntaxError):
        evaluate_condition(MatchCondition(regex="("), "abc")
    assert compile_condition(MatchCondition(regex="(")).screen is None
    pattern = PatternMatch(target="a[*]", condition=MatchCondition(regex="("))
    assert evaluate_pattern(pattern, {"a": []}) is False  # nothing resolved: the regex is never used
    error = evaluate_pattern(pattern, {"a": ["x", "y", "z"]})
    assert isinstance(error, EvaluationError) and error.kind == EvaluationErrorKind.UNSUPPORTED_METHOD
    lone = PatternMatch(target="a", condition=MatchCondition(regex="a\ud800"))  # no UTF-8 form: invalid RE2
    assert evaluate_pattern(lone, {"b": "x"}) is False
    error = evaluate_pattern(lone, {"a": "x"})
    assert isinstance(error, EvaluationError) and error.kind == EvaluationErrorKind.UNSUPPORTED_METHOD


def test_screen_falls_back_when_the_joined_text_matches() -> None:
    # a match across the separator proves nothing: each value is then tested alone
    spanning = PatternMatch(target="t[*]", condition={"regex": "a\nb"})
    assert evaluate_pattern(spanning, {"t": ["xa", "by", "z"]}) is False
    assert evaluate_pattern(spanning, {"t": ["xa", "b", "a\nb"]}) is True
    # anchored patterns are never screened: `^b` matches the second value, not the joined text's start
    anchored = PatternMatch(target="t[*]", condition={"regex": "^b"})
    assert compile_condition({"regex": "^b"}).screen is None
    assert evaluate_pattern(anchored, {"t": ["a", "b", "c"]}) is True
    ended = PatternMatch(target="t[*]", condition={"regex": "a$"})
    assert evaluate_pattern(ended, {"t": ["xa", "b", "c"]}) is True
    assert evaluate_pattern(PatternMatch(target="t[*]", condition={"regex": "\ud800"}), {"t": ["a", "b", "\ud800"]})


def test_first_match_and_first_unreadable_value_decide_in_document_order() -> None:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    condition = {"contains": "KEY"}
    before = evaluate_pattern(PatternMatch(target="v[*]", condition=condition), {"v": [deep, "KEY"]})
    assert isinstance(before, EvaluationError) and before.kind == EvaluationErrorKind.TYPE_ERROR
    assert evaluate_pattern(PatternMatch(target="v[*]", condition=condition), {"v": ["KEY", deep]}) is True
    assert evaluate_pattern(PatternMatch(target="v[*]", condition=condition), {"v": ["no", {"k": "KEY"}]}) is True
    assert evaluate_pattern(PatternMatch(target="v[*]", condition={"gt": 1}), {"v": [deep, 2]}) is True
    not_json = evaluate_pattern(PatternMatch(target="v[*]", condition=condition), {"v": ["no", {1, 2}]})
    assert isinstance(not_json, EvaluationError) and not_json.kind == EvaluationErrorKind.TYPE_ERROR


def test_too_many_values_is_an_error_even_when_the_first_matches() -> None:
    message = {"v": ["KEY"] * (MAX_RESOLVED_VALUES + 1)}
    for condition in ({"contains": "KEY"}, {"regex": "K.Y"}):
        outcome = evaluate_pattern(PatternMatch(target="v[*]", condition=condition), message)
        assert isinstance(outcome, EvaluationError) and outcome.kind == EvaluationErrorKind.PATH_RESOLUTION


def test_evidence_is_built_for_the_first_match() -> None:
    indicator = Indicator.from_dict({
        "id": "T-1", "target": "tools[*].description",
        "pattern": {"target": "tools[*].description", "regex": "(?i)ignore (all )?previous"},
    })
    message = {"tools": [{"description": "fine"}, {"description": "fine"}, {"description": "x Ignore previous"}]}
    verdict = evaluate_indicator(indicator, message)
    assert verdict.result is IndicatorResult.MATCHED
    assert verdict.evidence is not None
    assert verdict.evidence.startswith("tools[*].description (value 3 of 3): regex ")
    assert verdict.evidence.endswith('matched "x Ignore previous"')
    multiline = evaluate_indicator(indicator, {"tools": [{"description": "a\n\"Ignore previous\"\u2028"}]})
    assert multiline.evidence is not None and multiline.evidence.endswith(
        json.dumps("a\n\"Ignore previous\"\u2028", ensure_ascii=False)
    )


def test_predicates_use_the_same_conditions() -> None:
    assert evaluate_predicate({"a": MatchCondition(exists=False)}, {}) is True
    assert evaluate_predicate({"a": {"exists": False}}, {}) is True
    assert evaluate_predicate({"a": {"exists": False, "contains": None}}, {}) is True
    assert evaluate_predicate({"a": {"exists": 0}}, {}) is False  # exactly `false`
    assert evaluate_predicate({"a": MatchCondition(exists=False)}, {"a": None}) is False
    assert evaluate_predicate({"a": None}, {}) is False
    assert evaluate_predicate({"a": None, "b.c": MatchCondition(gte=2)}, {"a": None, "b": {"c": 2.0}}) is True
