"""Recorded sessions with the real SDK peers (`tests/wire/fixtures/*.mitm`, re-recorded with
`python -m tests.e2e_wire.record_fixtures`) decode to the binding's event sequences, in any chunking."""

from __future__ import annotations

from typing import Any

import pytest

from addon.events import ObservedEvent
from addon.wire import WireDecoder

from .replay import load, replay, summary

REQ, RES, C, S = "request", "response", "client", "server"

MCP_SESSION = [
    ("initialize", REQ, C), ("initialize", RES, S), ("notifications/initialized", REQ, C),
    ("tools/list", REQ, C), ("tools/list", RES, S),
    ("tools/call", REQ, C), ("tools/call", RES, S),
    ("tools/call", REQ, C), ("notifications/message", REQ, S), ("sampling/createMessage", REQ, S),
    ("sampling/createMessage", RES, C), ("tools/call", RES, S),
]
A2A_SESSION = [
    ("agent_card/get", REQ, C), ("agent_card/get", RES, S),
    ("message/send", REQ, C), ("message/send", RES, S), ("message/send", REQ, C), ("message/send", RES, S),
    ("agent_card/get", REQ, C), ("agent_card/get", RES, S),
    ("message/stream", REQ, C), ("message/stream", RES, S),
    ("message/stream", REQ, C), ("message/stream", RES, S),
    ("message/stream", RES, S), ("task/status", RES, S), ("message/stream", RES, S), ("task/artifact", RES, S),
    ("message/stream", RES, S), ("task/status", RES, S),
    ("tasks/get", REQ, C), ("tasks/get", RES, S),
]
AG_UI_RUN = [("run_agent_input", REQ, C)] + [(name, RES, S) for name in (
    "run_started", "text_message_start", "text_message_content", "text_message_content", "text_message_end",
    "tool_call_start", "tool_call_args", "tool_call_end", "run_finished")]
EXPECTED = {
    "mcp_http": MCP_SESSION[:7] + MCP_SESSION[7:] + [
        ("tools/call", REQ, C), ("notifications/tools/list_changed", REQ, S), ("tools/call", RES, S)],
    "mcp_sse": MCP_SESSION,
    "a2a_v1": A2A_SESSION,
    "a2a_v03": [*A2A_SESSION, ("agent_card/get", REQ, C), ("agent_card/get", RES, S)],
    "ag_ui": AG_UI_RUN * 6 + [AG_UI_RUN[0], ("tool_call_result", REQ, C)] + AG_UI_RUN[1:],
}
PROTOCOL = {"mcp_http": "mcp", "mcp_sse": "mcp", "a2a_v1": "a2a", "a2a_v03": "a2a", "ag_ui": "ag_ui"}


def decode(name: str, split: Any = None) -> tuple[list[ObservedEvent], list[Any]]:
    diagnostics: list[Any] = []
    decoder = WireDecoder(on_diagnostic=diagnostics.append)
    events = replay(decoder, load(name)) if split is None else replay(decoder, load(name), split)
    return events, diagnostics


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_event_sequence(name: str) -> None:
    events, diagnostics = decode(name)
    assert summary(events) == [(PROTOCOL[name], t, d, s, False) for t, d, s in EXPECTED[name]]
    assert diagnostics == []
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_byte_by_byte_gives_the_same_events(name: str) -> None:
    whole, _ = decode(name)
    split, _ = decode(name, lambda data: [data[i:i + 1] for i in range(len(data))])
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


def test_ag_ui_enrichment_and_encodings() -> None:
    events, _ = decode("ag_ui")
    args = [e for e in events if e.event_type in ("tool_call_args", "tool_call_end")]
    assert {e.content["toolCallName"] for e in args} == {"transfer_funds"}
    deltas = [e.content["delta"] for e in events if e.event_type == "text_message_content"]
    assert deltas == ["Hello", " world"] * 7  # identity, gzip, deflate, br, zstd, and the two tool-result runs
    result = next(e for e in events if e.event_type == "tool_call_result")
    assert result.content["toolCallName"] == "transfer_funds" and result.content["content"] == "transferred"
