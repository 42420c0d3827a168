"""What of the traffic can concern one attack, worked out once per loaded document, so that the monitor's
work per message is proportional to what matters to each attack rather than to the document's size.

- `protocols`: the protocols of the attack's actors (format spec §5.1 `actor.mode`); traffic of any other
  protocol cannot concern the attack.
- `selection(protocol, event_type)`, what an event of that type can do to a run of the attack:
  - `indicators`: the indicators that steps 1 and 2 of the trace-filtering procedure (format spec §6.1:
    protocol, then `surface`) keep, in document order. Steps 3 and 4 (actor, direction) depend on the run and
    the message and stay with `IndicatorTracker.accepts`;
  - `moves_actors`: whether it can change an actor's state in some phase — a trigger naming it (format spec
    §5.3: a trigger's `event` must equal the event type) or an extractor (which reads every message of its
    actor). When it can do neither, the run only counts the message.
- `gates(protocol, event_type, sender, direction)`, for an event the selection says can move actors: which
  of its phases' triggers and extractors it may use, or None when it may change an actor in other ways (see
  `gates`).
- `header`: the report's `attack` section (id, name, version, file, severity, classification).
- `payloads`: each actor's payload, in actor order (`delivery.actor_payload`: what must reach the agent for
  the attack to count as delivered).
- `judges`, `judge_keys`: each indicator compiled once (`oatf.compile_indicator`, not its bounded cache), and
  what makes two indicators judge every message alike (their detection keys and target, as written: the
  monitor judges such indicators once per message).
- what decides whether a run of the attack can wait on paper (`oatf_engine.monitor.paper`): `actor_names`,
  `rivals_possible`, `first_phase_timers` and `initially_terminal`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple

import oatf
from oatf.evaluation import Judge

from .actors import actor_name, agent_side
from .delivery import PayloadText, actor_payload

MAX_REMEMBERED_EVENT_TYPES = 1024
"""Event types whose indicator selection is remembered (event names come from the traffic: bounded)."""


TRIGGER = -1
"""The third position of the `Gate` of a phase's trigger."""

Gate = tuple[int, int, int]
"""(actor position, phase position, extractor position in the phase or `TRIGGER`): something of an actor an
event may use (`AttackPlan.gates`)."""


class Selection(NamedTuple):
    """What an event of one protocol and type can do to a run (see the module docstring)."""

    indicators: tuple[int, ...]
    moves_actors: bool


class AttackPlan:
    """The precomputed selections of one attack (see the module docstring)."""

    __slots__ = ("_actors", "_extracting", "_selections", "_triggering", "actor_names", "blanks", "events",
                 "first_phase_timers",
                 "grace_period", "header", "indicators", "initially_terminal", "judge_keys", "judges", "key",
                 "payloads", "protocols", "rivals_possible", "roles")

    def __init__(self, path: str, attack: oatf.Attack) -> None:
        self.key: str = attack.id or path
        actors = attack.execution.actors if attack.execution is not None else None
        self._actors: tuple[oatf.Actor, ...] = tuple(actors or ())
        self.protocols = frozenset(oatf.extract_protocol(a.mode or "") for a in actors or ())
        self.grace_period: float | None = (
            oatf.parse_duration(attack.grace_period).total_seconds() if attack.grace_period else None)
        """Seconds of `attack.grace_period`, None when the document leaves it to the tool."""
        self.indicators: tuple[oatf.Indicator, ...] = tuple(attack.indicators or ())
        self.judges: tuple[Judge, ...] = tuple(oatf.compile_indicator(i) for i in self.indicators)
        self.judge_keys: tuple[Hashable, ...] = tuple(
            repr((i.pattern, i.expression, i.semantic, i.target)) for i in self.indicators)
        """What a judge reads of its indicator (`oatf.evaluation._compile_judge`), as text: `repr` tells `true`
        from `1`, which compare equal."""
        phases = [(oatf.extract_protocol(a.mode or ""), p) for a in actors or () for p in a.phases or ()]
        self._extracting = frozenset(protocol for protocol, phase in phases if phase.extractors)
        self._triggering = frozenset((protocol, phase.trigger.event) for protocol, phase in phases
                                     if phase.trigger is not None and phase.trigger.event is not None)
        self.events = frozenset(i.surface for i in self.indicators if i.surface) | {e for _, e in self._triggering}
        """The event types its indicators and triggers name: `selection` and `gates` treat every other alike."""
        severity, classification = attack.severity, attack.classification
        self.header: dict[str, Any] = {
            "id": attack.id, "name": attack.name, "version": attack.version, "file": path,
            "severity": severity.to_dict() if severity is not None else None,
            "classification": classification.to_dict() if classification is not None else None,
        }
        self._selections: dict[tuple[str, str], Selection] = {}
        self.payloads: tuple[tuple[PayloadText, ...], ...] = tuple(actor_payload(a) for a in actors or ())
        self.actor_names = frozenset(actor_name(a) for a in self._actors)
        self.roles = tuple((oatf.extract_protocol(a.mode or ""), agent_side(a)) for a in self._actors)
        """Per actor: its protocol and the HTTP side the agent is on (`agent_side`)."""
        self.rivals_possible = len(set(self.roles)) < len(self.roles)
        """Two actors share a protocol and role: unless bindings tell them apart, each binds to the peer that
        delivers its payload (`AttackRun`)."""
        first = [a.phases[0].trigger if a.phases else None for a in self._actors]
        self.first_phase_timers = any(t is not None and t.after is not None for t in first)
        """An actor's first phase moves on after a time (`after`), traffic or not."""
        self.initially_terminal = all(t is None for t in first)
        """Every actor starts in its terminal phase (a run's grace period runs from its first event)."""
        self.blanks: dict[bool, object] = {}
        """The attack's `run.RunBlank` with and without a semantic evaluator, made when first needed."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its compiled judges (closures: the addon sends plans to its monitor process) and
        blanks."""
        return {name: getattr(self, name) for name in self.__slots__ if name not in ("judges", "blanks")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self.judges = tuple(oatf.compile_indicator(i) for i in self.indicators)
        self.blanks = {}

    def gates(self, protocol: str, event_type: str, sender: str, direction: str) -> tuple[Gate, ...] | None:
        """For an event whose `selection` can move actors: what of the attack's actors it may use, when each
        use needs something of the message — the `match` predicate of a trigger on its type (`ActorMachine.observe`
        changes nothing unless one holds: format spec §5.3, SDK spec §5.8 step 2, a failing `match` leaves the
        trigger's state alone) or an extractor of its `direction` (format spec §5.5 `source`; one that captures
        nothing changes nothing); None when it may change an actor otherwise: on the agent's side
        (`agent_side`), a trigger with `after` (evaluated on every event) or a trigger on the event's type
        without `match`."""
        found: list[Gate] = []
        for index, (actor, (actor_protocol, side)) in enumerate(zip(self._actors, self.roles, strict=True)):
            if actor_protocol != protocol:
                continue
            for number, phase in enumerate(actor.phases or ()):
                found.extend((index, number, position) for position, extractor in enumerate(phase.extractors or ())
                             if extractor.source == direction)
                trigger = phase.trigger
                if trigger is None or side != sender:
                    continue
                if trigger.after is not None or (trigger.event == event_type and trigger.match is None):
                    return None
                if trigger.event == event_type:
                    found.append((index, number, TRIGGER))
        return tuple(found)

    def selection(self, protocol: str, event_type: str) -> Selection:
        """What an event of this protocol and type can do to a run of the attack (see the module docstring)."""
        selected = self._selections.get((protocol, event_type))
        if selected is None:
            selected = Selection(
                tuple(i for i, indicator in enumerate(self.indicators) if indicator.protocol == protocol
                      and (indicator.surface is None or indicator.surface == event_type)),
                protocol in self._extracting or (protocol, event_type) in self._triggering)
            if len(self._selections) < MAX_REMEMBERED_EVENT_TYPES:
                self._selections[(protocol, event_type)] = selected
        return selected
