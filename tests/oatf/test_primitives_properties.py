"""Property and edge-case tests of the SDK spec §5 execution primitives: paths, conditions, predicates and
durations (hypothesis), then templates, regex, extractors, triggers, responses and effective state."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
import re2
from hypothesis import given
from hypothesis import strategies as st

from oatf.conditions import evaluate_condition, evaluate_predicate
from oatf.durations import parse_duration
from oatf.effective_state import compute_effective_state
from oatf.errors import DiagnosticSeverity, OATFParseError, ParseErrorKind
from oatf.extractors import evaluate_extractor, jsonpath_syntax_error
from oatf.model import Extractor, MatchCondition, Phase, ProtocolEvent, Trigger
from oatf.paths import (
    MAX_WILDCARD_DEPTH,
    NOT_FOUND,
    is_simple_path,
    is_wildcard_path,
    resolve_simple_path,
    resolve_wildcard_path,
)
from oatf.regex import RegexSyntaxError, compile_regex, regex_syntax_error
from oatf.responses import select_response
from oatf.templates import interpolate_template, interpolate_value, template_references, template_syntax_error
from oatf.triggers import AdvanceReason, TriggerResult, TriggerState, evaluate_trigger
from oatf.values import compact_json, deep_equal

# --- strategies ----------------------------------------------------------------------------------------

KEYS = st.text(alphabet="abc-_0.[*]", min_size=0, max_size=4)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=20,
)
SEGMENT = st.text(alphabet="abcxyzAZ09_-", min_size=1, max_size=5)
SIMPLE_PATHS = st.lists(SEGMENT, max_size=5).map(".".join)
WILDCARD_PATHS = st.lists(st.tuples(SEGMENT, st.booleans()), max_size=5).map(
    lambda parts: ".".join(name + ("[*]" if wild else "") for name, wild in parts)
)
ANY_PATHS = SIMPLE_PATHS | WILDCARD_PATHS | st.text(max_size=12)
OPERAND = st.one_of(
    st.text(max_size=6),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(SCALARS, max_size=3),
)
OPERATOR_MAPPINGS = st.dictionaries(
    st.sampled_from(["contains", "starts_with", "ends_with", "any_of", "gt", "lt", "gte", "lte", "exists"]),
    OPERAND,
    min_size=1,
)
SAFE_REGEXES = st.sampled_from(["a", "^$", "(?i)NULL", "[0-9]+", "\\{", "^\\[", "true|false", ".*"])
CONDITIONS = JSON | OPERATOR_MAPPINGS | st.builds(lambda m, r: {**m, "regex": r}, OPERATOR_MAPPINGS, SAFE_REGEXES)


def nested(depth: int, leaf: Any, key: str = "a") -> Any:
    """{key: {key: ... leaf}} `depth` levels deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = {key: value}
    return value


def nested_arrays(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# --- paths ---------------------------------------------------------------------------------------------


@given(ANY_PATHS, JSON)
def test_resolve_never_raises(path: str, value: Any) -> None:
    resolve_simple_path(path, value)
    assert isinstance(resolve_wildcard_path(path, value), list)


@given(SIMPLE_PATHS, JSON)
def test_simple_path_agrees_with_wildcard_path_without_wildcards(path: str, value: Any) -> None:
    simple = resolve_simple_path(path, value)
    wildcard = resolve_wildcard_path(path, value)
    if simple is NOT_FOUND:
        assert wildcard == []
    else:
        assert len(wildcard) == 1 and wildcard[0] is simple


@given(st.lists(SEGMENT, min_size=1, max_size=6), JSON)
def test_simple_path_finds_what_was_put_there(segments: list[str], leaf: Any) -> None:
    value: Any = leaf
    for segment in reversed(segments):
        value = {segment: value}
    assert resolve_simple_path(".".join(segments), value) is leaf


@given(JSON)
def test_empty_path_is_the_root(value: Any) -> None:
    assert resolve_simple_path("", value) is value
    (root,) = resolve_wildcard_path("", value)
    assert root is value


@given(st.lists(SEGMENT, max_size=6))
def test_generated_paths_satisfy_the_grammar(segments: list[str]) -> None:
    path = ".".join(segments)
    assert is_simple_path(path)
    assert is_wildcard_path(path)
    if segments:
        assert is_wildcard_path(path + "[*]")
        assert not is_simple_path(path + "[*]")


@pytest.mark.parametrize("path", ["a.", ".a", "a..b", "a b", "a[0]", "[*]", "a[*][*]", "a.*", "é", "a\n"])
def test_malformed_paths_are_rejected(path: str) -> None:
    assert not is_wildcard_path(path)
    assert not is_simple_path(path)


def test_found_null_is_not_not_found() -> None:
    assert resolve_simple_path("x", {"x": None}) is None
    assert resolve_simple_path("y", {"x": None}) is NOT_FOUND


@given(JSON)
def test_wildcard_results_are_bounded_by_input_size(value: Any) -> None:
    size = len(compact_json(value))  # every node takes at least one character
    for path in ("[*]", "a[*]", "a[*].b[*]", "[*].a[*].b"):
        assert len(resolve_wildcard_path(path, {"a": value, "b": value})) <= size + 1


def test_wildcard_on_100000_levels_is_bounded() -> None:
    deep_object = nested(100_000, "leaf")
    assert resolve_wildcard_path(".".join(["a"] * MAX_WILDCARD_DEPTH), deep_object) == [
        resolve_simple_path(".".join(["a"] * MAX_WILDCARD_DEPTH), deep_object)
    ]
    assert resolve_wildcard_path(".".join(["a"] * (MAX_WILDCARD_DEPTH + 1)), deep_object) == []
    assert resolve_wildcard_path(".".join(["a"] * 100_000), deep_object) == []

    deep_arrays = {"a": nested_arrays(100_000, "leaf")}
    (found,) = resolve_wildcard_path("a" + "[*]" * 1, deep_arrays)
    assert isinstance(found, list)
    assert resolve_wildcard_path("a[*]." * 70 + "a", deep_arrays) == []


def test_simple_path_on_100000_levels() -> None:
    deep_object = nested(100_000, "leaf")
    assert resolve_simple_path(".".join(["a"] * 100_000), deep_object) == "leaf"
    assert resolve_simple_path(".".join(["a"] * 100_001), deep_object) is NOT_FOUND


# --- conditions and predicates -------------------------------------------------------------------------


@given(CONDITIONS, JSON)
def test_evaluate_condition_never_raises(condition: Any, value: Any) -> None:
    assert isinstance(evaluate_condition(condition, value), bool)


@given(st.dictionaries(ANY_PATHS, CONDITIONS, max_size=4), JSON)
def test_evaluate_predicate_never_raises(predicate: dict[str, Any], value: Any) -> None:
    assert isinstance(evaluate_predicate(predicate, value), bool)


def _has_nan(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and math.isnan(item):
            return True
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return False


@given(JSON)
def test_deep_equality_is_reflexive_except_for_nan(value: Any) -> None:
    assert deep_equal(value, value) is not _has_nan(value)
    assert evaluate_condition([value], [value]) is not _has_nan(value)


@given(JSON, JSON)
def test_deep_equality_is_symmetric(left: Any, right: Any) -> None:
    assert deep_equal(left, right) is deep_equal(right, left)


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_integers_equal_their_floats(number: int) -> None:
    assert evaluate_condition(number, float(number))
    assert evaluate_condition({"any_of": [float(number)]}, number)


def test_equality_edge_cases() -> None:
    nan = float("nan")
    assert not evaluate_condition(nan, nan)
    assert not evaluate_condition([nan], [nan])
    assert not evaluate_condition(True, 1)
    assert not evaluate_condition(1, True)
    assert not evaluate_condition(0, False)
    assert not evaluate_condition(None, 0)
    assert not evaluate_condition("42", 42)
    assert evaluate_condition({"b": [1, 2.0], "a": None}, {"a": None, "b": [1.0, 2]})
    assert not evaluate_condition([1, 2], [2, 1])
    assert evaluate_condition(10**400, 10**400)
    assert not evaluate_condition(10**400, math.inf)


def test_deep_equality_of_100000_levels_does_not_recurse() -> None:
    assert deep_equal(nested(100_000, 1), nested(100_000, 1.0))
    assert not deep_equal(nested(100_000, 1), nested(100_000, True))


@given(st.sampled_from(["gt", "lt", "gte", "lte"]), JSON, st.integers() | st.floats())
def test_numeric_operators_are_false_on_non_numbers(operator: str, value: Any, operand: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        assert evaluate_condition({operator: operand}, value) is False


@given(st.integers(min_value=-(10**30), max_value=10**30), st.integers(min_value=-(10**30), max_value=10**30))
def test_numeric_operators_agree_with_python(value: int, operand: int) -> None:
    assert evaluate_condition({"gt": operand}, value) is (value > operand)
    assert evaluate_condition({"lt": operand}, value) is (value < operand)
    assert evaluate_condition({"gte": operand}, value) is (value >= operand)
    assert evaluate_condition({"lte": operand}, value) is (value <= operand)
    assert evaluate_condition(MatchCondition(gt=operand, lte=operand), value) is False


@given(JSON)
def test_string_operators_see_compact_sorted_json(value: Any) -> None:
    text = value if isinstance(value, str) else compact_json(value, sort_keys=True)
    assert evaluate_condition({"starts_with": text[:3], "ends_with": text[-3:]}, value)
    assert evaluate_condition({"contains": text[1:4]}, value)
    assert evaluate_condition({"regex": "^" + re2.escape(text) + "$"}, value)


def test_coercion_sorts_keys_and_has_no_whitespace() -> None:
    assert evaluate_condition({"regex": r'^\{"a":1,"b":\[true,null\]\}$'}, {"b": [True, None], "a": 1})
    assert evaluate_condition({"contains": "NaN"}, float("nan"))
    assert not evaluate_condition({"contains": "x"}, 10**5000)  # beyond int→str limits: matches nothing


@given(JSON)
def test_exists(value: Any) -> None:
    document = {"present": value}
    assert evaluate_predicate({"present": {"exists": True}}, document)
    assert not evaluate_predicate({"present": {"exists": False}}, document)
    assert evaluate_predicate({"absent": {"exists": False}}, document)
    assert not evaluate_predicate({"absent": {"exists": True}}, document)
    assert not evaluate_predicate({"absent": {"exists": False, "contains": ""}}, document)
    assert evaluate_predicate({"absent": MatchCondition(exists=False)}, document)


@given(st.dictionaries(SEGMENT, JSON, max_size=5))
def test_predicate_of_own_values_matches(document: dict[str, Any]) -> None:
    predicate = {key: value for key, value in document.items() if not _has_nan(value)}
    assert evaluate_predicate(predicate, document)


# --- durations -----------------------------------------------------------------------------------------

COUNTS = st.integers(min_value=0, max_value=10**6)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@given(COUNTS, st.sampled_from(sorted(UNIT_SECONDS)))
def test_shorthand_round_trips(count: int, unit: str) -> None:
    assert parse_duration(f"{count}{unit}") == timedelta(seconds=count * UNIT_SECONDS[unit])


@given(st.one_of(st.none(), COUNTS), st.one_of(st.none(), COUNTS), st.one_of(st.none(), COUNTS),
       st.one_of(st.none(), COUNTS))
def test_iso_8601_round_trips(days: int | None, hours: int | None, minutes: int | None, seconds: int | None) -> None:
    time = "".join(f"{n}{u}" for n, u in ((hours, "H"), (minutes, "M"), (seconds, "S")) if n is not None)
    text = "P" + (f"{days}D" if days is not None else "") + (f"T{time}" if time else "")
    if text == "P":
        with pytest.raises(OATFParseError):
            parse_duration(text)
        return
    expected = timedelta(days=days or 0, hours=hours or 0, minutes=minutes or 0, seconds=seconds or 0)
    assert parse_duration(text) == expected


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=10**5)))
def test_serialized_timedeltas_round_trip(duration: timedelta) -> None:
    whole = timedelta(days=duration.days, seconds=duration.seconds)
    hours, rest = divmod(whole.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    assert parse_duration(f"P{whole.days}DT{hours}H{minutes}M{seconds}S") == whole
    assert parse_duration(f"{int(whole.total_seconds())}s") == whole


@given(COUNTS.filter(lambda n: n > 0), st.sampled_from(["s", "m", "h", "d"]))
def test_negative_shorthand_is_rejected(count: int, unit: str) -> None:
    _assert_syntax_error(f"-{count}{unit}")


@given(COUNTS, st.sampled_from(["PT{}S", "PT{}M", "PT{}H", "P{}D"]))
def test_negative_iso_is_rejected(count: int, template: str) -> None:
    _assert_syntax_error(template.format(f"-{count}"))
    _assert_syntax_error("-" + template.format(count))


@given(COUNTS, st.integers(min_value=0, max_value=999), st.sampled_from(["{}s", "{}h", "PT{}S", "P{}D"]))
def test_fractions_are_rejected(whole: int, fraction: int, template: str) -> None:
    _assert_syntax_error(template.format(f"{whole}.{fraction}"))
    _assert_syntax_error(template.format(f"{whole},{fraction}"))


@given(st.text(max_size=12))
def test_parse_duration_accepts_or_raises_a_syntax_error(text: str) -> None:
    try:
        assert parse_duration(text) >= timedelta(0)
    except OATFParseError as exc:
        assert [e.kind for e in exc.errors] == [ParseErrorKind.SYNTAX]


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "P1W", "P1Y", "P1M", "PT1D", "P1H", "PT1S1M", "P1DT1S1H",
                                  "30S", "pt30s", " 30s", "30s ", "1e3s", "+5s", "٣s", "9" * 30 + "d", "5"])
def test_malformed_durations_are_rejected(text: str) -> None:
    _assert_syntax_error(text)


def _assert_syntax_error(text: str) -> None:
    with pytest.raises(OATFParseError) as raised:
        parse_duration(text)
    assert [e.kind for e in raised.value.errors] == [ParseErrorKind.SYNTAX]


# --- templates -----------------------------------------------------------------------------------------

NAMES = st.text(alphabet="abcxyz_", min_size=1, max_size=6)


@given(st.text(max_size=30), st.dictionaries(NAMES, st.text(max_size=8)), JSON, JSON)
def test_interpolate_template_never_raises(template: str, extractors: dict[str, str], request: Any,
                                           response: Any) -> None:
    text, diagnostics = interpolate_template(template, extractors, request, response)
    assert isinstance(text, str)
    assert all(d.code == "W-004" and d.severity == DiagnosticSeverity.WARNING for d in diagnostics)
    assert len(diagnostics) <= len(template_references(template))


@given(st.lists(st.tuples(st.text(alphabet="ab }{\\", max_size=5).filter(lambda t: not t.endswith(("{", "\\"))
                                                                         and "{{" not in t), NAMES), max_size=5),
       st.text(max_size=8))
def test_substituted_text_is_never_expanded(pieces: list[tuple[str, str]], injected: str) -> None:
    extractors = {name: "{{" + name + "}}" + injected for _, name in pieces}
    template = "".join(f"{literal}{{{{{name}}}}}" for literal, name in pieces)
    text, diagnostics = interpolate_template(template, extractors)
    assert text == "".join(literal + extractors[name] for literal, name in pieces)
    assert diagnostics == []
    assert template_references(template) == [name for _, name in pieces]
    assert template_syntax_error(template) is None


def test_template_diagnostics_and_escapes() -> None:
    extractors = {"empty": "", "server.token": "t0k"}
    text, diagnostics = interpolate_template(
        "[{{empty}}|{{missing}}|{{server.token}}|{{request.a}}|{{request.b}}|{{response.a}}|\\{{empty}}]",
        extractors, request={"a": {"x": [1, None]}},
    )
    assert text == '[||t0k|{"x":[1,null]}|||{{empty}}]'
    assert [d.code for d in diagnostics] == ["W-004"] * 3  # missing, request.b, response.a (no response)
    assert interpolate_template("{{request.n}}{{request.z}}", {}, {"n": 1.5, "z": None})[0] == "1.5null"
    assert interpolate_template("{{ spaced }}", {"spaced": "ok"})[0] == "ok"
    assert interpolate_template("open {{ never closed", {})[0] == "open {{ never closed"


@pytest.mark.parametrize(("template", "error"), [
    ("plain", False), ("{{a}}", False), ("\\{{a", False), ("a }} b", False), ("{{a}} \\{{b", False),
    ("{{a", True), ("{{a}} {{b", True), ("x {{", True), ("\\{{a}} {{", True),
])
def test_template_syntax_error(template: str, error: bool) -> None:
    assert (template_syntax_error(template) is not None) is error


def test_template_references() -> None:
    assert template_references("{{a}} \\{{b}} {{ actor.c }} {{request.x.y}} {{d") == ["a", "actor.c", "request.x.y"]


def test_interpolate_value_shares_unchanged_subtrees() -> None:
    static = {"inputSchema": {"type": "object"}, "list": [1, "two", None]}
    state = {"tools": (static, {"description": "{{x}}"}), "n": 3}
    result, diagnostics = interpolate_value(state, {"x": "X"})
    assert result == {"tools": (static, {"description": "X"}), "n": 3}
    assert result["tools"][0] is static and diagnostics == []
    assert interpolate_value(static, {"x": "X"})[0] is static
    assert state["tools"][1] == {"description": "{{x}}"}  # the input is never modified


# --- regex and extractors ------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["(?=a)", "(?!a)", "(?<=a)b", "(?<!a)b", "(a)\\1", "a++", "a*+", "[unclosed",
                                     "(", "a{1001}", "\\Z"])
def test_non_re2_patterns_are_syntax_errors(pattern: str) -> None:
    assert regex_syntax_error(pattern)
    with pytest.raises(RegexSyntaxError):
        compile_regex(pattern)
    with pytest.raises(RegexSyntaxError):
        evaluate_condition({"regex": pattern}, "a")


def test_regex_is_linear_time_re2() -> None:
    assert compile_regex("(a+)+$") is compile_regex("(a+)+$")  # compiled once
    assert not evaluate_condition({"regex": "(a+)+$"}, "a" * 100_000 + "!")  # catastrophic in `re`
    assert evaluate_condition({"regex": "(?i)ERROR"}, "an error")
    assert evaluate_condition({"regex": "^x.$"}, "x\ud800")  # a lone surrogate (legal in JSON) is matched


def test_extractor_edge_cases() -> None:
    def extractor(kind: str, selector: str) -> Extractor:
        return Extractor.from_dict({"name": "v", "source": "response", "type": kind, "selector": selector})

    assert evaluate_extractor(extractor("json_path", "$..x"), nested(1_000, {"x": 1}, "y"), "response") is None
    assert evaluate_extractor(extractor("json_path", "$..x"), nested(10, {"x": 1}, "y"), "response") == "1"
    assert evaluate_extractor(extractor("json_path", "$.a"), {"a": ""}, "response") == ""
    assert evaluate_extractor(extractor("json_path", "$.a"), {"a": True}, "response") == "true"
    assert evaluate_extractor(extractor("regex", '"k":"([a-z]*)"'), {"k": "v"}, "response") == "v"
    assert evaluate_extractor(extractor("regex", "(x)?y"), "y", "response") is None
    assert evaluate_extractor(extractor("regex", "k=(.*)"), "k=\ud800", "response") == "\ud800"
    assert jsonpath_syntax_error("$.tools[") and jsonpath_syntax_error("tools") and jsonpath_syntax_error("$[?")
    assert jsonpath_syntax_error("$.tools[*].name") is None
    assert jsonpath_syntax_error("$" + "[?(" * 5_000) is not None


# --- triggers, responses, effective state --------------------------------------------------------------


def test_trigger_after_and_event_together() -> None:
    trigger = Trigger.from_dict({"event": "tools/call", "count": 2, "after": "PT1M"})
    state = TriggerState()
    call = ProtocolEvent(event_type="tools/call", content={})
    assert evaluate_trigger(trigger, call, timedelta(seconds=1), state) is TriggerResult.NOT_ADVANCED
    assert evaluate_trigger(trigger, None, timedelta(seconds=59), state) is TriggerResult.NOT_ADVANCED
    assert evaluate_trigger(trigger, call, timedelta(seconds=2), state).reason is AdvanceReason.EVENT_MATCHED
    assert evaluate_trigger(trigger, None, timedelta(minutes=1), TriggerState()) == TriggerResult(
        advanced=True, reason=AdvanceReason.TIMEOUT
    )
    assert state.event_count == 2


def test_select_response_tries_every_predicate_before_the_default() -> None:
    entries = [{"content": "default"}, {"when": {"name": "b"}, "content": "b"}, {"when": {}, "content": "any"}]
    assert select_response(entries, {"name": "b"}) == {"content": "b"}
    assert select_response(entries, {"name": "c"}) == {"content": "any"}
    assert select_response(entries[:2], {"name": "c"}) == {"content": "default"}
    assert entries[1]["when"] == {"name": "b"}  # entries are not modified


def test_effective_state_bounds() -> None:
    phases = (Phase.from_dict({"state": {"a": 1}}), Phase.from_dict({"name": "p2"}))
    assert compute_effective_state(phases, 1) is phases[0].state
    for index in (-1, 2):
        with pytest.raises(IndexError):
            compute_effective_state(phases, index)
