"""The sans-I/O monitor: observed events and a clock in; phase changes, indicator matches and verdict
reports out. Shared by the live addon and the offline replayer ("one engine, two front doors")."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import oatf

from ..events import ObservedEvent
from .actors import PhaseChange
from .library import LoadedAttack
from .options import MonitorOptions
from .run import AttackRun
from .sessions import SessionResolver


@dataclass(frozen=True)
class PhaseChanged:
    run: str
    change: PhaseChange


@dataclass(frozen=True)
class IndicatorMatched:
    run: str
    attack_id: str
    indicator_id: str
    flow_id: str
    evidence: str


@dataclass(frozen=True)
class RunConcluded:
    run: str
    report: dict[str, Any]
    """The run's report: `attack`, `verdict` (OATF AttackVerdict), `execution_summary`."""


Output = PhaseChanged | IndicatorMatched | RunConcluded

SCAN_INTERVAL = 0.1
"""Seconds of clock time between two scans of the live runs for due timers."""


class Monitor:
    """Follows every loaded attack over every session of the observed traffic."""

    def __init__(self, attacks: list[LoadedAttack], options: MonitorOptions | None = None,
                 cel: oatf.CelEvaluator | None = None, semantic: oatf.SemanticEvaluator | None = None):
        self.options = options or MonitorOptions()
        self.attacks = list(attacks)
        self.cel = cel if cel is not None else oatf.DefaultCelEvaluator()
        self.semantic = semantic
        self.runs: OrderedDict[tuple[str, str], AttackRun] = OrderedDict()
        self.sessions = SessionResolver(self.options.session_key)
        self.now = 0.0
        self._scanned_at = float("-inf")
        self.events_seen = 0
        self.concluded = 0

    def set_options(self, options: MonitorOptions) -> None:
        """New options apply to runs created from now on."""
        self.options = options
        self.sessions.policy = options.session_key

    def replace_attacks(self, attacks: list[LoadedAttack]) -> list[Output]:
        """Swap the library (reload): runs of attacks that are gone or changed are concluded first."""
        kept = {a.key: a for a in attacks}
        outputs: list[Output] = []
        for key, run in list(self.runs.items()):
            new = kept.get(run.loaded.key)
            if new is None or new.path != run.loaded.path or new.document != run.loaded.document:
                outputs.append(self._conclude(key, "reloaded"))
        self.attacks = list(attacks)
        return outputs

    def observe(self, event: ObservedEvent) -> list[Output]:
        """Feed one event: it advances the clock, then every relevant run of its session."""
        outputs = self.tick(event.timestamp) if event.timestamp - self._scanned_at >= SCAN_INTERVAL else []
        self.now = max(self.now, event.timestamp)
        self.events_seen += 1
        for placed, session in self.sessions.resolve(event):
            outputs.extend(self._observe(placed, session))
        return outputs

    def _observe(self, event: ObservedEvent, session: str) -> list[Output]:
        outputs: list[Output] = []
        for loaded in self.attacks:
            key = (loaded.key, session)
            run = self.runs.get(key)
            if run is None:
                if event.protocol not in loaded.protocols:
                    continue
                run = AttackRun(loaded, session, self.now, self.options, self.semantic is not None)
                if not run.relevant(event):
                    continue
                outputs.extend(self._admit(key, run))
            elif not run.relevant(event):
                continue
            self.runs.move_to_end(key)
            changes, matched = run.observe(event, self.cel, self.semantic)
            outputs.extend(PhaseChanged(run.id, c) for c in changes)
            outputs.extend(IndicatorMatched(run.id, loaded.key, t.id, event.flow_id, t.matched.evidence or "")
                           for t in matched if t.matched is not None)
        return outputs

    def tick(self, now: float) -> list[Output]:
        """Advance the clock (never backwards): fire `after` timers and conclude runs that are due.

        `observe` ticks too, but at most every `SCAN_INTERVAL` seconds of event time, so a busy proxy with
        many live runs does not pay a full scan per message."""
        self.now = max(self.now, now)
        self._scanned_at = self.now
        outputs: list[Output] = []
        for placed, session in self.sessions.expire(self.now):
            outputs.extend(self._observe(placed, session))
        for key, run in list(self.runs.items()):
            outputs.extend(PhaseChanged(run.id, c) for c in run.tick(self.now))
            status = run.due(self.now)
            if status is not None:
                outputs.append(self._conclude(key, status))
        return outputs

    def shutdown(self) -> list[Output]:
        """Conclude every open run (the proxy is stopping): nothing observed is lost."""
        outputs: list[Output] = []
        for placed, session in self.sessions.flush():
            outputs.extend(self._observe(placed, session))
        return [*outputs, *(self._conclude(key, "interrupted") for key in list(self.runs))]

    def status(self) -> list[dict[str, Any]]:
        """A snapshot of the live runs, for the `oatf.status` command."""
        return [{
            "run": run.id, "messages": run.messages,
            "phases": {a.name: a.phase.name for a in run.actors},
            "matched": [t.id for t in run.indicators if t.matched is not None],
            "all_terminal": run.all_terminal_at is not None,
        } for run in self.runs.values()]

    def _admit(self, key: tuple[str, str], run: AttackRun) -> list[Output]:
        outputs: list[Output] = []
        while len(self.runs) >= self.options.max_runs:
            oldest = next(iter(self.runs))
            outputs.append(self._conclude(oldest, "evicted"))
        self.runs[key] = run
        return outputs

    def _conclude(self, key: tuple[str, str], status: str) -> RunConcluded:
        run = self.runs.pop(key)
        self.concluded += 1
        attack = run.loaded.attack
        severity = attack.severity
        report = {
            "attack": {
                "id": attack.id, "name": attack.name, "version": attack.version, "file": run.loaded.path,
                "severity": severity.to_dict() if severity is not None else None,
                "classification": attack.classification.to_dict() if attack.classification else None,
            },
            "verdict": run.verdict().to_dict(),
            "execution_summary": run.execution_summary(status, self.now),
        }
        return RunConcluded(run.id, report)
