"""What every assertion layer shares (Attest protocol v1 §4 "Assertion Layers", §2.2 result fields).

A layer module turns an assertion's `spec` into a check once (`compile_*`), raising `SpecError` for a spec
the engine can't run (reported as ASSERTION_ERROR, 1002), then runs the check against a `TraceView` to get
an `Outcome`: passed or not, a score in [0, 1], an explanation quoting the values involved, and a cost.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .errors import clip
from .targets import Selection, Target, TargetSyntaxError, parse_target

_VALUE_CHARS = 120
"""Longest rendering of one value inside an explanation."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of running one check (before `soft` turns a failure into `soft_fail`)."""

    passed: bool
    score: float
    explanation: str
    cost: float = 0.0


class SpecError(ValueError):
    """An assertion spec the engine can't evaluate (§5 ASSERTION_ERROR): `reason` and actionable `detail`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _with_steps(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """`node` (a validated trace or sub-trace) with an omitted or null `steps` read as `[]`: §3.2 makes
    `steps` optional ("May be empty for simple agents") and §7 counts a null optional field as absent, so
    `steps.length` is 0 rather than "not found". Sub-traces of `agent_call` steps (§3.3) likewise; the
    validated nesting depth bounds the recursion. The caller's trace is never modified."""
    steps = node.get("steps")
    if steps is None:
        return {**node, "steps": []}

    def nested(step: Any) -> bool:
        return isinstance(step, dict) and isinstance(step.get("sub_trace"), dict)

    if not any(nested(step) for step in steps):
        return node
    filled = [{**step, "sub_trace": _with_steps(step["sub_trace"])} if nested(step) else step for step in steps]
    return {**node, "steps": filled}


class TraceView:
    """A validated trace, with the derived data several checks need computed once per batch."""

    def __init__(self, trace: Mapping[str, Any]) -> None:
        self.trace = _with_steps(trace)

    @cached_property
    def tool_calls(self) -> list[tuple[int, str]]:
        """(step index, name) of each `tool_call` step, in order (§4 layer 3 "tools")."""
        steps = self.trace["steps"]
        return [(index, step["name"]) for index, step in enumerate(steps) if step.get("type") == "tool_call"]

    def select(self, target: Target) -> Selection:
        return target.select(self.trace)


DeterministicCheck = Callable[[TraceView], Outcome]
"""Layers 1–4: pure, synchronous, free."""

ProviderCheck = Callable[[TraceView], Awaitable[Outcome]]
"""Layers 5–6: call an embedding or LLM provider."""


def show(value: Any, limit: int = _VALUE_CHARS) -> str:
    """`value` for an explanation: strings quoted, other JSON compact, cut to `limit` characters."""
    if isinstance(value, str):
        return repr(clip(value, limit))
    return clip(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str), limit)


def as_text(value: Any) -> str:
    """The text a content-like check reads: a string as is, any other JSON value as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def field(spec: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str, *, required: bool) -> Any:
    """`spec[key]` checked against `kind` (booleans are never numbers); None when optional and absent."""
    value = spec.get(key)
    if value is None:
        if required:
            raise SpecError(f"spec.{key} is required", f"Add spec.{key} ({what}).")
        return None
    numeric = kind in (int, float) or kind == (int, float)
    if not isinstance(value, kind) or (numeric and isinstance(value, bool)):
        raise SpecError(f"spec.{key} must be {what}, got {show(value)}", f"Set spec.{key} to {what}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"spec.{key} must be a finite number", f"Set spec.{key} to {what}.")
    return value


def string_list(spec: Mapping[str, Any], key: str) -> list[str]:
    """`spec[key]` as a non-empty list of strings."""
    values = field(spec, key, list, "a non-empty array of strings", required=True)
    if not values or not all(isinstance(value, str) for value in values):
        raise SpecError(
            f"spec.{key} must be a non-empty array of strings, got {show(values)}",
            f"Set spec.{key} to a non-empty array of strings.",
        )
    return values


def threshold(spec: Mapping[str, Any], default: float) -> float:
    """`spec.threshold`: a number in [0, 1], `default` when absent (§4 layers 5 and 6)."""
    value = spec.get("threshold")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise SpecError(
            f"spec.threshold must be a number from 0.0 to 1.0, got {show(value)}",
            "This engine supports numeric thresholds only (protocol v1 §4); set spec.threshold to a number "
            "from 0.0 to 1.0.",
        )
    return float(value)


def target(spec: Mapping[str, Any], key: str = "target", default: str | None = None) -> Target:
    """`spec[key]` parsed as a target expression (see `targets`)."""
    text = spec.get(key)
    if text is None:
        text = default
    if text is None:
        raise SpecError(f"spec.{key} is required", f'Add spec.{key}, e.g. "output.message".')
    if not isinstance(text, str):
        raise SpecError(f"spec.{key} must be a string, got {show(text)}", f"Set spec.{key} to a path string.")
    try:
        return parse_target(text)
    except TargetSyntaxError as exc:
        raise SpecError(
            str(exc),
            "Supported targets: output, output.message, output.structured[.<field>], metadata.<field>, "
            "steps.length, steps[?type=='<type>'].length, steps[?name=='<name>'].args|result[.<field>].",
        ) from exc


def not_found(selection: Selection, target: Target) -> Outcome:
    """The failure of a check whose target selected nothing."""
    return Outcome(False, 0.0, f"{target.text} not found in trace: {selection.missing}.")
