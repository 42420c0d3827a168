"""The evaluation journal: what the live addon needs to conclude every open run after a crash.

The monitor is sans-I/O and deterministic: the same events and clock ticks, fed to a `Monitor` with the same
library and options, give the same runs. So the journal records the *inputs* — each batch of events sent for
evaluation, each clock tick — and which runs were concluded and reported. After `kill -9` of mitmdump (or of
its monitor process), the next start with the same report directory, or `oatf recover DIR`, replays the
journal into a fresh monitor (`recover`), skips the runs already reported, and concludes every other run with
status `recovered`, evidence included.

Files, in `<report dir>/journal/`: segments `NNNNNNNN.jsonl` (one JSON object per line: `{"events": [...]}`,
`{"tick": t}`, `{"concluded": [attack, session, started_at]}`), created with mode 0600.
- **Append-only, bounded.** A segment holds at most `SEGMENT_BYTES`; at most `MAX_SEGMENTS` are kept (the
  oldest is deleted beyond it: the journal keeps the latest ~`SEGMENT_BYTES * MAX_SEGMENTS` of traffic; a
  run older than that is recovered from what is left). A clean shutdown, which reports every run, deletes it.
- **fsync policy.** Every record is written and flushed to the operating system at once (a crash of the
  process loses nothing already journaled); `os.fsync` runs at most every `FSYNC_SECONDS` and when a segment
  is closed (a crash of the machine loses at most that much).
- A torn last line (the process died mid-write) is ignored on reading.

**Reports' fsync policy** (`oatf_engine.reports.ReportWriter`, used by the monitor process, which writes the reports
itself). Each report is put in place atomically at once (temporary file + rename), and appended to
`verdicts.jsonl`; the reports written meanwhile are made durable together — each file, `verdicts.jsonl`, then
the directory fsynced — at most every `addon.monitor_process.COMMIT_SECONDS` (0.2 s) and before the monitor
answers `shutdown`. Only then does the proxy learn of those runs and journal their `concluded` markers: a
marker never precedes a durable report. A crash between the two leaves a written report without a marker;
recovery recognises it by its file (`oatf_engine.recovery`), so no run is reported twice and none is lost.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from oatf_engine.events import Endpoint, ObservedEvent

JOURNAL_DIR = "journal"
SEGMENT_BYTES = 64 << 20
MAX_SEGMENTS = 4
FSYNC_SECONDS = 1.0

RunKey = tuple[str, str, str]
"""(attack key, session, started_at as the report writes it): one run, whatever the run id's later reuse."""


def encode_event(event: ObservedEvent) -> list[Any]:
    """An event as a JSON list of its fields, in declaration order."""
    fields = [getattr(event, f.name) for f in dataclasses.fields(ObservedEvent)]
    endpoint = event.endpoint
    fields[dataclasses.fields(ObservedEvent).index(_ENDPOINT)] = [endpoint.host, endpoint.port, endpoint.path]
    return fields


_ENDPOINT = next(f for f in dataclasses.fields(ObservedEvent) if f.name == "endpoint")


def decode_event(fields: list[Any]) -> ObservedEvent:
    """An event `encode_event` wrote. A journal written before a trailing field with a default was added (e.g.
    `injected`) lacks it: the default applies. More fields than the event has is an error (TypeError)."""
    names = [f.name for f in dataclasses.fields(ObservedEvent)]
    if len(fields) > len(names):
        raise TypeError(f"a journaled event has {len(fields)} fields, an event {len(names)}")
    values = dict(zip(names, fields, strict=False))
    values["endpoint"] = Endpoint(*values["endpoint"])
    if "injected" in values:
        values["injected"] = tuple(values["injected"])  # a JSON list
    return ObservedEvent(**values)


class Journal:
    """Appends the monitor's inputs and the concluded runs to `<directory>/journal/` (see the module
    docstring). Thread-safe: the addon's worker journals inputs while its receiver journals conclusions."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / JOURNAL_DIR
        self.path.mkdir(parents=True, exist_ok=True)
        existing = segments(self.path)
        self._number = int(existing[-1].stem) + 1 if existing else 1
        self._handle: Any = None
        self._size = 0
        self._synced = time.monotonic()
        self._lock = threading.Lock()

    def events(self, events: Sequence[ObservedEvent]) -> None:
        self._write({"events": [encode_event(e) for e in events]})

    def tick(self, now: float) -> None:
        self._write({"tick": now})

    def concluded(self, key: RunKey) -> None:
        """The run `key` was reported: its report file is written and durable (`ReportWriter.commit`)."""
        self._write({"concluded": list(key)})

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._handle is None or self._size >= SEGMENT_BYTES:
                self._rotate()
            self._handle.write(line)
            self._handle.flush()
            self._size += len(line)
            if time.monotonic() - self._synced >= FSYNC_SECONDS:
                os.fsync(self._handle.fileno())
                self._synced = time.monotonic()

    def _rotate(self) -> None:
        self.close()
        path = self.path / f"{self._number:08d}.jsonl"
        self._number += 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._handle = os.fdopen(fd, "a", encoding="utf-8")
        self._size = 0
        for old in segments(self.path)[:-MAX_SEGMENTS]:
            old.unlink(missing_ok=True)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None

    def clear(self) -> None:
        """Every run was reported: the journal is no longer needed."""
        with self._lock:
            self.close()
            clear(self.path)


def run_key(report: dict[str, Any]) -> RunKey:
    summary = report["execution_summary"]
    attack = report["attack"]
    return (str(attack["id"] or attack["file"]), str(summary["session"]), str(summary["started_at"]))


def segments(path: Path) -> list[Path]:
    return sorted(path.glob("*.jsonl")) if path.is_dir() else []


def clear(path: Path) -> None:
    for segment in segments(path):
        segment.unlink(missing_ok=True)


def records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of the journal at `path`, oldest first; a torn or damaged line is skipped."""
    for segment in segments(path):
        with open(segment, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    yield record
