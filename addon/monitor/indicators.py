"""One indicator's verdict over a run's traffic (format spec §6 trace filtering, SDK spec §4.4).

The filter keeps events of the indicator's protocol, surface, actor and direction; every kept event is
evaluated with `oatf.evaluate_indicator` until the first match, which keeps its evidence (flow, event,
path and excerpt) and ends evaluation for that indicator. Counters, not messages, are retained.
"""

from __future__ import annotations

from dataclasses import dataclass

import oatf

from ..events import ObservedEvent

EVIDENCE_LIMIT = 600


@dataclass
class IndicatorTracker:
    indicator: oatf.Indicator
    unavailable: str | None = None
    """Why this indicator cannot be evaluated here (e.g. no semantic evaluator): it is `skipped`."""
    examined: int = 0
    matched: oatf.IndicatorVerdict | None = None
    matched_flow: str | None = None
    matched_event: str | None = None
    error: oatf.IndicatorVerdict | None = None
    skipped: oatf.IndicatorVerdict | None = None

    @property
    def id(self) -> str:
        return self.indicator.id or ""

    def accepts(self, event: ObservedEvent, actors_of_event: set[str]) -> bool:
        """Format spec §6 steps 1–4: protocol, surface, actor, direction."""
        indicator = self.indicator
        if event.protocol != indicator.protocol:
            return False
        if indicator.surface is not None and event.event_type != indicator.surface:
            return False
        if indicator.actor is not None and indicator.actor not in actors_of_event:
            return False
        return indicator.direction is None or event.direction == indicator.direction

    def observe(self, event: ObservedEvent, cel: oatf.CelEvaluator | None,
                semantic: oatf.SemanticEvaluator | None) -> bool:
        """Evaluate one kept event; True when this is the indicator's first match."""
        if self.matched is not None or self.unavailable is not None:
            return False
        self.examined += 1
        verdict = oatf.evaluate_indicator(self.indicator, event.content, cel_evaluator=cel,
                                          semantic_evaluator=semantic)
        result = verdict.result
        if result is oatf.IndicatorResult.MATCHED:
            evidence = f"{event.event_type} {event.direction} (flow {event.flow_id}): {verdict.evidence or ''}"
            self.matched = oatf.IndicatorVerdict(self.id, result, verdict.timestamp, evidence[:EVIDENCE_LIMIT])
            self.matched_flow, self.matched_event = event.flow_id, event.event_type
            return True
        if result is oatf.IndicatorResult.ERROR and self.error is None:
            evidence = f"{event.event_type} {event.direction} (flow {event.flow_id}): {verdict.evidence or ''}"
            self.error = oatf.IndicatorVerdict(self.id, result, verdict.timestamp, evidence[:EVIDENCE_LIMIT])
        elif result is oatf.IndicatorResult.SKIPPED and self.skipped is None:
            self.skipped = oatf.IndicatorVerdict(self.id, result, verdict.timestamp, verdict.evidence)
        return False

    def verdict(self, timestamp: str) -> oatf.IndicatorVerdict:
        """Matched, else error, else skipped (no evaluator), else not_matched with what was examined."""
        if self.unavailable is not None:
            return oatf.IndicatorVerdict(self.id, oatf.IndicatorResult.SKIPPED, timestamp, self.unavailable)
        for found in (self.matched, self.error, self.skipped):
            if found is not None:
                return found
        evidence = (f"no matching message among {self.examined} examined" if self.examined
                    else "no message passed this indicator's filter (protocol, surface, actor, direction)")
        return oatf.IndicatorVerdict(self.id, oatf.IndicatorResult.NOT_MATCHED, timestamp, evidence)
