"""Recorded sessions with the real SDK peers (`tests/oatf_engine/wire/fixtures/*.mitm`, re-recorded with
`python -m tests.e2e.wire.record_fixtures`) decode to the binding's event sequences, in any chunking."""

from __future__ import annotations

from typing import Any

import pytest

from addon.recordings import decode_flows
from oatf_engine.events import ObservedEvent
from oatf_engine.wire import WireDecoder

from .expected import EXPECTED as SESSION_EVENTS
from .expected import PEER, PROTOCOL
from .replay import byte_by_byte, load, summary

EXPECTED = {peer: [(PROTOCOL[peer], *event, False) for session in SESSION_EVENTS if PEER[session] == peer
                   for event in SESSION_EVENTS[session]] for peer in PROTOCOL}
"""Fixture → its events: those of the sessions recorded into it, in recording order."""


def decode(name: str, by_byte: bool = False) -> tuple[list[ObservedEvent], list[Any]]:
    diagnostics: list[Any] = []
    flows = load(name)
    events = decode_flows(WireDecoder(on_diagnostic=diagnostics.append), byte_by_byte(flows) if by_byte else flows)
    return events, diagnostics


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_event_sequence(name: str) -> None:
    events, diagnostics = decode(name)
    assert summary(events) == EXPECTED[name]
    assert diagnostics == []
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_byte_by_byte_gives_the_same_events(name: str) -> None:
    whole, _ = decode(name)
    split, _ = decode(name, by_byte=True)
    assert [(e.event_type, e.content, e.session_keys) for e in split] == \
        [(e.event_type, e.content, e.session_keys) for e in whole]


def test_mcp_content_values() -> None:
    events, _ = decode("mcp_http")
    session = events[1].session_keys["mcp_session"]
    assert events[0].session_keys == {}  # the session id is assigned by the initialize response
    assert all(e.session_keys == {"mcp_session": session} for e in events[1:])
    add = events[6]
    assert add.content["params"] == {"name": "add", "arguments": {"a": 2, "b": 3}}  # enriched (SDK spec §4.1)
    assert add.content["content"][0]["text"] == "5"
    sampling = events[9]
    assert sampling.content["messages"][0]["content"]["text"] == "meaning of life?"
    assert events[10].content["content"]["text"] == "forty-two"
    assert events[13].flow_id not in {e.flow_id for e in events[12:15:2]}  # list_changed came on the GET stream


def test_mcp_legacy_session_key_from_endpoint() -> None:
    events, _ = decode("mcp_sse")
    keys = {e.session_keys.get("mcp_session") for e in events}
    assert len(keys) == 1 and None not in keys


_IDS = frozenset({"messageId", "contextId", "taskId", "id", "artifactId", "timestamp"})


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in _IDS else _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def test_a2a_v1_and_v03_give_the_same_content_values() -> None:
    """One document matches both wire versions: same events, same content (ids and times aside); only the
    request `configuration` (0.3 `blocking`, not part of the 1.0 request) and the cards differ."""
    v1 = [e for e in decode("a2a_v1")[0] if e.event_type != "agent_card/get"]
    v03 = [e for e in decode("a2a_v03")[0] if e.event_type != "agent_card/get"]
    for a, b in zip(v1, v03, strict=True):
        ca, cb = _masked(a.content), _masked(b.content)
        if a.direction == "request":
            ca.pop("configuration", None), cb.pop("configuration", None)
        assert ca == cb, a.event_type
    statuses = [e.content for e in v1 if e.event_type == "task/status"]
    assert [(s["status"]["state"], s["final"]) for s in statuses] == [("working", False), ("completed", True)]
    artifact = next(e.content for e in v1 if e.event_type == "task/artifact")
    assert artifact["artifact"]["parts"] == [{"kind": "text", "text": "artifact for task hello"}]
    assert v1[1].content["role"] == "agent" and v1[1].content["kind"] == "message"
    assert v1[1].envelope["result"]["message"]["role"] == "ROLE_AGENT"


def modulo_ids(event: ObservedEvent | dict[str, Any]) -> tuple[Any, ...]:
    """What an A2A event (decoded, or as the tap writes it) says but for ids and times: event, sides, content
    (an Agent Card's aside: it names its transport) and the names of its session keys."""
    get = event.get if isinstance(event, dict) else lambda name: getattr(event, name)
    content = None if get("event_type") == "agent_card/get" else _masked(get("content"))
    return (get("protocol"), get("event_type"), get("direction"), get("sender"), get("is_error"), content,
            sorted(get("session_keys")))


@pytest.mark.parametrize(("rest", "jsonrpc"), [("a2a_rest_v1", "a2a_v1"), ("a2a_rest_v03", "a2a_v03")])
def test_a2a_rest_decodes_to_the_jsonrpc_events(rest: str, jsonrpc: str) -> None:
    """The same client session over HTTP+JSON/REST and over JSON-RPC gives the same events, content Values and
    session keys (ids and times aside), so every A2A document matches both."""
    rest_events, jsonrpc_events = decode(rest)[0], decode(jsonrpc)[0][:len(SESSION_EVENTS[jsonrpc])]
    assert [modulo_ids(e) for e in rest_events] == [modulo_ids(e) for e in jsonrpc_events]
    assert all(e.jsonrpc_id is None for e in rest_events)
    get = next(e for e in rest_events if e.event_type == "tasks/get" and e.direction == "request")
    assert get.content == {"id": rest_events[-1].content["id"]}  # the task id from the URL path


def test_ag_ui_enrichment_and_encodings() -> None:
    events, _ = decode("ag_ui")
    args = [e for e in events if e.event_type in ("tool_call_args", "tool_call_end")]
    assert {e.content["toolCallName"] for e in args} == {"transfer_funds"}
    deltas = [e.content["delta"] for e in events if e.event_type == "text_message_content"]
    assert deltas == ["Hello", " world"] * 7  # identity, gzip, deflate, br, zstd, and the two tool-result runs
    result = next(e for e in events if e.event_type == "tool_call_result")
    assert result.content["toolCallName"] == "transfer_funds" and result.content["content"] == "transferred"
