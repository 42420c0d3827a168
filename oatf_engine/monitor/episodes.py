"""Agent episodes across protocols: an AG-UI run and the agent's outbound MCP and A2A traffic during it are one
episode (the README's "How traffic becomes runs", rule 4; issue 12).

**Who the agent is.** An agent is identified in each protocol by the endpoint it has there (format spec §5.3:
a server-mode actor's agent is the HTTP client, a client-mode actor's agent the HTTP server):
- AG-UI: the HTTP server (the agent serves `RunAgentInput`; an `ag_ui_client` actor plays the frontend);
- MCP, and A2A when the agent delegates: the HTTP client (the agent calls the servers that `mcp_server` and
  `a2a_server` actors play).
`oatf_agents=name=host[:port],…` names the agents behind one proxy (`AgentName`): an AG-UI server is agent
`name` when its host (and port, if given) match; an MCP or A2A client when its host matches (a client's port
is ephemeral). Without names, an agent is a host: the AG-UI server on host H and the MCP/A2A clients on H are
one agent, and the loopback names (`localhost`, `127.0.0.1`, `::1`) are one host. A stdio MCP server's client
(`oatf tap`, `oatf_engine.wire.ndjson`) is `<agent>:<server pid>`, the agent named by the tap's `--agent`: an
`oatf_agents` name, or else a host (by default the local host, `127.0.0.1`).

**Rule 4: the agent's outbound traffic during an AG-UI run joins that run's episode.** An AG-UI run is open
from its `RunAgentInput` (the request, SDK event `run_agent_input`) to `RUN_FINISHED` or `RUN_ERROR` on its
stream; a run the stream never closes ends `idle_gap` after the last traffic of its episode (two runs of
one thread open at once both gather, for the same episode). The episode is the run's thread
(`ag_ui_thread:<threadId>`: the runs of one thread are the turns of one conversation, which a multi-turn
attack follows). An MCP or A2A exchange whose HTTP client
is an agent, and whose first message comes while runs of that agent are open, belongs to the episodes of
those runs instead of its protocol session; every message of the exchange follows it (rule 1). Outside any
run, the agent's traffic stays in its protocol session (rules 1–3 of `sessions`).

**Two runs of one agent at once** (two AG-UI threads, one MCP client) are two episodes and never share a run;
an outbound exchange that comes while both are open cannot be told apart on the wire, so it joins **both**.
The alternative — joining neither, or guessing one — would take the agent's tool call away from the
episode whose user asked for it: a false `not_exploited` for an exploited agent, the worst error this tool
can make. Joining both can at worst show one exchange in two runs' evidence.

Sans-I/O: events (already placed in their protocol session) in, episodes out; bounded (`MAX_AGENTS`,
`MAX_FLOWS`, `MAX_OPEN_RUNS` and `CLOSED_KEPT` runs per agent).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..events import ObservedEvent

MAX_AGENTS = 10_000
MAX_FLOWS = 100_000
MAX_OPEN_RUNS = 1_000
"""AG-UI runs of one agent open at once; beyond it the oldest is ended (a flood of runs never finished)."""
CLOSED_KEPT = 32
"""Ended AG-UI runs remembered per agent: an exchange held by the session rules is placed after the run that
was open when it began may have ended, and still joins it (its time decides, not its placement)."""

_LOOPBACK = {"localhost": "127.0.0.1", "::1": "127.0.0.1", "::ffff:127.0.0.1": "127.0.0.1"}
_OUTBOUND = ("mcp", "a2a")
_RUN_ENDS = ("run_finished", "run_error")


def _host(host: str) -> str:
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
class _Run:
    """One AG-UI run of an agent: its thread's episode, and when it was open."""

    episode: str
    run_id: str
    opened: float
    last_seen: float
    closed: float | None = None


@dataclass
class _Agent:
    runs: list[_Run] = field(default_factory=list)
    """Open runs, then up to `CLOSED_KEPT` ended ones, oldest first."""


class AgentEpisodes:
    """Rule 4 (see the module docstring): the episodes an event placed in `session` belongs to."""

    def __init__(self, names: tuple[AgentName, ...] = (), idle_gap: float = 120.0) -> None:
        self.names = names
        self.idle_gap = idle_gap
        self.agents: OrderedDict[str, _Agent] = OrderedDict()
        self.flows: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        """The AG-UI episodes each outbound exchange joined, decided by its first message (empty: it stays in
        its protocol session)."""

    def server_agent(self, host: str, port: int) -> str | None:
        """The agent serving at `host:port` (AG-UI), or None when agents are named and none matches."""
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

    def link(self, event: ObservedEvent, session: str) -> tuple[str, ...]:
        """The episodes of `event`, which the session rules placed in `session`, in the order events are
        placed: AG-UI messages open and end runs; an agent's outbound exchange joins the runs open when it
        began."""
        if event.protocol == "ag_ui":
            self._follow_run(event, session)
            return (session,)
        if event.protocol not in _OUTBOUND:
            return (session,)
        joined = self.flows.get(event.flow_id)
        if joined is None:
            joined = self._open_at(event)
            remember(self.flows, event.flow_id, joined, MAX_FLOWS)
        if not joined:
            return (session,)
        self._seen(event, joined)
        return joined

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
            agent.runs.append(_Run(session, run_id, at, at))
            self._trim(agent, at)
        elif agent is not None:
            for run in agent.runs:
                if run.episode == session and run.closed is None and run.run_id in (run_id, ""):
                    run.last_seen = max(run.last_seen, at)
                    if event.event_type in _RUN_ENDS:
                        run.closed = at
        if agent is not None:
            remember(self.agents, agent_id, agent, MAX_AGENTS)

    def _open_at(self, event: ObservedEvent) -> tuple[str, ...]:
        """The episodes of the agent's runs open when an outbound exchange began (ended runs included: a
        held exchange may be placed after its run ended)."""
        agent_id = self.client_agent(event.client)
        agent = self.agents.get(agent_id) if agent_id is not None else None
        if agent is None:
            return ()
        at = event.timestamp
        episodes: list[str] = []
        for run in agent.runs:
            end = run.closed if run.closed is not None else run.last_seen + self.idle_gap
            if run.opened <= at <= end and run.episode not in episodes:
                episodes.append(run.episode)
        return tuple(episodes)

    def _seen(self, event: ObservedEvent, episodes: tuple[str, ...]) -> None:
        """Outbound traffic keeps its runs from going stale (`idle_gap`)."""
        agent_id = self.client_agent(event.client)
        agent = self.agents.get(agent_id) if agent_id is not None else None
        for run in agent.runs if agent is not None else ():
            if run.closed is None and run.episode in episodes:
                run.last_seen = max(run.last_seen, event.timestamp)

    def _trim(self, agent: _Agent, now: float) -> None:
        """Runs without traffic for `idle_gap` end; beyond `MAX_OPEN_RUNS` the oldest open run ends now; of
        the ended runs, the `CLOSED_KEPT` latest are kept."""
        runs = agent.runs
        for run in runs:
            if run.closed is None and now > run.last_seen + self.idle_gap:
                run.closed = run.last_seen + self.idle_gap
        open_runs = [run for run in runs if run.closed is None]
        for run in open_runs[:len(open_runs) - MAX_OPEN_RUNS]:
            run.closed = now
        ended = [run for run in runs if run.closed is not None]
        if len(ended) > CLOSED_KEPT:
            dropped = {id(run) for run in ended[:len(ended) - CLOSED_KEPT]}
            agent.runs = [run for run in runs if id(run) not in dropped]


def remember[K, V](table: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    """Put `key` last in a bounded table, dropping the oldest entries beyond `limit`."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)
