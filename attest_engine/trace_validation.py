"""Trace validation (Attest protocol v1 §7 "Trace Validation Rules", over the §3 trace data model).

`validate_trace` checks a trace in the §7 "Validation Order" and returns the first failure:

1. top-level JSON parse (the trace is a JSON object)
2. `schema_version` (current 1, previous 0 with a deprecation warning; others rejected)
3. required fields (`trace_id`, `output`)
4. size and count limits (payload bytes, steps, `output.message` characters)
5. field type and format (`agent_id`, `input`, `steps`, `metadata`, RFC 3339 `metadata.timestamp`,
   `parent_trace_id`)
6. step-level validation (`type`, `name`, `args`/`result`/`metadata` objects, result payload size,
   `sub_trace` only on `agent_call`)
7. sub-trace depth

Sub-traces (`agent_call` steps' `sub_trace`) are validated with rules 2–6 too, depth first after their
parent, down to the maximum depth; rule 7 then reports a tree deeper than that. The payload size (rule 4)
is the whole trace's. Optional fields given as JSON `null` count as absent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

import re2

CURRENT_SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (0, 1)
"""§7 "Schema Version Policy": current (1) fully supported, previous (0) supported with a deprecation warning."""

STEP_TYPES = ("llm_call", "tool_call", "retrieval", "agent_call")
"""§3.3 step types."""

_RFC3339 = re2.compile(r"\A(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))\z")


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """§7 "Size and Count Limits"."""

    max_trace_size_bytes: int = 10_485_760
    max_steps_per_trace: int = 10_000
    max_output_message_chars: int = 500_000
    max_step_result_bytes: int = 1_048_576
    max_sub_trace_depth: int = 5


@dataclass(frozen=True, slots=True)
class TraceError:
    """Why a trace is invalid: the §7 error `message` and its actionable `detail` (INVALID_TRACE, 1001)."""

    message: str
    detail: str


def json_size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON: how a payload is measured when no wire bytes are at hand."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def is_integer(value: Any) -> bool:
    """A JSON integer: a number with no fractional part (`1` or `1.0`), never a boolean."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def is_rfc3339(text: str) -> bool:
    """An RFC 3339 `date-time` (§5.6 of RFC 3339), with calendar-valid date and in-range time fields."""
    match = _RFC3339.match(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    try:
        date(year, month, day)
    except ValueError:
        return False
    if hour > 23 or minute > 59 or second > 60:
        return False
    offset_hours, offset_minutes = match.group(7), match.group(8)
    return offset_hours is None or (int(offset_hours) <= 23 and int(offset_minutes) <= 59)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class _Invalid(Exception):
    def __init__(self, message: str, detail: str) -> None:
        self.error = TraceError(message, detail)


def _where(location: str) -> str:
    """'trace' for the root; 'sub-trace at steps[2].sub_trace' for a nested one."""
    return "trace" if not location else f"sub-trace at {location}"


def _check_schema_version(node: Mapping[str, Any], where: str, warn: Callable[[str], None] | None) -> None:
    """§7 rule 2 and "Schema Version Policy"."""
    if "schema_version" not in node:
        raise _Invalid(
            f"{where} missing required field: schema_version",
            f"Every trace must include an integer schema_version; the current version is {CURRENT_SCHEMA_VERSION}.",
        )
    version = node["schema_version"]
    if not is_integer(version):
        raise _Invalid(
            f"{where} schema_version must be an integer, got {_type_name(version)}",
            f"Set schema_version to {CURRENT_SCHEMA_VERSION}.",
        )
    version = int(version)
    if version > CURRENT_SCHEMA_VERSION:
        raise _Invalid(
            f"unsupported schema_version {version}: engine supports schema versions 0 and 1",
            "Upgrade the engine binary, or emit traces with schema_version 1.",
        )
    if version < min(SUPPORTED_SCHEMA_VERSIONS):
        raise _Invalid(
            f"schema_version {version} is no longer supported: engine supports schema versions 0 and 1",
            f"Migrate the trace to schema_version {CURRENT_SCHEMA_VERSION} (see the §3 trace data model) "
            "and upgrade the SDK that produced it.",
        )
    if version < CURRENT_SCHEMA_VERSION and warn is not None:
        warn(f"trace schema_version {version} is deprecated; migrate to {CURRENT_SCHEMA_VERSION}")


def _check_required(node: Mapping[str, Any], where: str) -> None:
    """§7 rule 3, "Required Fields"."""
    if "trace_id" not in node or node["trace_id"] is None:
        raise _Invalid(
            f"{where} missing required field: trace_id", "Every trace must include a non-empty trace_id string."
        )
    trace_id = node["trace_id"]
    if not isinstance(trace_id, str) or not trace_id.strip():
        raise _Invalid(
            f"{where} trace_id must be a non-empty, non-whitespace string",
            "Every trace must include a non-empty trace_id string (recommended prefix: trc_).",
        )
    if "output" not in node or node["output"] is None:
        raise _Invalid(
            f"{where} missing required field: output",
            'Every trace must include an output object with at least one field, e.g. {"message": ...}.',
        )
    output = node["output"]
    if not isinstance(output, dict) or not output:
        raise _Invalid(
            f"{where} output must be an object with at least one field, got "
            + ("an empty object" if isinstance(output, dict) else _type_name(output)),
            'Put the agent\'s final answer in output, e.g. {"message": "..."}.',
        )


def _check_counts(node: Mapping[str, Any], where: str, limits: TraceLimits) -> None:
    """§7 rule 4, the per-trace counts: steps and `output.message` characters."""
    steps = node.get("steps")
    if isinstance(steps, list) and len(steps) > limits.max_steps_per_trace:
        raise _Invalid(
            f"{where} exceeds max steps: {len(steps)} > {limits.max_steps_per_trace}",
            f"Split the run into several traces or drop repetitive steps. Max allowed: "
            f"{limits.max_steps_per_trace} steps per trace.",
        )
    message = node["output"].get("message")
    if isinstance(message, str) and len(message) > limits.max_output_message_chars:
        prefix = "" if where == "trace" else f"{where}: "
        raise _Invalid(
            f"{prefix}output.message length {len(message)} exceeds {limits.max_output_message_chars} characters",
            f"Truncate output.message to at most {limits.max_output_message_chars} characters before submitting.",
        )


def _check_fields(node: Mapping[str, Any], where: str) -> None:
    """§7 rule 5, "Field Validation" for the trace's own fields (§3.2 types)."""
    for name, expected, ok in (
        ("agent_id", "a string", lambda v: isinstance(v, str)),
        ("input", "an object", lambda v: isinstance(v, dict)),
        ("steps", "an array", lambda v: isinstance(v, list)),
        ("metadata", "an object", lambda v: isinstance(v, dict)),
    ):
        value = node.get(name)
        if value is not None and not ok(value):
            raise _Invalid(
                f"{where} field {name} must be {expected}, got {_type_name(value)}",
                f"Fix the type of {name} (see the §3.2 trace fields), or leave it out.",
            )
    metadata = node.get("metadata") or {}
    if "timestamp" in metadata and metadata["timestamp"] is not None:
        timestamp = metadata["timestamp"]
        if not isinstance(timestamp, str) or not is_rfc3339(timestamp):
            shown = timestamp if isinstance(timestamp, str) else _type_name(timestamp)
            raise _Invalid(
                f"{where} metadata.timestamp {json.dumps(shown)[:80]} is not RFC 3339",
                'Use an RFC 3339 date-time such as "2026-02-18T10:30:00Z" or "2026-02-18T10:30:00.123+02:00".',
            )
    if "parent_trace_id" in node:
        parent = node["parent_trace_id"]
        if parent is not None and (not isinstance(parent, str) or not parent):
            raise _Invalid(
                f"{where} parent_trace_id must be a non-empty string or null, got "
                + ("an empty string" if parent == "" else _type_name(parent)),
                "Set parent_trace_id to the parent trace's trace_id, or to null for a root trace.",
            )


def _step_label(step: Mapping[str, Any], index: int) -> str:
    name = step.get("name")
    return f"'{name[:80]}'" if isinstance(name, str) and name else f"#{index}"


def _check_steps(node: Mapping[str, Any], where: str, limits: TraceLimits, strict_step_types: bool) -> None:
    """§7 rule 6, step-level validation (§3.3 step types, §3.4 common fields)."""
    for index, step in enumerate(node.get("steps") or ()):
        if not isinstance(step, dict):
            raise _Invalid(
                f"{where} step #{index} must be an object, got {_type_name(step)}",
                "Each step is an object with at least type and name (§3.4).",
            )
        label = _step_label(step, index)
        step_type = step.get("type")
        if not isinstance(step_type, str) or not step_type:
            raise _Invalid(
                f"{where} step {label} type must be a non-empty string",
                f"Set type to one of {', '.join(STEP_TYPES)}.",
            )
        if strict_step_types and step_type not in STEP_TYPES:
            raise _Invalid(
                f"{where} step {label} has unknown type '{step_type[:80]}'",
                f"This engine runs in strict mode: step types must be one of {', '.join(STEP_TYPES)}.",
            )
        name = step.get("name")
        if not isinstance(name, str) or not name:
            raise _Invalid(
                f"{where} step #{index} name must be a non-empty string",
                "Every step needs a name: trace assertions (contains_in_order, ...) match steps by name.",
            )
        for field_name in ("args", "result", "metadata"):
            value = step.get(field_name)
            if value is not None and not isinstance(value, dict):
                raise _Invalid(
                    f"{where} step {label} {field_name} must be an object, got {_type_name(value)}",
                    f'Wrap the step\'s {field_name} in an object, e.g. {{"value": ...}}.',
                )
        result = step.get("result")
        if result is not None:
            size = json_size(result)
            if size > limits.max_step_result_bytes:
                raise _Invalid(
                    f"{where} step {label} result exceeds {limits.max_step_result_bytes} bytes (actual: {size} bytes)",
                    f"Truncate the 'result' field for step {label} before submitting. Consider filtering large "
                    "arrays or binary data from tool results.",
                )
        sub_trace = step.get("sub_trace")
        if sub_trace is not None:
            if step_type != "agent_call":
                raise _Invalid(
                    f"{where} step {label} has a sub_trace but its type is '{step_type[:80]}'",
                    "Only agent_call steps carry a sub_trace (§3.3); change the step type or drop the sub_trace.",
                )
            if not isinstance(sub_trace, dict):
                raise _Invalid(
                    f"{where} step {label} sub_trace must be an object, got {_type_name(sub_trace)}",
                    "A sub_trace is a complete trace of the sub-agent (§3.3 agent_call).",
                )


def _check_node(
    node: Mapping[str, Any],
    location: str,
    limits: TraceLimits,
    strict_step_types: bool,
    warn: Callable[[str], None] | None,
) -> None:
    """§7 rules 2–6 for one trace of the tree (rule 4's payload size is checked once, on the root)."""
    where = _where(location)
    _check_schema_version(node, where, warn)
    _check_required(node, where)
    _check_counts(node, where, limits)
    _check_fields(node, where)
    _check_steps(node, where, limits, strict_step_types)


def _sub_traces(node: Mapping[str, Any], location: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The (location, sub-trace) pairs of `node`'s agent_call steps; tolerant of unvalidated nodes."""
    steps = node.get("steps")
    if not isinstance(steps, list):
        return []
    prefix = f"{location}." if location else ""
    return [
        (f"{prefix}steps[{index}].sub_trace", step["sub_trace"])
        for index, step in enumerate(steps)
        if isinstance(step, dict) and isinstance(step.get("sub_trace"), dict)
    ]


def validate_trace(
    trace: Any,
    *,
    limits: TraceLimits | None = None,
    strict_step_types: bool = False,
    size_bytes: int | None = None,
    warn: Callable[[str], None] | None = None,
) -> TraceError | None:
    """The first §7 failure of `trace`, in the §7 validation order, or None when the trace is valid.

    `size_bytes` is the trace's payload size as received (the bytes of its JSON on the wire); without it
    the trace is measured as compact UTF-8 JSON. `strict_step_types` rejects step types other than the
    four of §3.3 ("strict mode"); otherwise they are tolerated as opaque steps ("lax mode", §6 rule 6).
    `warn` receives deprecation warnings (schema_version 0).
    """
    limits = limits or TraceLimits()
    if not isinstance(trace, dict):
        return TraceError(
            f"trace must be a JSON object, got {_type_name(trace)}",
            "Send the trace as a JSON object with schema_version, trace_id and output (§3.1).",
        )
    try:
        where = "trace"
        _check_schema_version(trace, where, warn)
        _check_required(trace, where)
        size = json_size(trace) if size_bytes is None else size_bytes
        if size > limits.max_trace_size_bytes:
            raise _Invalid(
                f"trace exceeds max size: {size} > {limits.max_trace_size_bytes} bytes",
                f"Reduce trace size by filtering steps or truncating tool results. Max allowed: "
                f"{limits.max_trace_size_bytes} bytes ({limits.max_trace_size_bytes / 1_048_576:g} MB).",
            )
        _check_counts(trace, where, limits)
        _check_fields(trace, where)
        _check_steps(trace, where, limits, strict_step_types)
        # Sub-traces, depth first; those below the maximum depth are only measured, for rule 7.
        deepest = 0
        pending = [(location, sub, 1) for location, sub in reversed(_sub_traces(trace, ""))]
        while pending:
            location, node, depth = pending.pop()
            deepest = max(deepest, depth)
            if depth <= limits.max_sub_trace_depth:
                _check_node(node, location, limits, strict_step_types, warn)
            pending.extend((loc, sub, depth + 1) for loc, sub in reversed(_sub_traces(node, location)))
        if deepest > limits.max_sub_trace_depth:
            raise _Invalid(
                f"trace nesting depth {deepest} exceeds maximum {limits.max_sub_trace_depth}",
                f"Flatten the delegation chain: at most {limits.max_sub_trace_depth} levels of agent_call "
                "sub_trace nesting are accepted. Submit deeper sub-agents as separate traces linked by "
                "parent_trace_id.",
            )
    except _Invalid as invalid:
        return invalid.error
    return None
