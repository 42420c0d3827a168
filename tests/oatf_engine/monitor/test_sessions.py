"""How traffic becomes sessions (`oatf_engine.monitor.sessions`): one HTTP exchange is one session however late its
answer comes, keyless routes are agent episodes bounded by an idle gap, concurrent sessions stay apart."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from oatf_engine.events import Endpoint, ObservedEvent
from oatf_engine.monitor import SessionKey
from oatf_engine.monitor.sessions import FLOW_QUIET_SECONDS, MAX_PENDING_SECONDS, SessionResolver

_seq = itertools.count()


def message(flow: str, at: float, sender: str = "client", key: str | None = None, client: str = "10.0.0.5:4000",
            protocol: str = "a2a", envelope: Any = None) -> ObservedEvent:
    keys = {"a2a_context": key} if key and protocol == "a2a" else ({"mcp_session": key} if key else {})
    return ObservedEvent(protocol, "message/send", "request" if sender == "client" else "response", sender,  # type: ignore[arg-type]
                         {}, flow, next(_seq), at, Endpoint("10.0.0.1", 9999, "/"), client, keys,
                         envelope=envelope)


NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def place_all(events: list[ObservedEvent], idle_gap: float = 120.0) -> dict[str, str]:
    """flow id → session, for every event (asserting each is placed exactly once and flows never split)."""
    resolver = SessionResolver(SessionKey.AUTO, idle_gap)
    placed: list[tuple[ObservedEvent, str]] = []
    for n, event in enumerate(events):
        placed += resolver.place(event)
        done = {e.seq for e, _ in placed}
        waiting = [e.timestamp for e in events[:n + 1] if e.seq not in done]
        assert resolver.oldest_held() == min(waiting, default=float("inf")), "the clock stops at the oldest held"
        assert set(resolver.held_flows) == {e.flow_id for e in events[:n + 1] if e.seq not in done}, \
            "the flows held are those of the events not placed"
    placed += resolver.flush()
    assert not resolver.held_flows
    assert sorted(e.seq for e, _ in placed) == sorted(e.seq for e in events), "every event placed exactly once"
    # An exchange ends when its flow has been quiet for `FLOW_QUIET_SECONDS`: a later message of the flow (never
    # expected: no answer comes that late) is one of a new exchange, and its session is forgotten (`recent`).
    exchange: dict[int, tuple[str, int]] = {}
    last: dict[str, tuple[float, int]] = {}
    for event in events:
        seen, number = last.get(event.flow_id, (event.timestamp, 0))
        number += event.timestamp - seen > FLOW_QUIET_SECONDS
        last[event.flow_id] = (event.timestamp, number)
        exchange[event.seq] = (event.flow_id, number)
    by_flow: dict[tuple[str, int], set[str]] = {}
    for event, session in placed:
        by_flow.setdefault(exchange[event.seq], set()).add(session)
    assert all(len(s) == 1 for s in by_flow.values()), f"an exchange was split: {by_flow}"
    return {flow: next(iter(s)) for (flow, _), s in by_flow.items()}


def test_a_slow_answer_keeps_its_request_in_the_session_it_opens() -> None:
    """An A2A agent answering its first `message/send` after 3.6 s (or 30 s): request and answer of the same
    exchange, and the conversation after, are one session."""
    for delay in (3.6, 30.0):
        sessions = place_all([message("f1", 0.0), message("f1", delay, "server", key="ctx-1"),
                              message("f2", delay + 1, key="ctx-1"), message("f2", delay + 2, "server", key="ctx-1")])
        assert set(sessions.values()) == {"a2a_context:ctx-1"}


def test_a_request_whose_answer_never_comes_is_placed_once_it_has_waited_long_enough() -> None:
    resolver = SessionResolver(SessionKey.AUTO)
    assert resolver.place(message("f1", 0.0)) == []
    assert resolver.expire(MAX_PENDING_SECONDS - 1) == []
    assert resolver.expire(MAX_PENDING_SECONDS) == [] and resolver.held, "moved to its route's hold"
    [(_, session)] = resolver.expire(MAX_PENDING_SECONDS + 2.0)
    assert session == "agent:10.0.0.5>10.0.0.1:9999/a2a#1"


def test_a_stateless_route_is_one_episode_across_dropped_connections_until_it_goes_idle() -> None:
    """Stateless MCP: no session id, a new TCP connection (client port) per request. One agent episode while
    the route is busy; a new one after the idle gap."""
    events = []
    for n, at in enumerate((0.0, 5.0, 12.0, 200.0, 201.0)):
        client = f"10.0.0.5:{4000 + n}"
        events += [message(f"f{n}", at, client=client, protocol="mcp"),
                   message(f"f{n}", at + 0.5, "server", client=client, protocol="mcp")]
    sessions = place_all(events, idle_gap=120.0)
    first = "agent:10.0.0.5>10.0.0.1:9999/mcp#1"
    assert [sessions[f"f{n}"] for n in range(5)] == [first] * 3 + ["agent:10.0.0.5>10.0.0.1:9999/mcp#2"] * 2


def test_a_stateless_episode_is_placed_in_order_from_its_first_exchange() -> None:
    """Stateless MCP (a fastmcp server, a pydantic-ai agent): `initialize` is answered without a session id,
    then the agent goes on at once on new connections. The route's exchanges wait together and are placed in
    order, in one episode; while they wait, the monitor's clock stops at the oldest of them
    (`oldest_held`), so no run of the episode can end before they are placed."""
    resolver = SessionResolver(SessionKey.AUTO)
    events = [message("init", 0.0, protocol="mcp", client="10.0.0.5:4000"),
              message("init", 0.01, "server", protocol="mcp", client="10.0.0.5:4000"),
              message("note", 0.02, protocol="mcp", client="10.0.0.5:4001", envelope=NOTIFICATION),
              message("list", 0.03, protocol="mcp", client="10.0.0.5:4002"),
              message("list", 0.04, "server", protocol="mcp", client="10.0.0.5:4002")]
    placed = [p for e in events for p in resolver.place(e)]
    assert placed == [] and resolver.oldest_held() == 0.0
    assert set(resolver.held_flows) == {"init", "note", "list"}
    placed = resolver.expire(10.0)
    assert not resolver.held_flows
    assert [e.seq for e, _ in placed] == [e.seq for e in events], "placed in order"
    assert {session for _, session in placed} == {"agent:10.0.0.5>10.0.0.1:9999/mcp#1"}
    assert resolver.flush() == [] and resolver.oldest_held() == float("inf")


def test_concurrent_sessions_from_one_host_stay_apart() -> None:
    """Two MCP `initialize` exchanges at once from one host (two sessions of one agent): each request joins
    the session its own answer opens."""
    sessions = place_all([message("a", 0.0, protocol="mcp"), message("b", 0.1, protocol="mcp"),
                          message("b", 0.2, "server", key="s-b", protocol="mcp"),
                          message("a", 0.3, "server", key="s-a", protocol="mcp")])
    assert sessions == {"a": "mcp_session:s-a", "b": "mcp_session:s-b"}


events_strategy = st.lists(st.tuples(
    st.integers(0, 5),  # flow
    st.floats(0, 1000, allow_nan=False),  # time
    st.sampled_from(["client", "server"]),
    st.sampled_from([None, None, "k1", "k2"]),  # key
    st.sampled_from(["10.0.0.5:4000", "10.0.0.5:4001", "10.0.0.6:4000"]),
), max_size=40)


@settings(max_examples=1000)
@given(events_strategy)
def test_every_event_is_placed_once_and_no_exchange_is_split(specs: list[Any]) -> None:
    events = []
    now = 0.0
    clients: dict[int, str] = {}
    for flow, delta, sender, key, client in specs:
        now += delta / 10
        events.append(message(f"f{flow}", now, sender, key, clients.setdefault(flow, client)))
    place_all(events)  # asserts inside


def test_a_slow_first_answer_after_a_card_fetch_keeps_its_request() -> None:
    """An A2A client reads the Agent Card (answered without a key), then sends its first `message/send`
    (no contextId yet); the agent answers 5 s later with the contextId it assigns. Request and answer are
    one exchange, hence one session (rule 1), even though the card fetch showed the route keyless."""
    sessions = place_all([message("card", 0.0), message("card", 0.01, "server"),
                          message("send", 0.02), message("send", 5.02, "server", key="ctx-1")])
    assert sessions == {"card": "a2a_context:ctx-1", "send": "a2a_context:ctx-1"}, "the card joins it too"


def test_two_a2a_conversations_after_a_card_fetch_stay_apart() -> None:
    """After one Agent Card fetch, two conversations from one host each open their own contextId with their
    first `message/send`: two sessions, not one."""
    sessions = place_all([message("card", 0.0), message("card", 0.01, "server"),
                          message("send1", 0.02), message("send1", 0.5, "server", key="ctx-1"),
                          message("send2", 10.0), message("send2", 10.5, "server", key="ctx-2")])
    assert sessions["send1"] != sessions["send2"]
