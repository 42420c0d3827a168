"""Conditions and match predicates (SDK spec §5.3 `evaluate_condition`, §5.4 `evaluate_predicate`;
format spec §5.4 "Match Predicates").

A condition is a bare value (compared by deep equality), a `MatchCondition`, or a plain mapping with at
least one operator key (SDK spec §2.13: "if it's an object with operator keys, treat as MatchCondition;
otherwise treat as equality" — the same rule `parse` applies). A non-operator key in such a mapping (which
`parse` rejects) makes the condition false. An operator whose operand is None is absent. Evaluation never raises on any
JSON value; the only exception is `RegexSyntaxError` for a `regex` operand outside RE2, which a document
that passed `validate` (V-013) cannot contain.

`compile_condition` turns a condition into a `CompiledCondition` whose `test` is `evaluate_condition` for
that condition, the operators decided once instead of for each value; `evaluate_condition` is its one-off
form, so both share one implementation.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .model import CONDITION_OPERATORS, Condition, MatchCondition, MatchPredicate
from .paths import NOT_FOUND, resolve_simple_path
from .regex import RegexSyntaxError, is_context_free, regex_syntax_error, searcher
from .values import compact_json, deep_equal

_OPERATOR_NAMES = frozenset(CONDITION_OPERATORS)
_STRING_OPERATORS = frozenset(("contains", "starts_with", "ends_with", "regex"))
_NUMERIC_OPERATORS = frozenset(("gt", "lt", "gte", "lte"))


def _as_text(value: Any) -> str | None:
    """SDK spec §5.3 "Type coercion for string operators": strings as they are, anything else as compact
    JSON with sorted keys; None for a value with no JSON form (it then matches no string operator)."""
    if isinstance(value, str):
        return value
    try:
        return compact_json(value, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _operators(condition: Condition) -> dict[str, Any] | None:
    """The present operators of `condition` (name → operand), or None for a bare value."""
    if isinstance(condition, MatchCondition):
        present = {}
        for name in CONDITION_OPERATORS:
            operand = getattr(condition, name)
            if operand is not None:
                present[name] = operand
        return present
    if isinstance(condition, Mapping) and not _OPERATOR_NAMES.isdisjoint(condition):
        return {name: operand for name, operand in condition.items() if operand is not None}
    return None


# --- compilation -----------------------------------------------------------------------------------------
#
# A condition compiles to one test function. The operators become a sequence of steps, in the condition's
# own order (MatchCondition: spec order; a mapping: its key order), evaluated with AND and stopping at the
# first failure — the order matters only for which step is reached, e.g. whether an invalid `regex` raises.
# A step reads either the value itself or its text (string operators; the text is computed once, at the
# first string step, and a value without one fails there). Whatever can be decided from the operand alone
# is decided here: a step that always fails (a non-string operand of a string operator, a non-number
# operand of a numeric one, `exists: false`, a non-operator key) ends the sequence, `exists: true` is no
# step at all.


def _never(value: Any) -> bool:
    return False


def _always(value: Any) -> bool:
    return True


def _text_step(name: str, operand: str) -> Callable[[str], bool]:
    if name == "contains":
        return lambda text: operand in text
    if name == "starts_with":
        return lambda text: bool(text.startswith(operand))
    if name == "ends_with":
        return lambda text: bool(text.endswith(operand))
    try:
        return searcher(operand)
    except RegexSyntaxError as exc:  # raised when (and each time) the step is reached, not at compilation
        pattern, reason = exc.pattern, exc.reason

        def invalid(text: str) -> bool:
            raise RegexSyntaxError(pattern, reason)

        return invalid


def _any_of_step(operand: list[Any] | tuple[Any, ...]) -> Callable[[Any], bool]:
    def any_of(value: Any) -> bool:
        return any(deep_equal(value, item) for item in operand)

    if not isinstance(operand, tuple):  # a list can change after compilation: always read it afresh
        return any_of
    if any(isinstance(item, str) and type(item) is not str for item in operand):
        return any_of
    # A `str` equals (deep_equal) exactly the listed strings; the tuple and its strings are immutable.
    strings = frozenset(item for item in operand if type(item) is str)

    def any_of_fast(value: Any) -> bool:
        if type(value) is str:
            return value in strings
        return any(deep_equal(value, item) for item in operand)

    return any_of_fast


_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt, "lt": operator.lt, "gte": operator.ge, "lte": operator.le,
}


def _numeric_step(name: str, operand: float) -> Callable[[Any], bool]:
    compare = _COMPARISONS[name]

    def numeric(value: Any) -> bool:
        if type(value) is int or type(value) is float:
            return bool(compare(value, operand))
        return _is_number(value) and bool(compare(value, operand))  # a non-number is a mismatch, not an error

    return numeric


_Step = tuple[str, bool, Callable[[Any], bool]]
"""(operator name, whether the step reads the value's text, the test of the value or of its text)."""


def _value_steps(operators: dict[str, Any]) -> list[_Step]:
    """The steps of `operators`, ending at the first step that always fails."""
    steps: list[_Step] = []
    for name, operand in operators.items():
        if name in _STRING_OPERATORS:
            if not isinstance(operand, str):
                steps.append((name, False, _never))
                break
            steps.append((name, True, _text_step(name, operand)))
        elif name == "any_of":
            if not isinstance(operand, list | tuple):
                steps.append((name, False, _never))
                break
            steps.append((name, False, _any_of_step(operand)))
        elif name == "exists":  # given a value, `exists: true` holds and `exists: false` does not
            if operand is True:
                continue
            if operand is False:
                steps.append((name, False, _never))
                break
            steps.append((name, False, _always if operand else _never))  # a constant, as `bool(operand)`
        elif name in _NUMERIC_OPERATORS:
            if not _is_number(operand):
                steps.append((name, False, _never))
                break
            steps.append((name, False, _numeric_step(name, operand)))
        else:  # not an operator
            steps.append((name, False, _never))
            break
    return steps


def _operators_test(operators: dict[str, Any], steps: list[_Step]) -> Callable[[Any], bool]:
    """The AND of `operators`, compiled to `steps`, as one function of the resolved value."""
    if not steps:
        return _always
    if len(steps) == 1:
        name, reads_text, check = steps[0]
        if not reads_text:
            return check
        if name == "contains":  # the commonest condition, inlined
            needle = operators["contains"]

            def contains_test(value: Any) -> bool:
                if type(value) is str:
                    return needle in value
                text = _as_text(value)
                return text is not None and needle in text

            return contains_test

        def text_test(value: Any) -> bool:
            if type(value) is str:
                return bool(check(value))
            text = _as_text(value)
            return text is not None and bool(check(text))

        return text_test

    def test(value: Any) -> bool:
        text: str | None = None
        for _, reads_text, check in steps:
            if reads_text:
                if text is None:
                    text = _as_text(value)
                    if text is None:
                        return False
                if not check(text):
                    return False
            elif not check(value):
                return False
        return True

    return test


def _equality_test(expected: Any) -> Callable[[Any], bool]:
    """Deep equality with the bare value `expected` (read at each call: a mutable value is not copied)."""
    if type(expected) is str:
        # deep_equal(value, a str) holds only for a string value equal to it
        def equals_string(value: Any) -> bool:
            if type(value) is str:
                return value == expected
            return deep_equal(value, expected)

        return equals_string
    return lambda value: deep_equal(value, expected)


@dataclass(frozen=True, slots=True, eq=False)
class CompiledCondition:
    """A condition compiled once for evaluation against many values: `compiled(value)` (or, a call cheaper,
    `compiled.test(value)`) is `evaluate_condition(condition, value)`.

    `operators` holds the present operators (name → operand, in evaluation order), None for a bare value,
    which `expected` then holds. `reads_text`: some operator is a string operator (a value is read as its
    text). `exists_only`: `exists` is the only operator (SDK spec §4.2 step 1 decides it by resolution).

    `screen`, when not None, rules out many strings at once: `screen(SCREEN_SEPARATOR.join(strings))` False
    proves that `test` is False for every one of `strings` (each of type `str` exactly), and that testing
    them would raise nothing. True proves nothing. It is the search of a `regex` operand without
    empty-width assertions (see `oatf.regex.is_context_free`): a match inside a string is a match inside
    any text containing it."""

    test: Callable[[Any], bool]
    operators: dict[str, Any] | None
    expected: Any
    reads_text: bool
    exists_only: bool
    find: Callable[[list[Any], int], int]
    """`find(values, start)`: the first index from `start` on whose value satisfies `test` or, when
    `reads_text`, is not of type `str` exactly (`test` is then not called on it: the caller decides, and
    may look into why such a value fails); `len(values)` when there is none. One loop over many values."""
    screen: Callable[[str], bool] | None = None

    def __call__(self, value: Any) -> bool:
        return self.test(value)


_COMPILED_CACHE_SIZE = 4096
_compiled_cache: dict[Any, tuple[Condition, CompiledCondition]] = {}


SCREEN_SEPARATOR = "\n"
"""What `CompiledCondition.screen` expects between the strings it rules out (any separator would do)."""


def _screen(operators: dict[str, Any]) -> Callable[[str], bool] | None:
    """A `CompiledCondition.screen` for `operators`, or None. Every operator must be unable to raise on a
    string (so no invalid regex, no `exists` operand of unknown truth, no `any_of`, whose items' equality
    is theirs to define), and one must be a `regex` whose search is context-free; that search of the
    joined text is the screen."""
    screen = None
    for name, operand in operators.items():
        if name == "regex" and isinstance(operand, str):
            if regex_syntax_error(operand) is not None:
                return None
            if screen is None and is_context_free(operand):
                screen = searcher(operand)
        elif name == "any_of" or (name == "exists" and operand is not True and operand is not False):
            return None
    return screen


def _values_from(values: list[Any], start: int) -> Iterator[tuple[int, Any]]:
    return enumerate(values) if start == 0 else enumerate(islice(values, start, None), start)


def _finder(
    test: Callable[[Any], bool], reads_text: bool, operators: dict[str, Any], steps: list[_Step]
) -> Callable[[list[Any], int], int]:
    """`CompiledCondition.find` for `test` (compiled from `operators` to `steps`)."""
    if not reads_text:

        def find(values: list[Any], start: int) -> int:
            for index, value in _values_from(values, start):
                if test(value):
                    return index
            return len(values)

        return find
    check = test
    if len(steps) == 1 and steps[0][1]:  # one string operator: on a `str`, its text step is the test
        name, _, check = steps[0]
        if name == "contains":
            needle = operators["contains"]

            def find_contains(values: list[Any], start: int) -> int:
                for index, value in _values_from(values, start):
                    if type(value) is not str or needle in value:
                        return index
                return len(values)

            return find_contains

    def find_text(values: list[Any], start: int) -> int:
        for index, value in _values_from(values, start):
            if type(value) is not str or check(value):
                return index
        return len(values)

    return find_text


def _compile(condition: Condition) -> CompiledCondition:
    operators = _operators(condition)
    if operators is None:
        test = _equality_test(condition)
        return CompiledCondition(test, None, condition, False, False, _finder(test, False, {}, []))
    steps = _value_steps(operators)
    test = _operators_test(operators, steps)
    reads_text = not _STRING_OPERATORS.isdisjoint(operators)
    return CompiledCondition(
        test,
        operators,
        None,
        reads_text,
        operators.keys() == {"exists"},
        _finder(test, reads_text, operators, steps),
        _screen(operators),
    )


_SCALAR_TYPES = frozenset((str, int, float, bool, type(None)))
"""Bare values that cannot change after compilation, cached by (type, value): equal keys compile alike."""


def compile_condition(condition: Condition) -> CompiledCondition:
    """`condition` compiled (see `CompiledCondition`). A `MatchCondition` (immutable) is compiled once and
    cached by identity, a bare string, number, boolean or null by value; a bare array or object, or a plain
    mapping of operators, which may be mutated between calls, is compiled afresh each time (cheap enough:
    no regex is compiled twice, `oatf.regex` caches them).

    Never raises for a condition `evaluate_condition` accepts: an invalid `regex` raises
    `RegexSyntaxError` when a value reaches it, as `evaluate_condition` does."""
    if isinstance(condition, MatchCondition):
        key: Any = id(condition)
        cached = _compiled_cache.get(key)
        if cached is not None and cached[0] is condition:
            return cached[1]
    elif type(condition) in _SCALAR_TYPES:
        key = (type(condition), condition)
        cached = _compiled_cache.get(key)
        if cached is not None:
            return cached[1]
    else:
        return _compile(condition)
    compiled = _compile(condition)
    if len(_compiled_cache) >= _COMPILED_CACHE_SIZE:
        _compiled_cache.clear()
    _compiled_cache[key] = (condition, compiled)  # the entry keeps `condition` alive: its id stays its own
    return compiled


def _condition_test(condition: Condition) -> Callable[[Any], bool]:
    """`compile_condition(condition).test`, without compiling more than the test for a condition that is
    not cached."""
    if isinstance(condition, MatchCondition) or type(condition) in _SCALAR_TYPES:
        return compile_condition(condition).test
    operators = _operators(condition)
    if operators is None:
        return _equality_test(condition)
    return _operators_test(operators, _value_steps(operators))


def evaluate_condition(condition: Condition, value: Any) -> bool:
    """SDK spec §5.3 `evaluate_condition`: whether the resolved `value` satisfies `condition`.

    A bare value is compared by `deep_equal`. Operators combine with AND: `contains`, `starts_with`,
    `ends_with` (case-sensitive) and `regex` (RE2, partial match) apply to strings, other values being
    coerced to compact JSON with sorted keys; `any_of` is deep equality with any listed value; `gt`, `lt`,
    `gte`, `lte` are false for non-numbers (booleans are not numbers). `exists` concerns path resolution
    (see `evaluate_predicate`): given a value, `exists: true` holds and `exists: false` does not.

    One-off form of `compile_condition(condition).test(value)`."""
    return _condition_test(condition)(value)


def evaluate_predicate(predicate: MatchPredicate, value: Any) -> bool:
    """SDK spec §5.4 `evaluate_predicate`: AND over the `path → condition` entries of `predicate`.

    Each path is resolved with `resolve_simple_path`. An unresolved path satisfies only a condition that
    is exactly `exists: false`; a resolved path fails `exists: false` and otherwise must satisfy the
    condition. An empty predicate is true."""
    for path, condition in predicate.items():
        resolved = resolve_simple_path(path, value)
        if resolved is NOT_FOUND:
            operators = (
                compile_condition(condition).operators if isinstance(condition, MatchCondition)
                else _operators(condition)
            )
            if not (operators is not None and operators.get("exists") is False and len(operators) == 1):
                return False
        elif not _condition_test(condition)(resolved):
            return False
    return True
