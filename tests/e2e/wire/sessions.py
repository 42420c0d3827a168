"""Every client session the wire end-to-end tests run, by name, against the peers (directly or through a
proxy). Each returns what the client saw, so a proxied run can be compared with a direct one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from testing import clients
from testing.processes import Peers
from tests.oatf_engine.wire.expected import AG_UI_ENCODINGS


async def _mcp_http(peers: Peers, proxy: str | None) -> Any:
    changed: list[str] = []
    seen = await clients.mcp_streamable(peers.url("mcp_http", "/mcp"), proxy, changed)
    return {"seen": seen, "notifications": changed}


async def _ag_ui_tool_result(peers: Peers, proxy: str | None) -> Any:
    first = clients.run_agent_input("Send 100 to Bob")
    await clients.ag_ui_run(peers.url("ag_ui", "/agent"), proxy, first)
    events = await clients.ag_ui_run(peers.url("ag_ui", "/agent"), proxy, clients.tool_result_input(first))
    return _without_run_ids(events)


async def _legacy_card(peers: Peers, proxy: str | None) -> Any:
    status, _headers, body = await clients.raw_exchange("GET", peers.url("a2a_v03", "/.well-known/agent.json"), proxy)
    return status, body


def _without_run_ids(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in event.items() if k != "runId"} for event in events]


def _ag_ui(encoding: str) -> Callable[[Peers, str | None], Awaitable[Any]]:
    async def run(peers: Peers, proxy: str | None) -> Any:
        return _without_run_ids(await clients.ag_ui_run(peers.url("ag_ui", f"/agent?encoding={encoding}"), proxy))

    return run


SESSIONS: dict[str, Callable[[Peers, str | None], Awaitable[Any]]] = {
    "mcp_http": _mcp_http,
    "mcp_sse": lambda peers, proxy: clients.mcp_legacy_sse(peers.url("mcp_sse", "/sse"), proxy),
    "a2a_v1": lambda peers, proxy: clients.a2a_session(peers.url("a2a_v1"), proxy),
    "a2a_v03": lambda peers, proxy: clients.a2a_session(peers.url("a2a_v03"), proxy),
    "a2a_legacy_card": _legacy_card,
    "a2a_rest_v1": lambda peers, proxy: clients.a2a_session(peers.url("a2a_rest_v1"), proxy, "HTTP+JSON"),
    "a2a_rest_v03": lambda peers, proxy: clients.a2a_session(peers.url("a2a_rest_v03"), proxy, "HTTP+JSON"),
    **{f"ag_ui_{encoding}": _ag_ui(encoding) for encoding in AG_UI_ENCODINGS},
    "ag_ui_tool_result": _ag_ui_tool_result,
}
"""Session name → coroutine function (peers, proxy URL or None) → what the client saw; the names and order of
`tests.oatf_engine.wire.expected.EXPECTED`."""
