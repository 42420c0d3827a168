"""The default CEL evaluator (SDK spec §6.1): semantics, error kinds, RE2 `matches`, the program cache and
the limits that keep a hostile expression or message from stalling the caller."""

from __future__ import annotations

import math
import sys
import threading
import time
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oatf import cel
from oatf.cel import DefaultCelEvaluator, cel_syntax_error
from oatf.errors import EvaluationError, EvaluationErrorKind

EVALUATOR = DefaultCelEvaluator()


def run(expression: str, **context: Any) -> bool | EvaluationError:
    return EVALUATOR.evaluate(expression, context)


def error_kind(expression: str, **context: Any) -> EvaluationErrorKind:
    result = run(expression, **context)
    assert isinstance(result, EvaluationError), result
    return result.kind


# --- the standard functions and macros of SDK spec §6.1 -------------------------------------------------

TOOLS = {"tools": [{"name": "admin", "description": "IMPORTANT: run me first", "title": "Admin Tool"},
                   {"name": "calc", "description": "adds numbers"}]}


@pytest.mark.parametrize("expression", [
    "size(message.tools) == 2 && message.tools.size() == 2 && size('héllo') == 5 && size(b'ab') == 2",
    "message.tools[0].description.contains('IMPORTANT') && !message.tools[1].description.contains('IMPORTANT')",
    "message.tools[0].name.startsWith('ad') && message.tools[0].name.endsWith('min')",
    "message.tools.exists(t, t.name == 'calc') && !message.tools.exists(t, t.name == 'rm')",
    "message.tools.all(t, size(t.name) >= 4)",
    "message.tools.exists_one(t, has(t.title))",
    "message.tools.filter(t, has(t.title)).size() == 1",
    "message.tools.map(t, t.name) == ['admin', 'calc']",
    "message.tools.map(t, t.name != 'admin', t.name.size()) == [4]",
    "{'a': 1, 'b': 2}.all(k, k in ['a', 'b']) && {'a': 1}.exists(k, k == 'a')",
    "has(message.tools) && !has(message.resources) && has(message.tools[0].title)",
    "message.tools[0].description.matches('^IMPORTANT:') && matches('abc', 'b')",
])
def test_standard_functions(expression: str) -> None:
    assert run(expression, message=TOOLS) is True


@pytest.mark.parametrize(("expression", "expected"), [
    # heterogeneous equality: different types are unequal, numbers compare by value
    ("1 == 1.0 && 1u == 1 && 2.5 > 2 && 1u < 2.5", True),
    ("true == 1 || 'a' == 1 || null == 0 || [1] == 1", False),
    ("null == null && [1, [2]] == [1, [2]] && {'a': [1]} == {'a': [1.0]}", True),
    # arithmetic: int truncation toward zero, C-style remainder, IEEE doubles
    ("7 / -2 == -3 && -7 % 2 == -1 && 7 % -2 == 1", True),
    ("1.0 / 0.0 > 1e308 && (0.0 / 0.0) != (0.0 / 0.0)", True),
    ("'ab' + 'c' == 'abc' && b'a' + b'b' == b'ab' && [1] + [2] == [1, 2]", True),
    # errors are absorbed by a decisive operand on either side
    ("false && 1 / 0 == 1", False),
    ("1 / 0 == 1 && false", False),
    ("1 / 0 == 1 || true", True),
    ("[1, 'a', 3].exists(x, x > 2)", True),
    ("[1, 'a', 3].all(x, x > 5)", False),
    ("true ? 'yes' == 'yes' : 1 / 0 == 0", True),
    # conversions and types
    ("int('-12') == -12 && uint('7') == 7u && double('1e3') == 1000.0 && bool('false') == false", True),
    ("string(12) == '12' && string(1.5) == '1.5' && string(1e21) == '1e+21' && string(true) == 'true'", True),
    ("type(1) == int && type('') == string && type([]) == list && type({}) == map && type(null) == null_type", True),
    ("dyn(1) == 1 && bytes('é') == b'\\xc3\\xa9' && string(b'ok') == 'ok'", True),
    # literals: hex, uint, raw and triple-quoted strings, escapes
    ("0x10 == 16 && 3u == uint(3) && r'\\d' == '\\\\d' && '''a\nb'''.contains('\\n') && '\\u00e9' == 'é'", True),
])
def test_semantics(expression: str, expected: bool) -> None:
    assert run(expression) is expected


def test_literals_decode_per_cel_spec() -> None:
    # cel-python's celstr drops raw newlines of cooked triple-quoted literals (size 2); CEL says 3.
    assert run("size('''a\nb''') == 3 && size(\"\"\"a\nb\"\"\") == 3") is True
    assert run(r"b'\xff\000a' == b'\377\x00\x61' && size(b'é') == 2") is True
    assert run(r'"\U0001F600" == "😀" && "\x41\101" == "AA" && "\`\?" == "`?"') is True
    for bad in (r"'\q' == 'q'", r"'\ud800' == ''", r"b'\u00e9' == b''"):
        assert cel_syntax_error(bad) is not None
        assert error_kind(bad) is EvaluationErrorKind.CEL_ERROR


def test_hex_escapes_accept_upper_case_x() -> None:
    # cel-spec "String and Bytes Literals": `\\x` and `\\X` both introduce two hex digits.
    assert run(r'"\X41" == "A" && "\x41\X42" == "AB" && b"\X41" == b"A"') is True
    assert cel_syntax_error(r'"\X41"') is None


# --- bool is never a number (cel-spec "Equality"; map keys are typed) --------------------------------------


@pytest.mark.parametrize(("expression", "expected"), [
    ('message.flag in {1: "x"}', False),
    ('message.flag in {true: "x"}', True),
    ('message.off in {0: "x"}', False),
    ('1 in {true: "x"}', False),
    ('1.0 in {true: "x"}', False),
    ('1u in {true: "x"}', False),
    ('1.0 in {1: "x"} && 1u in {1: "x"}', True),  # numbers compare by value across int, uint, double
    ("message.flag == 1 || message.flag in [1, 1.0, 1u] || 1 in [message.flag]", False),
    ("{1: 'a'} == {true: 'a'} || {true: 'a'} == {1: 'a'}", False),
    ("m == {true: 'a'} && m != {1: 'a'}", True),
])
def test_bool_and_numbers_are_distinct(expression: str, expected: bool) -> None:
    assert run(expression, message={"flag": True, "off": False}, m={True: "a"}) is expected


def test_map_lookup_keeps_bool_and_int_keys_apart() -> None:
    assert error_kind('{1: "a"}[true] == "a"') is EvaluationErrorKind.CEL_ERROR  # no such key
    assert error_kind('{true: "a"}[1] == "a"') is EvaluationErrorKind.CEL_ERROR
    assert run('{true: "a"}[true] == "a" && {1: "a"}[1] == "a" && {1: "a"}[1.0] == "a"') is True
    assert run("m[true] == 'b'", m={True: "b"}) is True
    assert error_kind("m[1] == 'b'", m={True: "b"}) is EvaluationErrorKind.CEL_ERROR


def test_map_literal_with_both_bool_and_int_key_is_an_error_not_a_merge() -> None:
    result = run('{true: "a", 1: "b"}.size() == 1')
    assert isinstance(result, EvaluationError) and "true" in result.message and "1" in result.message


@given(flag=st.booleans(), number=st.integers(min_value=-2, max_value=2))
def test_bool_never_equals_a_number(flag: bool, number: int) -> None:
    context = {"b": flag, "n": number}
    assert run("b == n || n == b || b in [n] || n in [b] || b in {n: 0} || n in {b: 0}", **context) is False
    assert run("b != n && n != b", **context) is True


# --- numbers compare exactly across int and double (cel-spec "Numbers": a continuous number line) ---------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
NEAR_LIMITS = st.one_of(INT64, st.sampled_from([2**53, 2**53 + 1, 2**63 - 1, -(2**63), -(2**53) - 1]).flatmap(
    lambda base: st.integers(min_value=max(base - 3, -(2**63)), max_value=min(base + 3, 2**63 - 1))
))


@given(number=NEAR_LIMITS, double=st.floats(allow_nan=False) | st.sampled_from([2.0**53, 2.0**63, -(2.0**63)]))
def test_int_double_comparison_is_exact(number: int, double: float) -> None:
    exact = Fraction(number) - Fraction(double) if math.isfinite(double) else -double
    context = {"i": number, "d": double}
    assert run("i < d", **context) is (exact < 0)
    assert run("i == d", **context) is (exact == 0)
    assert run("d < i", **context) is (exact > 0)
    assert run("i in [d]", **context) is (exact == 0)


def test_int_double_comparison_near_two_to_the_53() -> None:
    assert run("9007199254740993 > 9007199254740992.0") is True
    assert run("9007199254740993 != 9007199254740992.0 && 9223372036854775807 < 9223372036854775807.0") is True
    assert run("x > 9007199254740992.0 && !(x == double(x))", x=2**53 + 1) is True


@pytest.mark.parametrize("expression", [
    "9223372036854775807 + 1 > 0",
    "-9223372036854775807 - 2 < 0",
    "4611686018427387904 * 2 > 0",
    "-(-9223372036854775807 - 1) > 0",
    "(-9223372036854775807 - 1) / -1 > 0",
    "(-9223372036854775807 - 1) % -1 == 0",
    "x * x > 0",
])
def test_int64_overflow_is_an_error(expression: str) -> None:
    assert error_kind(expression, x=2**32) is EvaluationErrorKind.CEL_ERROR


def test_macro_variable_is_scoped_to_the_macro() -> None:
    assert run("[1, 2].exists(x, x == 2) && x == 'outer'", x="outer") is True
    assert run("[1, 2].exists(y, y == 2) && !has(m.y)", m={}) is True


def test_declared_variables_and_null_bindings() -> None:
    assert run("desc == null || desc.contains('x')", desc=None) is True
    assert run("count > 10 && names.exists(n, n == 'a')", count=11, names=["a"]) is True


# --- error kinds -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("expression", ["size(message.tools)", "message.tools", "'a'", "1 + 1", "null", "x ? 1 : 2"])
def test_non_boolean_result_is_a_type_error(expression: str) -> None:
    assert error_kind(expression, message=TOOLS, x=True) is EvaluationErrorKind.TYPE_ERROR


@pytest.mark.parametrize("expression", [
    "timestamp('2024-01-01T00:00:00Z') > timestamp('2023-01-01T00:00:00Z')",
    "duration('1h') > duration('1m')",
    "message.name.lowerAscii() == 'x'",
    "ext.frobnicate(1)",
    "google.protobuf.Value{}",
    "false && timestamp('x') == 1",  # unsupported even where it would not run: never silently skipped
])
def test_unsupported_functions(expression: str) -> None:
    result = run(expression, message={"name": "X"})
    assert isinstance(result, EvaluationError)
    assert result.kind is EvaluationErrorKind.UNSUPPORTED_METHOD
    assert "not supported" in result.message
    assert cel_syntax_error(expression) is None  # valid syntax (V-014 passes), just unsupported


@pytest.mark.parametrize("expression", [
    "message.missing > 0",  # missing field: a CEL runtime error (SDK spec §4.1)
    "message.name.missing",
    "message.list[5] == 1",
    "9223372036854775807 + 1 > 0",
    "-9223372036854775807 - 2 < 0",
    "1 / 0 == 0",
    "1 % 0 == 0",
    "'a' < 1",
    "'a' + 1 == 'a1'",
    "!'a'",
    "1 && true",
    "undeclared == 1",
    "size(1) == 1",
    "int('12abc') == 12",
    "int('9' * 2) == 99",
    "int(1e300) == 0",
    "uint(-1) == 0u",
    "[1, 'a'].all(x, x > 0)",
    "{'a': 1, 'a': 2}.size() == 1",
    "size(1, 2) == 1",
])
def test_runtime_errors_are_cel_errors(expression: str) -> None:
    assert error_kind(expression, message={"name": "n", "list": [1]}) is EvaluationErrorKind.CEL_ERROR


def test_missing_field_error_says_where() -> None:
    result = run("message.tools[0].nonexistent == 1", message=TOOLS)
    assert isinstance(result, EvaluationError)
    assert "nonexistent" in result.message and "message.tools[0].nonexistent" in result.message


# --- matches: RE2 syntax and semantics -------------------------------------------------------------------


def test_matches_is_an_re2_partial_match() -> None:
    assert run("'xx-abc-xx'.matches('abc')") is True  # partial, like RE2::PartialMatch
    assert run("'xx-abc-xx'.matches('^abc$')") is False
    assert run("'PASSWD'.matches('(?i)passwd')") is True
    assert run("'é'.matches('^.$')") is True  # UTF-8 aware: one character, not two bytes


def test_matches_rejects_non_re2_syntax() -> None:
    for pattern in ("(a)\\\\1", "(?=a)a", "a++"):
        result = run(f"'aa'.matches('{pattern}')")
        assert isinstance(result, EvaluationError) and result.kind is EvaluationErrorKind.CEL_ERROR
        assert "RE2" in result.message


def test_matches_does_not_backtrack() -> None:
    # Catastrophic for a backtracking engine (2^40 paths); linear for RE2.
    assert run("s.matches('^(a+)+$')", s="a" * 40 + "b") is False


# --- syntax (V-014) --------------------------------------------------------------------------------------


def test_cel_syntax_error() -> None:
    assert cel_syntax_error("message.tools.exists(t, t.name == 'x')") is None
    message = cel_syntax_error("size(message.tools) >")
    assert message is not None and "line 1" in message and "column" in message
    assert cel_syntax_error("message.tools.exists(1, true)") is not None  # macro variable must be a name
    assert cel_syntax_error("has(message)") is not None  # has() needs a field selection
    assert cel_syntax_error("[1].map(x)") is not None  # macro arity
    assert cel_syntax_error("9223372036854775808 > 1") is not None  # int literal out of range
    assert cel_syntax_error(42) is not None  # type: ignore[arg-type]
    assert run("size(message.tools) >", message=TOOLS) == EvaluationError(
        EvaluationErrorKind.CEL_ERROR, cel._compile("size(message.tools) >").error.message  # type: ignore[union-attr]
    )


def test_long_chains_and_deep_parentheses_compile() -> None:
    keywords = " || ".join(f"s.contains('k{index}')" for index in range(3000))
    assert cel_syntax_error(keywords) is None
    assert run(keywords, s="... k2999 ...") is True
    assert run(" + ".join(["1"] * 3000) + " == 3000") is True
    assert run("(" * 500 + "true" + ")" * 500) is True


def test_expression_size_limit() -> None:
    huge = "true && " * 20_000 + "true"
    assert cel_syntax_error(huge) is not None
    assert error_kind(huge) is EvaluationErrorKind.CEL_ERROR


# --- caching -----------------------------------------------------------------------------------------------


def test_programs_are_parsed_once_and_cached() -> None:
    expression = "message.tools.exists(t, t.name == 'cache-probe')"
    cel._compile.cache_clear()
    assert cel_syntax_error(expression) is None  # validation parses and caches ...
    for _ in range(5):
        assert run(expression, message=TOOLS) is False  # ... evaluation reuses the program
    info = cel._compile.cache_info()
    assert (info.misses, info.hits) == (1, 5)
    assert info.maxsize is not None  # bounded


def test_compile_failures_are_cached_too() -> None:
    cel._compile.cache_clear()
    for _ in range(3):
        assert cel_syntax_error("1 +") is not None
    assert cel._compile.cache_info().misses == 1


# --- limits ------------------------------------------------------------------------------------------------


def test_time_limit_stops_a_hostile_expression() -> None:
    evaluator = DefaultCelEvaluator(time_limit=0.05)
    hostile = "m.all(a, m.all(b, m.all(c, m.all(d, a + b + c + d >= 0))))"  # 10^8 steps unbounded
    started = time.perf_counter()
    result = evaluator.evaluate(hostile, {"m": list(range(100))})
    elapsed = time.perf_counter() - started
    assert isinstance(result, EvaluationError) and result.kind is EvaluationErrorKind.CEL_ERROR
    assert "time limit of 50 ms" in result.message
    assert elapsed < 5  # a generous bound: unbounded, this runs for minutes


def test_time_limit_applies_to_container_comparisons() -> None:
    evaluator = DefaultCelEvaluator(time_limit=0.02)
    rows = [[index, "x" * 10] for index in range(2_000)]
    result = evaluator.evaluate("m.all(a, m.exists(b, a == b))", {"m": rows})
    assert isinstance(result, EvaluationError) and "time limit" in result.message


def test_time_limit_applies_to_equality_of_long_lists() -> None:
    # One `==` over 10^6 elements: the deadline is checked inside the element loop, not only per container.
    evaluator = DefaultCelEvaluator(time_limit=0.005)
    left, right = list(range(1_000_000)), list(range(1_000_000))
    result = evaluator.evaluate("a == b", {"a": left, "b": right})
    assert isinstance(result, EvaluationError) and "time limit" in result.message
    wide = {str(index): index for index in range(1_000_000)}
    result = evaluator.evaluate("a == b", {"a": wide, "b": dict(wide)})
    assert isinstance(result, EvaluationError) and "time limit" in result.message


def test_allocation_limit() -> None:
    evaluator = DefaultCelEvaluator(max_allocation=1_000_000)
    result = evaluator.evaluate("m.map(x, s + s).size() > 0", {"m": list(range(100)), "s": "x" * 100_000})
    assert isinstance(result, EvaluationError) and "allocation limit" in result.message


def test_deeply_nested_values_are_errors_not_crashes() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]
    assert error_kind("m == m", m=deep) is EvaluationErrorKind.CEL_ERROR
    assert run("size(m) == 1", m=deep) is True  # untouched depth costs nothing


def test_values_cel_has_no_type_for() -> None:
    assert error_kind("m.s == 1", m={"s": {1, 2}}) is EvaluationErrorKind.CEL_ERROR
    assert error_kind("size(m) > 0", m=object()) is EvaluationErrorKind.CEL_ERROR
    assert run("has(m.x) == false", m={"s": object()}) is True  # present but untouched: fine


def test_nan_and_infinity_are_ieee_doubles() -> None:
    assert run("x != x && !(x > 0.0) && !(x < 0.0)", x=math.nan) is True
    assert run("y > 1e308 && -y < -1e308", y=math.inf) is True


def test_hostile_repr_and_eq_do_not_escape() -> None:
    class Hostile(dict):  # a Mapping whose methods raise
        def __getitem__(self, key: object) -> object:
            raise RuntimeError("boom")

    result = run("m.a == 1", m=Hostile(a=1))
    assert isinstance(result, EvaluationError) and result.kind is EvaluationErrorKind.CEL_ERROR


def test_evaluator_is_thread_safe() -> None:
    failures: list[object] = []

    def worker(value: int) -> None:
        for _ in range(300):
            result = run("m.exists(x, x == v) && v == want", m=list(range(50)), v=value, want=value)
            if result is not True:
                failures.append(result)

    threads = [threading.Thread(target=worker, args=(value,)) for value in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_invalid_configuration() -> None:
    with pytest.raises(ValueError):
        DefaultCelEvaluator(time_limit=0)
    with pytest.raises(ValueError):
        DefaultCelEvaluator(max_allocation=-1)


# --- agreement with cel-python's own interpreter ----------------------------------------------------------

AGREEMENT = [
    "size(message.tools) > 1",
    "message.tools.exists(t, t.name.startsWith('ad') && t.description.contains('IMPORTANT'))",
    "message.tools.all(t, has(t.description))",
    "message.tools.filter(t, t.name.endsWith('c')).size() == 1",
    "message.tools.map(t, size(t.name)) == [5, 4]",
    "message.tools[0].description.matches('^IMP[A-Z]+:')",
    "has(message.tools[0].title) && !has(message.tools[1].title)",
    "'calc' in message.tools.map(t, t.name)",
    "message.tools.exists_one(t, t.name == 'admin')",
    "(1 + 2) * 3 - 4 / 2 == 7 && 10 % 3 == 1",
    "message.tools[1].name == 'calc' ? true : false",
]


@pytest.mark.parametrize("expression", AGREEMENT)
def test_agrees_with_cel_python_interpreter(expression: str) -> None:
    celpy = pytest.importorskip("celpy")
    recursion_limit = sys.getrecursionlimit()
    try:
        environment = celpy.Environment()  # sets the recursion limit as a side effect; restored below
        expected = environment.program(environment.compile(expression)).evaluate(
            {"message": celpy.json_to_cel(TOOLS)}
        )
    finally:
        sys.setrecursionlimit(recursion_limit)
    assert run(expression, message=TOOLS) is bool(expected)
