"""Build Attest v1 traces from plain Python data (Attest protocol v1 §3 "Trace Data Model", §7 validation).

For producers of traces, such as the proxy's export of observed agent sessions: `make_step` and
`build_trace` assemble the §3.1 JSON shape, normalise it to plain JSON values, and validate it with the
same `validate_trace` the engine applies to `evaluate_batch`, so a trace built here is one the engine
accepts. Step types are checked strictly (the four §3.3 types) unless `strict_step_types=False`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .trace_validation import CURRENT_SCHEMA_VERSION, TraceError, TraceLimits, validate_trace


class InvalidTraceError(ValueError):
    """The data does not make a valid v1 trace; `.error` holds the §7 message and detail."""

    def __init__(self, error: TraceError) -> None:
        super().__init__(f"{error.message} ({error.detail})")
        self.error = error


def make_step(
    step_type: str,
    name: str,
    *,
    args: Mapping[str, Any] | None = None,
    result: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    sub_trace: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One §3.3 step (`llm_call`, `tool_call`, `retrieval`, `agent_call`); absent fields are left out."""
    step: dict[str, Any] = {"type": step_type, "name": name}
    for key, value in (("args", args), ("result", result), ("sub_trace", sub_trace), ("metadata", metadata)):
        if value is not None:
            step[key] = value
    return step


def build_trace(
    *,
    trace_id: str,
    output: Mapping[str, Any],
    steps: Iterable[Mapping[str, Any]] = (),
    agent_id: str | None = None,
    input: Mapping[str, Any] | None = None,  # the §3.2 field name
    metadata: Mapping[str, Any] | None = None,
    parent_trace_id: str | None = None,
    schema_version: int = CURRENT_SCHEMA_VERSION,
    limits: TraceLimits | None = None,
    strict_step_types: bool = True,
) -> dict[str, Any]:
    """A validated §3.1 trace as a plain JSON-ready dict; raises `InvalidTraceError` (§7) otherwise.

    Values must be JSON data (dicts with string keys, lists or tuples, strings, finite numbers, booleans,
    None); anything else is rejected rather than converted.
    """
    trace: dict[str, Any] = {"schema_version": schema_version, "trace_id": trace_id}
    if agent_id is not None:
        trace["agent_id"] = agent_id
    if input is not None:
        trace["input"] = input
    trace["steps"] = list(steps)
    trace["output"] = output
    if metadata is not None:
        trace["metadata"] = metadata
    trace["parent_trace_id"] = parent_trace_id
    try:
        text = json.dumps(trace, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidTraceError(
            TraceError(f"trace is not JSON data: {exc}", "Convert values to JSON types (no NaN or Infinity).")
        ) from exc
    plain = json.loads(text)
    error = validate_trace(
        plain,
        limits=limits,
        strict_step_types=strict_step_types,
        size_bytes=len(text.encode("utf-8", "surrogatepass")),
    )
    if error is not None:
        raise InvalidTraceError(error)
    return plain
