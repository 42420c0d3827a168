"""What of the traffic can concern one attack, worked out once per loaded document, so that the monitor's
work per message is proportional to what matters to each attack rather than to the document's size.

- `protocols`: the protocols of the attack's actors (format spec §5.1 `actor.mode`); traffic of any other
  protocol cannot concern the attack.
- `indicators_for(protocol, event_type)`: the indicators that steps 1 and 2 of the trace-filtering procedure
  (format spec §6.1: protocol, then `surface`) keep for an event of that type, in document order. Steps 3
  and 4 (actor, direction) depend on the run and the message and stay with `IndicatorTracker.accepts`.
- `moves_actors(protocol, event_type)`: whether such an event can change an actor's state in some phase — a
  trigger naming it (format spec §5.3: a trigger's `event` must equal the event type) or an extractor (which
  reads every message of its actor). When it cannot, the run only counts the message.
- `header`: the report's `attack` section (id, name, version, file, severity, classification).
"""

from __future__ import annotations

from typing import Any

import oatf

MAX_REMEMBERED_EVENT_TYPES = 1024
"""Event types whose indicator selection is remembered (event names come from the traffic: bounded)."""


class AttackPlan:
    """The precomputed selections of one attack (see the module docstring)."""

    __slots__ = ("_extracting", "_selections", "_triggering", "grace_period", "header", "indicators", "key",
                 "protocols")

    def __init__(self, path: str, attack: oatf.Attack) -> None:
        self.key: str = attack.id or path
        actors = attack.execution.actors if attack.execution is not None else None
        self.protocols = frozenset(oatf.extract_protocol(a.mode or "") for a in actors or ())
        self.grace_period: float | None = (
            oatf.parse_duration(attack.grace_period).total_seconds() if attack.grace_period else None)
        """Seconds of `attack.grace_period`, None when the document leaves it to the tool."""
        self.indicators: tuple[oatf.Indicator, ...] = tuple(attack.indicators or ())
        phases = [(oatf.extract_protocol(a.mode or ""), p) for a in actors or () for p in a.phases or ()]
        self._extracting = frozenset(protocol for protocol, phase in phases if phase.extractors)
        self._triggering = frozenset((protocol, phase.trigger.event) for protocol, phase in phases
                                     if phase.trigger is not None and phase.trigger.event is not None)
        severity, classification = attack.severity, attack.classification
        self.header: dict[str, Any] = {
            "id": attack.id, "name": attack.name, "version": attack.version, "file": path,
            "severity": severity.to_dict() if severity is not None else None,
            "classification": classification.to_dict() if classification is not None else None,
        }
        self._selections: dict[tuple[str, str], tuple[int, ...]] = {}

    def indicators_for(self, protocol: str, event_type: str) -> tuple[int, ...]:
        """Positions of the indicators format spec §6.1 steps 1–2 keep for this protocol and event type."""
        selected = self._selections.get((protocol, event_type))
        if selected is None:
            selected = tuple(i for i, indicator in enumerate(self.indicators) if indicator.protocol == protocol
                             and (indicator.surface is None or indicator.surface == event_type))
            if len(self._selections) < MAX_REMEMBERED_EVENT_TYPES:
                self._selections[(protocol, event_type)] = selected
        return selected

    def moves_actors(self, protocol: str, event_type: str) -> bool:
        """Whether an event of this type can change an actor's state (see the module docstring)."""
        return protocol in self._extracting or (protocol, event_type) in self._triggering
