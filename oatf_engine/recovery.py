"""Concluding the runs a crashed proxy left open, from its journal (`oatf_engine.journal`).

`recover` replays the journal's events and clock ticks into a fresh sans-I/O `Monitor` with the given library
and options — the same inputs in the same order (`monitor_inputs`), so the same runs — and returns the reports
of every run that was not reported before the crash: runs that the journal shows still open are concluded with status
`recovered` — but those of an MCP session the agent had closed (journaled `closed`), which no later message can
change, conclude as the proxy would have concluded them had it gone on (`Monitor.conclude_closed_sessions`: mostly
`session_closed`, a grace period after the close); a run that had concluded but whose report was never written
keeps the status it concluded with.
The journaled wire steps (`oatf_engine.wire.steps`: the flows the proxy handed to its monitor process undecoded)
are decoded here as the monitor process decoded them — a decoder counting from `STEP_SEQ_BASE`, primed where a cut
left exchanges under way, an exchange whose step makes it raise cut off as there (`StepDecoder`) — with the
proxy's wire limits and overrides when the monitor process recovers, the defaults for `oatf recover`.
A run counts as reported when the journal holds its `concluded` marker, or when its report file is in
`report_dir` (the monitor process writes a report before the proxy journals its marker: a crash in between
leaves the file without the marker). Its file name is the same in replay — attack, session and end time —
whatever status the run then concludes with.
Used by the addon's monitor process — at start-up, for a journal left in its report directory (every event
journaled is replayed: those the proxy still held, received and not released, last, in time order), and when the
addon replaces a monitor process that died or stalled, for the segments it journaled until then
(`oatf_engine.journal.Journal.cut`; only the events released to the lost process: the proxy hands the others to
the new one) — and, through `conclude_pending` (which also writes their reports and
clears the journal), by `oatf tap` at start-up and by `oatf recover DIR`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oatf
from oatf_engine.events import UNINSPECTED_EVENT, ExchangeEnded, ObservedEvent
from oatf_engine.journal import JOURNAL_DIR, Item, RunKey, clear, decode_item, records, run_key
from oatf_engine.journal import segments as journal_segments
from oatf_engine.monitor import LoadedAttack, Monitor, MonitorOptions, Output, RunConcluded
from oatf_engine.progress import UPDATE_EVERY, Progress, file_size, size
from oatf_engine.reorder import Reorder
from oatf_engine.replay import SessionClose
from oatf_engine.reports import ReportWriter, report_filename
from oatf_engine.wire import UNINSPECTED, DecoderConfig, Unread, WireDecoder
from oatf_engine.wire.steps import STEP_SEQ_BASE, Prime, StepDecoder, WireStep

log = logging.getLogger(__name__)


def pending_journal(report_dir: str | Path) -> bool:
    """Whether `report_dir` holds a journal left by a proxy that did not shut down cleanly."""
    path = Path(report_dir) / JOURNAL_DIR
    return path.is_dir() and any(path.glob("*.jsonl"))


@dataclass(frozen=True)
class Recovered:
    """The monitor process's answer to a recovery the addon asked for: the journal segments it read, what left
    them (`origin`, for the log), how many runs it concluded, and whether every one of their reports was
    written (only then are the segments dropped)."""

    segments: tuple[str, ...]
    origin: str
    runs: int
    complete: bool


def recover(report_dir: str | Path, attacks: list[LoadedAttack], options: MonitorOptions,
            semantic: oatf.SemanticEvaluator | None = None, progress: Progress | None = None,
            wire: DecoderConfig | None = None, unread: Unread | None = None) -> list[dict[str, Any]]:
    """The reports of the runs the journal in `report_dir` shows were not reported (see the module docstring).
    `progress`: the stage `replaying journal`, in bytes; `wire`, `unread`: as `recover_runs`."""
    return [run.report for run in recover_runs(report_dir, attacks, options, semantic, progress=progress, wire=wire,
                                               unread=unread)]


def recover_runs(report_dir: str | Path, attacks: list[LoadedAttack], options: MonitorOptions,
                 semantic: oatf.SemanticEvaluator | None = None,
                 segments: list[Path] | None = None, unreleased: bool = True,
                 progress: Progress | None = None, wire: DecoderConfig | None = None,
                 unread: Unread | None = None) -> list[RunConcluded]:
    """`recover`, as the monitor's conclusions (run and report), from the journal's `segments` when given;
    `unreleased`: as `monitor_inputs`. The wire steps journaled are decoded as the monitor process decoded them
    (`wire`: its decoder's limits and overrides; `STEP_SEQ_BASE`); `unread`, when given, counts those that made the
    decoder raise (a bug: their exchanges cut off there, as in the monitor process; else a warning is logged) and
    the decoder's diagnostics."""
    monitor = Monitor(attacks, options, semantic=semantic)
    decoder = StepDecoder(WireDecoder(wire, seq_base=STEP_SEQ_BASE,
                                      on_diagnostic=unread.diagnosed if unread is not None else None))
    reported: set[RunKey] = set()
    outputs: list[Output] = []
    journal = Path(report_dir) / JOURNAL_DIR
    read = sorted(segments) if segments is not None else journal_segments(journal)
    events = ticks = 0
    total = sum(map(file_size, read))
    if progress is not None:
        progress.start("replaying journal", total, "bytes")
    inputs = monitor_inputs(records(journal, read, progress.update if progress is not None else None),
                            unreleased, reported)
    if unread is not None:
        inputs = _counted(inputs, unread)
    for item in decoder.decoded(inputs):
        if isinstance(item, float):
            ticks += 1
            outputs.extend(monitor.tick(item))
        elif isinstance(item, ExchangeEnded):
            outputs.extend(monitor.exchange_ended(item))
        elif isinstance(item, ObservedEvent):
            events += 1
            outputs.extend(monitor.observe(item))
        elif isinstance(item, tuple):
            monitor.close_session("mcp", "mcp_session", *item)
    if unread is not None:
        unread.failures += decoder.failures
    elif decoder.failures:
        log.warning("oatf recover: %d journaled step(s) made the wire decoder raise (a bug): their exchanges were "
                    "cut off there, as the monitor process cut them off", decoder.failures)
    outputs.extend(monitor.conclude_closed_sessions())
    outputs.extend(monitor.shutdown("recovered"))
    concluded = [o for o in outputs if isinstance(o, RunConcluded)]
    left = [o for o in concluded if run_key(o.report) not in reported
            and not (Path(report_dir) / report_filename(o.report)).exists()]
    if progress is not None:
        progress.finish(f"replayed {events:,} event(s) and {ticks:,} tick(s) from {len(read):,} journal segment(s), "
                        f"{size(total)}: {len(concluded):,} run(s), {len(concluded) - len(left):,} already reported")
    return left


def monitor_inputs(journal: Iterable[dict[str, Any]], unreleased: bool = True,
                   reported: set[RunKey] | None = None) -> Iterator[Item | SessionClose | Prime | float]:
    """What the live monitor was given, as the journal's records tell (`oatf_engine.journal`), in the order it was
    given: events, ends of exchanges and wire steps, the MCP sessions the agent closed (`(session, at)`), and its
    clock's ticks (floats); and, where a recovery cut the journal, the steps to prime a decoder with (`Prime`: fed
    to one that has not read the segments before the cut). Held events, ends and closes are released as the proxy
    released them: at each tick up to it (the highest so far), in time order, a close before the events of its
    time, ties in the order received; all of them at `drained`.
    `unreleased`: whether the events still held at the end — received and not released — come last, in time
    order (a crash of the proxy: yes; the loss of its monitor process only: no, the proxy hands them to the new
    one). A damaged event or close is skipped; the runs the journal shows reported are added to `reported`."""
    held: Reorder[Item | SessionClose] = Reorder()
    for record in journal:
        if "events" in record:
            yield from _events(record["events"])
        elif "received" in record:
            for event in _events(record["received"]):
                held.add(event.timestamp, event)
        elif "held" in record:  # the same ones as those held here, if the replay read the segments before
            held.drain()
            for event in _events(record["held"]):
                held.add(event.timestamp, event)
            for close in _closes(record.get("closed", [])):
                held.add(close[1], close, rank=0)
            primed = [item for item in _events(record.get("primed", [])) if isinstance(item, WireStep)]
            if primed:
                yield Prime(tuple(primed))
        elif "closed" in record:
            for close in _closes([record["closed"]]):
                held.add(close[1], close, rank=0)
        elif "tick" in record:
            now = float(record["tick"])
            yield from held.release(now)
            yield now
        elif "drained" in record:
            yield from held.drain()
        elif "concluded" in record and reported is not None:
            attack, session, started = record["concluded"]
            reported.add((str(attack), str(session), str(started)))
    if unreleased:
        yield from held.drain()


def _counted(inputs: Iterator[Any], unread: Unread) -> Iterator[Any]:
    """`inputs`, counting in `unread` what the process that journaled them did not inspect itself: its marks
    (`UNINSPECTED_EVENT`, journaled as events by a proxy that decoded a flow itself: inject mode, traces) by code,
    a `decoder_failure` one as a failure, and the `cut_off` steps of flows its tap failed on, as failures. What the
    steps decoded here miss is counted by the decoder (`on_diagnostic`, `StepDecoder.failures`)."""
    for item in inputs:
        if isinstance(item, WireStep):
            if item.call == "cut_off":
                unread.failures += 1
        elif isinstance(item, ObservedEvent) and item.event_type == UNINSPECTED_EVENT:
            code = item.content.get("code") if isinstance(item.content, dict) else None
            if code in UNINSPECTED:
                unread.diagnostics[code] += 1
            else:  # DECODER_FAILURE (or a code this version does not know: missed all the same)
                unread.failures += 1
        yield item


def _events(journaled: Any) -> Iterator[Item]:
    for fields in journaled if isinstance(journaled, list) else ():
        try:
            yield decode_item(fields)
        except (TypeError, ValueError):
            continue  # a damaged record: the others still count


def _closes(journaled: Any) -> Iterator[SessionClose]:
    for close in journaled if isinstance(journaled, list) else ():
        if isinstance(close, list) and len(close) == 2 and isinstance(close[0], str) \
                and isinstance(close[1], (int, float)) and not isinstance(close[1], bool):
            yield close[0], float(close[1])


def conclude_pending(report_dir: str | Path, attacks: list[LoadedAttack], options: MonitorOptions,
                     semantic: oatf.SemanticEvaluator | None = None,
                     progress: Progress | None = None, wire: DecoderConfig | None = None,
                     unread: Unread | None = None) -> list[dict[str, Any]]:
    """`recover`, then write those reports (durably) and clear the journal; the reports. `progress`: the stages
    `replaying journal` (in bytes) and `writing reports` (in reports); `wire`: the decoder's limits and overrides
    (`oatf_wire_*`) the journaled steps are decoded with, as the process that journaled them had them; `unread`:
    as `recover_runs`."""
    reports = recover(report_dir, attacks, options, semantic, progress, wire, unread)
    writer = ReportWriter(report_dir)
    if progress is not None:
        progress.start("writing reports", len(reports), "reports")
    for count, report in enumerate(reports):
        if progress is not None and count % UPDATE_EVERY == 0:
            progress.update(count)
        writer.write(report)
    writer.commit()
    clear(Path(report_dir) / JOURNAL_DIR)
    if progress is not None:
        progress.update(len(reports))
        progress.finish(f"wrote {len(reports):,} report(s) to {report_dir}")
    return reports
