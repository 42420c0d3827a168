"""Layer 2 — Constraint Checks (Attest protocol v1 §4 "Layer 2").

Numeric comparisons on a `field` of the trace: `metadata.cost_usd`, `metadata.total_tokens`,
`metadata.latency_ms`, `steps.length`, `steps[?type=='tool_call'].length`, or any other target expression
that selects numbers. Operators `lt`, `lte`, `gt`, `gte`, `eq` compare against `value`; `between` checks
`min <= field <= max` (inclusive). A field that is absent, or not a number, fails the check (the trace lacks
what the budget is about); a field selecting several numbers passes only if every one satisfies the
constraint. Boolean check: score 1.0 or 0.0.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from .checks import DeterministicCheck, Outcome, SpecError, TraceView, field, not_found, show, target

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "lt": operator.lt,
    "lte": operator.le,
    "gt": operator.gt,
    "gte": operator.ge,
    "eq": operator.eq,
}
"""§4 layer 2 operators other than `between`."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def compile_constraint(spec: Mapping[str, Any]) -> DeterministicCheck:
    """The layer 2 check for `spec` (`field`, `operator`, `value` or `min`/`max`)."""
    selector = target(spec, "field")
    op = field(spec, "operator", str, "one of lt, lte, gt, gte, eq, between", required=True)
    if op == "between":
        low = field(spec, "min", (int, float), "a number", required=True)
        high = field(spec, "max", (int, float), "a number", required=True)
        if low > high:
            raise SpecError(f"spec.min {low} is greater than spec.max {high}", "Set spec.min <= spec.max.")
        bound = f"between {low} and {high}"

        def satisfied(number: Any) -> bool:
            return low <= number <= high
    elif op in OPERATORS:
        value = field(spec, "value", (int, float), "a number", required=True)
        compare = OPERATORS[op]
        bound = f"{op} {value}"

        def satisfied(number: Any) -> bool:
            return compare(number, value)
    else:
        raise SpecError(
            f"unknown constraint operator {show(op)}", "Use one of lt, lte, gt, gte, eq, between (§4 layer 2)."
        )

    def check(view: TraceView) -> Outcome:
        selection = view.select(selector)
        if not selection.values:
            return not_found(selection, selector)
        for path, number in selection.values:
            if not _is_number(number):
                return Outcome(False, 0.0, f"{path} = {show(number)} is not a number; constraint {bound} not met.")
            if not satisfied(number):
                return Outcome(False, 0.0, f"{path} = {number}, constraint {bound} violated.")
        shown = ", ".join(f"{path} = {number}" for path, number in selection.values[:5])
        more = f" (and {len(selection.values) - 5} more)" if len(selection.values) > 5 else ""
        return Outcome(True, 1.0, f"{shown}{more}, constraint {bound} satisfied.")

    return check
