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
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import oatf
from oatf_engine.collector import collector_paused
from oatf_engine.cpus import available_cpus
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.monitor import LoadedAttack, LoadProblem, Monitor, MonitorOptions, RunConcluded
from oatf_engine.monitor.sessions import SessionResolver
from oatf_engine.progress import UPDATE_EVERY, Progress
from oatf_engine.replay_shards import ShardedMonitors, WorkerFailed
from oatf_engine.wire import Unread


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
    unread: Unread = field(default_factory=Unread)
    """What of the recorded traffic was not read through: steps that made the wire decoder raise, diagnostics
    (traffic not inspected among them)."""


Placed = tuple[ObservedEvent, str, float]
"""An event, the session it belongs to, and where the monitor's clock moves before it (its time, but never
past an event the resolver still held then: `SessionResolver.oldest_held`, as the live monitor does)."""

PARALLEL_MIN_EVENTS = 5_000
"""Below this many events a replay stays in one process: starting workers would cost more than it saves."""
PARALLEL_MIN_BYTES = 4_000_000
"""`PARALLEL_MIN_EVENTS` in bytes of recordings (about 5,000 MCP messages), known before they are read."""


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
                    closes: list[SessionClose] | None = None, endings: list[ExchangeEnded] | None = None,
                    pool: ShardedMonitors | None = None) -> list[dict[str, Any]]:
    """The reports of every run over recorded events (in time order), in the order the runs ended
    (`in_end_order`).

    The recording's end concludes the runs: the clock moves one grace period (the longest any loaded attack
    or `options` sets) past the last event or end of an exchange (an exchange that ended with requests
    unanswered lets their runs end a grace period after it, `Monitor.exchange_ended`: as live, where the clock
    goes on past it), so runs whose actors are all terminal conclude `completed`, and
    the others are concluded `interrupted`. Episodes are independent, so with `workers` > 1 (and enough
    events) they are split over that many forked processes (`oatf_engine.replay_shards`), each following its
    share of the episodes; the reports are the same as with one process (`oatf_max_runs` then bounds each
    process's live runs). `progress`: the stage `evaluating`, in events (placed: an event in two episodes
    counts twice; with workers, those sent to them). `closes`: the MCP sessions the agent closed, told to the
    monitor when the clock reaches them, as the live addon tells it (`Monitor.close_session`); `endings`: the
    ends of exchanges that left requests unanswered (`place_events`), told in their place
    (`Monitor.exchange_ended`). `pool`: workers already forked (`sharded_monitors`, entered) to use instead."""
    options = options or MonitorOptions()
    placed = place_events(events, options, endings)
    end = max(max((event.timestamp for event in events), default=0.0),
              max((ended.timestamp for ended in endings or ()), default=0.0))
    shards = pool.shards if pool is not None else worker_count(len(events), workers)
    if progress is not None:
        progress.start("evaluating", len(placed), "events")
    through = _running_total(progress.update) if progress is not None else None
    if shards == 1:
        reports = evaluate_placed(attacks, placed, _in_time(closes), options, lambda: end, semantic, through)
    else:
        with nullcontext(pool) if pool is not None else sharded_monitors(attacks, options, semantic, shards) as used:
            reports = used.evaluate(placed, _in_time(closes), lambda: end, through)
    if progress is not None:
        progress.finish(f"evaluated {len(placed):,} event(s) in {shards} process(es): {len(reports):,} run(s) "
                        "concluded")
    return in_end_order(reports)


def in_end_order(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reports in the order their runs ended, those that ended at the same time (to the millisecond) by session
    and start: the same order whichever process concluded each run (`oatf evaluate --jobs`); the runs of one
    session that also started together stay in the order they were concluded."""
    return sorted(reports, key=_end_order)


def _end_order(report: dict[str, Any]) -> tuple[str, str, str]:
    summary = report["execution_summary"]
    return summary["ended_at"], summary["session"], summary["started_at"]


def _in_time(closes: list[SessionClose] | None) -> list[SessionClose]:
    return sorted(closes or (), key=operator.itemgetter(1))


def sharded_monitors(attacks: list[LoadedAttack], options: MonitorOptions, semantic: oatf.SemanticEvaluator | None,
                     shards: int) -> ShardedMonitors:
    """`shards` forked processes, each following its share of the episodes with a `Monitor` of `attacks`
    (`evaluate_placed`); enter it before reading the recording, so the processes share none of its memory."""

    def evaluate(placed: Iterable[Placed | ExchangeEnded | float], closes: list[SessionClose], end: Callable[[], float],
                 last_clock: Callable[[float], float]) -> list[dict[str, Any]]:
        return evaluate_placed(attacks, placed, closes, options, end, semantic, last_clock=last_clock)

    _compile_expressions(attacks)
    return ShardedMonitors(evaluate, shards)


def _compile_expressions(attacks: list[LoadedAttack]) -> None:
    """Compile the attacks' CEL expressions now (each process compiles one at its first evaluation and keeps it:
    `oatf.cel_syntax_error`), so that forked workers inherit them, and cel-python's parser, rather than each
    building its own (~0.3 s of CPU a process)."""
    for loaded in attacks:
        for indicator in loaded.attack.indicators or ():
            if indicator.expression is not None and indicator.expression.cel is not None:
                oatf.cel_syntax_error(indicator.expression.cel)


def evaluate_stream(attacks: list[LoadedAttack], events: Iterable[ObservedEvent | ExchangeEnded],
                    options: MonitorOptions | None = None, semantic: oatf.SemanticEvaluator | None = None,
                    closes: list[SessionClose] | None = None,
                    pool: ShardedMonitors | None = None) -> tuple[list[dict[str, Any]], int]:
    """`evaluate_events` over events as they come (in time order: an iterator; the ends of exchanges among them in
    their place), each placed, evaluated and let go before the next is asked for: the reports, and how many
    events there were. In this process, or with `pool` (`sharded_monitors`, entered) in its workers, the events
    sent to them as they are placed (memory holds a few batches per worker, not the recording)."""
    options = options or MonitorOptions()
    tally = _Tally()
    placed = placed_events(tally.passing(events), options)
    if pool is None:
        reports = evaluate_placed(attacks, placed, _in_time(closes), options, lambda: tally.end, semantic)
    else:
        reports = pool.evaluate(placed, _in_time(closes), lambda: tally.end)
    return in_end_order(reports), tally.count


STREAM_BATCH = 8192
"""How many events `evaluate_stream` asks for at a time: the decoder and the monitor each run that many in a
row (alternating event by event costs ~25% more CPU: each pushes the other's data out of the processor's
caches), and memory holds that many decoded events at most."""


class _Tally:
    """Events counted as they pass, and the latest time among them and the ends of exchanges (0 without any:
    `evaluate_events`' end)."""

    def __init__(self) -> None:
        self.count = 0
        self.latest: float | None = None

    def passing(self, events: Iterable[ObservedEvent | ExchangeEnded]) -> Iterator[ObservedEvent | ExchangeEnded]:
        """`events`, asked for `STREAM_BATCH` at a time (the ends of exchanges pass uncounted)."""
        latest = self.latest
        for batch in itertools.batched(events, STREAM_BATCH):
            for event in batch:
                if not isinstance(event, ExchangeEnded):
                    self.count += 1
                if latest is None or event.timestamp > latest:
                    latest = event.timestamp
            self.latest = latest
            yield from batch

    @property
    def end(self) -> float:
        return 0.0 if self.latest is None else self.latest


def evaluate_placed(attacks: list[LoadedAttack], placed: Iterable[Placed | ExchangeEnded | float],
                    closes: list[SessionClose], options: MonitorOptions, end: Callable[[], float],
                    semantic: oatf.SemanticEvaluator | None = None,
                    through: Callable[[int], None] | None = None,
                    last_clock: Callable[[float], float] | None = None) -> list[dict[str, Any]]:
    """The reports of the runs over `placed`, in one monitor, in the order they were concluded (a float among them:
    the time another process's event moved the clock to, `replay_shards`); `closes` in time order; the recording
    ending at `end()` (asked once every event is placed; `last_clock`: see `Monitor.end_of_traffic`); `through`
    is told how many more events are through every `UPDATE_EVERY` events, and at the end."""
    monitor = Monitor(attacks, options, semantic=semantic)
    outputs = []
    pending = iter(closes)
    close = next(pending, None)
    count = 0
    for count, item in enumerate(placed, 1):
        if isinstance(item, ExchangeEnded):
            outputs.extend(monitor.exchange_ended(item, placed=True))
            continue
        clock = item if isinstance(item, float) else item[2]
        while close is not None and close[1] <= clock:
            monitor.close_session("mcp", "mcp_session", *close)
            close = next(pending, None)
        if isinstance(item, float):  # another process's event moved the clock (`replay_shards`)
            outputs.extend(monitor.tick(clock))
            continue
        event, session, clock = item
        outputs.extend(monitor.observe(event, session, clock))
        if through is not None and count % UPDATE_EVERY == 0:
            through(UPDATE_EVERY)
    for session_id, at in [*([close] if close is not None else []), *pending]:
        monitor.close_session("mcp", "mcp_session", session_id, at)
    outputs.extend(monitor.end_of_traffic(end(), last_clock))
    if through is not None and count % UPDATE_EVERY:
        through(count % UPDATE_EVERY)
    return [o.report for o in outputs if isinstance(o, RunConcluded)]


def _running_total(update: Callable[[int], None]) -> Callable[[int], None]:
    """An `evaluate_placed` `through` that tells `update` the events through so far."""
    total = 0

    def add(more: int) -> None:
        nonlocal total
        total += more
        update(total)

    return add


def stream_workers(recorded: int, workers: int) -> int:
    """The processes `addon.recordings.replay` evaluates `recorded` bytes of recordings in when asked for
    `workers` (`worker_count`, the recording's size telling whether it is long: the processes are forked
    before it is read)."""
    return worker_count(PARALLEL_MIN_EVENTS if recorded >= PARALLEL_MIN_BYTES else 0, workers)


def worker_count(events: int, workers: int) -> int:
    """The processes `evaluate_events` uses for `events` events when asked for `workers`: one below
    `PARALLEL_MIN_EVENTS` events, or where forking is unsafe (other threads running: a forked child would
    get only the calling thread) or unavailable."""
    if workers <= 1 or events < PARALLEL_MIN_EVENTS or threading.active_count() > 1:
        return 1
    return workers if "fork" in multiprocessing.get_all_start_methods() else 1


__all__ = [
    "PARALLEL_MIN_BYTES",
    "PARALLEL_MIN_EVENTS",
    "STREAM_BATCH",
    "Placed",
    "ReplayResult",
    "SessionClose",
    "WorkerFailed",
    "available_cpus",
    "collector_paused",
    "evaluate_events",
    "evaluate_placed",
    "evaluate_stream",
    "in_end_order",
    "place_events",
    "placed_events",
    "sharded_monitors",
    "stream_workers",
    "worker_count",
]
