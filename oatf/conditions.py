"""Conditions and match predicates (SDK spec §5.3 `evaluate_condition`, §5.4 `evaluate_predicate`;
format spec §5.4 "Match Predicates").

A condition is a bare value (compared by deep equality), a `MatchCondition`, or a plain mapping with at
least one operator key (SDK spec §2.13: "if it's an object with operator keys, treat as MatchCondition;
otherwise treat as equality" — the same rule `parse` applies). A non-operator key in such a mapping (which
`parse` rejects) makes the condition false. An operator whose operand is None is absent. Evaluation never raises on any
JSON value; the only exception is `RegexSyntaxError` for a `regex` operand outside RE2, which a document
that passed `validate` (V-013) cannot contain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import CONDITION_OPERATORS, Condition, MatchCondition, MatchPredicate
from .paths import NOT_FOUND, resolve_simple_path
from .regex import search
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


def _satisfies(operators: dict[str, Any], value: Any) -> bool:
    """AND of every operator against a resolved `value`. `exists: true` holds (the value resolved);
    `exists: false` fails (SDK spec §5.3 "The exists operator")."""
    text: str | None = None
    for name, operand in operators.items():
        if name in _STRING_OPERATORS:
            if not isinstance(operand, str):
                return False
            if text is None:
                text = _as_text(value)
                if text is None:
                    return False
            if name == "contains":
                matched = operand in text
            elif name == "starts_with":
                matched = text.startswith(operand)
            elif name == "ends_with":
                matched = text.endswith(operand)
            else:
                matched = search(operand, text)
        elif name == "any_of":
            matched = isinstance(operand, list | tuple) and any(deep_equal(value, item) for item in operand)
        elif name == "exists":
            matched = bool(operand)
        elif name in _NUMERIC_OPERATORS:  # a non-number on either side is a mismatch, not an error
            if not (_is_number(value) and _is_number(operand)):
                return False
            if name == "gt":
                matched = value > operand
            elif name == "lt":
                matched = value < operand
            elif name == "gte":
                matched = value >= operand
            else:
                matched = value <= operand
        else:  # not an operator
            return False
        if not matched:
            return False
    return True


def evaluate_condition(condition: Condition, value: Any) -> bool:
    """SDK spec §5.3 `evaluate_condition`: whether the resolved `value` satisfies `condition`.

    A bare value is compared by `deep_equal`. Operators combine with AND: `contains`, `starts_with`,
    `ends_with` (case-sensitive) and `regex` (RE2, partial match) apply to strings, other values being
    coerced to compact JSON with sorted keys; `any_of` is deep equality with any listed value; `gt`, `lt`,
    `gte`, `lte` are false for non-numbers (booleans are not numbers). `exists` concerns path resolution
    (see `evaluate_predicate`): given a value, `exists: true` holds and `exists: false` does not."""
    operators = _operators(condition)
    if operators is None:
        return deep_equal(value, condition)
    return _satisfies(operators, value)


def evaluate_predicate(predicate: MatchPredicate, value: Any) -> bool:
    """SDK spec §5.4 `evaluate_predicate`: AND over the `path → condition` entries of `predicate`.

    Each path is resolved with `resolve_simple_path`. An unresolved path satisfies only a condition that
    is exactly `exists: false`; a resolved path fails `exists: false` and otherwise must satisfy the
    condition. An empty predicate is true."""
    for path, condition in predicate.items():
        resolved = resolve_simple_path(path, value)
        operators = _operators(condition)
        if operators is None:
            if resolved is NOT_FOUND or not deep_equal(resolved, condition):
                return False
        elif resolved is NOT_FOUND:
            if not (operators.get("exists") is False and len(operators) == 1):
                return False
        elif not _satisfies(operators, resolved):
            return False
    return True
