"""What each client session of the end-to-end tests (`tests/e2e/wire/sessions.py`) decodes to, and so what the
fixtures recorded from those sessions (`fixtures/*.mitm`, one per peer, sessions in this order) decode to."""

from __future__ import annotations

AG_UI_ENCODINGS = ("identity", "gzip", "deflate", "br", "zstd")

REQ, RES, C, S = "request", "response", "client", "server"
_MCP = [
    ("initialize", REQ, C), ("initialize", RES, S), ("notifications/initialized", REQ, C),
    ("tools/list", REQ, C), ("tools/list", RES, S), ("tools/call", REQ, C), ("tools/call", RES, S),
    ("tools/call", REQ, C), ("notifications/message", RES, S), ("sampling/createMessage", RES, S),
    ("sampling/createMessage", REQ, C), ("tools/call", RES, S),
]
_A2A = [
    ("agent_card/get", REQ, C), ("agent_card/get", RES, S),
    ("message/send", REQ, C), ("message/send", RES, S), ("message/send", REQ, C), ("message/send", RES, S),
    ("agent_card/get", REQ, C), ("agent_card/get", RES, S),
    ("message/stream", REQ, C), ("message/stream", RES, S),
    ("message/stream", REQ, C), ("message/stream", RES, S),
    ("message/stream", RES, S), ("task/status", RES, S), ("message/stream", RES, S), ("task/artifact", RES, S),
    ("message/stream", RES, S), ("task/status", RES, S),
    ("tasks/get", REQ, C), ("tasks/get", RES, S),
]
_AG_UI = [("run_agent_input", REQ, C)] + [(name, RES, S) for name in (
    "run_started", "text_message_start", "text_message_content", "text_message_content", "text_message_end",
    "tool_call_start", "tool_call_args", "tool_call_end", "run_finished")]

EXPECTED: dict[str, list[tuple[str, str, str]]] = {
    "mcp_http": [*_MCP, ("tools/call", REQ, C), ("notifications/tools/list_changed", RES, S), ("tools/call", RES, S)],
    "mcp_sse": _MCP,
    "a2a_v1": _A2A,
    "a2a_v03": _A2A,
    "a2a_legacy_card": [("agent_card/get", REQ, C), ("agent_card/get", RES, S)],
    "a2a_rest_v1": _A2A,
    "a2a_rest_v03": _A2A,
    **{f"ag_ui_{encoding}": _AG_UI for encoding in AG_UI_ENCODINGS},
    "ag_ui_tool_result": [*_AG_UI, _AG_UI[0], ("tool_call_result", REQ, C), *_AG_UI[1:]],
}
"""Session name → the (event_type, direction, sender) sequence the tap decodes from it. Direction is format spec
§6.1's: `request` client→server, `response` server→client, whatever the JSON-RPC role (`oatf_engine.events`)."""

PEER = {name: ("ag_ui" if name.startswith("ag_ui") else "a2a_v03" if name == "a2a_legacy_card" else name)
        for name in EXPECTED}
"""Session name → the peer (and fixture file) it talks to."""
PROTOCOL = {"mcp_http": "mcp", "mcp_sse": "mcp", "a2a_v1": "a2a", "a2a_v03": "a2a", "a2a_rest_v1": "a2a",
            "a2a_rest_v03": "a2a", "ag_ui": "ag_ui"}
"""Peer → protocol."""

