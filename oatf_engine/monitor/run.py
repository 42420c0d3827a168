"""An AttackRun: one attack followed over one episode's traffic (format spec §5, §6, §9; SDK spec §4.5): a
protocol session, or an AG-UI run with its agent's outbound traffic (`sessions`, `episodes`).

When the grace period runs (format spec §4.2 `attack.grace_period`: "after all terminal phases complete"):
a passive observer cannot see an attacker's phase *complete*, and a single-phase document is terminal from
its first message — starting the timer at terminal-phase entry would conclude before the agent acted and
report a false `not_exploited`. So, for an observer, a run is complete when every actor is in its terminal
phase **and the run has gone quiet**: while every actor is terminal, each event of the run restarts the
grace timer, and the verdict is computed one grace period after the run's last event. A run is not quiet
while a request of its traffic waits for its answer (`answers`: a JSON-RPC request of either side, an HTTP
request; up to `MAX_ANSWER_WAIT`): a tool may take a minute, an LLM-backed agent answers a blocking
`message/send` after its work, 30 s later or more, and that answer belongs to the run (`awaited_at`).

Whether the attack reached the agent is followed beside the verdict (`delivery`): each actor's payload is
looked for in the messages its side sends to the agent. The report says `delivered` and gives the evidence;
its `outcome` tells *resisted* (delivered, not exploited) from *not delivered*.

Every time in a report follows the event clock (the traffic's timestamps), never the wall clock, so the
same traffic gives the same report live and in replay, however often it is replayed.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import oatf

from ..events import Call, ObservedEvent
from .actors import ActorMachine, PhaseChange, peer_of
from .answers import Unanswered
from .delivery import CUT_SHORT, Delivery, MessageText, PayloadText, outcome
from .episodes import MAX_ANSWER_WAIT
from .indicators import IndicatorTracker, Judged
from .library import LoadedAttack
from .options import ActorBinding, MonitorOptions
from .plan import AttackPlan
from .traffic import MAX_AWAITING, Baseline, SessionTraffic, TrafficKey, TrafficView

_NONE: Mapping[Any, Any] = MappingProxyType({})
"""No bindings, no rivals: what most runs hold (read only)."""

MAX_CITED_FLOWS = 50
MAX_INJECTIONS = 100
"""Exchanges the proxy's inject mode altered that a report lists, at most."""


@dataclass(slots=True)
class RunBlank:
    """An attack's actors, deliveries and indicators as a run starts with them, shared by its runs on paper
    (`AttackRun.blank`), which read them and are never fed: nothing ever changes them."""

    actors: list[ActorMachine]
    deliveries: list[Delivery]
    indicators: list[IndicatorTracker]
    by_protocol: dict[str, list[ActorMachine]]
    """`AttackRun._by_protocol` of these actors."""
    delivery_of: dict[int, Delivery]
    """`AttackRun._delivery_of` of these actors."""
    aggregate: tuple[oatf.AttackResult, oatf.EvaluationSummary, oatf.Tier | None] | None = None
    """What `oatf.compute_verdict` makes of these indicators' verdicts (result, summary, highest tier): the same
    for every run on paper, worked out by the first that reports (`AttackRun.verdict`)."""
    verdict_form: dict[str, Any] | None = None
    """The plain form of the first verdict of a run on paper (`AttackRun.verdict_form`): every other one is the
    same but for its time and each indicator's evidence (how many messages its filter kept), stamped in."""

    @classmethod
    def of(cls, loaded: LoadedAttack, semantic_available: bool) -> RunBlank:
        """The blank of `loaded`'s runs (`semantic_available`: as `AttackRun`'s), made once per plan
        (`AttackPlan.blanks`: monitors of one library, a reloaded one, share it)."""
        blank = loaded.plan.blanks.get(semantic_available)
        if isinstance(blank, RunBlank):
            return blank
        attack = loaded.attack
        assert attack.execution is not None and attack.execution.actors is not None
        actors = [ActorMachine(actor, math.nan) for actor in attack.execution.actors]
        deliveries = _deliveries(actors, loaded.plan.payloads)
        blank = loaded.plan.blanks[semantic_available] = cls(
            actors, deliveries, _trackers(loaded.plan, semantic_available), _by_protocol(actors),
            {id(machine): d for machine, d in zip(actors, deliveries, strict=True)})
        return blank


def _by_protocol(actors: list[ActorMachine]) -> dict[str, list[ActorMachine]]:
    found: dict[str, list[ActorMachine]] = {}
    for actor in actors:
        found.setdefault(actor.protocol, []).append(actor)
    return found


def _deliveries(actors: list[ActorMachine], payloads: Iterable[tuple[PayloadText, ...]]) -> list[Delivery]:
    return [Delivery(machine.name, payload) for machine, payload in zip(actors, payloads, strict=True)]


def _trackers(plan: AttackPlan, semantic_available: bool) -> list[IndicatorTracker]:
    unavailable = None if semantic_available else (
        "semantic indicators need a SemanticEvaluator; none is configured (option oatf_semantic_evaluator)")
    return [IndicatorTracker(i, judge, key, unavailable if i.semantic is not None else None)
            for i, judge, key in zip(plan.indicators, plan.judges, plan.judge_keys, strict=True)]


@dataclass(slots=True)
class _OwnCounts:
    """The counters an `exact` run keeps itself: as a run without rivals reads them from `traffic`."""

    last_event_at: float
    actors: dict[int, int]
    """Per actor (by id): the messages of its traffic."""
    examined: list[int]
    """Per indicator position: the messages its trace filter kept while it was open."""
    awaiting: Unanswered[None]
    """The run's requests waiting for their answer (see the module docstring)."""
    messages: int = 0


@dataclass(slots=True)
class AttackRun:
    loaded: LoadedAttack
    session: str
    started_at: float
    options: MonitorOptions
    semantic_available: bool = False
    traffic: SessionTraffic = field(default_factory=SessionTraffic)
    """The session's counters (`oatf_engine.monitor.traffic`): the run's own counters are read from them."""
    baseline: Baseline = field(default_factory=Baseline)
    """`traffic`'s counts just before the run's first event."""
    count_own: bool = False
    """Count its own messages even without rival actors (`exact`): `Monitor(prefilter=False)`, the reference
    the differential tests compare the counters read from `traffic` with."""
    blank: RunBlank | None = None
    """A run on paper (`oatf_engine.monitor.paper`): its actors, deliveries and indicators are the attack's
    shared blank, as the run started; it reports, tells its deadlines, and is never fed or ticked (`observe`
    and `tick` refuse). None: a run of its own."""
    actors: list[ActorMachine] = field(default_factory=list)
    indicators: list[IndicatorTracker] = field(default_factory=list)
    all_terminal_at: float | None = None
    closed_at: float | None = None
    """When the agent closed the run's session (an MCP `DELETE`: `Monitor.close_session`), if it did."""
    cited_flows: list[str] = field(default_factory=list)
    phase_changes: list[PhaseChange] = field(default_factory=list)
    injections: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Flow id → what the proxy's inject mode altered in it (`ObservedEvent.injected`), first seen first."""
    grace_period: float = field(init=False)
    """Seconds: `attack.grace_period`, else the monitor's default."""
    deliveries: list[Delivery] = field(init=False, repr=False, compare=False)
    _bindings: Mapping[str, ActorBinding] = field(init=False, repr=False, compare=False)
    _binding_bit: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _delivery_of: dict[int, Delivery] = field(init=False, repr=False, compare=False)
    _by_protocol: dict[str, list[ActorMachine]] = field(init=False, repr=False, compare=False)
    _protocols: frozenset[str] = field(init=False, repr=False, compare=False)
    _undelivered: int = field(init=False, repr=False, compare=False)
    _bound: bool = field(init=False, repr=False, compare=False)
    _rivals: Mapping[int, list[ActorMachine]] = field(init=False, repr=False, compare=False)
    """Actors sharing a protocol and role with others, by id: each binds to the peer that delivers its
    payload (`actors.peer_of`)."""
    _seen_noted: int = field(init=False, repr=False, compare=False)
    _view_cache: TrafficView | None = field(init=False, repr=False, compare=False)
    """`_view` while `traffic` counts no more events."""
    _own: _OwnCounts | None = field(init=False, repr=False, compare=False)
    """The run's own counters when it has rival actors or `count_own` (`exact`), else None: they are read from
    `traffic`."""
    scheduled: float = float("inf")
    """The earliest time the monitor's timer queue holds for this run (kept by `Monitor`)."""

    def __post_init__(self) -> None:
        plan = self.loaded.plan
        self.grace_period = plan.grace_period if plan.grace_period is not None else self.options.grace_period
        if self.options.bindings:
            self._bindings = {b.actor: b for b in self.options.bindings}
            bits = {b.actor: 1 << n for n, b in enumerate(self.options.bindings)}  # the last binding of a name wins
            self._binding_bit = {name: bits[name] for name in self._bindings}
        else:
            self._bindings, self._binding_bit = _NONE, _NONE
        blank = self.blank
        if blank is not None:
            self.actors, self.deliveries, self.indicators = blank.actors, blank.deliveries, blank.indicators
            self._delivery_of, self._by_protocol = blank.delivery_of, blank.by_protocol
        else:
            attack = self.loaded.attack
            assert attack.execution is not None and attack.execution.actors is not None
            self.actors = [ActorMachine(actor, self.started_at) for actor in attack.execution.actors]
            self.deliveries = _deliveries(self.actors, plan.payloads)
            self.indicators = _trackers(plan, self.semantic_available)
            self._delivery_of = {id(machine): d for machine, d in zip(self.actors, self.deliveries, strict=True)}
            self._by_protocol = _by_protocol(self.actors)
        self._undelivered = len(self.deliveries)
        self._bound = bool(self._bindings) and any(a.name in self._bindings for a in self.actors)
        self._rivals = _NONE
        if plan.rivals_possible:
            roles: dict[tuple[str, str], list[ActorMachine]] = {}
            for actor in self.actors:
                if actor.name not in self._bindings:
                    roles.setdefault((actor.protocol, actor.agent_side), []).append(actor)
            self._rivals = {id(a): [b for b in same if b is not a] for same in roles.values() if len(same) > 1
                            for a in same}
        self._protocols = frozenset(self._by_protocol)
        self._seen_noted = -1
        self._view_cache = None
        self._own = _OwnCounts(self.started_at, {id(a): 0 for a in self.actors}, [0] * len(plan.indicators),
                               Unanswered(MAX_AWAITING)) if self._rivals or self.count_own else None
        self._check_terminal(self.started_at)

    @property
    def id(self) -> str:
        return f"{self.loaded.key}@{self.session}"

    @property
    def exact(self) -> bool:
        """Whether the run counts its own messages, and so must be fed every event of its traffic
        (`Monitor`), however little the event can change in it.

        Which events an actor sees is read from the session's counters (`traffic`) when it depends on the
        event alone: its protocol and, with `oatf_actor_bindings`, its endpoint. Rival actors (`_plays`)
        see an event depending on the run's history too: before a peer delivers an actor's payload every peer
        no rival is bound to plays it, after that only its own peer does. No counter of the session can tell
        that, so such a run (rare: a document with two actors of one protocol and role) counts its messages,
        each actor's (`messages_seen`, which decides who takes part in `delivered`), each indicator's
        `examined` and the time of its last message itself, exactly as they were seen."""
        return self._own is not None

    @property
    def bound(self) -> bool:
        """Some actor of the run has an explicit binding (`oatf_actor_bindings` when the run was created)."""
        return self._bound

    def count_exactly(self) -> None:
        """Count its own messages from now on (`exact`), from the counts read from `traffic` so far: the
        session's binding bits no longer follow this run's bindings (new options: `Monitor.set_options`)."""
        if self._own is None:
            awaiting: Unanswered[None] = Unanswered(MAX_AWAITING)
            awaiting.calls = {call: (at, None) for call, at in self._awaited().items()}
            self._own = _OwnCounts(self.last_event_at, {id(a): self.actor_messages(a) for a in self.actors},
                                   [self.examined(t) for t in self.indicators], awaiting, self.messages)

    def actors_for(self, event: ObservedEvent) -> list[ActorMachine]:
        """The actors whose traffic this event is: same protocol; an actor's explicit binding if it has one
        (`oatf_actor_bindings`); and, for actors sharing a protocol and role, the peer bound to the actor, or,
        before one is, every peer no rival is bound to (`actors` module docstring)."""
        actors = self._by_protocol.get(event.protocol, [])
        if not self._bound and not self._rivals:
            return actors
        bound = self._bindings
        return [a for a in actors if (bound[a.name].accepts(event) if a.name in bound else self._plays(a, event))]

    def _plays(self, actor: ActorMachine, event: ObservedEvent) -> bool:
        rivals = self._rivals.get(id(actor))
        if rivals is None:
            return True
        peer = peer_of(event, actor.agent_side)
        if actor.peer is not None:
            return actor.peer == peer
        return all(rival.peer != peer for rival in rivals)

    def takes(self, actor: ActorMachine, key: TrafficKey) -> bool:
        """Whether `actor` sees the events counted under `key`: its protocol, and its binding if it has one."""
        bit = self._binding_bit.get(actor.name)
        return actor.protocol == key[0] and (bit is None or bool(key[3] & bit))

    def _view(self) -> TrafficView:
        """The session's events since the run started that some actor of the run sees (shared with the runs
        started by the same event when no actor is bound: `SessionTraffic.view`; worked out once per event the
        session counts: timers, grace periods and reports read it many times)."""
        noted = self.traffic.noted
        if self._view_cache is None or self._seen_noted != noted:
            traffic = self.traffic
            self._view_cache = traffic.view(self.baseline, self._protocols) if not self._bound else TrafficView.of(
                {key: n for key, n in traffic.since(self.baseline).items() if self._sees(key)}, traffic.last_at,
                self._awaited())
            self._seen_noted = noted
        return self._view_cache

    def _sees(self, key: TrafficKey) -> bool:
        """Whether some actor of the run sees the events counted under `key` (`takes`)."""
        return any(self.takes(actor, key) for actor in self._by_protocol.get(key[0], ()))

    def _awaited(self) -> dict[Call, float]:
        """The run's requests waiting for their answer, read from the session (`SessionTraffic.awaited`)."""
        return self.traffic.awaited(self.baseline, self._sees)

    @property
    def messages(self) -> int:
        """Messages of the run's traffic seen so far."""
        if self._own is not None:
            return self._own.messages
        return self._view().messages

    def actor_messages(self, actor: ActorMachine) -> int:
        """Messages of `actor`'s traffic seen so far."""
        if self._own is not None:
            return self._own.actors[id(actor)]
        if actor.name not in self._binding_bit:
            return self._view().by_protocol.get(actor.protocol, 0)
        return sum(n for key, n in self._view().seen.items() if self.takes(actor, key))

    def examined(self, tracker: IndicatorTracker) -> int:
        """Messages the indicator's trace filter kept so far (format spec §6.1 steps 1–4; see `traffic`)."""
        if self._own is not None:
            return self._own.examined[self.indicators.index(tracker)]
        indicator = tracker.indicator
        view = self._view()
        actors = self._by_protocol.get(indicator.protocol or "", ())
        if not self._bound or not any(a.name in self._binding_bit for a in actors):  # it sees the whole protocol
            if indicator.actor is not None and all(a.name != indicator.actor for a in actors):
                return 0
            return view.count(indicator.protocol, indicator.surface, indicator.direction)
        return sum(n for key, n in view.seen.items()
                   if key[0] == indicator.protocol
                   and (indicator.surface is None or key[1] == indicator.surface)
                   and (indicator.direction is None or key[2] == indicator.direction)
                   and (indicator.actor is None or any(a.name == indicator.actor and self.takes(a, key)
                                                       for a in actors)))

    @property
    def awaited_at(self) -> float:
        """When the latest of the run's requests waiting for their answer was sent (see the module docstring;
        at most `MAX_AWAITING` of them, the first), or -inf."""
        if self._own is not None:
            return self._own.awaiting.latest()
        return self._view().awaited_at

    @property
    def last_event_at(self) -> float:
        """The time of the run's last message (its first when it has seen one only; see `traffic`)."""
        if self._own is not None:
            return self._own.last_event_at
        return max(self.started_at, self._view().latest)

    def observe(self, event: ObservedEvent, actors: list[ActorMachine], positions: Iterable[int], moves_actors: bool,
                carries: bool, cel: oatf.CelEvaluator | None, semantic: oatf.SemanticEvaluator | None,
                text: MessageText | None = None, judged: Judged | None = None,
                ) -> tuple[list[PhaseChange], list[IndicatorTracker]]:
        """Feed one event of this run's traffic, already counted in `traffic` (`actors`: `actors_for(event)`, not
        empty; `positions`: the indicators that can match it, in document order, among those the plan's
        `Selection` keeps — all of them for an `exact` run; `moves_actors`: the selection's; `carries`: whether
        the event may carry a payload of the run's; `text`: the event's strings and `judged` its judgements so
        far, shared by the runs that see it): phase changes, and indicators that matched for the first time."""
        self._own_state()
        own = self._own
        if own is not None:
            own.messages += 1
            if event.timestamp > own.last_event_at:
                own.last_event_at = event.timestamp
            for actor in actors:
                own.actors[id(actor)] += 1
            own.awaiting.answered(event)
            own.awaiting.admit(event, None)
        if self._undelivered and carries:
            self._look_for_payload(event, actors, text or MessageText(event.content))
        changes: list[PhaseChange] = []
        if moves_actors:
            for actor in actors:
                change = actor.observe(event)
                if change is not None:
                    changes.append(change)
        newly: list[IndicatorTracker] = []
        names: set[str] | None = None
        for position in positions:
            tracker = self.indicators[position]
            if not tracker.open:
                continue
            if names is None:
                names = {a.name for a in actors}
            if not tracker.accepts(event, names):
                continue
            if own is not None:
                own.examined[position] += 1
            if tracker.observe(event, cel, semantic, judged):
                newly.append(tracker)
                self._cite(event.flow_id)
        if changes:
            self.phase_changes.extend(changes)
            self._cite(event.flow_id)
            self._check_terminal(self.last_event_at)
        return changes, newly

    def release(self, call: Call) -> None:
        """`call`, a request of the run's traffic, ended without its answer (`ExchangeEnded`): the run no longer
        waits for it (a run that counts its own messages follows its own requests; the others read the
        session's, `SessionTraffic.release`)."""
        if self._own is not None:
            self._own.awaiting.release(call)

    def note_injected(self, event: ObservedEvent) -> None:
        """An event of this run's traffic (some actor takes it) that the proxy's inject mode altered
        (`ObservedEvent.injected`): listed in the report, once per flow. Fed by `Monitor` to every run that
        takes the event, whether or not the event can change anything else in it."""
        if event.flow_id in self.injections or len(self.injections) < MAX_INJECTIONS:
            self.injections[event.flow_id] = {"flow": event.flow_id, "event": event.event_type,
                                              "injected": list(event.injected)}

    @property
    def undelivered(self) -> bool:
        """Some actor has not delivered its payload yet (a message may still do it)."""
        return self._undelivered > 0

    def _look_for_payload(self, event: ObservedEvent, actors: list[ActorMachine], text: MessageText) -> None:
        """Delivery: a message an actor's side sends to the agent may carry that actor's payload."""
        for actor in actors:
            if event.sender == actor.agent_side:
                continue  # the agent's own message
            delivery = self._delivery_of[id(actor)]
            if delivery.observe(event, text, actor.phase.name or f"phase-{actor.index + 1}"):
                self._undelivered -= 1  # the evidence names its flow; `flows_cited` keeps matches and phases
                if delivery.payload and id(actor) in self._rivals:
                    actor.peer = peer_of(event, actor.agent_side)  # this peer plays the actor from now on

    @property
    def delivered(self) -> bool:
        """Every actor that took part in the run (saw a message of it) delivered its payload, and one did.

        A run follows one episode, and an actor of a protocol the agent did not speak in it (or a document's
        rival actor no peer played) has no traffic there: it neither delivers nor blocks delivery here."""
        if self._undelivered == 0:
            return True
        if self.blank is not None:
            return False  # on paper: no payload was seen
        taking_part = [d for a, d in zip(self.actors, self.deliveries, strict=True) if self.actor_messages(a)]
        return bool(taking_part) and all(d.delivered for d in taking_part)

    def _own_state(self) -> None:
        """Refuse to change a run on paper (its state is the attack's shared `blank`)."""
        if self.blank is not None:
            raise RuntimeError(f"{self.id} is on paper: it is never fed nor ticked")

    def tick(self, now: float) -> list[PhaseChange]:
        """Fire the `after` timers that are due."""
        self._own_state()
        changes = [c for c in (a.tick(now) for a in self.actors) if c is not None]
        if changes:
            self.phase_changes.extend(changes)
            self._check_terminal(max(c.timestamp for c in changes))
        return changes

    def deadline(self) -> float:
        """The next time `tick`/`due` can change something: an `after` timer, the end of the grace period,
        of the closed session's grace period, or of the run's lifetime. Later events only move it later, except
        an answer the run waited for (`awaited_at`), which the monitor reschedules."""
        grace_end = self._grace_end()
        if grace_end is not None:
            return min(self._lifetime_end(), grace_end)
        closing_end = self._closing_end()
        return min(self._lifetime_end(), *(() if closing_end is None else (closing_end,)),
                   *(a.deadline() for a in self.actors))

    def quiet_deadline(self) -> float:
        """The next time the run changes with no more traffic, its lifetime aside: an `after` timer, or the end
        of the grace period once every actor is terminal or after the agent closed the session (infinity when
        only traffic can move it)."""
        grace_end, closing_end = self._grace_end(), self._closing_end()
        if grace_end is not None:
            return grace_end
        return min(math.inf if closing_end is None else closing_end, *(a.deadline() for a in self.actors))

    def due(self, now: float) -> tuple[str, float] | None:
        """The execution status and the time the run ended if it should conclude by `now`, else None: the
        end of its grace period (`completed`); for a run not every actor of which is terminal, the end of a
        grace period after the agent closed its session (`session_closed`: no later message can belong to the
        run); the end of its lifetime (`timed_out`) — whichever came first. The time is that end, not `now`, so
        a report does not depend on when the clock was read (a replay's clock jumps)."""
        grace_end, closing_end = self._grace_end(), self._closing_end()
        ends = [("completed", grace_end)] if grace_end is not None else \
            [("session_closed", closing_end)] if closing_end is not None else []
        status, at = min([*ends, ("timed_out", self._lifetime_end())], key=operator.itemgetter(1))
        return (status, at) if now >= at else None

    def close(self, at: float) -> None:
        """The agent closed the run's session at `at`: unless every actor is terminal (its grace period then
        ends it, `completed`), the run concludes a grace period after that, or after its last event if later
        (a full grace period, so not `cut_short`), once its `after` timers due by then have fired."""
        if self.closed_at is None:
            self.closed_at = at

    def _grace_end(self) -> float | None:
        """When the grace period ends, if every actor is terminal: one grace period after the run's last
        event (or after the last actor became terminal), see the module docstring."""
        if self.all_terminal_at is None:
            return None
        waiting = self.awaited_at + MAX_ANSWER_WAIT
        return max(self.last_event_at, self.all_terminal_at, waiting) + self.grace_period

    def _closing_end(self) -> float | None:
        if self.closed_at is None:
            return None
        return max(self.last_event_at, self.closed_at) + self.grace_period

    def _lifetime_end(self) -> float:
        return self.started_at + self.options.max_run_lifetime

    def _check_terminal(self, now: float) -> None:
        if all(a.terminal for a in self.actors):
            if self.all_terminal_at is None:
                self.all_terminal_at = now
        else:
            self.all_terminal_at = None

    def _cite(self, flow_id: str) -> None:
        if flow_id not in self.cited_flows and len(self.cited_flows) < MAX_CITED_FLOWS:
            self.cited_flows.append(flow_id)

    def verdict(self, at: float) -> oatf.AttackVerdict:
        """SDK spec §4.5 over this run's indicator verdicts, stamped `at` (event time: the run's end)."""
        timestamp = oatf.timestamp_at(at)
        verdicts = {t.id: t.verdict(timestamp, self.examined(t)) for t in self.indicators}
        blank = self.blank
        if blank is not None and blank.aggregate is not None:
            result, summary, tier = blank.aggregate
            return oatf.AttackVerdict(self.loaded.attack.id, result, tuple(verdicts.values()), summary, timestamp,
                                      "oatf-watch", tier)
        verdict = oatf.compute_verdict(self.loaded.attack, verdicts, timestamp=timestamp, source="oatf-watch")
        if blank is not None and len(verdict.indicator_verdicts) == len(verdicts) and all(
                mine is theirs for mine, theirs in zip(verdicts.values(), verdict.indicator_verdicts, strict=True)):
            blank.aggregate = (verdict.result, verdict.evaluation_summary, verdict.max_tier)  # ids unique: reusable
        return verdict

    def verdict_form(self, at: float) -> dict[str, Any]:
        """`verdict(at)`'s plain form (`to_dict`). A run on paper's is its blank's first (`RunBlank.verdict_form`)
        with the time and each indicator's evidence stamped in: nothing of a blank is ever matched, failed or
        skipped by traffic, so its indicators' verdicts differ from run to run only there (`IndicatorTracker.
        unmatched_evidence`) — made without the verdict objects (a shutdown reports thousands of runs on paper)."""
        blank = self.blank
        form = None if blank is None else blank.verdict_form
        if form is None:
            form = self.verdict(at).to_dict()
            if blank is None or blank.aggregate is None:
                return form
            blank.verdict_form = form  # kept as it is: each run on paper gets dicts of its own
        timestamp = oatf.timestamp_at(at)
        return {**form, "timestamp": timestamp, "indicator_verdicts": [
            {**plain, "timestamp": timestamp, "evidence": tracker.unmatched_evidence(self.examined(tracker))}
            for plain, tracker in zip(form["indicator_verdicts"], self.indicators, strict=True)]}

    def cut_short(self, status: str, ended_at: float) -> bool:
        """Whether the run ended before the agent was done, as far as an observer can tell: the tool ended
        it (`delivery.CUT_SHORT`: evicted, reloaded), or it ended before a grace period of quiet followed its
        last message (a proxy stopped or crashed mid-grace: `interrupted`, `recovered`). The end of a
        recording is not that: replay moves the clock a grace period past the last event."""
        return status in CUT_SHORT or ended_at < self.last_event_at + self.grace_period

    def report(self, status: str, ended_at: float) -> dict[str, Any]:
        """The run's report: `attack`, `verdict` (the OATF AttackVerdict, as §9.3 computes it, unchanged),
        `evidence` (beside it: each matched indicator's evidence as fields, `evidence`), `outcome` (what a
        person reads: exploited, partial, error, resisted, not_delivered or inconclusive) and
        `execution_summary`."""
        verdict = self.verdict_form(ended_at)
        delivered = self.delivered
        return {
            "attack": dict(self.loaded.plan.header),
            "verdict": verdict,
            "evidence": self.evidence(),
            "outcome": outcome(verdict["result"], delivered, self.cut_short(status, ended_at),
                               self.traffic.uninspected > 0),
            "execution_summary": self.execution_summary(status, ended_at, delivered),
        }

    def evidence(self) -> list[dict[str, Any]]:
        """For each matched indicator, in document order: its id, where it matched (flow, event, direction,
        time, endpoint, path), the excerpt of the traffic that matched, the indicator's `description` and its
        `false_positives` (format spec §6.1), so a triager reads what was seen next to what it means."""
        return [{"indicator_id": t.id, **t.found, "indicator_description": t.indicator.description,
                 "false_positives": list(t.indicator.false_positives or ())}
                for t in self.indicators if t.found is not None]

    def execution_summary(self, status: str, now: float, delivered: bool) -> dict[str, Any]:
        """What happened in the run; every time ISO 8601 (UTC, milliseconds) on the event clock. `injections`
        (only when the proxy's inject mode altered the run's traffic): each altered flow and what was injected;
        `uninspected_messages` (only when there were some): the session's messages, or parts of them, the decoder
        passed on without inspecting (`UNINSPECTED_EVENT`)."""
        extra: dict[str, Any] = {"injections": list(self.injections.values())} if self.injections else {}
        if self.traffic.uninspected:
            extra["uninspected_messages"] = self.traffic.uninspected
        return {
            "status": status,
            "session": self.session,
            "started_at": oatf.timestamp_at(self.started_at),
            "ended_at": oatf.timestamp_at(now),
            "grace_period_seconds": self.grace_period,
            "grace_applied": status == "completed",
            "delivered": delivered,
            "delivery_evidence": [d.evidence for d in self.deliveries if d.evidence is not None],
            "messages_seen": self.messages,
            "flows_cited": list(self.cited_flows),
            "actors": [{
                "name": a.name, "mode": a.actor.mode, "phases_reached": list(a.phases_reached),
                "current_phase": a.phase.name, "terminal_reached": a.terminal,
                "messages_seen": self.actor_messages(a), "extractors": dict(a.extracted), "delivered": d.delivered,
                "peer": a.peer,
            } for a, d in zip(self.actors, self.deliveries, strict=True)],
            "phase_changes": [{"actor": c.actor, "from": c.from_phase, "to": c.to_phase, "reason": c.reason,
                               "flow": c.flow_id, "at": oatf.timestamp_at(c.timestamp)}
                              for c in self.phase_changes[:100]],
            **extra,
        }
