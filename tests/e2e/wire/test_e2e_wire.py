"""End to end: the official SDK clients and servers on loopback, through mitmdump running the tap.

Each session runs directly and through the proxy: the client sees the same thing both ways, and the tap
decodes the binding's event sequence. Pass-through is byte for byte (every recorded fixture, served by a
replay server, read directly and through the proxy), and an SSE event reaches the client through the proxy
within 200 ms on a stream that stays open."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import io

from testing import clients
from testing.paths import WIRE_FIXTURES
from testing.processes import Peers, Proxy, mitmdump, peers, tracebacks
from tests.oatf_engine.wire.expected import EXPECTED, PEER, PROTOCOL
from tests.oatf_engine.wire.test_fixtures import modulo_ids

from .conftest import Run
from .sessions import SESSIONS

FIXTURES = WIRE_FIXTURES


def test_sessions_cover_the_expectations() -> None:
    assert list(SESSIONS) == list(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_client_sees_the_same_through_the_proxy(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    assert run.proxied == run.direct


@pytest.mark.parametrize("name", list(EXPECTED))
def test_tap_decodes_the_session(runs: dict[str, Run], running_peers: Peers, name: str) -> None:
    events = runs[name].events
    assert [(e["event_type"], e["direction"], e["sender"]) for e in events] == EXPECTED[name]
    assert {e["protocol"] for e in events} == {PROTOCOL[PEER[name]]}
    assert {e["endpoint"]["port"] for e in events} == {running_peers.ports[PEER[name]]}
    assert not any(e["is_error"] for e in events)


def test_mcp_get_stream_delivered_while_open(runs: dict[str, Run]) -> None:
    """notifications/tools/list_changed travels on the standalone GET stream, which stays open for the whole
    session: the client only gets it if the proxy streams (bare mitmdump would hold it until the stream ends)."""
    run = runs["mcp_http"]
    assert "notifications/tools/list_changed" in run.proxied["notifications"]
    events = run.events
    changed = next(e for e in events if e["event_type"] == "notifications/tools/list_changed")
    posts = {e["flow_id"] for e in events if e["sender"] == "client"}
    assert changed["flow_id"] not in posts
    call = next(e for e in events if e["event_type"] == "tools/call" and e["direction"] == "response")
    assert call["content"]["params"] == {"name": "add", "arguments": {"a": 2, "b": 3}}
    assert len({e["session_keys"].get("mcp_session") for e in events[1:]}) == 1


def test_bare_mitmdump_breaks_what_the_tap_streams(running_peers: Peers, workdir: Path) -> None:
    """Why streaming is not optional: bare mitmdump holds an SSE response until it ends, so the legacy MCP
    transport never receives its `endpoint` event (the same session passes through the tap above)."""
    with mitmdump(workdir, tap=False, name="bare") as bare, pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(clients.mcp_legacy_sse(running_peers.url("mcp_sse", "/sse"), bare.url), 3))


def test_mcp_legacy_transport_correlates_across_exchanges(runs: dict[str, Run]) -> None:
    events = runs["mcp_sse"].events
    responses = [e for e in events if e["direction"] == "response" and e["sender"] == "server"]
    requests = {e["flow_id"] for e in events if e["sender"] == "client"}
    assert responses and all(e["flow_id"] not in requests for e in responses)  # answered on the SSE stream


@pytest.mark.parametrize(("rest", "jsonrpc"), [("a2a_rest_v1", "a2a_v1"), ("a2a_rest_v03", "a2a_v03")])
def test_a2a_rest_decodes_like_jsonrpc(runs: dict[str, Run], rest: str, jsonrpc: str) -> None:
    """The real a2a-sdk client and server over HTTP+JSON/REST: the tap decodes the same events, content Values
    and session keys as from the same session over JSON-RPC (ids and times aside)."""
    assert runs[rest].proxied == runs[jsonrpc].proxied
    assert [modulo_ids(e) for e in runs[rest].events] == [modulo_ids(e) for e in runs[jsonrpc].events]


@pytest.mark.parametrize("name", ["a2a_v1", "a2a_v03", "a2a_rest_v1", "a2a_rest_v03"])
def test_a2a_content_in_the_binding_shape(runs: dict[str, Run], name: str) -> None:
    events = runs[name].events
    statuses = [e["content"] for e in events if e["event_type"] == "task/status"]
    assert [(s["kind"], s["status"]["state"], s["final"]) for s in statuses] == [
        ("status-update", "working", False), ("status-update", "completed", True)]
    reply = next(e["content"] for e in events if e["event_type"] == "message/send" and e["direction"] == "response")
    assert (reply["kind"], reply["role"]) == ("message", "agent")
    assert reply["parts"] == [{"kind": "text", "text": "echo: msg hello"}]
    sent = next(e["content"] for e in events if e["event_type"] == "message/send")
    assert (sent["message"]["role"], sent["message"]["parts"]) == ("user", [{"kind": "text", "text": "msg hello"}])
    assert all("a2a_context" in e["session_keys"] for e in events if e["direction"] == "response"
               and e["event_type"] != "agent_card/get")


def test_sse_event_reaches_the_client_within_200ms_on_an_open_stream(running_peers: Peers, proxy: Proxy) -> None:
    url = running_peers.url("ag_ui", "/ticks?count=4&interval=0.25&hold=1.5")
    before = len(proxy.events())
    latencies, open_after_first = asyncio.run(asyncio.wait_for(clients.ag_ui_tick_latencies(url, proxy.url), 20))
    assert len(latencies) == 4
    assert max(latencies) < 0.2, latencies
    assert open_after_first > 1.5  # the events came while the stream was still open
    ticks = [e for e in proxy.settled_events()[before:] if e["event_type"] == "custom"]
    assert [e["content"]["value"]["index"] for e in ticks] == [0, 1, 2, 3]
    assert all(e["timestamp"] - e["content"]["value"]["sent"] < 0.2 for e in ticks)  # decoded as it passed


@pytest.fixture(scope="module")
def replay_server(workdir: Path) -> Iterator[Peers]:
    with peers(workdir / "..", kinds=(), replay=sorted(FIXTURES.glob("*.mitm"))) as running:
        yield running


def _recorded_requests() -> list[tuple[str, str, bytes, str]]:
    out = []
    for path in sorted(FIXTURES.glob("*.mitm")):
        with open(path, "rb") as handle:
            for flow in io.FlowReader(handle).stream():
                if flow.response is not None:
                    out.append((flow.request.method, flow.request.path, flow.request.raw_content or b"", path.stem))
    return out


def _undated(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers if name.lower() != "date"]  # the clock moves between calls


def test_pass_through_is_byte_for_byte_for_every_fixture(replay_server: Peers, proxy: Proxy) -> None:
    requests = _recorded_requests()
    assert len(requests) > 30

    async def compare() -> list[str]:
        differences = []
        for method, path, body, fixture in requests:
            url = replay_server.url("replay", path)
            direct = await clients.raw_exchange(method, url, None, body, {"content-type": "application/json"})
            proxied = await clients.raw_exchange(method, url, proxy.url, body, {"content-type": "application/json"})
            if direct[0] == 404:
                differences.append(f"{fixture} {method} {path}: not served")
            if (direct[0], _undated(direct[1]), direct[2]) != (proxied[0], _undated(proxied[1]), proxied[2]):
                differences.append(f"{fixture} {method} {path}")
        return differences

    assert asyncio.run(asyncio.wait_for(compare(), 60)) == []


def test_bad_and_huge_input_pass_unaltered_and_never_break_the_proxy(running_peers: Peers, proxy: Proxy) -> None:
    mcp = running_peers.url("mcp_http", "/mcp")
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    bodies = [b"not json", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/ca', b"\xff\xfe\x00garbage",
              b'{"jsonrpc": "2.0", "id": [1], "method": 7}', b"[]"]
    big = json.dumps({"threadId": "t", "runId": "r", "messages": [], "pad": "x" * (32 << 20)}).encode()

    async def exchange_all(proxy_url: str | None) -> list[Any]:
        seen: list[Any] = []
        for body in bodies:
            status, _headers, raw = await clients.raw_exchange("POST", mcp, proxy_url, body, headers)
            seen.append((status, raw))
        status, _headers, raw = await clients.raw_exchange("GET", running_peers.url("ag_ui", f"/big?size={32 << 20}"),
                                                           proxy_url)
        seen.append((status, hashlib.sha256(raw).hexdigest()))
        status, _headers, raw = await clients.raw_exchange("POST", running_peers.url("ag_ui", "/big?size=10"),
                                                           proxy_url, big, {"content-type": "application/json"})
        seen.append((status, raw))
        return seen

    direct = asyncio.run(asyncio.wait_for(exchange_all(None), 60))
    proxied = asyncio.run(asyncio.wait_for(exchange_all(proxy.url), 60))
    assert proxied == direct
    assert asyncio.run(clients.ag_ui_run(running_peers.url("ag_ui", "/agent"), proxy.url))  # still working
    log = proxy.log.read_text(encoding="utf-8", errors="replace")
    assert log.count("oversize_body") == 1
    assert "failed on flow" not in log and not tracebacks(log)
