"""Concluding the runs a crashed proxy left open, from its journal (`oatf_engine.journal`).

`recover` replays the journal's events and clock ticks into a fresh sans-I/O `Monitor` with the given library
and options — the same inputs in the same order, so the same runs — and returns the reports of every run that
was not reported before the crash: runs that the journal shows still open are concluded with status
`recovered`; a run that had concluded but whose report was never written keeps the status it concluded with.
A run counts as reported when the journal holds its `concluded` marker, or when its report file is in
`report_dir` (the monitor process writes a report before the proxy journals its marker: a crash in between
leaves the file without the marker). Its file name is the same in replay — attack, session and end time —
whatever status the run then concludes with.
Used by the addon's monitor process — at start-up, for a journal left in its report directory, and when the
addon replaces a monitor process that died or stalled, for the segments it journaled until then
(`oatf_engine.journal.Journal.cut`) — and, through `conclude_pending` (which also writes their reports and
clears the journal), by `oatf tap` at start-up and by `oatf recover DIR`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oatf
from oatf_engine.journal import JOURNAL_DIR, clear, decode_event, records, run_key
from oatf_engine.journal import segments as journal_segments
from oatf_engine.monitor import LoadedAttack, Monitor, MonitorOptions, Output, RunConcluded
from oatf_engine.progress import UPDATE_EVERY, Progress, file_size, size
from oatf_engine.reports import ReportWriter, report_filename


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
            semantic: oatf.SemanticEvaluator | None = None, progress: Progress | None = None) -> list[dict[str, Any]]:
    """The reports of the runs the journal in `report_dir` shows were not reported (see the module docstring).
    `progress`: the stage `replaying journal`, in bytes."""
    return [run.report for run in recover_runs(report_dir, attacks, options, semantic, progress=progress)]


def recover_runs(report_dir: str | Path, attacks: list[LoadedAttack], options: MonitorOptions,
                 semantic: oatf.SemanticEvaluator | None = None,
                 segments: list[Path] | None = None, progress: Progress | None = None) -> list[RunConcluded]:
    """`recover`, as the monitor's conclusions (run and report), from the journal's `segments` when given."""
    monitor = Monitor(attacks, options, semantic=semantic)
    reported: set[tuple[str, str, str]] = set()
    outputs: list[Output] = []
    journal = Path(report_dir) / JOURNAL_DIR
    read = sorted(segments) if segments is not None else journal_segments(journal)
    events = ticks = 0
    total = sum(map(file_size, read))
    if progress is not None:
        progress.start("replaying journal", total, "bytes")
    for record in records(journal, read, progress.update if progress is not None else None):
        if "events" in record:
            for fields in record["events"]:
                try:
                    event = decode_event(fields)
                except (TypeError, ValueError):
                    continue  # a damaged record: the others still count
                events += 1
                outputs.extend(monitor.observe(event))
        elif "tick" in record:
            ticks += 1
            outputs.extend(monitor.tick(float(record["tick"])))
        elif "concluded" in record:
            attack, session, started = record["concluded"]
            reported.add((str(attack), str(session), str(started)))
    outputs.extend(monitor.shutdown("recovered"))
    concluded = [o for o in outputs if isinstance(o, RunConcluded)]
    left = [o for o in concluded if run_key(o.report) not in reported
            and not (Path(report_dir) / report_filename(o.report)).exists()]
    if progress is not None:
        progress.finish(f"replayed {events:,} event(s) and {ticks:,} tick(s) from {len(read):,} journal segment(s), "
                        f"{size(total)}: {len(concluded):,} run(s), {len(concluded) - len(left):,} already reported")
    return left


def conclude_pending(report_dir: str | Path, attacks: list[LoadedAttack], options: MonitorOptions,
                     semantic: oatf.SemanticEvaluator | None = None,
                     progress: Progress | None = None) -> list[dict[str, Any]]:
    """`recover`, then write those reports (durably) and clear the journal; the reports. `progress`: the stages
    `replaying journal` (in bytes) and `writing reports` (in reports)."""
    reports = recover(report_dir, attacks, options, semantic, progress)
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
