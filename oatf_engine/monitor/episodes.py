"""Agent episodes across protocols: an agent's AG-UI run or A2A task and the agent's outbound MCP and A2A traffic
during it are one episode (the README's "How traffic becomes runs", rules 4 to 6; issue 12).

**Who the agent is.** An agent is identified in each protocol by the endpoint it has there (format spec §5.3:
a server-mode actor's agent is the HTTP client, a client-mode actor's agent the HTTP server):
- AG-UI, and A2A when the agent is the remote agent: the HTTP server (the agent serves `RunAgentInput`, or
  `message/send`; an `ag_ui_client` or `a2a_client` actor plays its caller);
- MCP, and A2A when the agent delegates: the HTTP client (the agent calls the servers that `mcp_server` and
  `a2a_server` actors play).
`oatf_agents=name=host[:port],…` names the agents behind one proxy (`AgentName`): an AG-UI or A2A server is
agent `name` when its host (and port, if given) match; an MCP or A2A client when its host matches (a client's
port is ephemeral). Without names, an agent is a host: the servers on host H and the MCP/A2A clients on H are
one agent, and the loopback names (`localhost`, `127.0.0.1`, `::1`) are one host. A stdio MCP server's client
(`oatf tap`, `oatf_engine.wire.ndjson`) is `<agent>:<server pid>`, the agent named by the tap's `--agent`: an
`oatf_agents` name, or else a host (by default the local host, `127.0.0.1`).

**Rule 4: the agent's outbound traffic during one of its *work windows* joins the window's episode.** A window
is what the agent does for one caller:
- an **AG-UI run**, open from its `RunAgentInput` (the request, SDK event `run_agent_input`) to `RUN_FINISHED`
  or `RUN_ERROR` on its stream; its episode is the run's thread (`ag_ui_thread:<threadId>`: the runs of one
  thread are the turns of one conversation, which a multi-turn attack follows);
- an **A2A task**, open from a `message/send` or `message/stream` request to the agent until the agent's
  answer says it stopped working (`_ends_task`: a Message, a task or status update in a terminal or
  interrupted state, `final: true`, an error), in that exchange or in any carrying the task's `taskId` (a
  `tasks/get` answer, when the first answer only said `submitted`); its episode is the one its opening
  exchange is in — its context, `a2a_context:<contextId>`, or, when a caller delegated it from a window of its
  own, the caller's episode (a chain of agents is one episode).
A window without its end ends `idle_gap` after the last traffic of its episode, but never while its opening
request still waits for its answer (up to `MAX_ANSWER_WAIT`). An MCP or A2A exchange whose HTTP client is an
agent, and whose first message comes while windows of that agent are open, belongs to the episodes of those
windows instead of its protocol session (an A2A exchange addressed to the agent itself is not outbound: it
joins none of that agent's tasks); every message of the exchange follows it (rule 1). Outside any window,
the agent's traffic stays in its protocol session (rules 1–3 of `sessions`).

**Rule 5: a task's episode is known once its opening exchange is placed.** The first `message/send` of a
conversation carries no `contextId`: the session rules hold it until its answer brings one, and a slow agent
answers after its work, which includes its outbound calls. So a task is registered when its request
*arrives* (`arrived`), and an outbound exchange that begins during a task whose episode is not yet known waits
(`deferred`) until it is; the monitor's clock stops at it as at any held event (`oldest`).

**Rule 6: set-up traffic joins the episodes it serves.** An agent's set-up exchanges (`SETUP_EVENTS`: MCP
`initialize`, listings and `server/discover`; A2A Agent Card fetches) that begin outside any window — at
start-up, before the user's first run — serve the windows that later use the same server. They wait,
*parked*, for that: when an exchange on their route (agent, server, protocol) joins episodes, the route's
set-up exchanges are placed in those episodes, first (`SETUP_FLOWS` per route), and in each later episode the
route serves once. They go to their own protocol session (and stay remembered for later episodes) when the
route acts outside any window (the agent sends anything but set-up: a plain MCP client's first `tools/call`;
then at once, before it, and the route's later set-up goes there at once), after `idle_gap`, or at the end of
the traffic. Parked events do not stop the clock: no run exists yet that they
could join late; a session that only sets up gets its run `idle_gap` later.

**Two windows of one agent at once** (two AG-UI threads, one MCP client) are two episodes and never share a
run; an outbound exchange that comes while both are open cannot be told apart on the wire, so it joins
**both**. The alternative — joining neither, or guessing one — would take the agent's tool call away from the
episode whose user asked for it: a false `not_exploited` for an exploited agent, the worst error this tool
can make. Joining both can at worst show one exchange in two runs' evidence.

**An answer in another flow follows its request** (rule 1 across exchanges): the legacy HTTP+SSE transport
answers a POST on its GET stream, and the GET stream is an exchange of its own, opened at start-up. A JSON-RPC
response in a server's stream (a flow whose first message the server sent) is placed where the exchange of the
request it answers (same session, same id) was placed:
with a parked set-up exchange (so a `tools/list` answer joins the episodes its listing serves, after its
request), with a deferred one, in the windows it joined. So a request is always placed before its answer.

An exchange that ended without the answer of its request (`ExchangeEnded`, `ended`) no longer keeps the task it
opened from going quiet.

Sans-I/O: events (already placed in their protocol session) in, (event, episode) pairs out; bounded
(`MAX_AGENTS`, `MAX_FLOWS`, `MAX_OPEN_RUNS` and `CLOSED_KEPT` windows per agent, `MAX_DEFERRED`,
`MAX_ROUTES` × `SETUP_FLOWS`): what a bound pushes out is placed early, never dropped.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections import OrderedDict
from collections.abc import Iterable, KeysView
from dataclasses import dataclass, field
from typing import Literal

from ..events import UNINSPECTED_EVENT, ExchangeEnded, ObservedEvent, awaits_answer, may_answer
from ..wire.a2a import FINAL_STATES
from .flow_counts import FlowCounts
from .recent import RecentFlows

MAX_AGENTS = 10_000
MAX_FLOWS = 100_000
MAX_OPEN_RUNS = 1_000
"""Windows of one agent open at once; beyond it the oldest is ended (a flood of runs never finished)."""
CLOSED_KEPT = 32
"""Ended windows remembered per agent: an exchange held by the session rules is placed after the window that
was open when it began may have ended, and still joins it (its time decides, not its placement)."""
MAX_ANSWER_WAIT = 300.0
"""How long a request waits for the first message of its answer: the session rules hold a keyless request
that long (`sessions`, rule 1), an A2A task whose opening request is unanswered stays open that long, and so
does a run whose traffic holds an unanswered request (`answers`)."""
MAX_DEFERRED = 1_000
"""Outbound exchanges waiting for a task's episode (rule 5); beyond it the oldest is placed at once, in the
windows whose episode is known."""
SETUP_FLOWS = 8
"""Set-up exchanges remembered per route (rule 6), the latest."""
SETUP_EVENTS_KEPT = 16
"""Messages of one set-up exchange copied into later episodes (a listing is one request and one answer)."""
MAX_ROUTES = 1_000
"""Routes whose set-up exchanges are remembered (each keeps its messages, listings included: a few MB at most
per route)."""

SETUP_EVENTS: dict[str, frozenset[str]] = {
    "mcp": frozenset({"initialize", "notifications/initialized", "server/discover", "tools/list", "prompts/list",
                      "resources/list", "resources/templates/list"}),
    "a2a": frozenset({"agent_card/get", "agent/getAuthenticatedExtendedCard"}),
}
"""Requests with which an agent learns a server before using it (rule 6): their answers (tool, prompt and
resource descriptions, server instructions, Agent Cards) reach the model in every later window."""
TASK_OPENERS = frozenset({"message/send", "message/stream"})

_LOOPBACK = {"localhost": "127.0.0.1", "::1": "127.0.0.1", "::ffff:127.0.0.1": "127.0.0.1"}
_OUTBOUND = ("mcp", "a2a")
_RUN_ENDS = ("run_finished", "run_error")

Placed = tuple[ObservedEvent, str]
"""An event and one session (episode) it is placed in."""
Route = tuple[str, str, int, str]
"""(agent, server host, server port, protocol): the server an agent's set-up exchange learned (rule 6)."""


@functools.lru_cache(maxsize=1024)
def _host(host: str) -> str:
    """A host as the rules compare hosts: brackets off, lower case, loopback names as one (remembered: every
    event asks)."""
    host = host.strip("[]").lower()
    return _LOOPBACK.get(host, host)


@dataclass(frozen=True)
class AgentName:
    """One named agent: `name=host[:port]` (option `oatf_agents`)."""

    name: str
    host: str
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> AgentName:
        name, sep, target = text.partition("=")
        host, colon, port = target.strip().rpartition(":") if target.count(":") == 1 else (target.strip(), "", "")
        if not sep or not name.strip() or not host:
            raise ValueError(f"agent {text!r} must look like name=host[:port]")
        if colon and not port.isdigit():
            raise ValueError(f"agent {text!r}: port {port!r} is not a number")
        return cls(name.strip(), _host(host), int(port) if colon else None)


def parse_agents(text: str) -> tuple[AgentName, ...]:
    """`name=host[:port],…` as agent names (empty: agents are hosts)."""
    return tuple(AgentName.parse(part) for part in text.split(",") if part.strip())


@dataclass
class _Window:
    """One AG-UI run or A2A task of an agent: when it was open, and the episodes its agent's calls join."""

    kind: Literal["ag_ui", "a2a"]
    opener: str
    """The flow of the request that opened it."""
    episodes: tuple[str, ...] | None
    """None while the opening exchange is not placed (an A2A task's first request, held for its answer)."""
    run_id: str
    """The AG-UI `runId`, or the A2A `taskId` once known."""
    opened: float
    last_seen: float
    closed: float | None = None
    awaiting: bool = False
    """An A2A task whose opening request has no answer yet: open whatever the idle gap."""

    def end(self, idle_gap: float) -> float:
        if self.closed is not None:
            return self.closed
        if self.episodes is None:
            return float("inf")
        quiet = self.last_seen + idle_gap
        return max(quiet, self.opened + MAX_ANSWER_WAIT) if self.awaiting else quiet


@dataclass
class _Agent:
    runs: list[_Window] = field(default_factory=list)
    """Open windows, then up to `CLOSED_KEPT` ended ones, oldest first."""


@dataclass
class _Deferred:
    """An outbound exchange waiting for the episodes of the tasks open when it began (rule 5)."""

    waiting: set[str]
    """The opening flows of those tasks."""
    events: list[Placed] = field(default_factory=list)


@dataclass
class _Setup:
    """One set-up exchange of an agent, begun outside its windows (rule 6)."""

    route: Route
    events: list[Placed] = field(default_factory=list)
    placed_in: list[str] = field(default_factory=list)
    """Where its messages went (its protocol session, the episodes its route served); empty: parked."""
    parked_since: float | None = None


def asks_for_work(event: ObservedEvent) -> bool:
    """Whether a client's message asks an agent to work (it opens a window: an A2A `message/send` or
    `message/stream`, an AG-UI `RunAgentInput`), so that its answer may come only after the work. A request not
    inspected (an oversize `message/send`) asks so when its mark names such a method (read from its first bytes,
    `oatf_engine.wire.decoder`): the agent's calls while it works join the task, whose run then reads
    `inconclusive` for the message not inspected, where alone they could read `resisted`."""
    if event.sender != "client":
        return False
    if event.event_type == UNINSPECTED_EVENT:
        return event.protocol == "a2a" and isinstance(event.content, dict) and event.content.get(
            "method") in TASK_OPENERS
    return (event.protocol == "a2a" and event.event_type in TASK_OPENERS) or event.event_type == "run_agent_input"


def _ends_task(event: ObservedEvent) -> bool:
    """Whether the agent's message says it stopped working on the task (see the module docstring)."""
    content = event.content
    if event.is_error:
        return True
    if not isinstance(content, dict):
        return False
    kind = content.get("kind")
    status = content.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    return kind == "message" or (kind in ("task", "status-update") and state in FINAL_STATES) or (
        kind == "status-update" and content.get("final") is True)


class AgentEpisodes:
    """Rules 4 to 6 (see the module docstring): the episodes an event placed in `session` belongs to."""

    def __init__(self, names: tuple[AgentName, ...] = (), idle_gap: float = 120.0) -> None:
        self.names = names
        self.idle_gap = idle_gap
        self.agents: OrderedDict[str, _Agent] = OrderedDict()
        self.flows: RecentFlows[tuple[str, ...]] = RecentFlows(MAX_FLOWS, MAX_ANSWER_WAIT)
        """The episodes each outbound exchange joined, decided by its first message (empty: it stays in its
        protocol session); forgotten once the exchange has been quiet for `MAX_ANSWER_WAIT` (`recent`)."""
        self._clock = float("-inf")
        """The latest event time seen."""
        self.opening: OrderedDict[str, _Window] = OrderedDict()
        """A2A tasks whose opening exchange is not placed yet, by its flow (rule 5)."""
        self.deferred: OrderedDict[str, _Deferred] = OrderedDict()
        """Outbound exchanges waiting for them, by flow, oldest first."""
        self.setup: OrderedDict[Route, OrderedDict[str, _Setup]] = OrderedDict()
        """Set-up exchanges by route, oldest first (rule 6)."""
        self.setup_flows: dict[str, _Setup] = {}
        self.acting: OrderedDict[Route, bool] = OrderedDict()
        """Routes that acted outside any window: their set-up is their session's at once (rule 6)."""
        self.requests: OrderedDict[tuple[str, str | int], str] = OrderedDict()
        """(session, JSON-RPC id) → the flow of a request whose exchange is not simply placed in its session (set-up,
        deferred, or in windows), until its answer: an answer in another flow follows it there."""
        self.streams: OrderedDict[str, None] = OrderedDict()
        """Flows whose first message the server sent (a GET stream): the only ones whose answers may follow
        requests of other flows (`_request_flow`)."""
        self.awaiting_tasks: OrderedDict[str, _Window] = OrderedDict()
        """A2A tasks whose opening request waits for its answer, by its flow."""
        self._parked: list[tuple[float, int, _Setup]] = []
        """(parked since, order, set-up exchange) of the parked ones, a heap; entries of released ones are
        dropped lazily."""
        self._order = itertools.count()
        self._waiting = FlowCounts()
        """The messages deferred or parked here, per flow (`waiting_flows`)."""

    # --- who is who -----------------------------------------------------------------------------------------

    def server_agent(self, host: str, port: int) -> str | None:
        """The agent serving at `host:port` (AG-UI, A2A), or None when agents are named and none matches."""
        host = _host(host)
        if not self.names:
            return host
        return next((a.name for a in self.names if a.host == host and a.port in (None, port)), None)

    def client_agent(self, client: str) -> str | None:
        """The agent that is the HTTP client at `client` (`host:port`, or a stdio server's `<agent>:<pid>`), or
        None (see `server_agent`)."""
        given = client.rpartition(":")[0] or client
        host = _host(given)
        if not self.names:
            return host
        return next((a.name for a in self.names if a.host == host or a.name == given), None)

    # --- events in ------------------------------------------------------------------------------------------

    def arrived(self, event: ObservedEvent) -> None:
        """An event reached the session rules (before they place it): an A2A request to an agent opens a task
        now, whatever the rules hold (rule 5)."""
        if event.protocol != "a2a" or not asks_for_work(event):
            return
        agent_id = self.server_agent(event.endpoint.host, event.endpoint.port)
        if agent_id is None or event.flow_id in self.opening:
            return
        agent = self.agents.get(agent_id) or _Agent()
        at = event.timestamp
        window = _Window("a2a", event.flow_id, None, event.session_keys.get("a2a_task", ""), at, at, awaiting=True)
        agent.runs.append(window)
        self._trim(agent, at)
        remember(self.agents, agent_id, agent, MAX_AGENTS)
        remember(self.opening, event.flow_id, window, MAX_FLOWS)
        remember(self.awaiting_tasks, event.flow_id, window, MAX_FLOWS)

    def ended(self, ended: ExchangeEnded) -> None:
        """An exchange ended leaving requests unanswered: a task whose opening request it was waits no more."""
        for flow, _side, _id in ended.unanswered:
            window = self.awaiting_tasks.pop(flow, None)
            if window is not None:
                window.awaiting = False

    def link(self, event: ObservedEvent, session: str) -> list[Placed]:
        """The placements of `event`, which the session rules placed in `session`, in the order events are
        placed (none while it waits; with it, the events it releases): AG-UI messages open and end runs, A2A
        messages tasks; an agent's outbound exchange joins the windows open when it began."""
        if event.protocol == "ag_ui":
            self._follow_run(event, session)
            return [(event, session)]
        if event.protocol not in _OUTBOUND:
            return [(event, session)]
        flow = event.flow_id
        self._clock = max(self._clock, event.timestamp)
        if self.requests and event.sender == "server" and may_answer(event):
            flow = self._request_flow(event, session)
        deferred = self.deferred.get(flow)
        if deferred is not None:
            deferred.events.append((event, session))
            self._wait(event)
            self._follow_answer(event, session)
            return []
        setup = self.setup_flows.get(flow)
        if setup is not None:
            self._follow_answer(event, session)
            if len(setup.events) < SETUP_EVENTS_KEPT:
                setup.events.append((event, session))
                if setup.parked_since is not None:
                    self._wait(event)
                return [(event, episode) for episode in setup.placed_in]
            # A bound: a parked exchange that outgrows it goes to its session now, with its route's, never dropped.
            unparked = self._unpark(self.setup.get(setup.route)) if setup.parked_since is not None else []
            return unparked + [(event, episode) for episode in setup.placed_in]
        placed: list[Placed] = []
        joined = self.flows.get(flow, self._clock)
        if joined is None:
            if event.sender == "server":  # a server's stream: answers in it may follow their requests' exchanges
                remember(self.streams, flow, None, MAX_FLOWS)
            agent_id = self.client_agent(event.client)
            joined, undecided = self._open_at(event, agent_id)
            if undecided:
                self._follow_answer(event, session)
                return self._defer(flow, undecided, event, session)
            self.flows.put(flow, joined, self._clock)
            route = None if agent_id is None else (agent_id, _host(event.endpoint.host), event.endpoint.port,
                                                   event.protocol)
            if route is not None and joined:
                placed += self._setup_into(route, joined)
            elif route is not None and event.sender == "client" and event.event_type in SETUP_EVENTS[event.protocol]:
                self._follow_answer(event, session)
                return self._new_setup(route, event, session)
            elif route is not None and event.sender == "client":
                placed += self._acted(route)
        episodes = joined or (session,)
        if joined:
            self._seen(event, joined)
            self._follow_answer(event, session)
        placed += [(event, episode) for episode in episodes]
        if event.protocol == "a2a":
            placed += self._follow_task(event, episodes)
        return placed

    def _request_flow(self, event: ObservedEvent, session: str) -> str:
        """The flow whose placement a server's JSON-RPC response follows: its own; or, in a server's stream (a flow
        whose first message the server sent: the legacy transport's GET stream), the flow of the registered
        request it answers (see the module docstring). Ids are reused across exchanges (each HTTP exchange
        answers its own), so an exchange that carried requests keeps its answers."""
        flow, answered = event.flow_id, event.jsonrpc_id
        if answered is None:
            return flow
        key = (session, answered)
        owner = self.requests.get(key)
        if owner is None:
            return flow
        if owner != flow:
            if flow not in self.streams:
                if self.flows.get(flow, self._clock) is not None or flow in self.setup_flows or flow in self.deferred:
                    return flow  # an exchange with requests of its own
                remember(self.streams, flow, None, MAX_FLOWS)
            else:
                self.streams.move_to_end(flow)
        del self.requests[key]
        return owner

    def _follow_answer(self, event: ObservedEvent, session: str) -> None:
        """A client's JSON-RPC request in an exchange not simply placed in its session: its answer, should it come
        in another flow, follows it (see the module docstring)."""
        if event.sender == "client" and event.jsonrpc_id is not None and awaits_answer(event):
            remember(self.requests, (session, event.jsonrpc_id), event.flow_id, MAX_FLOWS)

    # --- time and the end -----------------------------------------------------------------------------------

    def oldest(self) -> float:
        """The time of the oldest event waiting for a task's episode (infinity when none is): the monitor's
        clock must not pass it (`SessionResolver.oldest_held`)."""
        return min((d.events[0][0].timestamp for d in self.deferred.values() if d.events), default=float("inf"))

    @property
    def waiting_flows(self) -> KeysView[str]:
        """The flows with messages waiting here, not placed yet: deferred exchanges (rule 5) and parked set-up
        (rule 6; a listing's answer with its request). Their matches, if any, are still to come."""
        return self._waiting.flows

    def _wait(self, event: ObservedEvent) -> None:
        """`event` waits here (deferred, or parked): counted in `waiting_flows` until it is placed."""
        self._waiting.add(event.flow_id)

    def _unwait(self, events: Iterable[Placed]) -> None:
        """These waiting events are placed now (or about to be)."""
        for event, _session in events:
            self._waiting.remove(event.flow_id)

    def next_release(self) -> float:
        """When the oldest parked set-up exchange stops waiting for a window (infinity when none does)."""
        heap = self._parked
        while heap and heap[0][2].parked_since != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] + self.idle_gap if heap else float("inf")

    def expire(self, now: float) -> list[Placed]:
        """Parked set-up that waited `idle_gap` goes to its protocol sessions, a route's all at once (placed
        behind the clock, a session's messages must not be split by a timer firing between them)."""
        placed: list[Placed] = []
        while self.next_release() <= now:
            placed += self._unpark(self.setup.get(heapq.heappop(self._parked)[2].route))
        return placed

    def flush(self) -> list[Placed]:
        """Release everything that waits (the end of the traffic): deferred exchanges join the windows whose
        episode is known, parked set-up goes to its sessions."""
        placed: list[Placed] = []
        while self.deferred:
            placed += self._release_oldest()
        return placed + [item for kept in list(self.setup.values()) for item in self._unpark(kept)]

    # --- windows --------------------------------------------------------------------------------------------

    def _follow_run(self, event: ObservedEvent, session: str) -> None:
        agent_id = self.server_agent(event.endpoint.host, event.endpoint.port)
        if agent_id is None or not session.startswith("ag_ui_thread:"):
            return
        agent = self.agents.get(agent_id)
        run_id = event.session_keys.get("ag_ui_run", "")
        at = event.timestamp
        if event.event_type == "run_agent_input":
            if agent is None:
                agent = self.agents[agent_id] = _Agent()
            agent.runs.append(_Window("ag_ui", event.flow_id, (session,), run_id, at, at))
            self._trim(agent, at)
        elif agent is not None:
            for run in agent.runs:
                if (run.kind == "ag_ui" and run.episodes == (session,) and run.closed is None
                        and run.run_id in (run_id, "")):
                    run.last_seen = max(run.last_seen, at)
                    if event.event_type in _RUN_ENDS:
                        run.closed = at
        if agent is not None:
            remember(self.agents, agent_id, agent, MAX_AGENTS)

    def _follow_task(self, event: ObservedEvent, episodes: tuple[str, ...]) -> list[Placed]:
        """An A2A message of a task's exchange (or naming its task): the opening request decides the task's
        episodes (releasing the exchanges that waited for them); the agent's answers keep it open or end it."""
        window = self.opening.pop(event.flow_id, None)
        released = self._decided(event.flow_id, window, episodes) if window is not None else []
        agent_id = self.server_agent(event.endpoint.host, event.endpoint.port)
        agent = self.agents.get(agent_id) if agent_id is not None else None
        task = event.session_keys.get("a2a_task", "")
        for run in agent.runs if agent is not None else ():
            if run.kind != "a2a" or run.closed is not None or not (
                    run.opener == event.flow_id or (task and run.run_id == task)):
                continue
            run.run_id = task or run.run_id
            run.last_seen = max(run.last_seen, event.timestamp)
            if event.sender != "server":
                continue
            if run.opener == event.flow_id:
                run.awaiting = False
                self.awaiting_tasks.pop(event.flow_id, None)
            if _ends_task(event):
                run.closed = event.timestamp
        return released

    def _open_at(self, event: ObservedEvent, agent_id: str | None) -> tuple[tuple[str, ...], set[str]]:
        """The episodes of the windows of the agent `agent_id` (the exchange's client) open when an outbound
        exchange began (ended ones included: a held exchange may be placed after its window ended), and the
        opening flows of those whose episodes are not known yet."""
        agent = self.agents.get(agent_id) if agent_id is not None else None
        if agent is None:
            return (), set()
        to_itself = event.protocol == "a2a" and self.server_agent(event.endpoint.host, event.endpoint.port) == agent_id
        at = event.timestamp
        episodes: list[str] = []
        undecided: set[str] = set()
        for run in agent.runs:
            if (run.kind == "a2a" and to_itself) or not run.opened <= at <= run.end(self.idle_gap):
                continue
            if run.episodes is None:
                undecided.add(run.opener)
            else:
                episodes += [episode for episode in run.episodes if episode not in episodes]
        return tuple(episodes), undecided

    def _seen(self, event: ObservedEvent, episodes: tuple[str, ...]) -> None:
        """Outbound traffic keeps its windows from going stale (`idle_gap`)."""
        agent_id = self.client_agent(event.client)
        agent = self.agents.get(agent_id) if agent_id is not None else None
        for run in agent.runs if agent is not None else ():
            if run.closed is None and run.episodes is not None and set(run.episodes) & set(episodes):
                run.last_seen = max(run.last_seen, event.timestamp)

    def _trim(self, agent: _Agent, now: float) -> None:
        """Windows without traffic for `idle_gap` end; beyond `MAX_OPEN_RUNS` the oldest open one ends now; of
        the ended ones, the `CLOSED_KEPT` latest are kept."""
        runs = agent.runs
        for run in runs:
            if run.closed is None and now > run.end(self.idle_gap):
                run.closed = run.end(self.idle_gap)
        open_runs = [run for run in runs if run.closed is None]
        for run in open_runs[:len(open_runs) - MAX_OPEN_RUNS]:
            run.closed = now
        ended = [run for run in runs if run.closed is not None]
        if len(ended) > CLOSED_KEPT:
            dropped = {id(run) for run in ended[:len(ended) - CLOSED_KEPT]}
            agent.runs = [run for run in runs if id(run) not in dropped]

    # --- rule 5: waiting for a task's episode ---------------------------------------------------------------

    def _defer(self, flow: str, undecided: set[str], event: ObservedEvent, session: str) -> list[Placed]:
        self.deferred[flow] = _Deferred(undecided, [(event, session)])
        self._wait(event)
        placed: list[Placed] = []
        while len(self.deferred) > MAX_DEFERRED:
            placed += self._release_oldest()
        return placed

    def _decided(self, opener: str, window: _Window, episodes: tuple[str, ...]) -> list[Placed]:
        """A task's episodes are known: the exchanges that waited for it alone are placed now."""
        window.episodes = episodes
        placed: list[Placed] = []
        for flow, deferred in list(self.deferred.items()):
            deferred.waiting.discard(opener)
            if not deferred.waiting and self.deferred.get(flow) is deferred:
                del self.deferred[flow]
                self._unwait(deferred.events)
                for item in deferred.events:
                    placed += self.link(*item)
        return placed

    def _release_oldest(self) -> list[Placed]:
        """Place the oldest deferred exchange now, in the windows whose episode is known (a bound, the end)."""
        flow, deferred = self.deferred.popitem(last=False)
        self._unwait(deferred.events)
        first = deferred.events[0][0]
        joined, _undecided = self._open_at(first, self.client_agent(first.client))
        self.flows.put(flow, joined, self._clock)
        placed: list[Placed] = []
        for item in deferred.events:
            placed += self.link(*item)
        return placed

    # --- rule 6: set-up traffic -----------------------------------------------------------------------------

    def _new_setup(self, route: Route, event: ObservedEvent, session: str) -> list[Placed]:
        """A set-up exchange begins outside the agent's windows: parked, and remembered for the episodes its
        route serves later."""
        self.flows.pop(event.flow_id)
        acting = route in self.acting
        setup = _Setup(route, [(event, session)], [session] if acting else [], None if acting else event.timestamp)
        self.setup_flows[event.flow_id] = setup
        if not acting:
            heapq.heappush(self._parked, (event.timestamp, next(self._order), setup))
            self._wait(event)
        kept = self.setup.get(route) or OrderedDict()
        kept[event.flow_id] = setup
        placed: list[Placed] = [(event, session)] if acting else []
        while len(kept) > SETUP_FLOWS:
            flow, old = kept.popitem(last=False)
            placed = self._forget(flow, old) + placed
        self.setup[route] = kept
        self.setup.move_to_end(route)
        while len(self.setup) > MAX_ROUTES:
            _route, dropped = self.setup.popitem(last=False)
            for flow, old in dropped.items():
                placed = self._forget(flow, old) + placed
        return placed

    def _forget(self, flow: str, setup: _Setup) -> list[Placed]:
        del self.setup_flows[flow]
        return self._unpark_one(setup)

    def _setup_into(self, route: Route, episodes: tuple[str, ...]) -> list[Placed]:
        """The route serves `episodes`: its set-up exchanges are placed in them, each once."""
        placed: list[Placed] = []
        for setup in (self.setup.get(route) or {}).values():
            new = [episode for episode in episodes if episode not in setup.placed_in]
            setup.placed_in += new
            if setup.parked_since is not None:
                self._unwait(setup.events)
            setup.parked_since = None
            placed += [(event, episode) for episode in new for event, _session in setup.events]
        return placed

    def _acted(self, route: Route) -> list[Placed]:
        """The route acts outside any window (a plain client's first call): its parked set-up goes to its
        session now, and its later set-up there at once."""
        if route not in self.acting:
            remember(self.acting, route, True, MAX_ROUTES)
        return self._unpark(self.setup.get(route))

    def _unpark(self, kept: OrderedDict[str, _Setup] | None) -> list[Placed]:
        """A route's parked set-up goes to its sessions, in the order it was sent."""
        if not kept:
            return []
        placed = [item for setup in kept.values() for item in self._unpark_one(setup)]
        return sorted(placed, key=lambda item: item[0].seq)

    def _unpark_one(self, setup: _Setup) -> list[Placed]:
        """A parked set-up exchange goes to its protocol session (all its messages share one: rule 1)."""
        if setup.parked_since is None:
            return []
        self._unwait(setup.events)
        setup.parked_since = None
        session = setup.events[0][1]
        setup.placed_in.append(session)
        return [(event, session) for event, _session in setup.events]


def remember[K, V](table: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    """Put `key` last in a bounded table, dropping the oldest entries beyond `limit`."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)
