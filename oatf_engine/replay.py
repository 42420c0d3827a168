"""Offline evaluation: recorded events (in time order, recorded timestamps as the clock) through the same
session placement and monitor as the live addon. `addon.recordings` reads recordings into events; this is how
CI runs an attack library.

The recording ends the observation: once every event is fed, runs whose actors are all terminal conclude as
`completed` (nothing more can happen in their grace period), and the others as `interrupted`.
"""

from __future__ import annotations

import itertools
import multiprocessing
import operator
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from typing import Any

import oatf
from oatf_engine.collector import collector_paused
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.monitor import LoadedAttack, LoadProblem, Monitor, MonitorOptions, RunConcluded
from oatf_engine.monitor.sessions import SessionResolver
from oatf_engine.progress import UPDATE_EVERY, Progress


@dataclass
class ReplayResult:
    reports: list[dict[str, Any]]
    problems: list[LoadProblem]
    events: int
    flows: int
    workers: int = 1
    """Processes that evaluated the sessions (`evaluate_events`)."""
    attack_ids: tuple[str, ...] = ()
    """The attacks loaded (their keys: id, else file), whether or not any run of them was produced."""
    waived: list[LoadProblem] = field(default_factory=list)
    """Strict-check findings of documents loaded anyway (`lenient`)."""
    attacks: dict[str, oatf.Attack] = field(default_factory=dict)
    """The attacks loaded, by key (`attack_ids`): their headers (name, description, severity) for outputs."""
    flow_files: dict[str, str] = field(default_factory=dict)
    """The recording each flow (by id) was read from."""


POLL_SECONDS = 0.2
"""How often, while forked processes evaluate, the count of events they are through is read for `Progress`."""


Placed = tuple[ObservedEvent, str, float]
"""An event, the session it belongs to, and where the monitor's clock moves before it (its time, but never
past an event the resolver still held then: `SessionResolver.oldest_held`, as the live monitor does)."""

PARALLEL_MIN_EVENTS = 5_000
"""Below this many events a replay stays in one process: starting workers would cost more than it saves."""


def place_events(events: list[ObservedEvent], options: MonitorOptions,
                 endings: list[ExchangeEnded] | None = None) -> list[Placed | ExchangeEnded]:
    """Every event with its session (its episode), in the order a `Monitor` with `options` fed `events` one by
    one would observe them (keyless events held by the `SessionResolver` are released as the recorded clock
    passes their hold, and at the end of the recording; an event in several episodes once in each). `endings`:
    the ends of exchanges that left requests unanswered, told to the resolver in their place among the events
    (`ExchangeEnded.seq`), as the live monitor is told them (`Monitor.exchange_ended`), and kept in that place
    for the monitor."""
    return list(placed_events(_in_order(events, endings or []), options))


def placed_events(items: Iterable[ObservedEvent | ExchangeEnded], options: MonitorOptions,
                  ) -> Iterator[Placed | ExchangeEnded]:
    """`place_events` over events and ends of exchanges already in order, each placed as soon as it can be."""
    resolver = SessionResolver(options.session_key, options.idle_gap, options.agents)
    for item in items:
        released = resolver.end_exchange(item) if isinstance(item, ExchangeEnded) else resolver.place(item)
        oldest = resolver.oldest_held()
        for event, session in released:
            yield event, session, min(event.timestamp, oldest)
        if isinstance(item, ExchangeEnded):
            yield item
    for event, session in resolver.flush():
        yield event, session, event.timestamp


def _in_order(events: list[ObservedEvent], endings: list[ExchangeEnded]) -> list[ObservedEvent | ExchangeEnded]:
    """Events (in time order) and ends of exchanges merged as the live addon hands them over: in time order, an
    end after the event it follows (`ExchangeEnded.seq`)."""
    if not endings:
        return list(events)
    return sorted([*events, *endings], key=lambda item: (item.timestamp, item.seq, isinstance(item, ExchangeEnded)))


SessionClose = tuple[str, float]
"""An MCP session the agent closed (its `Mcp-Session-Id`) and when (`oatf_engine.wire.mcp.closed_session`)."""


def evaluate_events(attacks: list[LoadedAttack], events: list[ObservedEvent],
                    options: MonitorOptions | None = None, workers: int = 1,
                    semantic: oatf.SemanticEvaluator | None = None, progress: Progress | None = None,
                    closes: list[SessionClose] | None = None,
                    endings: list[ExchangeEnded] | None = None) -> list[dict[str, Any]]:
    """The reports of every run over recorded events (in time order), in the order the runs ended.

    The recording's end concludes the runs: the clock moves one grace period (the longest any loaded attack
    or `options` sets) past the last event, so runs whose actors are all terminal conclude `completed`, and
    the others are concluded `interrupted`. Sessions are independent, so with `workers` > 1 (and enough
    events) they are split over that many forked processes, each following its share of the sessions; the
    reports are the same as with one process (`oatf_max_runs` then bounds each process's live runs).
    `progress`: the stage `evaluating`, in events (placed: an event in two episodes counts twice), counted by
    every process. `closes`: the MCP sessions the agent closed, told to the monitor when the clock reaches
    them, as the live addon tells it (`Monitor.close_session`); `endings`: the ends of exchanges that left
    requests unanswered (`place_events`), told in their place (`Monitor.exchange_ended`)."""
    options = options or MonitorOptions()
    placed = place_events(events, options, endings)
    end = max((event.timestamp for event in events), default=0.0)
    shards = worker_count(len(events), workers)
    closed = sorted(closes or (), key=operator.itemgetter(1))
    if progress is not None:
        progress.start("evaluating", len(placed), "events")
    reports = (_evaluate_placed(attacks, placed, closed, options, lambda: end, semantic,
                                _running_total(progress.update) if progress is not None else None) if shards == 1
               else _evaluate_in_parallel(attacks, placed, closed, options, end, shards, semantic, progress))
    if progress is not None:
        progress.finish(f"evaluated {len(placed):,} event(s) in {shards} process(es): {len(reports):,} run(s) "
                        "concluded")
    ended = operator.itemgetter("ended_at")
    return sorted(reports, key=lambda report: ended(report["execution_summary"]))


def evaluate_stream(attacks: list[LoadedAttack], events: Iterable[ObservedEvent | ExchangeEnded],
                    options: MonitorOptions | None = None, semantic: oatf.SemanticEvaluator | None = None,
                    closes: list[SessionClose] | None = None) -> tuple[list[dict[str, Any]], int]:
    """`evaluate_events` in one process over events as they come (in time order: an iterator; the ends of
    exchanges among them in their place), each evaluated and let go before the next is asked for: the reports,
    and how many events there were."""
    options = options or MonitorOptions()
    tally = _Tally()
    closed = sorted(closes or (), key=operator.itemgetter(1))
    reports = _evaluate_placed(attacks, placed_events(tally.passing(events), options), closed, options,
                               lambda: tally.end, semantic)
    ended = operator.itemgetter("ended_at")
    return sorted(reports, key=lambda report: ended(report["execution_summary"])), tally.count


STREAM_BATCH = 8192
"""How many events `evaluate_stream` asks for at a time: the decoder and the monitor each run that many in a
row (alternating event by event costs ~25% more CPU: each pushes the other's data out of the processor's
caches), and memory holds that many decoded events at most."""


class _Tally:
    """Events counted as they pass, and the latest time among them (0 without any: `evaluate_events`' end)."""

    def __init__(self) -> None:
        self.count = 0
        self.latest: float | None = None

    def passing(self, events: Iterable[ObservedEvent | ExchangeEnded]) -> Iterator[ObservedEvent | ExchangeEnded]:
        """`events`, asked for `STREAM_BATCH` at a time (the ends of exchanges pass uncounted)."""
        latest = self.latest
        for batch in itertools.batched(events, STREAM_BATCH):
            for event in batch:
                if isinstance(event, ExchangeEnded):
                    continue
                self.count += 1
                if latest is None or event.timestamp > latest:
                    latest = event.timestamp
            self.latest = latest
            yield from batch

    @property
    def end(self) -> float:
        return 0.0 if self.latest is None else self.latest


def _evaluate_in_parallel(attacks: list[LoadedAttack], placed: list[Placed | ExchangeEnded], closes: list[SessionClose],
                          options: MonitorOptions, end: float, shards: int, semantic: oatf.SemanticEvaluator | None,
                          progress: Progress | None = None) -> list[dict[str, Any]]:
    """`_evaluate_placed` with the sessions split over `shards` forked processes (by a hash of the session;
    every process is told every close and every end of an exchange: one of a session it does not follow changes
    nothing). With `progress`,
    the processes add the events they are through to a shared count, read every `POLL_SECONDS`."""
    split: list[list[Placed | ExchangeEnded]] = [[] for _ in range(shards)]
    for item in placed:
        if isinstance(item, ExchangeEnded):
            for shard in split:
                shard.append(item)
        else:
            split[zlib.crc32(item[1].encode("utf-8", "surrogatepass")) % shards].append(item)
    context = multiprocessing.get_context("fork")
    through = context.Value("q", 0) if progress is not None else None
    global _SHARDS
    _SHARDS = (attacks, split, closes, options, end, semantic, through)
    try:
        with context.Pool(shards) as pool:
            pending = pool.map_async(_evaluate_shard, range(shards))
            while not pending.ready():
                pending.wait(POLL_SECONDS)
                if progress is not None and through is not None:
                    progress.update(through.value)
            results = pending.get()
        if progress is not None and through is not None:
            progress.update(through.value)  # every event, counted once every process is done
    finally:
        _SHARDS = None
    return [report for shard in results for report in shard]


def _evaluate_placed(attacks: list[LoadedAttack], placed: Iterable[Placed | ExchangeEnded],
                     closes: list[SessionClose], options: MonitorOptions, end: Callable[[], float],
                     semantic: oatf.SemanticEvaluator | None = None,
                     through: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """The reports of the runs over `placed`, in one monitor, the recording ending at `end()` (asked once every
    event is placed); `through` is told how many more events are through every `UPDATE_EVERY` events, and at the
    end."""
    monitor = Monitor(attacks, options, semantic=semantic)
    outputs = []
    pending = iter(closes)
    close = next(pending, None)
    count = 0
    for count, item in enumerate(placed, 1):
        if isinstance(item, ExchangeEnded):
            outputs.extend(monitor.exchange_ended(item, placed=True))
            continue
        event, session, clock = item
        while close is not None and close[1] <= clock:
            monitor.close_session("mcp", "mcp_session", *close)
            close = next(pending, None)
        outputs.extend(monitor.observe(event, session, clock))
        if through is not None and count % UPDATE_EVERY == 0:
            through(UPDATE_EVERY)
    for session_id, at in [*([close] if close is not None else []), *pending]:
        monitor.close_session("mcp", "mcp_session", session_id, at)
    outputs.extend(monitor.end_of_traffic(end()))
    if through is not None and count % UPDATE_EVERY:
        through(count % UPDATE_EVERY)
    return [o.report for o in outputs if isinstance(o, RunConcluded)]


def _running_total(update: Callable[[int], None]) -> Callable[[int], None]:
    """A `_evaluate_placed` `through` that tells `update` the events through so far."""
    total = 0

    def add(more: int) -> None:
        nonlocal total
        total += more
        update(total)

    return add


def _shared_total(through: Synchronized[int]) -> Callable[[int], None]:
    """A `_evaluate_placed` `through` that adds to a count shared by forked processes."""

    def add(more: int) -> None:
        with through.get_lock():
            through.value += more

    return add


_SHARDS: tuple[list[LoadedAttack], list[list[Placed | ExchangeEnded]], list[SessionClose], MonitorOptions, float,
               oatf.SemanticEvaluator | None, Synchronized[int] | None] | None
_SHARDS = None
"""What forked workers evaluate (inherited, not pickled): attacks, placed events per worker, closes, options,
end, semantic evaluator, and the shared count of events through (with progress)."""


def _evaluate_shard(index: int) -> list[dict[str, Any]]:
    assert _SHARDS is not None
    attacks, split, closes, options, end, semantic, through = _SHARDS
    with collector_paused():
        return _evaluate_placed(attacks, split[index], closes, options, lambda: end, semantic,
                                _shared_total(through) if through is not None else None)


def available_cpus() -> int:
    """The CPUs this process may run on (the default number of replay workers)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def may_fork(workers: int) -> bool:
    """Whether `evaluate_events` would split a long recording over processes when asked for `workers`."""
    return worker_count(PARALLEL_MIN_EVENTS, workers) > 1


def worker_count(events: int, workers: int) -> int:
    """The processes `evaluate_events` uses for `events` events when asked for `workers`: one below
    `PARALLEL_MIN_EVENTS` events, or where forking is unsafe (other threads running: a forked child would
    get only the calling thread) or unavailable."""
    if workers <= 1 or events < PARALLEL_MIN_EVENTS or threading.active_count() > 1:
        return 1
    return workers if "fork" in multiprocessing.get_all_start_methods() else 1


__all__ = [
    "PARALLEL_MIN_EVENTS",
    "STREAM_BATCH",
    "Placed",
    "ReplayResult",
    "SessionClose",
    "available_cpus",
    "collector_paused",
    "evaluate_events",
    "evaluate_stream",
    "may_fork",
    "place_events",
    "placed_events",
    "worker_count",
]
