"""Counters of one session's traffic, shared by every run of the session (issue 15: work only where something
can happen).

A run counts the messages it sees (`messages_seen`, each actor's `messages_seen`), the messages each
indicator's trace filter keeps (format spec §6.1 steps 1–4: protocol, surface, actor, direction: the
`examined` of a `not_matched` verdict) and the time of its last message (the grace period, `AttackRun`). Every
run of a session sees the same events, told apart only by protocol, event type, direction and, with actor
bindings, which bindings accept the event's endpoint. So the session counts its events once per
`TrafficKey` (`note`), a run keeps the counts as they were just before its first event (`snapshot`,
shared by the runs created by one event) and works out each of its counters from the difference when it is
read (at a timer, a phase change, a report). A message that can change nothing in a run (no trigger,
extractor, payload or indicator it can fire: `Monitor`) costs that run nothing.

This holds while which actors see an event depends on the event alone. Rival actors (two actors of one
protocol and role, each bound to the peer that first delivers its payload: `AttackRun._plays`) see an event
depending on what the run saw before it, so a run with rivals counts its own messages instead and is fed every
event of its traffic (`AttackRun.exact`).

Event types no loaded indicator names as its surface are counted together (`OTHER`): only surfaces tell
counts apart, and the set of keys stays bounded whatever methods a client invents.

The requests waiting for their answer (`answers`: they keep a run from going quiet, `AttackRun.awaited_at`)
are followed by the session too (`awaiting`): a run's are those counted since it started that its actors
see, the first `MAX_AWAITING` of them. (A run that counts its own messages follows its own, admitting a
request only while it follows fewer than `MAX_AWAITING`: the two differ only for a run that saw that many
go unanswered.)

The time of a run's last message is the latest event of the session kept by any of its actors, among
those it has seen since it started. When an event observed before the run started carries a later timestamp
than every event since (traffic observed out of order across a run's conclusion), that later time counts:
the grace period then ends later than the run's own events alone would make it, which can only let the run
see more before its verdict (and make an interrupted one `inconclusive` rather than `resisted`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..events import Call, ObservedEvent
from .answers import Unanswered

OTHER = ""
"""The event type of `TrafficKey`s for event types no loaded indicator names as its surface."""

TrafficKey = tuple[str, str, str, int]
"""(protocol, event type or `OTHER`, direction, bitmask of the actor bindings accepting the endpoint)."""

MAX_AWAITED = 1_024
"""Requests of one session followed while they wait for their answer, at most (`SessionTraffic.awaiting`)."""
MAX_AWAITING = 64
"""Requests of one run followed while they wait for their answer (`AttackRun.awaited_at`), at most."""


class Baseline(dict[TrafficKey, int]):
    """A session's counts just before a run's first event (`SessionTraffic.snapshot`), and how many events it
    had counted then (`noted`)."""

    __slots__ = ("noted",)

    def __init__(self, counts: Iterable[tuple[TrafficKey, int]] = (), noted: int = 0) -> None:
        super().__init__(counts)
        self.noted = noted


@dataclass(slots=True)
class TrafficView:
    """What a run reads of its session's events since it started (`SessionTraffic.view`; not to be changed)."""

    seen: Mapping[TrafficKey, int]
    """The events since the baseline that the run's actors see, by key."""
    messages: int
    by_protocol: dict[str, int]
    """`messages` per protocol (what an actor without a binding sees)."""
    latest: float
    """The time of the latest of them, per `SessionTraffic.last_at` (-inf without any)."""
    awaited_at: float
    """When the latest of the requests waiting for their answer was sent (`SessionTraffic.awaited`), or -inf."""
    _counts: dict[tuple[str | None, str | None, str | None], int] = field(default_factory=dict)

    @classmethod
    def of(cls, seen: Mapping[TrafficKey, int], last_at: Mapping[tuple[str, int], float],
           awaited: Mapping[Call, float]) -> TrafficView:
        by_protocol: dict[str, int] = {}
        for key, n in seen.items():
            by_protocol[key[0]] = by_protocol.get(key[0], 0) + n
        return cls(seen, sum(by_protocol.values()), by_protocol,
                   max((last_at[key[0], key[3]] for key in seen), default=-math.inf),
                   max(awaited.values(), default=-math.inf))

    def count(self, protocol: str | None, event_type: str | None, direction: str | None) -> int:
        """The events of `protocol`, `event_type` (None: any) and `direction` (None: any): what an indicator's
        trace filter keeps of them when its actor, if it names one, sees every event of the protocol."""
        key = (protocol, event_type, direction)
        found = self._counts.get(key)
        if found is None:
            found = self._counts[key] = sum(n for (p, t, d, _), n in self.seen.items() if p == protocol
                                            and (event_type is None or t == event_type)
                                            and (direction is None or d == direction))
        return found


class SessionTraffic:
    """The events of one session, counted by `TrafficKey`, and the latest time per (protocol, bindings)."""

    __slots__ = ("_since", "_views", "awaiting", "counts", "last_at", "noted", "uninspected")

    def __init__(self) -> None:
        self.counts: dict[TrafficKey, int] = {}
        self.uninspected = 0
        """Marks of messages the decoder passed on without inspecting (`UNINSPECTED_EVENT`), not counted as
        messages: no run of the session reads `resisted` once there is one (`AttackRun.report`)."""
        self.last_at: dict[tuple[str, int], float] = {}
        self.noted = 0
        """Events counted so far, and requests released (`release`): what a run's counters read from `counts` and
        `awaiting` stay valid while it is unchanged."""
        self.awaiting: Unanswered[tuple[int, TrafficKey]] = Unanswered(MAX_AWAITED, forget_stale=True)
        """The requests waiting for their answer (see the module docstring), with `noted` once each was counted
        and its key."""
        self._since: tuple[Mapping[TrafficKey, int], int, dict[TrafficKey, int]] | None = None
        """The last `since`: its baseline, `noted` then and its answer (the runs of one cohort share a baseline)."""
        self._views: tuple[int, dict[tuple[int, frozenset[str]], tuple[Mapping[TrafficKey, int], TrafficView]]] = (
            0, {})
        """`view`'s answers since `noted` last changed."""

    def note(self, event: ObservedEvent, event_type: str, bound: int) -> bool:
        """Count `event` (`event_type`: its own or `OTHER`; `bound`: the bindings accepting its endpoint); True
        when it answers a request that waited for its answer (runs' ends may come closer: `AttackRun.awaited_at`)."""
        key = (event.protocol, event_type, event.direction, bound)
        self.noted += 1
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1
        latest = (event.protocol, bound)
        if event.timestamp > self.last_at.get(latest, float("-inf")):
            self.last_at[latest] = event.timestamp
        answered = self.awaiting.answered(event)
        self.awaiting.admit(event, (self.noted, key))
        return answered

    def release(self, call: Call) -> bool:
        """Stop following `call`, whose exchange ended without its answer (`ExchangeEnded`); True when it was
        followed (runs' ends may come closer). `noted` moves on: what runs read of the requests changed."""
        if not self.awaiting.release(call):
            return False
        self.noted += 1
        return True

    def snapshot(self) -> Baseline:
        """The counts now (what a run created before the next `note` starts from)."""
        return Baseline(self.counts.items(), self.noted)

    def awaited(self, baseline: Baseline, sees: Callable[[TrafficKey], bool]) -> dict[Call, float]:
        """Each request waiting for its answer counted since `baseline` under a key `sees` keeps, and when it
        was sent: the first `MAX_AWAITING`."""
        return dict(itertools.islice(((call, at) for call, (at, (noted, key)) in self.awaiting.calls.items()
                                      if noted > baseline.noted and sees(key)), MAX_AWAITING))

    def since(self, baseline: Mapping[TrafficKey, int]) -> Mapping[TrafficKey, int]:
        """The events counted since `baseline`, by key (keys without any left out; not to be changed)."""
        last = self._since
        if last is not None and last[0] is baseline and last[1] == self.noted:
            return last[2]
        found = {key: count - baseline.get(key, 0) for key, count in self.counts.items()
                 if count > baseline.get(key, 0)}
        self._since = (baseline, self.noted, found)
        return found

    def view(self, baseline: Baseline, protocols: frozenset[str]) -> TrafficView:
        """The events of `protocols` since `baseline`: what a run whose actors have no binding reads (shared by
        the runs started by one event: worked out once per event counted)."""
        noted, views = self._views
        if noted != self.noted:
            views = {}
            self._views = (self.noted, views)
        found = views.get((id(baseline), protocols))
        if found is None or found[0] is not baseline:
            view = TrafficView.of({key: n for key, n in self.since(baseline).items() if key[0] in protocols},
                                  self.last_at, self.awaited(baseline, lambda key: key[0] in protocols))
            views[(id(baseline), protocols)] = (baseline, view)
            return view
        return found[1]
