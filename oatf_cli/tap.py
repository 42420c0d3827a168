"""`oatf tap … -- COMMAND [ARGS…]`: the front door for MCP servers spoken to over stdio, which no proxy sees.

The tap starts COMMAND as its child and stands between the agent and it:
- **Relay.** The agent's stdin goes to the child's stdin and the child's stdout to our stdout, byte for byte,
  each chunk written on as soon as it is read (two relay threads doing only `os.read`/`os.write`); the
  child's stderr is ours. The tap writes nothing else to stdout (it is the protocol).
- **Evaluation.** Each relayed chunk is queued, with the time it was read, for an evaluation thread: NDJSON
  framing and MCP decoding (`oatf_engine.wire.ndjson`, the HTTP transports' JSON-RPC logic), the `Monitor` built
  from the engine settings (`oatf_engine.engine_config`), reports by `ReportWriter`, and `--record`'s capture. The
  relay never waits for it. The clock ticks every `TICK_SECONDS` while the traffic is quiet, so grace
  periods end live.
- **Lifetime.** SIGINT, SIGTERM and SIGHUP are forwarded to the child (which runs in a process group of its
  own, so a terminal's Ctrl-C reaches it once); on Linux the child also gets SIGTERM if the tap itself is
  killed (`PR_SET_PDEATHSIG`), so it is never orphaned. When the child ends (the agent closed stdin, a
  signal, a crash), the rest of its stdout is relayed, every open run is concluded (status `interrupted`)
  and reported, and the tap exits with the child's status (dying of the child's signal when it died of one).
- Diagnostics (undecodable traffic, the reports written) go to stderr only with `verbose`; errors of the
  tap itself (an attack not loaded, a report not written) always do, each kind once.
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
from typing import IO, Any

from oatf_engine.engine_config import EngineConfig
from oatf_engine.events import Side
from oatf_engine.monitor import Monitor, RunConcluded, load_library
from oatf_engine.reports import ReportWriter
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.wire import Diagnostic, WireDecoder
from oatf_engine.wire.ndjson import StdioSession, endpoint_of, record_header, record_line

CHUNK = 1 << 16
TICK_SECONDS = 1.0
"""How often the evaluation thread advances the clock while no traffic comes."""
DRAIN_SECONDS = 5.0
"""How long, after the child exited, the tap waits for the end of its stdout (a process the child started may
still hold it open)."""
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_USAGE, EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 2, 127, 126
_PR_SET_PDEATHSIG = 1

Chunk = tuple[Side, bytes | None, float]
"""Bytes one side sent (None: its stream ended), and when they were read."""


@dataclass(frozen=True)
class TapOptions:
    """What `oatf tap` was asked to do."""

    command: list[str]
    attack_paths: list[str]
    report_dir: str
    config: EngineConfig
    record: str | None = None
    verbose: bool = False


class _Once:
    """Writes each kind of message to stderr once."""

    def __init__(self, stderr: IO[str]) -> None:
        self.stderr = stderr
        self.seen: set[str] = set()

    def say(self, kind: str, message: str) -> None:
        if kind not in self.seen:
            self.seen.add(kind)
            print(f"oatf tap: {message}", file=self.stderr, flush=True)


class Evaluator:
    """The evaluation thread's work: chunks in (`put`), reports and the capture out."""

    def __init__(self, session: StdioSession, monitor: Monitor, writer: ReportWriter, record: IO[str] | None,
                 errors: _Once, verbose: bool) -> None:
        self.session = session
        self.monitor = monitor
        self.writer = writer
        self.server_exited = False
        """The server exited by itself (the agent closed the session): its runs end as a recording's do
        (`Monitor.end_of_traffic`), not cut short; after a signal they are concluded `interrupted` at once."""
        self.record = record
        self.errors = errors
        self.verbose = verbose
        self.reported = 0
        self.queue: queue.SimpleQueue[Chunk | None] = queue.SimpleQueue()

    def put(self, sender: Side, data: bytes | None) -> None:
        """Queue what a relay thread just copied (never blocks)."""
        self.queue.put((sender, data, time.time()))

    def run(self) -> None:
        """Evaluate queued chunks until `None` is queued, then conclude and report every open run."""
        while True:
            try:
                item = self.queue.get(timeout=TICK_SECONDS)
            except queue.Empty:
                self._guarded("tick", lambda: self._report(self.monitor.tick(time.time())))
                continue
            if item is None:
                break
            self._guarded("evaluation", functools.partial(self._chunk, *item))
        self._guarded("shutdown", lambda: self._report(
            self.monitor.end_of_traffic(self.monitor.now) if self.server_exited else self.monitor.shutdown()))
        self.session.close()

    def _chunk(self, sender: Side, data: bytes | None, timestamp: float) -> None:
        if data is None:
            last = self.session.end(sender)
            lines = [last] if last is not None else []
        else:
            lines = self.session.lines(sender, data)
        outputs = []
        for line in lines:
            if self.record is not None:
                self._guarded("record", functools.partial(self._record, sender, line, timestamp))
            for event in self.session.message(sender, line, timestamp):
                outputs.extend(self.monitor.observe(event))
        self._report(outputs)

    def _record(self, sender: Side, line: bytes, timestamp: float) -> None:
        assert self.record is not None
        self.record.write(record_line(sender, line, timestamp))
        self.record.flush()

    def _report(self, outputs: list[Any]) -> None:
        concluded = [output.report for output in outputs if isinstance(output, RunConcluded)]
        for report in concluded:
            self._guarded("report", functools.partial(self._write, report))
        if concluded:
            self._guarded("report", self.writer.commit)  # one round of fsyncs per batch of reports

    def _write(self, report: dict[str, Any]) -> None:
        path = self.writer.write(report)
        self.reported += 1
        if self.verbose:
            print(f"oatf tap: {report['attack']['id']}: {report['outcome']} ({path})", file=self.errors.stderr,
                  flush=True)

    def _guarded(self, kind: str, work: Callable[[], None]) -> None:
        """Run `work`; a failure is reported once per kind and the evaluation goes on."""
        try:
            work()
        except Exception as exc:  # the relay must outlive any failure of the evaluation
            self.errors.say(kind, f"{kind} failed (reported once): {type(exc).__name__}: {exc}")


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
    """Copy `source` to `target` chunk by chunk, queueing each chunk for evaluation after it is written. A
    target that closed (the reader is gone) stops the copying, not the reading (the evaluation still sees the
    traffic)."""
    try:
        while data := os.read(source, CHUNK):
            if target is not None:
                try:
                    _write_all(target, data)
                except OSError:
                    target = None
            evaluator.put(sender, data)
    except OSError:
        pass
    finally:
        evaluator.put(sender, None)
        on_end()


def run_tap(options: TapOptions, stdin: int = 0, stdout: int = 1, stderr: IO[str] = sys.stderr) -> int:
    """Run the tap (see the module docstring); the child's exit status (negative: the signal that ended it),
    or `EXIT_USAGE` / `EXIT_NOT_FOUND` / `EXIT_NOT_EXECUTABLE` when it could not start."""
    errors = _Once(stderr)
    library = load_library(options.attack_paths, options.config.lenient)
    for problem in library.problems:
        print(f"oatf tap: not loaded: {problem}", file=stderr, flush=True)
    try:
        semantic = load_semantic_evaluator(options.config.semantic_evaluator)
        writer = ReportWriter(options.report_dir)
        record = open(options.record, "w", encoding="utf-8") if options.record else None  # noqa: SIM115
    except (ImportError, AttributeError, OSError) as exc:
        print(f"oatf tap: {exc}", file=stderr, flush=True)
        return EXIT_USAGE
    try:
        child = subprocess.Popen(options.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                 process_group=0,
                                 preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    except OSError as exc:
        print(f"oatf tap: {options.command[0]}: {exc.strerror or exc}", file=stderr, flush=True)
        if record is not None:
            record.close()
        return EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
    assert child.stdin is not None and child.stdout is not None
    session_name = f"stdio:{child.pid}"
    if record is not None:
        record.write(record_header(session_name, child.pid, options.command, time.time()))
        record.flush()

    def diagnose(diagnostic: Diagnostic) -> None:
        if options.verbose:
            print(f"oatf tap: {diagnostic.code}: {diagnostic.message}", file=stderr, flush=True)

    decoder = WireDecoder(options.config.decoder, on_diagnostic=diagnose)
    session = StdioSession(decoder, session_name, endpoint_of(options.command, child.pid))
    monitor = Monitor(list(library.attacks), options.config.monitor, semantic=semantic)
    evaluator = Evaluator(session, monitor, writer, record, errors, options.verbose)
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
        print(f"oatf tap: {options.command[0]} exited with status {status}; {evaluator.reported} run(s) reported "
              f"in {options.report_dir}", file=stderr, flush=True)
    return status


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
