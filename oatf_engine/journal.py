"""The evaluation journal: what the live addon needs to conclude every open run after a crash.

The monitor is sans-I/O and deterministic: the same events and clock ticks, fed to a `Monitor` with the same
library and options, give the same runs. So the journal records the *inputs* — each batch of events as the
process takes it in, each clock tick — and which runs were concluded and reported. After `kill -9` of mitmdump (or of
its monitor process), the next start with the same report directory, or `oatf recover DIR`, replays the
journal into a fresh monitor (`recover`), skips the runs already reported, and concludes every other run with
status `recovered`, evidence included.

Files, in `<report dir>/journal/`: segments `NNNNNNNN.jsonl`, one JSON object per line, created with mode 0600:
- `{"events": [...]}`: events handed to the monitor as they came (`oatf tap`, `oatf monitor`);
- `{"received": [...]}`: events the proxy took in, journaled at once (at most `addon.oatf_addon.COALESCE_SECONDS`
  after they were observed: the batch the worker took) and held until the watermark releases them
  (`addon.watermark`): a crash right after the traffic loses none of them, however far the watermark is behind.
  Among them, in their place, the ends of exchanges that left requests unanswered (`ExchangeEnded`, an object
  `{"ended": [flow, time, seq, [[flow, side, id], ...]]}`: `encode_item`), which end those requests' waits, and,
  for the flows the proxy does not decode itself (most of them: `addon.mitm_tap`), their wire steps, undecoded
  (`{"step": [call, flow, time, ...]}`: `oatf_engine.wire.steps.encode_step`), which a replay decodes as the
  monitor process did;
- `{"tick": t}`: the monitor's clock moved to `t` — for the proxy, also the "released up to" marker: every held
  event stamped up to `t` (the highest tick so far) was handed to the monitor first, in time order
  (`oatf_engine.reorder.Reorder`, ties in the order received);
- `{"drained": true}`: every held event was handed to the monitor, in time order (a library swap, the shutdown);
- `{"closed": [session, at]}`: the agent closed that MCP session at `at` (a `DELETE` with its `Mcp-Session-Id`
  the server accepted), journaled as the proxy takes it in and held with the events, told to the monitor when a
  tick passes `at` — before the events of its time, as replay tells it (`Monitor.close_session`);
- `{"held": [...], "closed": [[session, at], ...], "primed": [...]}`: the events (and the closes) held when a
  recovery cut the journal (`cut`), journaled again at the start of the next segment so that the segments after a
  cut hold them; they replace what a replay holds at that point (a replay that read the segments before the cut
  holds the same ones: none counts twice); `primed`: the steps already handed over of the exchanges then under way
  (`oatf_engine.wire.steps.OpenSteps`), which prime a replay's decoder that has not read them (one that has leaves
  those exchanges as they are);
- `{"concluded": [attack, session, started_at]}`: that run was reported.
A replay (`oatf_engine.recovery.monitor_inputs`) hands a fresh monitor the same events, closes and ticks in the
same order as the proxy did: after a crash of the proxy, the events still held are handed over last, in time order;
after the loss of the monitor process only (the proxy goes on, and hands its held events to the new one), they are
not.
- **Append-only, bounded.** A segment holds at most `SEGMENT_BYTES`; at most `MAX_SEGMENTS` are kept (the
  oldest is deleted beyond it: the journal keeps the latest ~`SEGMENT_BYTES * MAX_SEGMENTS` of traffic; a
  run older than that is recovered from what is left). A clean shutdown, which reports every run, deletes it.
- **fsync policy.** Every record is written and flushed to the operating system at once (a crash of the
  process loses nothing already journaled); `os.fsync` runs at most every `FSYNC_SECONDS` and when a segment
  is closed (a crash of the machine loses at most that much).
- A torn last line (the process died mid-write) is ignored on reading.
- **The report directory changed at runtime** (the proxy's `oatf_report_dir`): the live runs go on, and their
  reports go to the new directory, so their journal goes with them (`hand_over`): its segments move to the new
  directory's journal, after those a crashed process left there (recovered into the new directory, as at a start)
  and before what is written next; the old directory is left with no journal, as after a clean shutdown — its
  runs are neither recovered there later nor lost. Segments a recovery is still reading stay where they are
  (that recovery reports into the old directory, and drops them).
- **One writer per report directory** (`take_lock`): a process journals and recovers in a report directory
  only while it holds an exclusive lock on `<report dir>/journal.lock` (the proxy's addon, `oatf tap` and
  `oatf monitor` judging, `oatf recover`). Another that finds it taken says so and neither journals nor
  recovers there: recovering a live process's journal would report its open runs as `recovered` while it
  still follows them (each run reported twice), and two writers' segments would interleave. The lock is the
  kernel's (`flock`): it ends with the process however the process ends, so a crash never leaves it taken.

**Reports' fsync policy** (`oatf_engine.reports.ReportWriter`, used by the monitor process, which writes the reports
itself). Each report is put in place atomically at once (temporary file + rename), and appended to
`verdicts.jsonl`; the reports written meanwhile are made durable together — one `syncfs` of the report
directory's filesystem (Linux), else each file, `verdicts.jsonl`, then the directory fsynced — at most every
`addon.monitor_process.COMMIT_SECONDS` (0.2 s) and before the monitor answers `shutdown`. Only then does the
proxy learn of those runs and journal their `concluded` markers: a marker never precedes a durable report. A
crash between the two leaves a written report without a marker; recovery recognises it by its file
(`oatf_engine.recovery`), so no run is reported twice and none is lost.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from oatf_engine.events import EVENT_FIELDS, Call, Endpoint, ExchangeEnded, ObservedEvent, event_values
from oatf_engine.progress import UPDATE_EVERY
from oatf_engine.wire.steps import WireStep, decode_step, encode_step

JOURNAL_DIR = "journal"
LOCK_FILE = "journal.lock"
SEGMENT_BYTES = 64 << 20
MAX_SEGMENTS = 4
FSYNC_SECONDS = 1.0

RunKey = tuple[str, str, str]
"""(attack key, session, started_at as the report writes it): one run, whatever the run id's later reuse."""


def encode_event(event: ObservedEvent) -> list[Any]:
    """An event as a JSON list of its fields, in declaration order."""
    fields = list(event_values(event))
    endpoint = event.endpoint
    fields[_ENDPOINT_AT] = [endpoint.host, endpoint.port, endpoint.path]
    return fields


_CHOICES: dict[str, tuple[str, ...]] = {"protocol": ("mcp", "a2a", "ag_ui"), "direction": ("request", "response"),
                                        "sender": ("client", "server")}
_TEXT = ("event_type", "flow_id", "client")
_ENDPOINT_AT = EVENT_FIELDS.index("endpoint")


def decode_event(fields: Any) -> ObservedEvent:
    """An event from `encode_event`'s JSON; ValueError when it is not one (a damaged journal record, or a frame
    from a socket: every field is checked, so the monitor never sees a value of the wrong kind). A journal
    written before events carried `injected` (their last field) lacks it: the default applies."""
    if not isinstance(fields, list) or not len(EVENT_FIELDS) - 1 <= len(fields) <= len(EVENT_FIELDS):
        raise ValueError(f"an event is a JSON list of its {len(EVENT_FIELDS)} fields")
    values = dict(zip(EVENT_FIELDS, fields, strict=False))
    endpoint, keys, jsonrpc_id = values["endpoint"], values["session_keys"], values["jsonrpc_id"]
    injected = values.get("injected", [])
    if not (isinstance(endpoint, list) and len(endpoint) == 3 and isinstance(endpoint[0], str)
            and _is_int(endpoint[1]) and isinstance(endpoint[2], str)):
        raise ValueError("an event's endpoint is [host, port, path]")
    if not (isinstance(keys, dict) and all(isinstance(v, str) for v in keys.values())):
        raise ValueError("an event's session keys are strings")
    if not (isinstance(injected, list) and all(isinstance(line, str) for line in injected)):
        raise ValueError("an event's injections are strings")
    if any(values[name] not in choices for name, choices in _CHOICES.items()) \
            or not all(isinstance(values[name], str) for name in _TEXT) or not _is_int(values["seq"]) \
            or not isinstance(values["timestamp"], (int, float)) or isinstance(values["timestamp"], bool) \
            or not (jsonrpc_id is None or isinstance(jsonrpc_id, str) or _is_int(jsonrpc_id)) \
            or not isinstance(values["is_error"], bool):
        raise ValueError("an event field has the wrong type")
    values["endpoint"] = Endpoint(*endpoint)
    values["timestamp"] = float(values["timestamp"])
    values["injected"] = tuple(injected)
    return ObservedEvent(**values)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


Item = ObservedEvent | ExchangeEnded | WireStep
"""What the proxy holds for the monitor and journals as it comes (`received`, `held`)."""


def encode_item(item: Item) -> list[Any] | dict[str, Any]:
    """An event as `encode_event`'s list, the end of an exchange as `{"ended": [flow, time, seq, calls]}`, a wire
    step as `{"step": [...]}` (`oatf_engine.wire.steps.encode_step`)."""
    if isinstance(item, WireStep):  # (first: what the proxy journals most)
        return encode_step(item)
    if isinstance(item, ObservedEvent):
        return encode_event(item)
    return {"ended": [item.flow_id, item.timestamp, item.seq, [list(call) for call in item.unanswered]]}


def decode_item(fields: Any) -> Item:
    """An event, the end of an exchange or a wire step from `encode_item`'s JSON; ValueError when it is none."""
    if not isinstance(fields, dict):
        return decode_event(fields)
    if "step" in fields:
        return decode_step(fields)
    ended = fields.get("ended")
    if not (isinstance(ended, list) and len(ended) == 4 and isinstance(ended[0], str)
            and isinstance(ended[1], int | float) and not isinstance(ended[1], bool) and _is_int(ended[2])
            and isinstance(ended[3], list)):
        raise ValueError("the end of an exchange is {\"ended\": [flow, time, seq, calls]}")
    calls: list[Call] = []
    for call in ended[3]:
        if not (isinstance(call, list) and len(call) == 3 and isinstance(call[0], str)
                and call[1] in ("client", "server") and (call[2] is None or isinstance(call[2], str)
                                                         or _is_int(call[2]))):
            raise ValueError("an unanswered request is [flow, side, id]")
        calls.append((call[0], call[1], call[2]))
    return ExchangeEnded(ended[0], float(ended[1]), ended[2], tuple(calls))


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)
"""A record's JSON (one encoder for every record: `json.dumps` with arguments makes one per call)."""


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
        self._held: set[Path] = set()
        """Segments handed to a recovery (`cut`): the bound does not delete them before `drop`."""

    def events(self, events: Sequence[ObservedEvent]) -> None:
        """Events handed to the monitor as they came."""
        self._write({"events": [encode_event(e) for e in events]})

    def received(self, events: Sequence[Item]) -> None:
        """Events (and ends of exchanges) taken in and held until a `tick` (or `drained`) releases them."""
        self._write({"received": [encode_item(e) for e in events]})

    def drained(self) -> None:
        """Every held event was handed to the monitor, in time order."""
        self._write({"drained": True})

    def closed(self, session: str, at: float) -> None:
        """The agent closed the MCP session `session` at `at`: held like a received event until a tick passes it."""
        self._write({"closed": [session, at]})

    def held(self, events: Sequence[Item], closes: Sequence[tuple[str, float]] = (),
             primed: Sequence[WireStep] = ()) -> None:
        """The events (and ends of exchanges, steps) and the closes held at a `cut`, in time order, and the steps
        already released of the exchanges under way (`primed`: `oatf_engine.wire.steps.Prime`), written first in
        the segment after it."""
        record: dict[str, Any] = {"held": [encode_item(e) for e in events], "closed": [list(close) for close in closes]}
        if primed:
            record["primed"] = [encode_step(step) for step in primed]
        self._write(record)

    def tick(self, now: float) -> None:
        self._write({"tick": now})

    def concluded(self, *keys: RunKey) -> None:
        """The runs `keys` were reported: their report files are written and durable (`ReportWriter.commit`).
        A record each, written together (a shutdown reports thousands of runs at once)."""
        self._write(*({"concluded": list(key)} for key in keys))

    def _write(self, *records: dict[str, Any]) -> None:
        line = "".join(_ENCODER.encode(record) + "\n" for record in records)
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
        for old in [segment for segment in segments(self.path) if segment not in self._held][:-MAX_SEGMENTS]:
            old.unlink(missing_ok=True)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None

    def cut(self) -> list[Path]:
        """Every segment written so far, for a recovery to read while the journal goes on: the segment being
        written is closed (the next record starts a new one), and these are held — kept whatever the bound —
        until `drop`."""
        with self._lock:
            self.close()
            held = segments(self.path)
            self._held.update(held)
            return held

    def drop(self, held: list[Path]) -> None:
        """Segments whose runs a recovery reported (`cut`): no longer needed."""
        with self._lock:
            for segment in held:
                segment.unlink(missing_ok=True)
                self._held.discard(segment)

    def hand_over(self, to: Journal) -> None:
        """Move this journal's segments — but those a recovery holds (`cut`) — to journal `to` (the report
        directory changed, see the module docstring), oldest first, numbered after its own; each is durable there
        (file and directory fsynced) before it leaves here. This journal is closed."""
        with self._lock:
            self.close()
            moving = [segment for segment in segments(self.path) if segment not in self._held]
        to.adopt(moving)
        fsync_path(self.path)

    def adopt(self, others: Sequence[Path]) -> None:
        """Take over another journal's segments (`hand_over`): renamed into this one's directory (copied, then
        deleted, across filesystems), numbered after its own and before what it writes next."""
        with self._lock:
            self.close()
            for segment in sorted(others):
                target = self.path / f"{self._number:08d}.jsonl"
                self._number += 1
                try:
                    os.rename(segment, target)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    _copy_durably(segment, target)
                    segment.unlink()
            fsync_path(self.path)

    def clear(self) -> None:
        """Every run was reported: the journal is no longer needed."""
        with self._lock:
            self.close()
            clear(self.path)


def _copy_durably(source: Path, target: Path) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, open(source, "rb") as handle:
        shutil.copyfileobj(handle, out)
        out.flush()
        os.fsync(out.fileno())


def fsync_path(path: str | os.PathLike[str]) -> None:
    """`os.fsync` of a file or a directory, by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def take_lock(directory: str | os.PathLike[str]) -> IO[str] | None:
    """Take the report directory's writer lock (see the module docstring), created with the directory if need
    be: held until the returned file is closed or the process ends; None when another writer holds it. OSError
    when it cannot be opened."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    handle = open(Path(directory) / LOCK_FILE, "a", encoding="utf-8")  # noqa: SIM115 (held by the caller)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    except OSError:
        handle.close()
        raise
    return handle


def run_key(report: dict[str, Any]) -> RunKey:
    summary = report["execution_summary"]
    attack = report["attack"]
    return (str(attack["id"] or attack["file"]), str(summary["session"]), str(summary["started_at"]))


def segments(path: Path) -> list[Path]:
    return sorted(path.glob("*.jsonl")) if path.is_dir() else []


def clear(path: Path) -> None:
    for segment in segments(path):
        segment.unlink(missing_ok=True)


def records(path: Path, only: list[Path] | None = None,
            position: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """Every record of the journal at `path` (of its segments among `only`, when given), oldest first; a torn
    or damaged line is skipped. `position`, when given, is told the bytes read so far across the segments
    (every `UPDATE_EVERY` lines, and once at the end)."""
    read = lines = 0
    for segment in segments(path) if only is None else sorted(only):
        with open(segment, "rb") as handle:
            for raw in handle:
                read += len(raw)
                lines += 1
                if position is not None and lines % UPDATE_EVERY == 0:
                    position(read)
                try:
                    record = json.loads(raw.decode("utf-8", "replace"))
                except ValueError:
                    continue
                if isinstance(record, dict):
                    yield record
    if position is not None:
        position(read)
