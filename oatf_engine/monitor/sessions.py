"""Which session (run key) an event belongs to, including the messages that carry no session key of their own.

Under the `auto` and protocol session keys, some messages carry no key: MCP's `initialize` request (the
server assigns `Mcp-Session-Id` in its answer), an A2A Agent Card fetch or `tasks/get`, the first
`message/send` before the server assigns a `contextId`, and every message of the stateless MCP revision.
The rules, in order:

1. **One HTTP exchange, one session.** Every event of a flow (the request and its answer, however late the
   answer comes: a slow agent may take seconds or minutes) shares one session. A keyless request (not a
   JSON-RPC notification or response, which expect no answer) waits, held, for the first message of its
   answer: if the answer carries a key, the request joins that session; once a flow's session is decided,
   its later events follow it (a key first seen there then names that session for the rest of the traffic).
   While anything is held, the monitor's clock stops at the oldest held event (`oldest_held`): no run ends
   before the events that may belong to it are placed.
2. **A keyless exchange joins its route's session.** An exchange whose answer carries no key either (a card
   fetch, stateless MCP) is held up to `HOLD_SECONDS` of event time for the next keyed event from the same
   client host to the same server and protocol (its *route*), and joins that session; else the session last
   seen on the route. The hold lasts while a request on the route still waits for its answer (the first
   `message/send` after an Agent Card fetch: its answer brings the `contextId` the card joins).
3. **Else the agent's episode on that route.** A route that never carries a key (stateless MCP, whose
   clients may drop the TCP connection between requests) is one episode while it stays busy: a new episode
   starts after `idle_gap` seconds without traffic on the route. Its session is
   `agent:<client host>><server host>:<port>/<protocol>#<n>`.
4. **An AG-UI run or an A2A task gathers its agent's outbound traffic** (under `auto`, `episodes` rules 4–6):
   an MCP or A2A exchange of an agent that began while one of its windows was open is placed in that window's
   episode instead (in every such episode when several were open); an A2A task is known from its request's
   arrival (`AgentEpisodes.arrived`), and exchanges wait for its episode (`oldest_held` counts them); the
   agent's set-up exchanges join the episodes their server serves later.
A request still waiting for its answer after `MAX_PENDING_SECONDS` is placed by rule 2, and so, at once, is one
whose exchange ended without its answer (`end_exchange`: an HTTP error without a JSON-RPC body, a stream closed
early, a connection reset) or that its client cancelled (`notifications/cancelled`). Held events are
released in their original order (`seq`). Everything held is bounded (`HOLD_EVENTS` per hold,
`MAX_PENDING_FLOWS`, `MAX_ROUTES`, `MAX_FLOWS`); what a bound pushes out is placed early, never dropped.
An exchange's decided session is forgotten once the exchange has been quiet for `FLOW_QUIET_SECONDS`
(`recent`): memory follows the live traffic, not all the traffic seen.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Set
from dataclasses import dataclass, field

from ..events import ExchangeEnded, ObservedEvent
from .answers import cancelled
from .episodes import MAX_ANSWER_WAIT, AgentEpisodes, AgentName, Placed, remember
from .flow_counts import FlowCounts
from .options import DEFAULT_IDLE_GAP, SessionKey, session_of
from .recent import RecentFlows

Route = tuple[str, str, int, str]
"""(client host, server host, server port, protocol): who talks to whom, whatever the TCP connection."""

HOLD_SECONDS = 2.0
"""How long a keyless exchange waits for a keyed event on its route (rule 2)."""
MAX_PENDING_SECONDS = MAX_ANSWER_WAIT
"""How long a keyless request waits for the first message of its answer (rule 1)."""
HOLD_EVENTS = 200
MAX_PENDING_FLOWS = 10_000
MAX_ROUTES = 10_000
MAX_FLOWS = 100_000
FLOW_QUIET_SECONDS = MAX_ANSWER_WAIT
"""An exchange quiet this long sends nothing more (its answer would be late beyond `MAX_ANSWER_WAIT`): its
decided session is forgotten (`recent`)."""


@dataclass
class _Held:
    since: float
    events: list[ObservedEvent] = field(default_factory=list)


def _route(event: ObservedEvent) -> Route:
    return (event.client.rpartition(":")[0] or event.client, event.endpoint.host, event.endpoint.port,
            event.protocol)


def _awaits_answer(event: ObservedEvent) -> bool:
    """Whether a client's message expects an answer: not a JSON-RPC notification or response (a JSON-RPC
    request has both `method` and `id`); every other HTTP request (an Agent Card fetch, a REST call) does."""
    envelope = event.envelope
    if isinstance(envelope, dict) and "jsonrpc" in envelope:
        return "method" in envelope and "id" in envelope
    return True


@dataclass
class _Episode:
    number: int
    last_seen: float


class SessionResolver:
    """Assigns each event its run key (see the module docstring)."""

    def __init__(self, policy: SessionKey, idle_gap: float = DEFAULT_IDLE_GAP,
                 agents: tuple[AgentName, ...] | None = None) -> None:
        self.policy = policy
        self.agent_episodes = AgentEpisodes(agents, idle_gap) if agents is not None else None
        """Rules 4–6 (`episodes`), under `auto`; None: events stay in their protocol session (Attest traces)."""
        self.idle_gap = idle_gap
        self.pending: OrderedDict[str, _Held] = OrderedDict()
        self.pending_routes: Counter[Route] = Counter()
        """Requests waiting for their answer, per route: a route's hold lasts while it has any (rule 2)."""
        self._held_times: list[tuple[float, int]] = []
        """(time, seq) of every event put on hold, a heap; entries of placed events are dropped lazily."""
        self._held_seqs: set[int] = set()
        """The seqs of the events on hold now."""
        self._held_flows = FlowCounts()
        """The events on hold now, per flow (`held_flows`)."""
        """Keyless requests waiting for their answer, by flow, oldest first (rule 1)."""
        self.held: OrderedDict[Route, _Held] = OrderedDict()
        """Keyless exchanges waiting for a keyed event on their route, oldest hold first (rule 2)."""
        self.flow_session: RecentFlows[str] = RecentFlows(MAX_FLOWS, FLOW_QUIET_SECONDS)
        """Each exchange's session once decided (rule 1), forgotten when the exchange has been quiet for
        `FLOW_QUIET_SECONDS` (`recent`)."""
        self.last_session: OrderedDict[Route, str] = OrderedDict()
        self.episodes: OrderedDict[Route, _Episode] = OrderedDict()
        self.aliases: OrderedDict[str, str] = OrderedDict()
        """Keys first seen in an exchange whose session was already decided: they name that session."""
        self._clock = float("-inf")

    def resolve(self, event: ObservedEvent) -> list[Placed]:
        """The events that can be placed now (this one and any it releases), with their session."""
        request = cancelled(event) if self.pending else None
        released = self._cancel(event, request) if request is not None else []
        return self._placed([*released, *self._resolve(event)])

    def end_exchange(self, ended: ExchangeEnded) -> list[Placed]:
        """The events that can be placed once the exchange `ended` is over (holds the clock has passed first):
        a keyless request it left unanswered waits for its answer no more and joins its route (rule 2), as after
        `MAX_PENDING_SECONDS`; a task it opened stops waiting for its answer (`AgentEpisodes.ended`)."""
        if self.policy in (SessionKey.GLOBAL, SessionKey.CONNECTION):
            return []
        self._clock = max(self._clock, ended.timestamp)
        released = self.expire(self._clock) if self.next_release() <= self._clock else []
        unheld: list[Placed] = []
        for flow in dict.fromkeys(call[0] for call in ended.unanswered):
            if flow in self.pending:
                unheld.extend(self._hold_events(self._unpend(flow).events, self._clock))
        if (linker := self._linker()) is not None:
            linker.ended(ended)
        return released + self._placed(unheld)

    def _cancel(self, event: ObservedEvent, request: str | int) -> list[Placed]:
        """The client cancelled its request `request` (`event`, a `notifications/cancelled`): if that request waits
        for its answer (rule 1), its exchange joins its route (rule 2) now."""
        route = _route(event)
        for flow, held in self.pending.items():
            first = held.events[0]
            if first.sender == event.sender and first.jsonrpc_id == request and _route(first) == route:
                return self._hold_events(self._unpend(flow).events, self._clock)
        return []

    def _resolve(self, event: ObservedEvent) -> list[Placed]:
        if self.policy in (SessionKey.GLOBAL, SessionKey.CONNECTION):
            return [(event, session_of(event, self.policy))]
        self._clock = max(self._clock, event.timestamp)
        if (linker := self._linker()) is not None:
            linker.arrived(event)
        route = _route(event)
        self._touch(route, event.timestamp)
        session = self._key_of(event)
        decided = self.flow_session.get(event.flow_id, self._clock)
        if decided is not None:
            if session is not None and session != decided:
                self._remember(self.aliases, session, decided, MAX_FLOWS)  # the key joins the exchange's session
            return [(event, decided)]
        if session is None:
            if event.flow_id in self.pending:
                if event.sender == "client":
                    self._track([event])
                    self.pending[event.flow_id].events.append(event)
                    return []
                # The answer carries no key: the exchange joins its route (rule 2).
                return self._hold_on_route(route, [*self._unpend(event.flow_id).events, event])
            held = self.held.get(route)
            if held is not None and any(e.flow_id == event.flow_id for e in held.events):
                return self._hold_on_route(route, [event])  # its exchange waits there already
            if event.sender == "client" and _awaits_answer(event):
                return self._wait_for_answer(event)
            return self._hold_on_route(route, [event])
        self.flow_session.put(event.flow_id, session, self._clock)
        self._remember(self.last_session, route, session, MAX_ROUTES)
        flow = self._unpend(event.flow_id) if event.flow_id in self.pending else None
        held = self.held.pop(route, None)
        waiting = sorted([*(flow.events if flow else ()), *(held.events if held else ())], key=lambda e: e.seq)
        for item in held.events if held else ():
            self.flow_session.put(item.flow_id, session, self._clock)
        return [*((e, session) for e in waiting), (event, session)]

    def place(self, event: ObservedEvent) -> list[Placed]:
        """The events that can be placed once `event` is seen, in order: held events whose hold the clock
        (the latest event time) has passed, then `event` and any held events it releases."""
        self._clock = max(self._clock, event.timestamp)
        released = self.expire(self._clock) if self.next_release() <= self._clock else []
        return released + self.resolve(event)

    def oldest_held(self) -> float:
        """The time of the oldest event still held (infinity when none is). A run's timers must not fire past
        it: a held event may belong to the run, and the clock would end the run before it is placed (a slow
        answer, a keyless exchange waiting for its route)."""
        heap, held = self._held_times, self._held_seqs
        while heap and heap[0][1] not in held:
            heapq.heappop(heap)
        oldest = heap[0][0] if heap else float("inf")
        linker = self.agent_episodes
        return min(oldest, linker.oldest()) if linker is not None and linker.deferred else oldest

    @property
    def held_flows(self) -> Set[str]:
        """The flows with events on hold now (rules 1 and 2) or waiting in the agent episodes (`AgentEpisodes.
        waiting_flows`, rules 5 and 6): their matches, if any, are still to come."""
        linker = self._linker()
        waiting = linker.waiting_flows if linker is not None else None
        held = self._held_flows.flows
        return held | waiting if waiting else held

    def next_release(self) -> float:
        """When the oldest hold expires (infinity when nothing is held)."""
        linker = self._linker()
        due = linker.next_release() if linker is not None else float("inf")
        if self.held:
            due = next(iter(self.held.values())).since + HOLD_SECONDS
        if self.pending:
            return min(due, next(iter(self.pending.values())).since + MAX_PENDING_SECONDS)
        return due

    def expire(self, now: float) -> list[Placed]:
        """Release what has waited long enough: requests without an answer go to their route's hold, route
        holds to their route's session (rules 2 and 3)."""
        released: list[Placed] = []
        while self.pending:
            flow_id, flow = next(iter(self.pending.items()))
            if now < flow.since + MAX_PENDING_SECONDS:
                break
            released.extend(self._hold_events(self._unpend(flow_id).events, flow.since + MAX_PENDING_SECONDS))
        for route, held in list(self.held.items()):
            if now < held.since + HOLD_SECONDS:
                break
            if self.pending_routes[route]:
                continue  # a request of the route still waits for its answer, which may carry the key
            del self.held[route]
            released.extend(self._fallback(route, held))
        placed = self._placed(released)
        linker = self._linker()
        return placed + linker.expire(now) if linker is not None else placed

    def flush(self) -> list[Placed]:
        """Release everything held (shutdown, end of a recording)."""
        released = [pair for flow in self.pending.values() for pair in self._hold_events(flow.events, flow.since)]
        self.pending.clear()
        self.pending_routes.clear()
        released += [pair for route, held in self.held.items() for pair in self._fallback(route, held)]
        self.held.clear()
        placed = self._placed(released)
        linker = self._linker()
        return placed + linker.flush() if linker is not None else placed

    # --- helpers ------------------------------------------------------------------------------------------

    def _key_of(self, event: ObservedEvent) -> str | None:
        session = session_of(event, self.policy)
        return None if session.startswith("connection:") else self.aliases.get(session, session)

    def _wait_for_answer(self, event: ObservedEvent) -> list[Placed]:
        self._track([event])
        self.pending[event.flow_id] = _Held(self._clock, [event])
        self.pending_routes[_route(event)] += 1
        released: list[Placed] = []
        while len(self.pending) > MAX_PENDING_FLOWS:
            oldest = self._unpend(next(iter(self.pending)))
            released.extend(self._hold_events(oldest.events, oldest.since))
        return released

    def _unpend(self, flow_id: str) -> _Held:
        """A request's exchange stops waiting for its answer."""
        flow = self.pending.pop(flow_id)
        route = _route(flow.events[0])
        self.pending_routes[route] -= 1
        if not self.pending_routes[route]:
            del self.pending_routes[route]
        return flow

    def _track(self, events: list[ObservedEvent]) -> None:
        """Events put on hold: `oldest_held` sees them until they are placed."""
        for event in events:
            if event.seq not in self._held_seqs:
                self._held_seqs.add(event.seq)
                self._held_flows.add(event.flow_id)
                heapq.heappush(self._held_times, (event.timestamp, event.seq))
        if len(self._held_times) > 4 * len(self._held_seqs) + 1024:  # drop placed events' entries
            self._held_times = [t for t in self._held_times if t[1] in self._held_seqs]
            heapq.heapify(self._held_times)

    def _placed(self, placed: list[Placed]) -> list[Placed]:
        """Events leave the holds as they are placed, each in its episodes (rule 4)."""
        if self._held_seqs:
            held, flows = self._held_seqs, self._held_flows
            for event, _session in placed:
                if event.seq in held:
                    held.remove(event.seq)
                    flows.remove(event.flow_id)
        linker = self._linker()
        if linker is None:
            return placed
        return [pair for event, session in placed for pair in linker.link(event, session)]

    def _linker(self) -> AgentEpisodes | None:
        """The agent episodes when rules 4–6 apply (`auto`)."""
        return self.agent_episodes if self.policy is SessionKey.AUTO else None

    def _hold_on_route(self, route: Route, events: list[ObservedEvent]) -> list[Placed]:
        return self._hold_events(events, self._clock, route)

    def _hold_events(self, events: list[ObservedEvent], since: float, route: Route | None = None) -> list[Placed]:
        """Add events to their route's hold; a full hold is placed at once (rule 2's fallback)."""
        if not events:
            return []
        route = route or _route(events[0])
        held = self.held.get(route)
        if held is None:
            held = self.held[route] = _Held(since)
        self._track(events)
        held.events.extend(events)
        if len(held.events) < HOLD_EVENTS:
            return []
        del self.held[route]
        return self._fallback(route, held)

    def _fallback(self, route: Route, held: _Held) -> list[Placed]:
        session = self.last_session.get(route) or self._episode(route)
        events = sorted(held.events, key=lambda e: e.seq)
        for event in events:
            self.flow_session.put(event.flow_id, session, self._clock)
        return [(e, session) for e in events]

    def _touch(self, route: Route, at: float) -> None:
        """Rule 3's clock: a route idle longer than `idle_gap` starts a new episode at its next message."""
        episode = self.episodes.get(route)
        if episode is None:
            self._remember(self.episodes, route, _Episode(1, at), MAX_ROUTES)
            return
        if at - episode.last_seen > self.idle_gap:
            episode.number += 1
            self.last_session.pop(route, None)  # a keyed session seen before the gap does not absorb it
        episode.last_seen = max(episode.last_seen, at)
        self.episodes.move_to_end(route)

    def _episode(self, route: Route) -> str:
        episode = self.episodes.get(route)
        number = episode.number if episode is not None else 1
        client, host, port, protocol = route
        return f"agent:{client}>{host}:{port}/{protocol}#{number}"

    _remember = staticmethod(remember)
