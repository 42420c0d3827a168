"""One actor's phase machine as a passive observer sees it (format spec §5.2–§5.5, SDK spec §5.8).

An actor advances through its phases on the events its trigger names, counted per phase, or when `after`
elapses; extractors of the current phase capture values from the actor's messages. The observer learns
nothing else about the attacker's state: it follows the document's phases as the traffic advances them.

Which events an actor's triggers see (format spec §5.3 "An actor's mode determines event direction"): the
messages the agent sends. A server-mode actor (`mcp_server`, `a2a_server`) plays the server, so the agent is
the HTTP client and its messages arrive in HTTP requests; a client-mode actor's agent is the HTTP server.

Which endpoint plays an actor (format spec §5.1 multi-actor execution): its *peer* in the episode, the other
side of the agent — the HTTP server (`host:port`) for a server-mode actor, the HTTP client's host for a
client-mode one (`peer_of`). When a document has several actors of one protocol and role (two `mcp_server`
actors: a trusted server and a poisoned one), each binds to the peer whose message first carries its payload
(`AttackRun`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import oatf

from ..events import ObservedEvent


@dataclass
class PhaseChange:
    """An actor entered a new phase."""

    actor: str
    from_phase: str
    to_phase: str
    reason: str  # "event_matched" | "timeout"
    flow_id: str | None
    timestamp: float


def peer_of(event: ObservedEvent, agent_side: str) -> str:
    """The endpoint on the other side of the agent (see the module docstring): the HTTP server's `host:port`
    when the agent is the HTTP client, else the HTTP client's host (its port changes with every connection).
    Paths are left out: one A2A agent serves its card and its JSON-RPC at different paths."""
    if agent_side == "client":
        return f"{event.endpoint.host}:{event.endpoint.port}"
    return event.client.rpartition(":")[0] or event.client


TIMER_SLACK = 1e-6
"""Seconds added to an `after` deadline: the trigger compares elapsed time in whole microseconds."""


def actor_name(actor: oatf.Actor) -> str:
    """The actor's name in reports and actor bindings (`default` for a single unnamed actor)."""
    return actor.name or "default"


def agent_side(actor: oatf.Actor) -> str:
    """The HTTP side the agent is on, seen from `actor`'s mode (see the module docstring)."""
    return "client" if (actor.mode or "").endswith("_server") else "server"


@dataclass(slots=True)
class ActorMachine:
    actor: oatf.Actor
    entered_at: float
    index: int = 0
    trigger_state: oatf.TriggerState = field(default_factory=oatf.TriggerState)
    extracted: dict[str, str] = field(default_factory=dict)
    phases_reached: list[str] = field(default_factory=list)

    peer: str | None = None
    """The endpoint bound to play this actor in its run (`peer_of`), or None: every peer of its protocol."""

    name: str = field(init=False)
    protocol: str = field(init=False)
    agent_side: str = field(init=False)
    """The HTTP side the agent is on, seen from this actor's mode."""
    phase: oatf.Phase = field(init=False)
    """The current phase."""

    def __post_init__(self) -> None:
        self.name = actor_name(self.actor)
        self.protocol = oatf.extract_protocol(self.actor.mode or "")
        self.agent_side = agent_side(self.actor)
        self.phase = self.actor.phases[self.index]
        self.phases_reached.append(self.phase.name or "phase-1")

    @property
    def terminal(self) -> bool:
        """In its terminal phase (the one without a trigger), or past the last phase."""
        return self.phase.trigger is None

    @property
    def movable(self) -> bool:
        """An event may still change it (`observe`): its phase has a trigger or an extractor."""
        return self.phase.trigger is not None or bool(self.phase.extractors)

    def deadline(self) -> float:
        """When the current phase's `after` timer fires (infinity without one)."""
        trigger = self.phase.trigger
        if trigger is None or trigger.after is None:
            return float("inf")
        return self.entered_at + oatf.parse_duration(trigger.after).total_seconds() + TIMER_SLACK

    def moved_by(self, event: ObservedEvent) -> bool:
        """Whether `observe(event)` may change this actor in its phase: an extractor of the event's direction,
        or its trigger evaluated on the event (the agent's message, of the trigger's event type or with
        `after`)."""
        phase = self.phase
        if phase.extractors and any(e.source == event.direction for e in phase.extractors):
            return True
        trigger = phase.trigger
        return trigger is not None and event.sender == self.agent_side and (
            trigger.after is not None or trigger.event == event.event_type)

    def observe(self, event: ObservedEvent) -> PhaseChange | None:
        """Extract, then evaluate the current phase's trigger on an event of this actor's traffic."""
        phase = self.phase
        if phase.extractors:
            self._extract(event)
        trigger = phase.trigger
        if trigger is None or event.sender != self.agent_side:
            return None
        if trigger.after is None and trigger.event != event.event_type:
            return None  # `evaluate_trigger` would leave the state alone (SDK spec §5.8 step 2)
        result = oatf.evaluate_trigger(trigger, oatf.ProtocolEvent(event.event_type, event.content),
                                       timedelta(seconds=max(0.0, event.timestamp - self.entered_at)),
                                       self.trigger_state)
        return self._advance(result, event.flow_id, event.timestamp)

    def tick(self, now: float) -> PhaseChange | None:
        """Fire an `after` timer that has elapsed: the phase changes at the timer's deadline (not at `now`,
        which may be later), so the times in a report do not depend on when the clock was read."""
        trigger = self.phase.trigger
        if trigger is None or trigger.after is None:
            return None
        result = oatf.evaluate_trigger(trigger, None, timedelta(seconds=max(0.0, now - self.entered_at)),
                                       self.trigger_state)
        return self._advance(result, None, min(now, self.deadline()))

    def _advance(self, result: oatf.TriggerResult, flow_id: str | None, now: float) -> PhaseChange | None:
        if not result.advanced or self.index + 1 >= len(self.actor.phases):
            return None
        previous = self.phase.name or f"phase-{self.index + 1}"
        self.index += 1
        self.phase = self.actor.phases[self.index]
        self.entered_at = now
        self.trigger_state = oatf.TriggerState()
        current = self.phase.name or f"phase-{self.index + 1}"
        self.phases_reached.append(current)
        return PhaseChange(self.name, previous, current, str(result.reason), flow_id, now)

    def _extract(self, event: ObservedEvent) -> None:
        """Format spec §5.5: an extractor reads the messages of its `source`, the event's §6.1 `direction`
        (`request`: sent by the HTTP client, whichever actor mode; see `oatf_engine.events`)."""
        for extractor in self.phase.extractors or ():
            value = oatf.evaluate_extractor(extractor, event.content, event.direction)
            if value is not None and extractor.name:
                self.extracted[extractor.name] = value[:1000]
