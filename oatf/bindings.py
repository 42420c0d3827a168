"""The three v0.1 protocol bindings as data (format spec §7.1 MCP, §7.2 A2A, §7.3 AG-UI), for `validate`.

What the validator needs from the bindings, and nothing else: the recognized modes and protocols (SDK spec
§3.2 `known_modes` / `known_protocols`), each protocol's operation names (V-018 surface warnings), each
mode's trigger events (V-029 event warnings), where the response-dispatch lists sit in a phase `state`
(V-027 `when` keys, V-033 catch-alls) and the closed enumerations a binding defines inside `state` (V-005).

The bindings name their events by reference to the upstream protocols ("See the MCP Specification for the
full list of methods and notifications", format spec §7.1.2; likewise §7.2.2, §7.3.2), so the tables below
spell out those lists for the pinned upstream versions: MCP 2025-11-25, A2A v0.3.0, and the AG-UI
`EventType` enum. Event and surface names are matched exactly: v0.1 has no event qualifier syntax
(`tools/call:calculator`); instances are selected with `trigger.match` (§7.1.2), the JSON Schema's
`trigger.event` pattern `^[a-z][a-zA-Z0-9_/]*$` admits no `:`, and `evaluate_trigger` compares
`event_type` to `trigger.event` for equality (SDK spec §5.8 step 2a).

Everything here is advisory or scoped to recognized bindings: for an unrecognized mode or protocol the
functions report nothing (SDK spec §2.22, format spec §11.1 item 5: skip surface and event validation).
All functions accept any value for `state` and never raise.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .protocols import extract_protocol

# --- modes and protocols (format spec §7.1.1, §7.2.1, §7.3.1; SDK spec §2.20) ----------------------------

KNOWN_MODES: frozenset[str] = frozenset({"mcp_server", "mcp_client", "a2a_server", "a2a_client", "ag_ui_client"})
"""The modes the v0.1 bindings define: format spec §7.1.1 (MCP), §7.2.1 (A2A), §7.3.1 (AG-UI client only)."""

KNOWN_PROTOCOLS: frozenset[str] = frozenset({"mcp", "a2a", "ag_ui"})
"""The protocols of the v0.1 bindings (SDK spec §2.20 `Protocol`; format spec §7.0.5)."""


def known_modes() -> frozenset[str]:
    """SDK spec §3.2 `known_modes()`: the modes defined by the included protocol bindings."""
    return KNOWN_MODES


def known_protocols() -> frozenset[str]:
    """SDK spec §3.2 `known_protocols()`: the protocols of the included protocol bindings."""
    return KNOWN_PROTOCOLS


# --- MCP 2025-11-25 method names (format spec §7.1.2) -----------------------------------------------------

_MCP_CLIENT_REQUESTS = frozenset({
    "initialize", "ping", "completion/complete", "logging/setLevel",
    "tools/list", "tools/call",
    "resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
    "prompts/list", "prompts/get",
    "tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
})
_MCP_SERVER_REQUESTS = frozenset({
    "ping", "sampling/createMessage", "elicitation/create", "roots/list",
    "tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
})
_MCP_CLIENT_NOTIFICATIONS = frozenset({
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/roots/list_changed", "notifications/tasks/status",
})
_MCP_SERVER_NOTIFICATIONS = frozenset({
    "notifications/cancelled", "notifications/progress", "notifications/message",
    "notifications/resources/updated", "notifications/resources/list_changed",
    "notifications/tools/list_changed", "notifications/prompts/list_changed",
    "notifications/elicitation/complete", "notifications/tasks/status",
})

# --- A2A v0.3.0 (format spec §7.2.2) ----------------------------------------------------------------------

_A2A_METHODS = frozenset({
    "message/send", "message/stream",
    "tasks/get", "tasks/cancel", "tasks/resubscribe",
    "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete",
    "agent/getAuthenticatedExtendedCard",
})
_A2A_AGENT_CARD = "agent_card/get"  # synthetic: HTTP GET /.well-known/agent-card.json (§7.2.2, §7.0.2)
_A2A_STREAM_EVENTS = frozenset({"task/status", "task/artifact"})  # synthetic, client mode only (§7.2.2)

# --- AG-UI (format spec §7.3.2): the `EventType` enum in snake_case, plus the synthetic POST body name -----

_AG_UI_EVENT_TYPES = frozenset({
    "run_started", "run_finished", "run_error", "step_started", "step_finished",
    "text_message_start", "text_message_content", "text_message_end", "text_message_chunk",
    "tool_call_start", "tool_call_args", "tool_call_end", "tool_call_chunk", "tool_call_result",
    "state_snapshot", "state_delta", "messages_snapshot", "activity_snapshot", "activity_delta",
    "reasoning_start", "reasoning_message_start", "reasoning_message_content", "reasoning_message_end",
    "reasoning_message_chunk", "reasoning_end", "reasoning_encrypted_value",
    "subagent_started", "subagent_finished", "subagent_error",
    "raw", "custom",
})
_AG_UI_RUN_AGENT_INPUT = "run_agent_input"  # synthetic: the RunAgentInput POST body (§7.3.2, §7.0.2)

SURFACES: dict[str, frozenset[str]] = {
    "mcp": _MCP_CLIENT_REQUESTS | _MCP_SERVER_REQUESTS | _MCP_CLIENT_NOTIFICATIONS | _MCP_SERVER_NOTIFICATIONS,
    "a2a": _A2A_METHODS | _A2A_STREAM_EVENTS | {_A2A_AGENT_CARD},
    "ag_ui": _AG_UI_EVENT_TYPES | {_AG_UI_RUN_AGENT_INPUT},
}
"""Protocol → every operation name usable as `indicator.surface` (V-018; SDK spec §2.21). MCP: every
2025-11-25 method and notification, either direction (format spec §7.1 "Indicators use MCP method names as
`surface` values"). A2A: the v0.3.0 JSON-RPC methods and the synthetic `agent_card/get`, `task/status`,
`task/artifact` (§7.2 intro, §7.2.2). AG-UI: the event types and the synthetic `run_agent_input` (§7.3
intro, §7.3.2)."""

EVENTS: dict[str, frozenset[str]] = {
    # §7.1.2: "For `mcp_server` actors, events are incoming requests and client-to-server notifications."
    "mcp_server": _MCP_CLIENT_REQUESTS | _MCP_CLIENT_NOTIFICATIONS,
    # §7.1.2: "For `mcp_client` actors, events are correlated responses [to its own requests],
    # server-to-client notifications, and server-initiated requests."
    "mcp_client": _MCP_CLIENT_REQUESTS | _MCP_SERVER_NOTIFICATIONS | _MCP_SERVER_REQUESTS,
    # §7.2.2: "incoming JSON-RPC requests ... and the HTTP Agent Card request."
    "a2a_server": _A2A_METHODS | {_A2A_AGENT_CARD},
    # §7.2.2: "correlated JSON-RPC responses, SSE streaming events (`task/status`, `task/artifact`), and the
    # Agent Card response."
    "a2a_client": _A2A_METHODS | _A2A_STREAM_EVENTS | {_A2A_AGENT_CARD},
    # §7.3.2: the `EventType` values (`tool_call_result` included) and the synthetic `run_agent_input`.
    "ag_ui_client": _AG_UI_EVENT_TYPES | {_AG_UI_RUN_AGENT_INPUT},
}
"""Mode → every `trigger.event` the binding's Events section lists for that mode (V-029; SDK spec §2.22;
format spec §7.1.2, §7.2.2, §7.3.2)."""


def event_is_known(mode: str | None, event: Any) -> bool:
    """V-029 (SDK spec §2.22): False only when `mode` is a recognized mode and `event` is not one of the
    events its binding lists for it; True for any event on an unrecognized mode, whose event validation
    SDKs MUST skip. Names match exactly (no qualifier syntax in v0.1; see the module docstring)."""
    events = EVENTS.get(mode) if isinstance(mode, str) else None
    return events is None or (isinstance(event, str) and event in events)


def surface_is_known(protocol: str | None, surface: Any) -> bool:
    """V-018 (SDK spec §2.21): False only when `protocol` is a recognized protocol and `surface` is not one
    of its operation names; True for any surface of an unrecognized protocol, whose surface validation
    tools MUST skip (format spec §11.1 item 5)."""
    surfaces = SURFACES.get(protocol) if isinstance(protocol, str) else None
    return surfaces is None or (isinstance(surface, str) and surface in surfaces)


# --- response dispatch lists (format spec §7.0.1; SDK spec §2.24) -----------------------------------------


@dataclass(frozen=True)
class DispatchList:
    """Where one response-dispatch list sits in a phase `state`: `state[key]` when `parent` is None, else
    `state[parent][i][key]` for each object `i` of the list `state[parent]`."""

    key: str
    parent: str | None = None


DISPATCH_LISTS: dict[str, tuple[DispatchList, ...]] = {
    "mcp": (
        DispatchList("responses", "tools"),  # §7.1.4 `tools[].responses`
        DispatchList("responses", "prompts"),  # §7.1.4 `prompts[].responses`
        DispatchList("sampling_responses"),  # §7.1.5
        DispatchList("elicitation_responses"),  # §7.1.5
    ),
    "a2a": (DispatchList("task_responses"),),  # §7.2.4
    "ag_ui": (DispatchList("tool_responses"),),  # §7.3.4
}
"""Protocol → the response-dispatch lists its binding defines in phase state (format spec §7.0.1: "five
dispatch lists"; V-027, V-033). Keyed by protocol, not mode: the conformance fixtures VAL-027c/d and
VAL-033c put `sampling_responses` (an `mcp_client` key, §7.1.5) in an `mcp_server` state and expect V-027 /
V-033 errors, so a binding's lists are checked in both of its modes."""


def response_lists(mode: str | None, state: Any) -> Iterator[tuple[str, list[Any]]]:
    """Every response-dispatch list present in `state` for `mode`'s protocol binding, as (dot-path relative
    to the state, the list): `tools[0].responses`, `sampling_responses`, ... (V-027, V-033). Yields nothing
    for an unrecognized mode (whose state layout no v0.1 binding defines) or where the shape differs:
    a non-object state, a non-list parent or list, a non-object parent entry."""
    for location in _bindings_of(mode, DISPATCH_LISTS):
        if location.parent is None:
            entries = _get(state, location.key)
            if isinstance(entries, list):
                yield location.key, entries
            continue
        parents = _get(state, location.parent)
        if not isinstance(parents, list):
            continue
        for index, parent in enumerate(parents):
            entries = _get(parent, location.key)
            if isinstance(entries, list):
                yield f"{location.parent}[{index}].{location.key}", entries


# --- closed enumerations inside binding state (V-005) -----------------------------------------------------


@dataclass(frozen=True)
class StateEnum:
    """A closed enumeration on field `field` of each object in the state list `state[parent]`."""

    parent: str
    field: str
    allowed: tuple[str, ...]


ELICITATION_MODES: tuple[str, ...] = ("form", "url")
"""Format spec §7.1.4 `elicitations[].mode: enum(form, url)?` (default `form`); SDK spec §2.20
`ElicitationMode`."""

ELICITATION_ACTIONS: tuple[str, ...] = ("accept", "decline", "cancel")
"""Format spec §7.1.5 `elicitation_responses[].action: enum(accept, decline, cancel)?` (default `accept`)."""

STATE_ENUMS: dict[str, tuple[StateEnum, ...]] = {
    "mcp": (
        StateEnum("elicitations", "mode", ELICITATION_MODES),
        StateEnum("elicitation_responses", "action", ELICITATION_ACTIONS),
    ),
}
"""Protocol → the closed enumerations its binding defines on structural state fields (V-005). Only these
two: everything else in binding state (roles, A2A task states, AG-UI message roles, ...) is protocol-native
pass-through that "the OATF parser preserves ... without validation" (format spec §7.0.3). Keyed by
protocol for the same reason as `DISPATCH_LISTS`."""


def state_enum_violations(mode: str | None, state: Any) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """Every closed-enum field of `mode`'s protocol binding in `state` whose value is not a member, as
    (dot-path relative to the state, the value as text, the allowed values), e.g.
    `("elicitation_responses[0].action", "deny", ("accept", "decline", "cancel"))` (V-005). An absent or
    null field takes the binding's default and is not reported; a non-string value is reported by its
    `repr`. Nothing for an unrecognized mode or a state of another shape."""
    for enum in _bindings_of(mode, STATE_ENUMS):
        entries = _get(state, enum.parent)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            value = _get(entry, enum.field)
            if value is None or (isinstance(value, str) and value in enum.allowed):
                continue
            text = value if isinstance(value, str) else repr(value)
            yield f"{enum.parent}[{index}].{enum.field}", text, enum.allowed


# --- helpers ------------------------------------------------------------------------------------------------


def _bindings_of[T](mode: str | None, table: dict[str, tuple[T, ...]]) -> tuple[T, ...]:
    """The `table` row of `mode`'s protocol, or () when the mode is not a recognized one."""
    if not isinstance(mode, str) or mode not in KNOWN_MODES:
        return ()
    return table.get(extract_protocol(mode), ())


def _get(value: Any, key: str) -> Any:
    """`value[key]` when `value` is an object holding `key`, else None."""
    return value.get(key) if isinstance(value, Mapping) else None
