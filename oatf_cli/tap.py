"""`oatf tap … -- COMMAND [ARGS…]`: the front door for MCP servers spoken to over stdio, which no proxy sees.

The tap starts COMMAND as its child and stands between the agent and it:
- **Relay.** The agent's stdin goes to the child's stdin and the child's stdout to our stdout, byte for byte,
  each chunk written on as soon as it is read (two relay threads doing only `os.read`/`os.write`); the
  child's stderr is ours. The tap writes nothing else to stdout (it is the protocol).
- **Evaluation.** Each chunk read is queued, with the time it was read, for an evaluation thread, just before
  it is relayed (so a request is always queued before the answer the peer gives it), which takes the chunks
  in batches (`BATCH_SECONDS`, `Evaluator.run`): NDJSON
  framing and MCP decoding (`oatf_engine.wire.ndjson`, the HTTP transports' JSON-RPC logic; the events' client
  is `<agent>:<pid>`, `--agent`), and `--record`'s capture. The events are then judged alone (`Judge`: the
  `Monitor` built from the engine settings, reports, a journal for `oatf recover`; one journal record per
  batch), or, with `--monitor PATH`,
  sent to a shared monitor (`oatf_engine.feed`: the addon's `oatf_listen`, or `oatf monitor --listen`) that
  judges the agent's other traffic too. A tap that cannot reach the shared monitor, or loses it, says so and
  judges alone, the events the monitor had not acknowledged included. The clock ticks every `TICK_SECONDS`
  while the traffic is quiet, so grace periods end live.
- **Never blocked.** The relay never waits for the evaluation: the queue holds at most `MAX_QUEUED_BYTES`;
  a chunk beyond it is relayed but not evaluated, counted and said on stderr (with the total at the end), and
  its direction's framing resumes at its next line. While the evaluation thread works, a relay thread waits
  at most `SWITCH_SECONDS` for the interpreter lock.
- **Lifetime.** SIGINT, SIGTERM and SIGHUP are forwarded to the child (which runs in a process group of its
  own, so a terminal's Ctrl-C reaches it once); on Linux the child also gets SIGTERM if the tap itself is
  killed (`PR_SET_PDEATHSIG`), so it is never orphaned. When the child ends (the agent closed stdin, a
  signal, a crash), the rest of its stdout is relayed, every open run is concluded (status `interrupted`)
  and reported, and the tap exits with the child's status (dying of the child's signal when it died of one).
- Diagnostics (undecodable traffic, the reports written) go to stderr only with `verbose`; errors of the
  tap itself (an attack not loaded, a report not written, the shared monitor lost, evaluation behind) always
  do, each kind once.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from oatf_cli.judge import TICK_SECONDS, Judge, Say
from oatf_engine.engine_config import EngineConfig
from oatf_engine.events import ObservedEvent, Side
from oatf_engine.feed import FeedClient, FrameError
from oatf_engine.monitor import load_library
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.wire import Diagnostic, WireDecoder
from oatf_engine.wire.ndjson import StdioSession, endpoint_of, record_header, record_line

CHUNK = 1 << 16
MAX_QUEUED_BYTES = 64 << 20
"""Relayed bytes waiting for evaluation, at most (see the module docstring)."""
DRAIN_SECONDS = 5.0
"""How long, after the child exited, the tap waits for the end of its stdout (a process the child started may
still hold it open)."""
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_USAGE, EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 2, 127, 126
LOCAL_AGENT = "127.0.0.1"
_PR_SET_PDEATHSIG = 1
RECORD_PID = "{pid}"
"""In a `--record` path: the tap's process id (`record_path`)."""
SWITCH_SECONDS = 0.0005
"""How long a relay thread waits at most for the interpreter lock while the evaluation thread holds it
(`sys.setswitchinterval` for the tap's process; Python's default, 5 ms, was added to round trips whenever the
evaluation was busy: with the whole library loaded, a FastMCP `tools/call` loop ran at 235 calls/s through the
tap, 320-370 with 0.5 ms, same machine and minutes, `benchmarks/bench_tap.py`)."""
BATCH_SECONDS = 0.05
BATCH_BYTES = 1 << 20
"""Once a chunk is queued, the evaluation thread lets chunks gather for `BATCH_SECONDS`, or until `BATCH_BYTES`
are queued, before it takes them all (`Evaluator.run`)."""
GAP = b""
"""Queued in place of the chunks left out: the direction's framing resumes at its next line."""

Chunk = tuple[Side, bytes | None, float]
"""Bytes one side sent (None: its stream ended; `GAP`: bytes were left out), and when they were read."""


@dataclass(frozen=True)
class TapOptions:
    """What `oatf tap` was asked to do."""

    command: list[str]
    attack_paths: list[str]
    report_dir: str
    config: EngineConfig
    record: str | None = None
    verbose: bool = False
    agent: str = LOCAL_AGENT
    """The agent the server serves (`--agent`): an `oatf_agents` name, or a host."""
    monitor: str | None = None
    """A shared monitor's socket (`--monitor`), or None: judge alone."""


class Evaluator:
    """The evaluation thread's work: chunks in (`put`), events to the judge or the shared monitor, the capture
    out."""

    def __init__(self, session: StdioSession, make_judge: Callable[[], Judge], judge: Judge | None,
                 record: IO[str] | None, say: Say, monitor_path: str | None) -> None:
        self.session = session
        self.make_judge = make_judge
        self.judge = judge
        """Judging alone (from the start, or since the shared monitor was lost); else None."""
        self.feed: FeedClient | None = None
        """The shared monitor's feed, while it serves."""
        self.monitor_path = monitor_path
        self.server_exited = False
        """The server exited by itself (the agent closed the session): its runs end as a recording's do
        (`Monitor.end_of_traffic`), not cut short; after a signal they are concluded `interrupted` at once."""
        self.record = record
        self.say = say
        self.queue: queue.SimpleQueue[Chunk | None] = queue.SimpleQueue()
        self.queued = 0
        """Bytes queued and not yet evaluated."""
        self.dropped_bytes = 0
        self.dropped_chunks = 0
        self._said_dropped = 0
        self._gaps: set[Side] = set()
        self._lock = threading.Lock()
        self._gathered = threading.Event()
        """Set when `BATCH_BYTES` are queued: the batch is taken at once."""

    def put(self, sender: Side, data: bytes | None) -> None:
        """Queue what a relay thread just copied, or leave it out (counted) beyond `MAX_QUEUED_BYTES`: never
        blocks."""
        now = time.time()
        with self._lock:
            if data is not None and self.queued + len(data) > MAX_QUEUED_BYTES:
                self.dropped_bytes += len(data)
                self.dropped_chunks += 1
                self._gaps.add(sender)
                return
            if sender in self._gaps:
                self._gaps.discard(sender)
                self.queue.put((sender, GAP, now))
            self.queued += len(data or b"")
            self.queue.put((sender, data, now))
            if self.queued >= BATCH_BYTES:
                self._gathered.set()

    def run(self) -> None:
        """Evaluate queued chunks until `None` is queued, then conclude and report every open run. The chunks
        are taken in batches: once one is queued, the thread waits `BATCH_SECONDS` (or until `BATCH_BYTES` are
        queued) and takes the chunks queued by then, up to `BATCH_BYTES`, handing their events on together (one
        journal record, one frame to a shared monitor): a tap evaluating each chunk as it came woke for each, and
        its evaluation, cache-cold each time, cost three times its CPU on a busy machine."""
        while True:
            try:
                item = self.queue.get(timeout=TICK_SECONDS)
            except queue.Empty:
                self.say.guard("tick", self._tick)
                continue
            if item is not None:
                self._gathered.wait(BATCH_SECONDS)
                self._gathered.clear()
            events: list[ObservedEvent] = []
            taken = 0
            while item is not None:
                taken += len(item[1] or b"")
                with self._lock:
                    self.queued -= len(item[1] or b"")
                self.say.guard("evaluation", functools.partial(self._chunk, *item, events))
                if taken >= BATCH_BYTES:
                    break
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
            self.say.guard("evaluation", functools.partial(self._hand, events))
            self._say_dropped()
            if item is None:
                break
        self._say_dropped()
        self.say.guard("shutdown", self._finish)
        self.session.close()

    def _tick(self) -> None:
        if self.judge is not None:  # a shared monitor keeps its own clock
            self.judge.tick(time.time())

    def _chunk(self, sender: Side, data: bytes | None, timestamp: float, events: list[ObservedEvent]) -> None:
        """Decode (and record) one chunk; its events appended to `events`."""
        if data is None:
            last = self.session.end(sender)
            lines = [last] if last is not None else []
        elif data is GAP:
            self.session.gap(sender)
            return
        else:
            lines = self.session.lines(sender, data)
        for line in lines:
            if self.record is not None:
                self.say.guard("record", functools.partial(self._record, sender, line, timestamp))
            events.extend(self.session.message(sender, line, timestamp))

    def _hand(self, events: list[ObservedEvent]) -> None:
        if not events:
            return
        if self.feed is not None:
            try:
                self.feed.send(events)
                return
            except (OSError, FrameError) as exc:
                self.alone(f"the shared monitor at {self.monitor_path} failed ({exc})", self.feed.close())
                return
        assert self.judge is not None
        self.judge.observe(events)

    def alone(self, why: str, unacked: list[ObservedEvent]) -> None:
        """Judge alone from now on, beginning with what the shared monitor did not acknowledge."""
        self.feed = None
        self.judge = self.make_judge()
        self.say.always(f"{why}: judging alone from now on ({len(unacked)} event(s) it had not acknowledged "
                        f"included), reports in {self.judge.report_dir}")
        self.judge.observe(unacked)

    def _finish(self) -> None:
        if self.feed is not None:
            unacked = self.feed.close()
            if unacked:
                self.alone(f"the shared monitor at {self.monitor_path} did not acknowledge every event", unacked)
        if self.judge is not None:
            self.judge.finish(self.server_exited)

    def _say_dropped(self) -> None:
        if self.dropped_chunks != self._said_dropped:
            self._said_dropped = self.dropped_chunks
            self.say.always(f"evaluation is behind the traffic: {self.dropped_bytes} byte(s) in "
                            f"{self.dropped_chunks} chunk(s) relayed but not evaluated so far (over "
                            f"{MAX_QUEUED_BYTES} bytes waiting); verdicts may miss what they held")

    def _record(self, sender: Side, line: bytes, timestamp: float) -> None:
        assert self.record is not None
        self.record.write(record_line(sender, line, timestamp))
        self.record.flush()


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the tap dies, however it dies (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _relay(source: int, target: int | None, sender: Side, evaluator: Evaluator,
           on_end: Callable[[], None] = lambda: None) -> None:
    """Copy `source` to `target` chunk by chunk, queueing each chunk for evaluation *before* it is written: the
    peer cannot answer a message it has not received, so the evaluation always sees a request before its answer
    (queued after the write, a relay thread paused between the two — a loaded machine, a tap running at a lower
    priority than its server — let the other direction queue the answer first; the decoder then had no request
    to correlate it with and dropped it: a `tools/list` answer lost made a resisting agent `not_delivered`, a
    `tools/call` answer lost hid what a response indicator would match). A target that closed (the reader is
    gone) stops the copying, not the reading (the evaluation still sees the traffic)."""
    try:
        while data := os.read(source, CHUNK):
            evaluator.put(sender, data)
            if target is not None:
                try:
                    _write_all(target, data)
                except OSError:
                    target = None
    except OSError:
        pass
    finally:
        evaluator.put(sender, None)
        on_end()


def run_tap(options: TapOptions, stdin: int = 0, stdout: int = 1, stderr: IO[str] = sys.stderr) -> int:
    """Run the tap (see the module docstring); the child's exit status (negative: the signal that ended it),
    or `EXIT_USAGE` / `EXIT_NOT_FOUND` / `EXIT_NOT_EXECUTABLE` when it could not start."""
    say = Say("oatf tap", stderr)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_SECONDS)
    try:
        return _run(options, stdin, stdout, say)
    finally:
        sys.setswitchinterval(switch)


def _run(options: TapOptions, stdin: int, stdout: int, say: Say) -> int:
    library = load_library(options.attack_paths, options.config.lenient)
    for problem in library.problems:
        say.always(f"not loaded: {problem}")
    try:
        semantic = load_semantic_evaluator(options.config.semantic_evaluator)
        make_judge = functools.partial(Judge, list(library.attacks), options.config, semantic, options.report_dir,
                                       say, options.verbose)
        judge = make_judge() if options.monitor is None else None
        record = open(record_path(options.record), "w", encoding="utf-8") if options.record else None  # noqa: SIM115
    except (ImportError, AttributeError, OSError) as exc:
        say.always(str(exc))
        return EXIT_USAGE
    try:
        child = subprocess.Popen(options.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                 process_group=0,
                                 preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    except OSError as exc:
        say.always(f"{options.command[0]}: {exc.strerror or exc}")
        if record is not None:
            record.close()
        if judge is not None:
            judge.finish(True)
        return EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
    assert child.stdin is not None and child.stdout is not None
    session_name = f"stdio:{child.pid}"
    if record is not None:
        record.write(record_header(session_name, child.pid, options.command, options.agent, time.time()))
        record.flush()

    def diagnose(diagnostic: Diagnostic) -> None:
        if options.verbose:
            say.always(f"{diagnostic.code}: {diagnostic.message}")

    decoder = WireDecoder(options.config.decoder, on_diagnostic=diagnose)
    session = StdioSession(decoder, session_name, endpoint_of(options.command, child.pid), options.agent)
    evaluator = Evaluator(session, make_judge, judge, record, say, options.monitor)
    if options.monitor is not None:
        source = f"oatf tap {options.command[0]} (pid {child.pid}, agent {options.agent})"
        try:
            evaluator.feed = FeedClient(options.monitor, source)
        except (OSError, FrameError) as exc:
            evaluator.alone(f"cannot reach the shared monitor at {options.monitor} ({exc})", [])
    previous = {signum: signal.signal(signum, lambda signum, _frame: child.send_signal(signum))
                for signum in FORWARDED_SIGNALS} if threading.current_thread() is threading.main_thread() else {}
    child_stdin = child.stdin.fileno()
    threads = [
        threading.Thread(target=_relay, name="oatf-tap-stdin", daemon=True,
                         args=(stdin, child_stdin, "client", evaluator, child.stdin.close)),
        threading.Thread(target=_relay, name="oatf-tap-stdout", daemon=True,
                         args=(child.stdout.fileno(), stdout, "server", evaluator)),
    ]
    evaluation = threading.Thread(target=evaluator.run, name="oatf-tap-evaluation", daemon=True)
    evaluation.start()
    for thread in threads:
        thread.start()
    try:
        status = child.wait()
        threads[1].join(DRAIN_SECONDS)
        evaluator.server_exited = status >= 0  # not killed by a signal: the session is over, not cut short
        evaluator.queue.put(None)
        evaluation.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if record is not None:
            with contextlib.suppress(OSError):
                record.close()
    if options.verbose:
        judged = (f"{evaluator.judge.reported} run(s) reported in {options.report_dir}" if evaluator.judge
                  else f"its events judged by the shared monitor at {options.monitor}")
        say.always(f"{options.command[0]} exited with status {status}; {judged}")
    if evaluator.dropped_chunks:
        say.always(f"{evaluator.dropped_bytes} byte(s) relayed but not evaluated (evaluation was behind)")
    return status


def record_path(record: str) -> str:
    """Where `--record FILE` writes: FILE, `{pid}` in it replaced by the tap's process id, so that each session
    of a server the agent starts again (or several times at once) keeps a capture of its own."""
    return record.replace(RECORD_PID, str(os.getpid()))


def exit_like(status: int) -> int:
    """End this process the way the child ended: by the same signal when a signal ended it (its default
    action restored first), else with its status. Returns the status for callers that go on (128 + signal
    when the signal does not end the process)."""
    if status >= 0:
        return status
    signum = -status
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum
