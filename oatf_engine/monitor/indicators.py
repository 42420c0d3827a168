"""One indicator's verdict over a run's traffic (format spec §6 trace filtering, SDK spec §4.4).

The filter keeps events of the indicator's protocol, surface, actor and direction (steps 1–2 are selected per
attack by `AttackPlan.selection`, steps 3–4 by `accepts`); every kept event is evaluated with the
indicator's compiled judge (`AttackPlan.judges`: `evaluate_indicator` without a verdict per message; one
judgement per message for indicators alike, `Judged`) until the first match, which keeps its evidence (flow,
event, path and excerpt: the verdict's string and `found`, the same as fields) and ends evaluation for that
indicator. Nothing of the messages is retained; how many the filter kept is counted by the session
(`oatf_engine.monitor.traffic`), or by the run when it must count exactly (`AttackRun.exact`), not by each
indicator.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import oatf
from oatf.evaluation import Judge, Judgement, evidence_parts

from ..events import ObservedEvent

EVIDENCE_LIMIT = 600

Judged = dict[Hashable, Judgement]
"""One message's judgements so far, by `AttackPlan.judge_keys`: indicators alike are judged once."""


@dataclass(slots=True)
class IndicatorTracker:
    indicator: oatf.Indicator
    judge: Judge
    """The indicator compiled (`AttackPlan.judges`)."""
    key: Hashable
    """What makes indicators judge alike (`AttackPlan.judge_keys`)."""
    unavailable: str | None = None
    """Why this indicator cannot be evaluated here (e.g. no semantic evaluator): it is `skipped`."""
    matched: oatf.IndicatorVerdict | None = None
    found: dict[str, Any] | None = None
    """Where the first match was, as fields: flow, event, direction, time, endpoint, path, excerpt."""
    error: oatf.IndicatorVerdict | None = None
    skipped: oatf.IndicatorVerdict | None = None
    open: bool = True
    """Still evaluated: not matched yet, and evaluable here."""

    def __post_init__(self) -> None:
        self.open = self.unavailable is None

    @property
    def id(self) -> str:
        return self.indicator.id or ""

    def accepts(self, event: ObservedEvent, actors_of_event: set[str]) -> bool:
        """Format spec §6.1 steps 3–4: actor and direction (the plan already kept protocol and surface)."""
        indicator = self.indicator
        if indicator.actor is not None and indicator.actor not in actors_of_event:
            return False
        return indicator.direction is None or event.direction == indicator.direction

    def observe(self, event: ObservedEvent, cel: oatf.CelEvaluator | None, semantic: oatf.SemanticEvaluator | None,
                judged: Judged | None = None) -> bool:
        """Evaluate one kept event (`judged`: the event's judgements so far, shared by the runs it is fed to);
        True when this is the indicator's first match."""
        if not self.open:
            return False
        judgement = None if judged is None else judged.get(self.key)
        if judgement is None:
            judgement = self.judge(event.content, cel, semantic)
            if judged is not None:
                judged[self.key] = judgement
        result, evidence = judgement
        if result is oatf.IndicatorResult.NOT_MATCHED:
            return False
        if result is oatf.IndicatorResult.SKIPPED:
            if self.skipped is None:
                self.skipped = oatf.IndicatorVerdict(self.id, result, oatf.timestamp_at(event.timestamp), evidence)
            return False
        if result is oatf.IndicatorResult.ERROR and self.error is not None:
            return False
        verdict = oatf.IndicatorVerdict(self.id, result, oatf.timestamp_at(event.timestamp), (
            f"{event.event_type} {event.direction} (flow {event.flow_id}): {evidence or ''}")[:EVIDENCE_LIMIT])
        if result is oatf.IndicatorResult.ERROR:
            self.error = verdict
            return False
        self.matched = verdict
        self.open = False
        path, excerpt = evidence_parts(evidence or "")
        endpoint = event.endpoint
        self.found = {"flow": event.flow_id, "event": event.event_type, "direction": event.direction,
                      "at": oatf.timestamp_at(event.timestamp),
                      "endpoint": f"{endpoint.host}:{endpoint.port}{endpoint.path}", "path": path, "excerpt": excerpt}
        return True

    def verdict(self, timestamp: str, examined: int) -> oatf.IndicatorVerdict:
        """Matched, else error, else skipped (no evaluator), else not_matched with how many messages the filter
        kept (`examined`)."""
        if self.unavailable is None:
            for found in (self.matched, self.error, self.skipped):
                if found is not None:
                    return found
        return oatf.IndicatorVerdict(self.id, self.unmatched_result, timestamp, self.unmatched_evidence(examined))

    @property
    def unmatched_result(self) -> oatf.IndicatorResult:
        """`verdict`'s result while nothing matched, failed or was skipped: skipped when the indicator cannot be
        evaluated here, else not_matched."""
        return oatf.IndicatorResult.SKIPPED if self.unavailable is not None else oatf.IndicatorResult.NOT_MATCHED

    def unmatched_evidence(self, examined: int) -> str:
        """`verdict`'s evidence while nothing matched, failed or was skipped (`unmatched_result`)."""
        if self.unavailable is not None:
            return self.unavailable
        return (f"no matching message among {examined} examined" if examined
                else "no message passed this indicator's filter (protocol, surface, actor, direction)")
