"""Layer 3 — Trace Inspection (Attest protocol v1 §4 "Layer 3").

Structural checks on the sequence of tool calls: the names of the trace's `tool_call` steps, in order
(other step types are not tool calls and never count; sub-traces are not entered). Explanations give the
step indices (positions in `steps`) of the calls involved. Boolean checks: score 1.0 or 0.0.

| check               | passes when                                                                  |
|---------------------|------------------------------------------------------------------------------|
| `contains_in_order` | `tools` occur as a subsequence of the tool calls (other calls may interleave) |
| `exact_order`       | `tools` occur as a contiguous run of the tool calls (no other call between)   |
| `loop_detection`    | `tool` is called at most `max_repetitions` times                              |
| `no_duplicates`     | no tool is called more than once                                              |
| `required_tools`    | every tool in `tools` is called at least once                                 |
| `forbidden_tools`   | no tool in `tools` is called                                                  |
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from .checks import DeterministicCheck, Outcome, SpecError, TraceView, field, show, string_list

_LISTED = 10


def _names(names: list[str] | list[tuple[int, str]]) -> str:
    """A bounded Python-style list of names, e.g. ['lookup_order', 'process_refund']."""
    plain = [name if isinstance(name, str) else name[1] for name in names]
    head = ", ".join(show(name, 60) for name in plain[:_LISTED])
    return f"[{head}{', …' if len(plain) > _LISTED else ''}]"


def _indices(indices: list[int]) -> str:
    head = ", ".join(map(str, indices[:_LISTED]))
    return f"[{head}{', …' if len(indices) > _LISTED else ''}]"


def _contains_in_order(tools: list[str]) -> DeterministicCheck:
    def check(view: TraceView) -> Outcome:
        found: list[int] = []
        calls = iter(view.tool_calls)
        for tool in tools:
            index = next((index for index, name in calls if name == tool), None)
            if index is None:
                after = f" after step {found[-1]}" if found else ""
                return Outcome(
                    False,
                    0.0,
                    f"Tool sequence {_names(tools)} not found in order: {show(tool)} not called{after} "
                    f"({len(found)} of {len(tools)} matched); tool calls were {_names(view.tool_calls)}.",
                )
            found.append(index)
        return Outcome(True, 1.0, f"Tool sequence {_names(tools)} found in order at steps {_indices(found)}.")

    return check


def _exact_order(tools: list[str]) -> DeterministicCheck:
    def check(view: TraceView) -> Outcome:
        names = [name for _, name in view.tool_calls]
        for start in range(len(names) - len(tools) + 1):
            if names[start : start + len(tools)] == tools:
                steps = [index for index, _ in view.tool_calls[start : start + len(tools)]]
                return Outcome(
                    True, 1.0, f"Tool sequence {_names(tools)} found contiguously at steps {_indices(steps)}."
                )
        return Outcome(
            False,
            0.0,
            f"Tool sequence {_names(tools)} not found as a contiguous run; tool calls were {_names(names)}.",
        )

    return check


def _loop_detection(tool: str, limit: int) -> DeterministicCheck:
    def check(view: TraceView) -> Outcome:
        steps = [index for index, name in view.tool_calls if name == tool]
        if len(steps) > limit:
            return Outcome(
                False,
                0.0,
                f"{show(tool)} called {len(steps)} times (max_repetitions {limit}) at steps {_indices(steps)}.",
            )
        return Outcome(True, 1.0, f"{show(tool)} called {len(steps)} times, within max_repetitions {limit}.")

    return check


def _no_duplicates() -> DeterministicCheck:
    def check(view: TraceView) -> Outcome:
        counts = Counter(name for _, name in view.tool_calls)
        repeated = [(name, count) for name, count in counts.items() if count > 1]
        if repeated:
            listed = ", ".join(f"{show(name, 60)} ×{count}" for name, count in repeated[:_LISTED])
            return Outcome(False, 0.0, f"Tools called more than once: {listed}.")
        return Outcome(True, 1.0, f"No tool called more than once ({len(counts)} distinct tool calls).")

    return check


def _required_tools(tools: list[str]) -> DeterministicCheck:
    def check(view: TraceView) -> Outcome:
        called = {name for _, name in view.tool_calls}
        missing = [tool for tool in tools if tool not in called]
        if missing:
            return Outcome(
                False,
                0.0,
                f"Required tools not called: {_names(missing)}; tool calls were {_names(view.tool_calls)}.",
            )
        return Outcome(True, 1.0, f"All required tools called: {_names(tools)}.")

    return check


def _forbidden_tools(tools: list[str]) -> DeterministicCheck:
    def check(view: TraceView) -> Outcome:
        forbidden = set(tools)
        hits = [(index, name) for index, name in view.tool_calls if name in forbidden]
        if hits:
            return Outcome(
                False,
                0.0,
                f"Forbidden tools called: {_names(hits)} at steps {_indices([index for index, _ in hits])}.",
            )
        return Outcome(True, 1.0, f"None of the forbidden tools {_names(tools)} called.")

    return check


def _loop_spec(spec: Mapping[str, Any]) -> DeterministicCheck:
    tool = field(spec, "tool", str, "a tool name", required=True)
    limit = field(spec, "max_repetitions", int, "a non-negative integer", required=True)
    if limit < 0:
        raise SpecError(f"spec.max_repetitions must be >= 0, got {limit}", "Set spec.max_repetitions to 0 or more.")
    return _loop_detection(tool, limit)


CHECKS: dict[str, Callable[[Mapping[str, Any]], DeterministicCheck]] = {
    "contains_in_order": lambda spec: _contains_in_order(string_list(spec, "tools")),
    "exact_order": lambda spec: _exact_order(string_list(spec, "tools")),
    "loop_detection": _loop_spec,
    "no_duplicates": lambda spec: _no_duplicates(),
    "required_tools": lambda spec: _required_tools(string_list(spec, "tools")),
    "forbidden_tools": lambda spec: _forbidden_tools(string_list(spec, "tools")),
}
"""§4 layer 3 check types."""


def compile_trace_check(spec: Mapping[str, Any]) -> DeterministicCheck:
    """The layer 3 check for `spec` (`check` and its fields)."""
    check = field(spec, "check", str, "a trace check name", required=True)
    if check not in CHECKS:
        raise SpecError(f"unknown trace check {show(check)}", f"Use one of {', '.join(CHECKS)} (§4 layer 3).")
    return CHECKS[check](spec)
