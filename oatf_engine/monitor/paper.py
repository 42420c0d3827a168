"""Runs on paper (issue 15: work only where something can happen).

Every attack of a protocol gets a run in a session at the session's first event of that protocol, and that
run reports when it concludes, whatever it saw (format spec §9: `not_delivered`, `resisted`, ...). In most
sessions most runs see nothing that can change them: no trigger, extractor, payload or indicator of theirs
can be satisfied by the session's messages (`Monitor`'s prefilter). Such a run is fully known from the
session's counters (`oatf_engine.monitor.traffic`) and from when it started: its actors are in their first
phase, its indicators open and unmatched, nothing is delivered. So it is kept *on paper* — one bit of a
`Cohort`, the attacks of a session put on paper by the same event, which share the start, the counters'
baseline and the options — until an event can concern it. Then the monitor materialises it: an `AttackRun`
started then, with that baseline, fed the event like any other. A run concluded on paper reports as that
run would: an `AttackRun` reading the attack's shared blank (`RunBlank`) instead of state of its own.

Only attacks whose runs have nothing but traffic and time to follow wait on paper (`paper_class`): none of
their actors has an actor binding (what an actor sees would then depend on the endpoint), no two of their
actors share a protocol and role (rivals bind to peers by what they deliver: `AttackRun.exact`), and no
actor's first phase has an `after` timer (it would move without traffic).

**When runs on paper conclude.** A run's end depends, besides its start, baseline and options, on the
protocols of its actors (which messages are its last), its grace period and whether every actor starts
terminal (`AttackRun.due`), and on the requests of its traffic still waiting for their answer, read from the
session's counters like every other run's (`answers`: no run ends while one waits, up to `MAX_ANSWER_WAIT`;
`Monitor` queues the timers again when an answer comes). A cohort's members alike in these (`paper_class`)
conclude together: one timer per class (`PaperTimer`), whose deadline and end are read from a representative
run on paper, as from any run (`deadline`, `due`, `quiet_deadline`), so the rules live in `AttackRun` alone.

A session's memory is then its materialised runs and a few integers per cohort, not a run per loaded
attack; runs on paper do not count against `MonitorOptions.max_runs`, which bounds the runs followed in
memory.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from .options import MonitorOptions
from .plan import AttackPlan
from .run import AttackRun
from .traffic import Baseline


def bits(mask: int) -> Iterator[int]:
    """The positions of the bits set in `mask`, lowest first (attack numbers, in library order)."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def paper_class(plan: AttackPlan, options: MonitorOptions) -> Hashable | None:
    """What a run of the attack concluding on paper depends on besides its cohort — the protocols of its
    actors, its grace period, whether every actor starts terminal — or None when its runs cannot wait on paper
    (see the module docstring)."""
    if plan.rivals_possible or plan.first_phase_timers or not plan.actor_names.isdisjoint(
            b.actor for b in options.bindings):
        return None
    grace = plan.grace_period if plan.grace_period is not None else options.grace_period
    return plan.protocols, grace, plan.initially_terminal


class Cohort:
    """Attacks of one session put on paper by the same event: started then, counting from the session's
    counters as they were just before it, with the options then in force."""

    __slots__ = ("baseline", "closed_at", "options", "started_at", "timers")

    def __init__(self, started_at: float, baseline: Baseline, options: MonitorOptions) -> None:
        self.started_at = started_at
        self.baseline = baseline
        self.options = options
        self.closed_at: float | None = None
        """When the agent closed the session (`AttackRun.close`), if it did since the cohort started."""
        self.timers: list[PaperTimer] = []
        """One per class of its members (`paper_class`), each with members left."""

    @property
    def members(self) -> int:
        """The attacks still on paper in this cohort (a bit per attack number)."""
        found = 0
        for timer in self.timers:
            found |= timer.members
        return found


class PaperTimer:
    """The members of one cohort alike in how they conclude (`paper_class`), and the representative run on
    paper their deadline and end are read from (its `scheduled` time is the timer's place in the monitor's
    queue)."""

    __slots__ = ("cohort", "members", "representative", "session")

    def __init__(self, session: str, cohort: Cohort, members: int, representative: AttackRun) -> None:
        self.session = session
        self.cohort = cohort
        self.members = members
        self.representative = representative
