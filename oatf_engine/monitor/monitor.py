"""The sans-I/O monitor: observed events and a clock in; phase changes, indicator matches and verdict
reports out. Shared by the live addon and the offline replayer ("one engine, two front doors")."""

from __future__ import annotations

import heapq
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

import re2

import oatf
from oatf.model import IndicatorResult

from ..events import UNINSPECTED_EVENT, Call, ExchangeEnded, ObservedEvent, awaits_answer
from . import prefilter
from .actors import PhaseChange
from .delivery import MessageText
from .episodes import MAX_ANSWER_WAIT, MAX_FLOWS, remember
from .indicators import Judged
from .library import LoadedAttack
from .options import MonitorOptions, session_named
from .paper import Cohort, PaperTimer, bits, paper_class
from .plan import MAX_REMEMBERED_EVENT_TYPES, TRIGGER, Gate
from .recent import RecentFlows
from .run import AttackRun, RunBlank
from .sessions import SessionResolver
from .traffic import OTHER, SessionTraffic


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

NOT_MATCHED = IndicatorResult.NOT_MATCHED

MAX_ENDED_CALLS = 10_000
"""Requests of ended exchanges remembered for their late placement (`Monitor.exchange_ended`)."""
MAX_EARLY_MARKS = 10_000
"""Sessions remembered with marks placed before their first message (`Monitor._early_marks`)."""


@dataclass(frozen=True, slots=True)
class _Dispatch:
    """What an event of one protocol, event type, sender and direction can do over the whole library, by attack
    index."""

    movers: frozenset[int]
    """Attacks whose actors it may move whatever it holds (`AttackPlan.gates`)."""
    triggers: dict[int, tuple[int, ...]]
    """Requirement → the attacks whose actors it gates (a trigger's `match`, an extractor: `AttackPlan.gates`)."""
    judged: dict[Hashable, tuple[tuple[int, int], ...]]
    """Judge key (`AttackPlan.judge_keys`) → the (attack, indicator position) of the selected indicators without a
    prefilter requirement judged alike: judged on every such event, fed to the runs where not `not_matched`."""
    fed: dict[int, tuple[int, ...]]
    """Attack → its selected semantic indicators, when an evaluator is configured: fed every such event (the
    evaluator is asked only where the indicator's trace filter keeps the event)."""
    gated: dict[int, dict[Hashable, tuple[tuple[int, int], ...]]]
    """Indicator requirement → judge key → the (attack, indicator position) it gates, among the selected
    indicators: judged where the requirement holds, fed to the runs where not `not_matched`."""
    undelivered: tuple[int, ...]
    """Attacks with an actor whose side sends it and that holds no distinctive payload (the first message counts)."""
    payloads: dict[int, tuple[int, ...]]
    """Payload requirement → the attacks with an actor whose side sends it and whose payload it gates."""
    gating: frozenset[int]
    """The requirements of `gated` and `triggers` (the indicator filter's answer is intersected with them)."""
    carried: frozenset[int]
    """The requirements of `payloads`."""


class _Session:
    """One session's live runs (materialised, and on paper), its traffic counters and the attacks that have no
    run in it. Attacks are told apart by their number in the library, a bit each in the masks."""

    __slots__ = ("cohorts", "exact", "live", "paper", "pending", "recheck", "runs", "settled", "started", "traffic")

    def __init__(self) -> None:
        self.traffic = SessionTraffic()
        self.runs: dict[tuple[str, str], AttackRun] = {}
        """The materialised runs."""
        self.live = 0
        """The attacks of `runs`."""
        self.exact: dict[tuple[str, str], AttackRun] = {}
        """The runs among `runs` that count their own messages (`AttackRun.exact`): fed every event."""
        self.settled: set[int] = set()
        """Attacks of `runs` that no event can move any more (`ActorMachine.movable`: every actor in a phase
        without trigger or extractor): events that could only move actors are not fed to them."""
        self.cohorts: list[Cohort] = []
        """The runs on paper (`oatf_engine.monitor.paper`), by the event that started them."""
        self.paper = 0
        """The attacks of `cohorts`."""
        self.started: set[str] = set()
        """Protocols whose first event has been seen: every attack of theirs got a run then."""
        self.pending: dict[str, int] = {}
        """Per protocol, attacks without a run since (concluded, or no actor of theirs took an event yet)."""
        self.recheck: Recheck | None = None
        """The session's queued `Recheck`, if any."""

    @property
    def idle(self) -> bool:
        """No run left, materialised or on paper: the session can be forgotten."""
        return not self.runs and not self.cohorts


class Recheck:
    """A session whose runs may end sooner: a request they waited for was answered (`AttackRun.awaited_at`).
    Queued at the earliest time any of them can end now (the answer's time plus the shortest grace period),
    it queues each run and timer of runs on paper of the session again at its deadline: one pass per grace
    period, however many answers came meanwhile, rather than one per answer."""

    __slots__ = ("at", "session")

    def __init__(self, session: str, at: float) -> None:
        self.session = session
        self.at = at


Timed = tuple[str, str] | PaperTimer
"""What the timer queue holds for a run: a materialised run's key, or a timer of runs on paper."""


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

    Work per event (issue 15: nearly flat in the size of the library): the session counts the event once
    (`traffic`); runs are opened for the attacks of its protocol that have none in the session — on paper
    (`oatf_engine.monitor.paper`: a bit in a cohort) unless they must be followed from the start; then only
    the runs the event can change are fed it, materialised first if they were on paper: those whose actors it
    can move (an extractor it may feed, or a trigger on its type whose `match` it may satisfy:
    `AttackPlan.gates`), those with an indicator it may match and those whose payload it may carry. Which
    indicators, triggers, extractors and payloads a message may satisfy is decided for the whole library in
    one pass over the message (`prefilter`); an indicator without a requirement (expressions, semantic,
    `exists: false`, ...) is evaluated on every message its selection keeps.

    `prefilter=False` keeps no run on paper, feeds every run every event of its traffic, evaluates every
    selected indicator and trigger, looks for every payload and has each run count its own messages
    (`AttackRun.exact`): the reference the differential tests compare the prefilter, the runs on paper and the
    session's counters with (the same reports; runs that conclude at the same moment may come out in another
    order). A run with rival actors (which events an actor sees depends on the peers bound so far) is always
    fed and counts that way.

    Timers (`after` triggers, ends of grace periods and of run lifetimes) wait in a heap keyed by each run's
    `deadline()` (runs on paper: one entry per `PaperTimer`): the clock only touches the runs that are due."""

    def __init__(self, attacks: list[LoadedAttack], options: MonitorOptions | None = None,
                 cel: oatf.CelEvaluator | None = None, semantic: oatf.SemanticEvaluator | None = None,
                 prefilter: bool = True):
        self.options = options or MonitorOptions()
        self.cel = cel if cel is not None else oatf.DefaultCelEvaluator()
        self.semantic = semantic
        self.prefilter = prefilter
        self.runs: dict[tuple[str, str], AttackRun] = {}
        """The materialised live runs (`live_runs` counts those on paper too)."""
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        """Sessions with live runs, least recently active first."""
        self.sessions = SessionResolver(self.options.session_key, self.options.idle_gap, self.options.agents)
        self.now = 0.0
        self.events_seen = 0
        self.concluded = 0
        self._timers: list[tuple[float, int, Timed | Recheck]] = []
        self._timer_order = itertools.count()
        self._paper_timer_count = 0
        """`PaperTimer`s with members left, over every session."""
        self._paper_count = 0
        """Runs on paper, over every session."""
        self._awaiting_flows: RecentFlows[list[str]] = RecentFlows(MAX_FLOWS, MAX_ANSWER_WAIT)
        """Flow → the sessions a request of it was counted in while it waited for its answer: where an
        `ExchangeEnded` of the flow releases it (`exchange_ended`). Forgotten once the flow sent no request for
        `MAX_ANSWER_WAIT` (`recent`): its requests hold nothing any more (`answers`), so its end changes no run."""
        self._ended_calls: OrderedDict[Call, None] = OrderedDict()
        """The requests of the latest `MAX_ENDED_CALLS` ends of exchanges: one the session rules place after its
        exchange ended (held for its answer, parked set-up, or copied into a later episode) waits for nothing."""
        self._early_marks: OrderedDict[str, int] = OrderedDict()
        """Marks (`UNINSPECTED_EVENT`) placed in a session with no state yet, by session: counted against its runs
        once it has some. A request that was not inspected comes before anything else of its session when it opens
        it (an A2A `message/send` whose answer brings the `contextId`) or when the session's runs all ended."""
        self._shortest_grace = self.options.grace_period
        """The shortest grace period of any run so far or to come (the options' and every loaded attack's, ever:
        a run keeps its own): no run ends sooner than that after its last message (`Recheck`)."""
        self._set_attacks(attacks)

    def _set_attacks(self, attacks: list[LoadedAttack]) -> None:
        self.attacks = list(attacks)
        self._shortest_grace = min([self._shortest_grace, *(a.plan.grace_period for a in self.attacks
                                                            if a.plan.grace_period is not None)])
        self._by_protocol: dict[str, list[LoadedAttack]] = {}
        for loaded in self.attacks:
            for protocol in sorted(loaded.protocols):
                self._by_protocol.setdefault(protocol, []).append(loaded)
        self._surfaces = frozenset(i.surface for a in self.attacks for i in a.plan.indicators if i.surface)
        self._named = frozenset(event for a in self.attacks for event in a.plan.events)
        """Event types some attack names: events of any other type share one `_Dispatch` (as `OTHER`)."""
        self._requirement_of: dict[tuple[int, int], int] = {}
        """Per (attack, indicator position): the requirement of the indicator (`prefilter.requirements`)."""
        self._gate_requirement: dict[tuple[int, Gate], int] = {}
        """Per (attack, `Gate`): the requirement of a trigger's `match` or of an extractor."""
        pieces: list[str] = []
        self._payload_requirements: dict[tuple[int, int], list[int]] = {}
        """Per (attack, actor position): the requirements of its payload (a piece of each of its strings' longest
        literal piece: `prefilter.distinctive_pieces`)."""
        indicators: dict[tuple[int, int], tuple[str, ...]] = {}
        gates: dict[tuple[int, Gate], tuple[str, ...]] = {}
        for number, loaded in enumerate(self.attacks):
            for position, indicator in enumerate(loaded.plan.indicators):
                indicators[(number, position)] = prefilter.requirements(indicator)
            execution = loaded.attack.execution
            for actor, machine in enumerate(execution.actors or () if execution is not None else ()):
                for phase, step in enumerate(machine.phases or ()):
                    if step.trigger is not None and step.trigger.match is not None:
                        gates[(number, (actor, phase, TRIGGER))] = prefilter.predicate_requirements(step.trigger.match)
                    for position, extractor in enumerate(step.extractors or ()):
                        found = prefilter.extractor_requirement(extractor)
                        gates[(number, (actor, phase, position))] = () if found is None else (found,)
            for actor, payload in enumerate(loaded.plan.payloads):
                for text in payload:
                    self._payload_requirements.setdefault((number, actor), []).append(len(pieces))
                    pieces.append(text.longest)
        requirements: dict[str, int] = {}  # a number per distinct requirement: messages hit it once
        chosen = prefilter.choose([*indicators.values(), *gates.values()])
        for where, requirement in zip(indicators, chosen[:len(indicators)], strict=True):
            if requirement is not None:
                self._requirement_of[where] = requirements.setdefault(requirement, len(requirements))
        for gate, requirement in zip(gates, chosen[len(indicators):], strict=True):
            if requirement is not None:
                self._gate_requirement[gate] = requirements.setdefault(requirement, len(requirements))
        self._indicator_filter = prefilter.LiteralFilter({n: r for r, n in requirements.items()})
        distinct = list(dict.fromkeys(pieces))
        self._payload_filter = prefilter.LiteralFilter(
            dict(enumerate(re2.escape(piece) for piece in prefilter.distinctive_pieces(distinct))))
        number_of = {text: number for number, text in enumerate(distinct)}
        for requirement_numbers in self._payload_requirements.values():
            requirement_numbers[:] = [number_of[pieces[n]] for n in requirement_numbers]
        self._index_of = {loaded.key: number for number, loaded in enumerate(self.attacks)}
        self._judges = {key: judge for loaded in self.attacks
                        for key, judge in zip(loaded.plan.judge_keys, loaded.plan.judges, strict=True)}
        """A judge per judge key (`AttackPlan.judge_keys`: indicators alike judge alike)."""
        self._of_protocol = {protocol: sum(1 << self._index_of[a.key] for a in attacks)
                             for protocol, attacks in self._by_protocol.items()}
        """Per protocol, its attacks (a bit per attack number)."""
        self._classify()
        self._dispatch: dict[tuple[str, str, str, str], _Dispatch] = {}
        self._carriers: dict[tuple[str, str], tuple[tuple[int, ...], dict[int, tuple[int, ...]]]] = {}
        self._plans_of = {protocol: [(self._index_of[a.key], a.plan) for a in attacks]
                          for protocol, attacks in self._by_protocol.items()}
        for session in self._sessions.values():  # a reloaded library: attacks without a run get one next event
            session.started.clear()
            session.pending.clear()

    def _classify(self) -> None:
        """Which attacks' runs must be followed from the start (`_eager`) and, for the others, their classes
        on paper (`paper.paper_class`), under the current options. None wait on paper without the prefilter."""
        self._eager = 0
        self._paper_classes: dict[Hashable, int] = {}
        for number, loaded in enumerate(self.attacks):
            found = paper_class(loaded.plan, self.options) if self.prefilter else None
            if found is None:
                self._eager |= 1 << number
            else:
                self._paper_classes[found] = self._paper_classes.get(found, 0) | 1 << number

    def set_options(self, options: MonitorOptions) -> None:
        """New options apply to runs created from now on. The session's traffic counters tell actor bindings
        apart by their position in the options (`traffic`), so a live run with a bound actor counts its own
        messages from then on (`AttackRun.count_exactly`) when the bindings change."""
        self._shortest_grace = min(self._shortest_grace, options.grace_period)
        if options.bindings != self.options.bindings:
            for state in self._sessions.values():
                for key, run in state.runs.items():
                    if run.bound and not run.exact:
                        run.count_exactly()
                        state.exact[key] = run
        self.options = options
        self._classify()
        self.sessions.policy = options.session_key
        self.sessions.idle_gap = options.idle_gap
        if self.sessions.agent_episodes is not None:
            self.sessions.agent_episodes.names = options.agents
            self.sessions.agent_episodes.idle_gap = options.idle_gap

    def replace_attacks(self, attacks: list[LoadedAttack]) -> list[Output]:
        """Swap the library (reload): runs of attacks that are gone or changed are concluded first."""
        kept = {a.key: a for a in attacks}

        def changed(loaded: LoadedAttack) -> bool:
            new = kept.get(loaded.key)
            return new is None or new.path != loaded.path or new.document != loaded.document

        outputs: list[Output] = []
        for key, run in list(self.runs.items()):
            if changed(run.loaded):
                outputs.append(self._conclude(key, "reloaded"))
        old = self.attacks
        for state in list(self._sessions.values()):
            for cohort in list(state.cohorts):
                for timer in list(cohort.timers):
                    gone = sum(1 << number for number in bits(timer.members) if changed(old[number]))
                    if gone:
                        outputs.extend(self._conclude_paper(state, timer, gone, "reloaded", self.now))
        self._set_attacks(attacks)
        for state in self._sessions.values():  # the same attacks, numbered in the new library
            state.live = sum(1 << self._index_of[key] for key, _ in state.runs)
            state.settled = {self._index_of[old[number].key] for number in state.settled}
            for cohort in state.cohorts:
                for timer in cohort.timers:
                    timer.members = sum(1 << self._index_of[old[number].key] for number in bits(timer.members))
            state.paper = sum(cohort.members for cohort in state.cohorts)
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

    def exchange_ended(self, ended: ExchangeEnded, placed: bool = False) -> list[Output]:
        """An exchange ended leaving requests unanswered (`oatf_engine.events.ExchangeEnded`): the session rules
        stop holding them for their answer (`SessionResolver.end_exchange`: what that releases is observed, as in
        `observe`), and the runs that waited for them may end sooner — a grace period after their last message,
        as if they had been answered then (`answers`). Nothing else changes: it is no message, and no evidence.
        `placed`: the caller's own resolver was told already (offline replay's `place_events`). The clock does
        not move."""
        outputs: list[Output] = []
        for call in ended.unanswered:
            remember(self._ended_calls, call, None, MAX_ENDED_CALLS)
        if not placed:
            for item, item_session in self.sessions.end_exchange(ended):
                outputs.extend(self._advance(min(item.timestamp, self.sessions.oldest_held())))
                outputs.extend(self._observe(item, item_session))
        flows = self._awaiting_flows
        for flow in dict.fromkeys(call[0] for call in ended.unanswered):
            for session in flows.take(flow, ended.timestamp) or ():
                state = self._sessions.get(session)
                if state is None:
                    continue
                calls = [call for call in ended.unanswered if call[0] == flow]
                released = [state.traffic.release(call) for call in calls]
                for run in state.exact.values():
                    for call in calls:
                        run.release(call)
                if any(released) or state.exact:
                    self._answered(state, session, ended.timestamp)
        return outputs

    def _observe(self, event: ObservedEvent, session: str) -> list[Output]:
        protocol = event.protocol
        if protocol not in self._by_protocol:
            return []
        if event.event_type == UNINSPECTED_EVENT:  # evidence never seen: no run of the session may read resisted
            if (unseen := self._sessions.get(session)) is not None:
                unseen.traffic.uninspected += 1
            else:
                remember(self._early_marks, session, self._early_marks.get(session, 0) + 1, MAX_EARLY_MARKS)
            return []
        state = self._sessions.get(session)
        if state is None:
            state = self._sessions[session] = _Session()
            if self._early_marks:
                state.traffic.uninspected = self._early_marks.pop(session, 0)
        else:
            self._sessions.move_to_end(session)
        outputs = self._open_runs(event, session, state)
        bindings = self.options.bindings
        bound = sum(1 << n for n, b in enumerate(bindings) if b.accepts(event)) if bindings else 0
        answered = state.traffic.note(event, event.event_type if event.event_type in self._surfaces else OTHER, bound)
        late: Call | None = None
        if awaits_answer(event):
            call = (event.flow_id, event.sender, event.jsonrpc_id)
            if call in self._ended_calls:
                late = call  # its exchange ended before it was placed: released once the runs have taken it
            elif (flows := self._awaiting_flows.get(event.flow_id, event.timestamp)) is None:
                self._awaiting_flows.put(event.flow_id, [session], event.timestamp)
            elif session not in flows:
                flows.append(session)
        if event.injected:  # inject mode: rare, and every run that takes the event lists it
            for number in bits(state.paper & self._of_protocol[protocol]):
                outputs.extend(self._materialise(state, session, number))
            for taking in state.runs.values():
                if protocol in taking.loaded.protocols and taking.actors_for(event):
                    taking.note_injected(event)
        text = MessageText(event.content)
        judged: Judged = {}
        concerned = self._concerned(event, text, judged, state.settled)
        if state.exact:
            concerned = self._with_exact_runs(concerned, event, state)
        for number, positions, moves_actors, carries in concerned:
            key = (self.attacks[number].key, session)
            run = state.runs.get(key)
            if run is None:
                if not state.paper >> number & 1 or not (positions or carries or (moves_actors and any(
                        a.moved_by(event) for a in self._blank(number).by_protocol.get(protocol, ())))):
                    continue  # no run, or one on paper the event cannot change (its actors' first phases)
                outputs.extend(self._materialise(state, session, number))
                run = state.runs.get(key)
                if run is None:
                    continue  # evicted at once (max_runs)
                actors = run.actors_for(event)
            else:
                actors = run.actors_for(event)
                if not (run.exact or positions or (carries and run.undelivered)
                        or (moves_actors and any(a.moved_by(event) for a in actors))):
                    continue  # nothing in it the event can change
            if not actors:
                continue
            changes, matched = run.observe(event, actors, positions, moves_actors, carries, self.cel, self.semantic,
                                           text, judged)
            if changes:
                outputs.extend(PhaseChanged(run.id, c) for c in changes)
                self._schedule((run.loaded.key, session), run)
                if not any(a.movable for a in run.actors):
                    state.settled.add(number)
            if matched:
                outputs.extend(IndicatorMatched(run.id, run.loaded.key, t.id, event.flow_id, t.matched.evidence or "",
                                                *_where(t.found)) for t in matched if t.matched is not None)
        if late is not None:
            answered = state.traffic.release(late) or answered
            for run in state.exact.values():
                run.release(late)
        if answered or late is not None:
            self._answered(state, session, event.timestamp)
        if state.idle:
            self._sessions.pop(session, None)
        return outputs

    def _answered(self, state: _Session, session: str, at: float) -> None:
        """A request of the session that waited for its answer got it at `at` (the event, now fed to the runs it
        concerns): the runs that waited may end sooner, but none before `at` plus its grace period, so the
        session's `Recheck` is queued then (or stays, if queued earlier)."""
        due = max(at + self._shortest_grace, math.nextafter(self.now, math.inf))
        if state.recheck is not None and state.recheck.at <= due:
            return
        state.recheck = Recheck(session, due)
        heapq.heappush(self._timers, (due, next(self._timer_order), state.recheck))

    def _rechecked(self, recheck: Recheck) -> None:
        """Queue each run and timer of runs on paper of the session again at its deadline (not before the
        recheck's time: one the clock has passed fires in the same advance, as it would have been queued)."""
        state = self._sessions.get(recheck.session)
        if state is None or state.recheck is not recheck:
            return
        state.recheck = None
        for key, run in state.runs.items():
            self._schedule(key, run, recheck.at)
        for cohort in state.cohorts:
            for timer in cohort.timers:
                self._schedule(timer, timer.representative, recheck.at)

    def _open_runs(self, event: ObservedEvent, session: str, state: _Session) -> list[Output]:
        """A run, starting with `event`, for each attack of its protocol without one in the session (whose
        actors take the event: with actor bindings, one may not): on paper for those that may wait there."""
        protocol = event.protocol
        if protocol in state.started:
            missing = state.pending.pop(protocol, 0)
        else:
            state.started.add(protocol)
            missing = self._of_protocol[protocol]
        missing &= ~(state.live | state.paper)
        if not missing:
            return []
        baseline = state.traffic.snapshot()
        outputs: list[Output] = []
        for number in bits(missing & self._eager):
            loaded = self.attacks[number]
            run = AttackRun(loaded, session, event.timestamp, self.options, self.semantic is not None,
                            state.traffic, baseline, count_own=not self.prefilter)
            if not run.actors_for(event):
                state.pending[protocol] = state.pending.get(protocol, 0) | 1 << number
                continue
            outputs.extend(self._admit((loaded.key, session), run, state))
        if missing & ~self._eager:
            self._put_on_paper(state, session, Cohort(event.timestamp, baseline, self.options), missing & ~self._eager)
        return outputs

    def _put_on_paper(self, state: _Session, session: str, cohort: Cohort, members: int) -> None:
        """Keep the runs of `members` on paper in `cohort`, a timer per class (`paper.paper_class`)."""
        for alike in self._paper_classes.values():
            found = members & alike
            if found:
                timer = PaperTimer(session, cohort, found, self._on_paper(state, cohort, session, found & -found))
                cohort.timers.append(timer)
                self._paper_timer_count += 1
                self._schedule(timer, timer.representative)
        state.cohorts.append(cohort)
        state.paper |= members
        self._paper_count += members.bit_count()

    def _on_paper(self, state: _Session, cohort: Cohort, session: str, bit: int) -> AttackRun:
        """The run on paper of the attack of `bit` in `cohort` (`AttackRun.blank`)."""
        number = bit.bit_length() - 1
        run = AttackRun(self.attacks[number], session, cohort.started_at, cohort.options, self.semantic is not None,
                        state.traffic, cohort.baseline, blank=self._blank(number))
        if cohort.closed_at is not None:
            run.close(cohort.closed_at)
        return run

    def _blank(self, number: int) -> RunBlank:
        """The blank runs on paper of attack `number` read (`RunBlank`)."""
        return RunBlank.of(self.attacks[number], self.semantic is not None)

    def _materialise(self, state: _Session, session: str, number: int) -> list[Output]:
        """Follow the run on paper of attack `number` in memory from now on: the run its cohort started, fed
        nothing so far (nothing could change it)."""
        bit = 1 << number
        cohort = next(c for c in state.cohorts if c.members & bit)
        timer = next(t for t in cohort.timers if t.members & bit)
        self._leave_paper(state, timer, bit)
        run = AttackRun(self.attacks[number], session, cohort.started_at, cohort.options, self.semantic is not None,
                        state.traffic, cohort.baseline)
        if cohort.closed_at is not None:
            run.close(cohort.closed_at)
        return self._admit((run.loaded.key, session), run, state)

    def _leave_paper(self, state: _Session, timer: PaperTimer, members: int) -> None:
        """`members` of `timer` are no longer on paper (materialised, or concluded)."""
        timer.members &= ~members
        state.paper &= ~members
        self._paper_count -= members.bit_count()
        cohort = timer.cohort
        if not timer.members:
            self._paper_timer_count -= 1
            cohort.timers.remove(timer)  # its entry in the timer queue is stale now
            if not cohort.timers:
                state.cohorts.remove(cohort)

    def _concerned(self, event: ObservedEvent, text: MessageText, judged: Judged, settled: Set[int],
                   ) -> list[tuple[int, list[int], bool, bool]]:
        """The attacks whose runs `event` can change, in library order: (attack, the indicators it can match
        in document order, whether it can move actors — but not those of `settled` attacks —, whether it may
        carry a payload). The indicators are judged here, once per judge key (`judged`): one that does not match
        the event changes no run."""
        event_type = event.event_type if event.event_type in self._named else OTHER
        dispatch = self._dispatch_for(event.protocol, event_type, event.sender, event.direction)
        content, cel, semantic, judges = event.content, self.cel, self.semantic, self._judges
        positions: dict[int, list[int]] = {number: list(found) for number, found in dispatch.fed.items()}

        def keep(alike: Mapping[Hashable, tuple[tuple[int, int], ...]]) -> None:
            """Judge each key of `alike` once; keep the (attack, position)s of those not `not_matched`."""
            for key, where in alike.items():
                judgement = judged.get(key)
                if judgement is None:
                    judgement = judged[key] = judges[key](content, cel, semantic)
                if judgement[0] is not NOT_MATCHED:
                    for number, position in where:
                        positions.setdefault(number, []).append(position)

        keep(dispatch.judged)
        movers: Set[int] = dispatch.movers
        if dispatch.gating:
            hits = self._hits(self._indicator_filter, dispatch.gating,
                              prefilter.haystack(content) if self.prefilter else None)
            if hits:
                movers = set(movers)
                for requirement in hits:
                    keep(dispatch.gated.get(requirement, {}))
                    movers.update(dispatch.triggers.get(requirement, ()))
        if movers and settled:
            movers = movers - settled
        carriers: frozenset[int] = frozenset(dispatch.undelivered)
        if dispatch.carried:
            data = text.joined.encode("utf-8", "surrogatepass") if self.prefilter else None
            hits = self._hits(self._payload_filter, dispatch.carried, data)
            if hits:
                carriers = carriers.union(*(dispatch.payloads[requirement] for requirement in hits))
        if not (positions or movers or carriers):
            return []
        concerned = []
        for number in sorted(positions.keys() | movers | carriers):
            found = positions.get(number, [])
            found.sort()
            concerned.append((number, found, number in movers, number in carriers))
        return concerned

    def _with_exact_runs(self, concerned: list[tuple[int, list[int], bool, bool]], event: ObservedEvent,
                         state: _Session) -> list[tuple[int, list[int], bool, bool]]:
        """`concerned` with the session's `exact` runs of the event's protocol fed it as without the prefilter:
        every indicator and trigger their plan selects for it (`AttackPlan.selection`), in library order."""
        by_number = {entry[0]: entry for entry in concerned}
        for run in state.exact.values():
            if event.protocol in run.loaded.protocols:
                selection = run.loaded.plan.selection(event.protocol, event.event_type)
                number = self._index_of[run.loaded.key]
                by_number[number] = (number, list(selection.indicators), selection.moves_actors, True)
        return [by_number[number] for number in sorted(by_number)]

    @staticmethod
    def _hits(literals: prefilter.LiteralFilter, gated: Set[int], data: bytes | None) -> Set[int]:
        """The requirements among `gated` that `data` (a haystack; None: no prefilter) may satisfy."""
        if data is None:
            return gated
        return literals.matching(data) & gated

    def _dispatch_for(self, protocol: str, event_type: str, sender: str, direction: str) -> _Dispatch:
        """The library's `_Dispatch` for events of `protocol`, `event_type`, `sender` and `direction`,
        remembered for a bounded number of event types."""
        dispatch = self._dispatch.get((protocol, event_type, sender, direction))
        if dispatch is not None:
            return dispatch
        movers: set[int] = set()
        triggers: dict[int, list[int]] = {}
        judged: dict[Hashable, list[tuple[int, int]]] = {}
        fed: dict[int, tuple[int, ...]] = {}
        gated: dict[int, dict[Hashable, list[tuple[int, int]]]] = {}
        requirement_of, semantic_available = self._requirement_of, self.semantic is not None
        for number, plan in self._plans_of.get(protocol, ()):
            selection = plan.selection(protocol, event_type)
            if selection.moves_actors:
                fired = plan.gates(protocol, event_type, sender, direction)
                gates = [self._gate_requirement.get((number, gate)) for gate in fired or ()]
                if fired is None or None in gates:
                    movers.add(number)
                else:
                    for requirement in gates:
                        assert requirement is not None
                        triggers.setdefault(requirement, []).append(number)
            semantic = []
            for position in selection.indicators:
                indicator = plan.indicators[position]
                if indicator.direction not in (None, direction):
                    continue  # `IndicatorTracker.accepts` would refuse the event
                if indicator.semantic is not None:
                    if semantic_available:  # without an evaluator, it is never evaluated (`skipped`)
                        semantic.append(position)
                    continue
                requirement = requirement_of.get((number, position))
                if requirement is None:
                    judged.setdefault(plan.judge_keys[position], []).append((number, position))
                else:
                    alike = gated.setdefault(requirement, {})
                    alike.setdefault(plan.judge_keys[position], []).append((number, position))
            if semantic:
                fed[number] = tuple(semantic)
        undelivered, payloads = self._carried(protocol, sender)
        dispatch = _Dispatch(frozenset(movers), {r: tuple(n) for r, n in triggers.items()},
                             {k: tuple(w) for k, w in judged.items()}, fed,
                             {r: {k: tuple(w) for k, w in g.items()} for r, g in gated.items()}, undelivered, payloads,
                             frozenset(gated.keys() | triggers.keys()), frozenset(payloads))
        if len(self._dispatch) < MAX_REMEMBERED_EVENT_TYPES:
            self._dispatch[(protocol, event_type, sender, direction)] = dispatch
        return dispatch

    def _carried(self, protocol: str, sender: str) -> tuple[tuple[int, ...], dict[int, tuple[int, ...]]]:
        """`_Dispatch.undelivered` and `_Dispatch.payloads` for the messages `sender` sends on `protocol` (they
        depend on nothing else: remembered)."""
        found = self._carriers.get((protocol, sender))
        if found is None:
            undelivered: list[int] = []
            payloads: dict[int, list[int]] = {}
            for number, plan in self._plans_of.get(protocol, ()):
                for actor, ((actor_protocol, side), payload) in enumerate(zip(plan.roles, plan.payloads,
                                                                              strict=True)):
                    if actor_protocol != protocol or side == sender:
                        continue
                    if not payload:
                        undelivered.append(number)
                    for requirement in self._payload_requirements.get((number, actor), ()):
                        payloads.setdefault(requirement, []).append(number)
            found = self._carriers[(protocol, sender)] = (tuple(undelivered),
                                                          {r: tuple(n) for r, n in payloads.items()})
        return found

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
            at, _, item = heapq.heappop(timers)
            if isinstance(item, Recheck):
                self._rechecked(item)
                continue
            run = self._timed_run(item)
            if run is None or run.scheduled != at:
                continue  # concluded, or superseded by an earlier deadline that has already fired
            run.scheduled = float("inf")
            if isinstance(item, PaperTimer):  # runs on paper have no `after` timer to fire
                due = run.due(self.now)
                if due is not None:
                    outputs.extend(self._conclude_paper(self._sessions[item.session], item, item.members, *due))
                else:
                    self._schedule(item, run)
                continue
            changes = run.tick(self.now)
            if changes:
                outputs.extend(PhaseChanged(run.id, c) for c in changes)
                if not any(a.movable for a in run.actors):
                    self._sessions[run.session].settled.add(self._index_of[run.loaded.key])
            due = run.due(self.now)
            if due is not None:
                outputs.append(self._conclude(item, *due))
            else:
                self._schedule(item, run)
        return outputs

    def _timed_run(self, item: Timed) -> AttackRun | None:
        """The run a timer queue entry stands for, while it is live: a materialised run, or the representative
        of a `PaperTimer` with members left."""
        if isinstance(item, PaperTimer):
            return item.representative if item.members else None
        return self.runs.get(item)

    def _schedule(self, item: Timed, run: AttackRun, not_before: float | None = None) -> None:
        """Queue the run's deadline if it is earlier than the one queued (later ones are found when the
        queued one fires). A deadline the clock has already passed is queued just after now, so one tick
        never loops on a run (or at `not_before`, a time the clock has reached: a `Recheck`'s)."""
        at = run.deadline()
        if at >= run.scheduled or at == float("inf"):
            return
        at = max(at, math.nextafter(self.now, math.inf) if not_before is None else not_before)
        run.scheduled = at
        heapq.heappush(self._timers, (at, next(self._timer_order), item))
        if len(self._timers) > 2 * (len(self.runs) + self._paper_timer_count) + 1024:  # stale ones: at most as many
            self._timers = [t for t in self._timers if self._live_entry(t[0], t[2])]
            heapq.heapify(self._timers)

    def _live_entry(self, at: float, item: Timed | Recheck) -> bool:
        """Whether a timer queue entry is still to fire (not superseded, its run or session still there)."""
        if isinstance(item, Recheck):
            state = self._sessions.get(item.session)
            return state is not None and state.recheck is item
        run = self._timed_run(item)
        return run is not None and run.scheduled == at

    def _timed(self) -> Iterable[tuple[Timed, AttackRun]]:
        """Every live timer queue entry's item and run: the materialised runs, then the timers of runs on paper."""
        yield from self.runs.items()
        for state in self._sessions.values():
            for cohort in state.cohorts:
                for timer in cohort.timers:
                    yield timer, timer.representative

    def end_of_traffic(self, end: float, last_clock: Callable[[float], float] | None = None) -> list[Output]:
        """The traffic ended at `end` (a recording's end; a stdio session the agent closed): the clock moves
        one grace period — the longest any loaded attack or the options set — past it, so runs whose actors are
        all terminal conclude `completed` (events still held for an answer are placed first: none can come now).
        Then, as on a proxy left running, the timers that need no traffic
        fire in turn (`AttackRun.quiet_deadline`: an `after` trigger, and the grace period that follows the
        last actor turning terminal), so a capture replays to the reports the live proxy wrote. The runs still
        waiting for traffic are concluded `interrupted` after at least a full grace period (not cut short:
        `AttackRun.cut_short`), at the clock those timers brought the monitor to, or the later one `last_clock`
        (told that clock) returns: a replay split over processes concludes each process's at the latest of
        theirs, as one monitor of all the runs would (`oatf_engine.replay_shards`)."""
        grace = max([self.options.grace_period, *(a.plan.grace_period or 0.0 for a in self.attacks)])
        outputs: list[Output] = []
        for placed, session in self.sessions.flush():  # no answer can come now: nothing more to wait for
            outputs.extend(self._observe(placed, session))
        outputs += self.tick(end + grace)
        # Each run's next quiet deadline, earliest first; an entry is checked against its run when it comes up
        # (stale ones are requeued), so every timer costs a heap operation, not a look at every run.
        order = itertools.count()
        pending = [(due, next(order), item) for item, run in self._timed() if (due := run.quiet_deadline()) < math.inf]
        heapq.heapify(pending)
        while pending:
            due, _, item = heapq.heappop(pending)
            run = self._timed_run(item)
            if run is None:
                continue  # concluded meanwhile
            if (current := run.quiet_deadline()) != due:
                if current < math.inf:
                    heapq.heappush(pending, (current, next(order), item))
                continue
            # A deadline the clock has passed was queued just after it (`_schedule`): one tick past it fires it.
            outputs += self.tick(max(due, math.nextafter(self.now, math.inf)))
            run = self._timed_run(item)
            if run is not None and (after := run.quiet_deadline()) < math.inf and after > due:
                heapq.heappush(pending, (after, next(order), item))
            # else concluded, or its timer changed nothing: only traffic could move it now
        if last_clock is not None:
            outputs += self.tick(last_clock(self.now))
        return [*outputs, *self.shutdown()]

    def shutdown(self, status: str = "interrupted") -> list[Output]:
        """Conclude every open run with `status` (the proxy is stopping: `interrupted`; a crashed proxy's
        journal replayed: `recovered`): nothing observed is lost."""
        outputs: list[Output] = []
        for placed, session in self.sessions.flush():
            outputs.extend(self._observe(placed, session))
        outputs.extend(self._conclude(key, status) for key in list(self.runs))
        for state in list(self._sessions.values()):
            for cohort in list(state.cohorts):
                for timer in list(cohort.timers):
                    outputs.extend(self._conclude_paper(state, timer, timer.members, status, self.now))
        self._timers.clear()
        return outputs

    def conclude_closed_sessions(self) -> list[Output]:
        """Conclude now, as the clock would conclude them, the runs of the sessions the agent closed
        (`close_session`): no later message can belong to them, so each one's own `after` timers fire in turn up
        to its end and it concludes with the status and at the time its end gives (`AttackRun.due`: mostly
        `session_closed`, a grace period after the close) — whatever the clock reads. A crashed proxy's journal
        replayed (`oatf_engine.recovery`) so reports them as the proxy, had it gone on, would have; the other
        runs, which later traffic could still change, are left open."""
        outputs: list[Output] = []
        for placed, session in self.sessions.flush():  # held events placed first: they may be a closed run's
            outputs.extend(self._observe(placed, session))
        for item, run in list(self._timed()):
            while run.closed_at is not None:
                at = run.deadline()
                if isinstance(item, PaperTimer):  # runs on paper have no `after` timer to fire
                    due = run.due(at)
                    if due is not None and item.members:
                        outputs.extend(self._conclude_paper(self._sessions[item.session], item, item.members, *due))
                    break
                outputs.extend(PhaseChanged(run.id, change) for change in run.tick(at))
                due = run.due(at)
                if due is not None:
                    outputs.append(self._conclude(item, *due))
                    break
                if run.deadline() <= at:  # nothing moves it further (never expected): leave it to `shutdown`
                    break
        return outputs

    @property
    def held_flows(self) -> Set[str]:
        """The flows with events the session resolver holds, not evaluated yet (`SessionResolver.held_flows`)."""
        return self.sessions.held_flows

    @property
    def queued_timers(self) -> int:
        """Entries in the timer queue, stale ones included (bounded by `_schedule`'s compaction)."""
        return len(self._timers)

    @property
    def live_runs(self) -> int:
        """Runs open, materialised (`runs`) or on paper."""
        return len(self.runs) + self._paper_count

    @property
    def open_sessions(self) -> int:
        """Sessions with live runs, materialised or on paper."""
        return len(self._sessions)

    def close_session(self, protocol: str, name: str, value: str, at: float) -> None:
        """The agent closed the session whose key `name` is `value` at `at` (an MCP client's `DELETE` with its
        `Mcp-Session-Id`): its runs conclude `session_closed` a grace period later (`AttackRun.close`), unless
        they conclude earlier. Nothing happens when the session key policy does not group runs by that key."""
        session = session_named(protocol, name, value, self.options.session_key)
        state = None if session is None else self._sessions.get(session)
        if state is None:
            return
        for key, run in state.runs.items():
            run.close(at)
            self._schedule(key, run)
        for cohort in state.cohorts:
            if cohort.closed_at is None:
                cohort.closed_at = at
            for timer in cohort.timers:
                timer.representative.close(at)
                self._schedule(timer, timer.representative)

    def status(self) -> list[dict[str, Any]]:
        """A snapshot of the live runs (materialised, then on paper), for the `oatf.status` command: each run's
        `state` is `live`, `grace` (every actor is terminal: it concludes after a grace period of quiet) or
        `session closed` (the agent closed its session: it concludes a grace period later)."""
        paper = [self._on_paper(state, cohort, session, 1 << number)
                 for session, state in self._sessions.items() for cohort in state.cohorts
                 for number in bits(cohort.members)]
        return [{
            "run": run.id, "messages": run.messages,
            "phases": {a.name: a.phase.name for a in run.actors},
            "matched": [t.id for t in run.indicators if t.matched is not None],
            "state": "grace" if run.all_terminal_at is not None else
                     "session closed" if run.closed_at is not None else "live",
            "delivered": run.delivered,
        } for run in [*self.runs.values(), *paper]]

    def _admit(self, key: tuple[str, str], run: AttackRun, state: _Session) -> list[Output]:
        """Add a new run; beyond `max_runs` live runs in memory, the oldest run of the least recently active
        session is concluded `evicted` first."""
        outputs: list[Output] = []
        while len(self.runs) >= self.options.max_runs:
            oldest = next(iter(next(s for s in self._sessions.values() if s.runs).runs))
            outputs.append(self._conclude(oldest, "evicted"))
        self.runs[key] = run
        state.runs[key] = run
        state.live |= 1 << self._index_of[run.loaded.key]
        if run.exact:
            state.exact[key] = run
        self._sessions[run.session] = state  # again, if an eviction just emptied and forgot it
        self._schedule(key, run)
        return outputs

    def _conclude(self, key: tuple[str, str], status: str, ended_at: float | None = None) -> RunConcluded:
        """Conclude a run: its report, with `status` and `ended_at` (default: now). Its attack gets a new run
        at the session's next event of its protocols; a session without runs is forgotten."""
        run = self.runs.pop(key)
        self.concluded += 1
        state = self._sessions.get(run.session)
        if state is not None:
            del state.runs[key]
            state.exact.pop(key, None)
            number = self._index_of.get(run.loaded.key)
            if number is not None:
                state.live &= ~(1 << number)
                state.settled.discard(number)
            self._pend(state, run.session, run.loaded.protocols, 0 if number is None else 1 << number)
        return RunConcluded(run.id, run.report(status, self.now if ended_at is None else ended_at))

    def _conclude_paper(self, state: _Session, timer: PaperTimer, members: int, status: str,
                        ended_at: float) -> list[Output]:
        """Conclude the runs on paper of `members` (some of `timer`'s), in library order: their reports, with
        `status` and `ended_at` (as `_conclude`)."""
        self._leave_paper(state, timer, members)
        outputs: list[Output] = []
        for number in bits(members):
            run = self._on_paper(state, timer.cohort, timer.session, 1 << number)
            outputs.append(RunConcluded(run.id, run.report(status, ended_at)))
        self.concluded += members.bit_count()
        self._pend(state, timer.session, timer.representative.loaded.protocols, members)  # a class: one protocols
        return outputs

    def _pend(self, state: _Session, session: str, protocols: Iterable[str], attacks: int) -> None:
        """Runs of `attacks` (bits) concluded: each gets a new run at the session's next event of its
        `protocols`; a session without runs left is forgotten."""
        if state.idle:
            self._sessions.pop(session, None)
        else:
            for protocol in protocols:
                state.pending[protocol] = state.pending.get(protocol, 0) | attacks
