"""Tests of `oatf.bindings`: the v0.1 protocol-binding tables (format spec §7) that `validate` reads for
V-005, V-018, V-027, V-029 and V-033."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oatf.bindings import (
    DISPATCH_LISTS,
    ELICITATION_ACTIONS,
    ELICITATION_MODES,
    EVENTS,
    KNOWN_MODES,
    KNOWN_PROTOCOLS,
    STATE_ENUMS,
    SURFACES,
    event_is_known,
    known_modes,
    known_protocols,
    response_lists,
    state_enum_violations,
    surface_is_known,
)
from oatf.model import ElicitationMode
from oatf.protocols import extract_protocol
from tests.oatf.conformance.fixtures import corpus_files, load_yaml_file

# --- modes, protocols and the shape of the tables -------------------------------------------------------


def test_known_modes_and_protocols() -> None:
    assert known_modes() == {"mcp_server", "mcp_client", "a2a_server", "a2a_client", "ag_ui_client"}
    assert known_protocols() == {"mcp", "a2a", "ag_ui"}
    assert known_modes() is KNOWN_MODES and known_protocols() is KNOWN_PROTOCOLS
    assert {extract_protocol(mode) for mode in KNOWN_MODES} == KNOWN_PROTOCOLS


def test_tables_cover_exactly_the_known_bindings() -> None:
    assert set(EVENTS) == KNOWN_MODES
    assert set(SURFACES) == KNOWN_PROTOCOLS
    assert set(DISPATCH_LISTS) == KNOWN_PROTOCOLS
    assert set(STATE_ENUMS) <= KNOWN_PROTOCOLS


def test_every_event_of_a_mode_is_a_surface_of_its_protocol() -> None:
    for mode, events in EVENTS.items():
        assert events <= SURFACES[extract_protocol(mode)], mode


def test_names_follow_the_schema_event_pattern() -> None:
    """JSON Schema `trigger.event` pattern: no qualifier `:`, no upper-case first letter."""
    pattern = re.compile(r"^[a-z][a-zA-Z0-9_/]*$")
    for names in SURFACES.values():
        assert all(pattern.match(name) for name in names)


def test_elicitation_modes_match_the_model_enum() -> None:
    assert set(ELICITATION_MODES) == {member.value for member in ElicitationMode}
    assert ELICITATION_ACTIONS == ("accept", "decline", "cancel")


# --- the tables against the upstream protocol packages (when installed) ---------------------------------


def _literal_methods(models: typing.Iterable[Any]) -> set[str]:
    methods: set[str] = set()
    for model in models:
        field = getattr(model, "model_fields", {}).get("method")
        if field is not None:
            methods.update(typing.get_args(field.annotation))
    return methods


def _union_members(union: Any) -> list[Any]:
    """The members of a union of message types: a pydantic `RootModel` over one (mcp 1), or the union itself."""
    fields = getattr(union, "model_fields", None)
    return list(typing.get_args(fields["root"].annotation if fields is not None else union))


def test_mcp_events_match_the_mcp_sdk() -> None:
    """Against MCP 2025-11-25, the revision the v0.1 binding names: `mcp` 2's types of that revision, generated
    from its schema (`mcp_types._v2025_11_25`; the top-level `mcp.types` are 2026-07-28's, where the tasks
    methods left the core for an extension and `server/discover`, `subscriptions/listen` came)."""
    types = pytest.importorskip("mcp_types._v2025_11_25")
    client_requests = _literal_methods(_union_members(types.ClientRequest))
    server_requests = _literal_methods(_union_members(types.ServerRequest))
    client_notifications = _literal_methods(_union_members(types.ClientNotification))
    server_notifications = _literal_methods(_union_members(types.ServerNotification))
    assert EVENTS["mcp_server"] == client_requests | client_notifications
    assert EVENTS["mcp_client"] == client_requests | server_requests | server_notifications
    assert SURFACES["mcp"] == client_requests | server_requests | client_notifications | server_notifications


def test_ag_ui_events_match_the_event_type_enum() -> None:
    core = pytest.importorskip("ag_ui.core")
    assert EVENTS["ag_ui_client"] == {member.value.lower() for member in core.EventType} | {"run_agent_input"}


def test_a2a_methods_match_the_v0_3_types() -> None:
    types = pytest.importorskip("a2a.compat.v0_3.types")
    methods = _literal_methods(getattr(types, name) for name in dir(types))
    assert EVENTS["a2a_server"] == methods | {"agent_card/get"}
    assert EVENTS["a2a_client"] == methods | {"agent_card/get", "task/status", "task/artifact"}


# --- event_is_known (V-029) and surface_is_known (V-018) --------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "event", "known"),
    [
        ("mcp_server", "tools/call", True),  # VAL-029a
        ("mcp_server", "message/send", False),  # VAL-029b: an A2A method
        ("mcp_server", "notifications/elicitation/complete", False),  # VAL-029d: server-to-client only
        ("mcp_client", "notifications/elicitation/complete", True),
        ("mcp_server", "notifications/initialized", True),
        ("mcp_client", "notifications/initialized", False),
        ("mcp_server", "sampling/createMessage", False),  # server-initiated: an mcp_client event
        ("mcp_client", "sampling/createMessage", True),
        ("mcp_client", "tools/call", True),  # correlated response
        ("a2a_server", "agent_card/get", True),
        ("a2a_server", "task/status", False),  # synthetic SSE events are client mode only
        ("a2a_client", "task/artifact", True),
        ("ag_ui_client", "run_started", True),
        ("ag_ui_client", "tool_call_result", True),
        ("ag_ui_client", "run_agent_input", True),
        ("ag_ui_client", "RUN_STARTED", False),  # the binding's names are snake_case
        ("mcp_server", "tools/call:calculator", False),  # no qualifier syntax in v0.1
        ("mcp_server", "", False),
        ("mcp_server", None, False),
        ("mcp_server", ["tools/call"], False),
        ("custom_proto_server", "custom/event", True),  # VAL-029c: unrecognized mode, skipped
        (None, "anything", True),
    ],
)
def test_event_is_known(mode: Any, event: Any, known: bool) -> None:
    assert event_is_known(mode, event) is known


@pytest.mark.parametrize(
    ("protocol", "surface", "known"),
    [
        ("mcp", "tools/list", True),  # VAL-018a
        ("mcp", "agent_card/get", False),  # VAL-018b
        ("mcp", "invalid_surface", False),  # VAL-005f
        ("mcp", "elicitation/create", True),
        ("mcp", "notifications/elicitation/complete", True),  # surfaces ignore direction
        ("a2a", "agent_card/get", True),
        ("a2a", "task/status", True),
        ("a2a", "tools/list", False),
        ("ag_ui", "run_agent_input", True),
        ("ag_ui", "tool_call_start", True),
        ("ag_ui", {"not": "hashable"}, False),
        ("voice", "tools/list", True),  # unrecognized protocol: skipped
    ],
)
def test_surface_is_known(protocol: Any, surface: Any, known: bool) -> None:
    assert surface_is_known(protocol, surface) is known


# --- response_lists (V-027, V-033) ----------------------------------------------------------------------

MCP_STATE: dict[str, Any] = {
    "tools": [
        {"name": "a", "responses": [{"when": {"arguments.x": 1}}, {"content": {}}]},
        {"name": "b"},
        "not a tool",
        {"name": "c", "responses": {"not": "a list"}},
        {"name": "d", "responses": []},
    ],
    "prompts": [{"name": "p", "responses": [{"messages": []}]}],
    "sampling_responses": [{"content": {}}],
    "elicitation_responses": [{"action": "decline"}],
    "task_responses": [{"content": {}}],  # an A2A key: not MCP state
    "tool_responses": [{"content": {}}],  # an AG-UI key: not MCP state
}


def test_response_lists_of_an_mcp_state() -> None:
    found = dict(response_lists("mcp_server", MCP_STATE))
    assert list(found) == [
        "tools[0].responses",
        "tools[4].responses",
        "prompts[0].responses",
        "sampling_responses",
        "elicitation_responses",
    ]
    assert found["tools[0].responses"] is MCP_STATE["tools"][0]["responses"]
    assert dict(response_lists("mcp_client", MCP_STATE)) == found  # one protocol, one layout


def test_response_lists_of_a2a_and_ag_ui_states() -> None:
    assert list(response_lists("a2a_server", MCP_STATE)) == [("task_responses", MCP_STATE["task_responses"])]
    assert list(response_lists("a2a_client", MCP_STATE)) == [("task_responses", MCP_STATE["task_responses"])]
    assert list(response_lists("ag_ui_client", MCP_STATE)) == [("tool_responses", MCP_STATE["tool_responses"])]


def test_response_lists_fixture_shapes() -> None:
    """VAL-033b (tools), VAL-033c / VAL-027d (`sampling_responses` in an `mcp_server` state), VAL-033d."""
    two_defaults = [{"content": 1}, {"content": 2}]
    assert [p for p, _ in response_lists("mcp_server", {"tools": [{"name": "t", "responses": two_defaults}]})] == [
        "tools[0].responses"
    ]
    assert [p for p, _ in response_lists("mcp_server", {"tools": [], "sampling_responses": two_defaults})] == [
        "sampling_responses"
    ]
    assert [p for p, _ in response_lists("a2a_server", {"agent_card": {}, "task_responses": two_defaults})] == [
        "task_responses"
    ]


@pytest.mark.parametrize("mode", ["custom_proto_server", "mpc_server", None, 7])
def test_response_lists_skip_unrecognized_modes(mode: Any) -> None:
    assert list(response_lists(mode, MCP_STATE)) == []


@pytest.mark.parametrize("state", [None, [], "tools", 3, {"tools": "x"}, {"tools": [None, 1, []]}, {"tools": {}}])
def test_response_lists_of_other_shapes(state: Any) -> None:
    assert list(response_lists("mcp_server", state)) == []


# --- state_enum_violations (V-005) ----------------------------------------------------------------------


def test_elicitation_response_actions() -> None:
    """VAL-005i (`decline` is valid) and VAL-005j (`deny` is not)."""
    assert list(state_enum_violations("mcp_client", {"elicitation_responses": [{"action": "decline"}]})) == []
    assert list(state_enum_violations("mcp_client", {"elicitation_responses": [{"action": "deny"}]})) == [
        ("elicitation_responses[0].action", "deny", ("accept", "decline", "cancel"))
    ]


def test_elicitation_modes() -> None:
    state = {
        "elicitations": [
            {"message": "m", "mode": "url", "url": "https://x"},
            {"message": "m"},  # absent: defaults to form
            {"message": "m", "mode": None},  # null: as absent
            {"message": "m", "mode": "Form"},
            {"message": "m", "mode": 3},
            "not an object",
        ]
    }
    assert list(state_enum_violations("mcp_server", state)) == [
        ("elicitations[3].mode", "Form", ("form", "url")),
        ("elicitations[4].mode", "3", ("form", "url")),
    ]


def test_state_enums_are_binding_scoped() -> None:
    state = {"elicitation_responses": [{"action": "deny"}], "elicitations": [{"mode": "sms"}]}
    assert len(list(state_enum_violations("mcp_server", state))) == 2
    for mode in ("a2a_server", "a2a_client", "ag_ui_client", "custom_server", None):
        assert list(state_enum_violations(mode, state)) == []


def test_pass_through_values_are_not_enums() -> None:
    """Roles and task states are protocol-native pass-through (format spec §7.0.3)."""
    state = {
        "agent_card": {"name": "x"},
        "task_responses": [{"content": {"status": {"state": "bogus"}, "role": "robot"}}],
    }
    assert list(state_enum_violations("a2a_server", state)) == []


# --- robustness: arbitrary states never raise -----------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(
        st.sampled_from(
            ["tools", "prompts", "responses", "sampling_responses", "elicitation_responses", "task_responses",
             "tool_responses", "elicitations", "action", "mode", "when", "x"]
        ),
        children,
        max_size=5,
    ),
    max_leaves=30,
)
MODES = st.sampled_from([*sorted(KNOWN_MODES), "custom_server", ""]) | st.none() | st.integers()


def _resolve(state: Any, path: str) -> Any:
    for key, index in re.findall(r"(\w+)(?:\[(\d+)\])?", path):
        state = state[key]
        if index:
            state = state[int(index)]
    return state


@given(MODES, JSON)
def test_response_lists_never_raise_and_paths_resolve(mode: Any, state: Any) -> None:
    for path, entries in response_lists(mode, state):
        assert isinstance(entries, list)
        assert _resolve(state, path) is entries


@given(MODES, JSON)
def test_state_enum_violations_never_raise_and_paths_resolve(mode: Any, state: Any) -> None:
    for path, text, allowed in state_enum_violations(mode, state):
        value = _resolve(state, path)
        assert value is not None and value not in allowed
        assert text == (value if isinstance(value, str) else repr(value))


@given(MODES, JSON)
def test_known_checks_never_raise(mode: Any, value: Any) -> None:
    assert isinstance(event_is_known(mode, value), bool)
    assert isinstance(surface_is_known(mode, value), bool)


# --- the conformance corpus ----------------------------------------------------------------------------


def _mode_protocol(mode: Any) -> str | None:
    return extract_protocol(mode) if isinstance(mode, str) else None


@pytest.mark.parametrize("path", corpus_files("parse/valid"))
def test_parse_corpus_uses_only_known_events_and_surfaces(path: Path) -> None:
    """Every trigger event and indicator surface of the valid parse corpus is known to its binding."""
    attack = load_yaml_file(path)["attack"]
    execution = attack["execution"]
    actors = execution.get("actors") or [{"mode": execution.get("mode"), "phases": execution.get("phases", [])}]
    for actor in actors:
        for phase in actor["phases"]:
            event = (phase.get("trigger") or {}).get("event")
            if event is not None:
                assert event_is_known(phase.get("mode", actor["mode"]), event), (path.name, event)
    default_protocol = _mode_protocol(execution.get("mode") or (actors[0]["mode"] if len(actors) == 1 else None))
    for indicator in attack.get("indicators") or []:
        if "surface" in indicator:
            protocol = indicator.get("protocol", default_protocol)
            assert surface_is_known(protocol, indicator["surface"]), (path.name, indicator["surface"])
