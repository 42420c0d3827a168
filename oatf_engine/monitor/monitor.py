"""The sans-I/O monitor: observed events and a clock in; phase changes, indicator matches and verdict
reports out. Shared by the live addon and the offline replayer ("one engine, two front doors")."""

from __future__ import annotations

import heapq
import itertools
import math
from collections import OrderedDict
from collections.abc import KeysView
from dataclasses import dataclass
from typing import Any

import oatf

from ..events import ObservedEvent
from .actors import PhaseChange
from .delivery import MessageText
from .library import LoadedAttack
from .options import MonitorOptions, session_named
from .plan import MAX_REMEMBERED_EVENT_TYPES, Selection
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
    """The indicator verdict's evidence (event, direction, flow, where and what matched)."""
    path: str | None = None
    """Where in the message it matched (`IndicatorTracker.found`); None when the evidence names no path (CEL)."""
    excerpt: str | None = None
    """The traffic text that matched, unquoted; None when the evidence quotes none."""


@dataclass(frozen=True)
class RunConcluded:
    run: str
    report: dict[str, Any]
    """The run's report: `attack`, `verdict` (OATF AttackVerdict), `execution_summary`."""


Output = PhaseChanged | IndicatorMatched | RunConcluded


@dataclass(frozen=True)
class Held:
    """The flows whose events the monitor holds, not evaluated yet (`Monitor.held_flows`: keyless exchanges
    waiting to be placed in a session), as the live addon's monitor process tells them."""

    flows: frozenset[str]


def _where(found: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(path, excerpt) of a match's evidence fields."""
    return (None, None) if found is None else (found.get("path"), found.get("excerpt"))

class Monitor:
    """Follows every loaded attack over every session of the observed traffic.

    Work per event: the runs of its session for the attacks of its protocol, and for each only the
    indicators its plan selects (`AttackPlan.selection`). Timers (`after` triggers, ends of grace
    periods and of run lifetimes) wait in a heap keyed by each run's `deadline()`: the clock only touches
    the runs that are due."""

    def __init__(self, attacks: list[LoadedAttack], options: MonitorOptions | None = None,
                 cel: oatf.CelEvaluator | None = None, semantic: oatf.SemanticEvaluator | None = None):
        self.options = options or MonitorOptions()
        self.cel = cel if cel is not None else oatf.DefaultCelEvaluator()
        self.semantic = semantic
        self.runs: OrderedDict[tuple[str, str], AttackRun] = OrderedDict()
        self.sessions = SessionResolver(self.options.session_key, self.options.idle_gap, self.options.agents)
        self.now = 0.0
        self.events_seen = 0
        self.concluded = 0
        self._timers: list[tuple[float, int, tuple[str, str]]] = []
        self._timer_order = itertools.count()
        self._set_attacks(attacks)

    def _set_attacks(self, attacks: list[LoadedAttack]) -> None:
        self.attacks = list(attacks)
        self._by_protocol: dict[str, list[tuple[str, LoadedAttack]]] = {}
        for loaded in self.attacks:
            for protocol in sorted(loaded.protocols):
                self._by_protocol.setdefault(protocol, []).append((loaded.key, loaded))
        self._concerned: dict[tuple[str, str], list[tuple[str, LoadedAttack, Selection]]] = {}

    def set_options(self, options: MonitorOptions) -> None:
        """New options apply to runs created from now on."""
        self.options = options
        self.sessions.policy = options.session_key
        self.sessions.idle_gap = options.idle_gap
        if self.sessions.agent_episodes is not None:
            self.sessions.agent_episodes.names = options.agents
            self.sessions.agent_episodes.idle_gap = options.idle_gap

    def replace_attacks(self, attacks: list[LoadedAttack]) -> list[Output]:
        """Swap the library (reload): runs of attacks that are gone or changed are concluded first."""
        kept = {a.key: a for a in attacks}
        outputs: list[Output] = []
        for key, run in list(self.runs.items()):
            new = kept.get(run.loaded.key)
            if new is None or new.path != run.loaded.path or new.document != run.loaded.document:
                outputs.append(self._conclude(key, "reloaded"))
        self._set_attacks(attacks)
        return outputs

    def observe(self, event: ObservedEvent, session: str | None = None, clock: float | None = None) -> list[Output]:
        """Feed one event: the clock advances to its time (timers due by then fire first), then every
        relevant run of its session sees it. `session`: the event's session when the caller placed it
        already (`SessionResolver`, as offline replay does to split sessions over processes); by default
        this monitor's resolver places it (`SessionResolver.place`). The clock moves to the event's time, but
        never past an event still held (`SessionResolver.oldest_held`); `clock`: where a caller that placed
        the event itself moves it (replay's `place_events` records it)."""
        self.events_seen += 1
        if session is not None:
            return [*self._advance(event.timestamp if clock is None else clock), *self._observe(event, session)]
        outputs: list[Output] = []
        for item, item_session in self.sessions.place(event):
            outputs.extend(self._advance(min(item.timestamp, self.sessions.oldest_held())))
            outputs.extend(self._observe(item, item_session))
        return outputs

    def _observe(self, event: ObservedEvent, session: str) -> list[Output]:
        outputs: list[Output] = []
        runs = self.runs
        text = MessageText(event.content)
        for attack_key, loaded, selection in self._concerned_by(event.protocol, event.event_type):
            key = (attack_key, session)
            run = runs.get(key)
            if run is None:
                run = AttackRun(loaded, session, event.timestamp, self.options, self.semantic is not None)
                actors = run.actors_for(event)
                if not actors:
                    continue
                outputs.extend(self._admit(key, run))
            else:
                actors = run.actors_for(event)
                if not actors:
                    continue
                runs.move_to_end(key)
            answers = bool(run.awaiting) and event.sender == "server" and event.flow_id in run.awaiting
            changes, matched = run.observe(event, actors, selection, self.cel, self.semantic, text)
            if changes:
                outputs.extend(PhaseChanged(run.id, c) for c in changes)
            if changes or answers:
                self._schedule(key, run)  # an answer the run waited for can bring its end closer (`awaiting`)
            if matched:
                outputs.extend(IndicatorMatched(run.id, attack_key, t.id, event.flow_id, t.matched.evidence or "",
                                                *_where(t.found))
                               for t in matched if t.matched is not None)
        return outputs

    def _concerned_by(self, protocol: str, event_type: str) -> list[tuple[str, LoadedAttack, Selection]]:
        """The attacks of `protocol`, each with its plan's selection for `event_type` (remembered for a bounded
        number of event types)."""
        concerned = self._concerned.get((protocol, event_type))
        if concerned is None:
            concerned = [(key, loaded, loaded.plan.selection(protocol, event_type))
                         for key, loaded in self._by_protocol.get(protocol, ())]
            if len(self._concerned) < MAX_REMEMBERED_EVENT_TYPES:
                self._concerned[(protocol, event_type)] = concerned
        return concerned

    def tick(self, now: float) -> list[Output]:
        """Advance the clock (never backwards): release held keyless events that are due, fire the `after`
        timers that are due and conclude the runs whose grace period or lifetime has ended."""
        outputs: list[Output] = []
        for placed, session in self.sessions.expire(max(self.now, now)):
            outputs.extend(self._observe(placed, session))
        return outputs + self._advance(min(now, self.sessions.oldest_held()))

    def _advance(self, now: float) -> list[Output]:
        """Move the clock to `now` (never backwards) and fire the timers due by then."""
        self.now = max(self.now, now)
        outputs: list[Output] = []
        timers = self._timers
        while timers and timers[0][0] <= self.now:
            at, _, key = heapq.heappop(timers)
            run = self.runs.get(key)
            if run is None or run.scheduled != at:
                continue  # concluded, or superseded by an earlier deadline that has already fired
            run.scheduled = float("inf")
            outputs.extend(PhaseChanged(run.id, c) for c in run.tick(self.now))
            due = run.due(self.now)
            if due is not None:
                outputs.append(self._conclude(key, *due))
            else:
                self._schedule(key, run)
        return outputs

    def _schedule(self, key: tuple[str, str], run: AttackRun) -> None:
        """Queue the run's deadline if it is earlier than the one queued (later ones are found when the
        queued one fires). A deadline the clock has already passed is queued just after now, so one tick
        never loops on a run."""
        at = run.deadline()
        if at >= run.scheduled or at == float("inf"):
            return
        at = max(at, math.nextafter(self.now, math.inf))
        run.scheduled = at
        heapq.heappush(self._timers, (at, next(self._timer_order), key))
        if len(self._timers) > 4 * len(self.runs) + 1024:
            self._timers = [t for t in self._timers if (r := self.runs.get(t[2])) is not None and r.scheduled == t[0]]
            heapq.heapify(self._timers)

    def end_of_traffic(self, end: float) -> list[Output]:
        """The traffic ended at `end` (a recording's end; a stdio session the agent closed): the clock moves
        one grace period — the longest any loaded attack or the options set — past it, so runs whose actors are
        all terminal conclude `completed` (events still held for an answer are placed first: none can come now).
        Then, as on a proxy left running, the timers that need no traffic
        fire in turn (`AttackRun.quiet_deadline`: an `after` trigger, and the grace period that follows the
        last actor turning terminal), so a capture replays to the reports the live proxy wrote. The runs still
        waiting for traffic are concluded `interrupted` after at least a full grace period (not cut short:
        `AttackRun.cut_short`)."""
        grace = max([self.options.grace_period, *(a.plan.grace_period or 0.0 for a in self.attacks)])
        outputs: list[Output] = []
        for placed, session in self.sessions.flush():  # no answer can come now: nothing more to wait for
            outputs.extend(self._observe(placed, session))
        outputs += self.tick(end + grace)
        # Each run's next quiet deadline, earliest first; an entry is checked against its run when it comes up
        # (stale ones are requeued), so every timer costs a heap operation, not a look at every run.
        order = itertools.count()
        pending = [(due, next(order), key) for key, run in self.runs.items()
                   if (due := run.quiet_deadline()) < math.inf]
        heapq.heapify(pending)
        while pending:
            due, _, key = heapq.heappop(pending)
            run = self.runs.get(key)
            if run is None:
                continue  # concluded meanwhile
            if (current := run.quiet_deadline()) != due:
                if current < math.inf:
                    heapq.heappush(pending, (current, next(order), key))
                continue
            # A deadline the clock has passed was queued just after it (`_schedule`): one tick past it fires it.
            outputs += self.tick(max(due, math.nextafter(self.now, math.inf)))
            run = self.runs.get(key)
            if run is not None and (after := run.quiet_deadline()) < math.inf and after > due:
                heapq.heappush(pending, (after, next(order), key))
            # else concluded, or its timer changed nothing: only traffic could move it now
        return [*outputs, *self.shutdown()]

    def shutdown(self, status: str = "interrupted") -> list[Output]:
        """Conclude every open run with `status` (the proxy is stopping: `interrupted`; a crashed proxy's
        journal replayed: `recovered`): nothing observed is lost."""
        outputs: list[Output] = []
        for placed, session in self.sessions.flush():
            outputs.extend(self._observe(placed, session))
        outputs.extend(self._conclude(key, status) for key in list(self.runs))
        self._timers.clear()
        return outputs

    @property
    def held_flows(self) -> KeysView[str]:
        """The flows with events the session resolver holds, not evaluated yet (`SessionResolver.held_flows`)."""
        return self.sessions.held_flows

    @property
    def queued_timers(self) -> int:
        """Entries in the timer queue, stale ones included (bounded by `_schedule`'s compaction)."""
        return len(self._timers)

    def close_session(self, protocol: str, name: str, value: str, at: float) -> None:
        """The agent closed the session whose key `name` is `value` at `at` (an MCP client's `DELETE` with its
        `Mcp-Session-Id`): its runs conclude `session_closed` a grace period later (`AttackRun.close`), unless
        they conclude earlier. Nothing happens when the session key policy does not group runs by that key."""
        session = session_named(protocol, name, value, self.options.session_key)
        for key, run in self.runs.items():
            if run.session == session:
                run.close(at)
                self._schedule(key, run)

    def status(self) -> list[dict[str, Any]]:
        """A snapshot of the live runs, for the `oatf.status` command: each run's `state` is `live`, `grace`
        (every actor is terminal: it concludes after a grace period of quiet) or `session closed` (the agent
        closed its session: it concludes a grace period later)."""
        return [{
            "run": run.id, "messages": run.messages,
            "phases": {a.name: a.phase.name for a in run.actors},
            "matched": [t.id for t in run.indicators if t.matched is not None],
            "state": "grace" if run.all_terminal_at is not None else
                     "session closed" if run.closed_at is not None else "live",
            "delivered": run.delivered,
        } for run in self.runs.values()]

    def _admit(self, key: tuple[str, str], run: AttackRun) -> list[Output]:
        outputs: list[Output] = []
        while len(self.runs) >= self.options.max_runs:
            oldest = next(iter(self.runs))
            outputs.append(self._conclude(oldest, "evicted"))
        self.runs[key] = run
        self._schedule(key, run)
        return outputs

    def _conclude(self, key: tuple[str, str], status: str, ended_at: float | None = None) -> RunConcluded:
        """Conclude a run: its report, with `status` and `ended_at` (default: now)."""
        run = self.runs.pop(key)
        self.concluded += 1
        return RunConcluded(run.id, run.report(status, self.now if ended_at is None else ended_at))
