"""Judging in one thread: the `Monitor`, its reports and its journal, as the addon's monitor process and journal
do them (`oatf tap` judging alone), and `oatf monitor --listen PATH`, the shared monitor that taps feed when no
proxy serves them (`oatf_engine.feed`).

- `Judge`: events and clock ticks in; each concluded run's report written (`ReportWriter`, made durable per
  batch) and then journaled as reported; the inputs journaled first (`oatf_engine.journal`), so a crash of the
  process leaves a journal that `oatf recover DIR` (or the next tap or monitor started on the directory)
  concludes. A clean finish, every report written, deletes the journal. One process journals in a report
  directory at a time (`oatf_engine.journal.take_lock`): another that finds it taken says so and judges without a
  journal.
- `Say`: the messages and failures of the front door, each kind once; no failure of judging stops the relay or
  the serving.
"""

from __future__ import annotations

import functools
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

import oatf
from oatf_engine.engine_config import EngineConfig
from oatf_engine.events import ObservedEvent
from oatf_engine.feed import FeedServer
from oatf_engine.journal import Journal, run_key, take_lock
from oatf_engine.monitor import LoadedAttack, Monitor, RunConcluded, load_library
from oatf_engine.recovery import conclude_pending, pending_journal
from oatf_engine.reports import ReportWriter
from oatf_engine.semantic import load_semantic_evaluator

TICK_SECONDS = 1.0
"""How often the clock advances while no traffic comes, so grace periods end live."""


class Say:
    """Writes a front door's messages to stderr, each kind once (`say`), and runs work that must not stop the
    caller (`guard`)."""

    def __init__(self, program: str, stderr: IO[str]) -> None:
        self.program = program
        self.stderr = stderr
        self.seen: set[str] = set()

    def say(self, kind: str, message: str) -> None:
        if kind not in self.seen:
            self.seen.add(kind)
            self.always(message)

    def always(self, message: str) -> None:
        print(f"{self.program}: {message}", file=self.stderr, flush=True)

    def guard(self, kind: str, work: Callable[[], None]) -> None:
        """Run `work`; a failure is said once per kind and the caller goes on."""
        try:
            work()
        except Exception as exc:  # the relay and the serving must outlive any failure of judging
            self.say(kind, f"{kind} failed (reported once): {type(exc).__name__}: {exc}")


class Judge:
    """A monitor with its reports and journal (see the module docstring). Not thread-safe: one thread calls it."""

    def __init__(self, attacks: list[LoadedAttack], config: EngineConfig, semantic: oatf.SemanticEvaluator | None,
                 report_dir: str, say: Say, verbose: bool) -> None:
        self.monitor = Monitor(attacks, config.monitor, semantic=semantic)
        self.writer = ReportWriter(report_dir)
        self.report_dir = report_dir
        self.say = say
        self.verbose = verbose
        self.reported = 0
        self.unwritten = 0
        self._lock: IO[str] | None = None
        self.journal = self._open_journal(attacks, config, semantic)

    def _open_journal(self, attacks: list[LoadedAttack], config: EngineConfig,
                      semantic: oatf.SemanticEvaluator | None) -> Journal | None:
        """The journal, after concluding the runs a process that did not stop cleanly left in it; None (said)
        when another process journals there or it cannot be written."""
        try:
            lock = take_lock(self.report_dir)
            if lock is None:
                self.say.always(f"another process journals in {self.report_dir}: this one judges without a journal "
                                f"(a crash would lose its open runs); give it a report directory of its own")
                return None
            self._lock = lock
            if pending_journal(self.report_dir):
                recovered = conclude_pending(self.report_dir, attacks, config.monitor, semantic, wire=config.decoder)
                self.say.always(f"{len(recovered)} run(s) left open by a process that did not stop cleanly were "
                                f"concluded from its journal (status `recovered`) into {self.report_dir}")
            return Journal(self.report_dir)
        except OSError as exc:
            self.say.always(f"the journal is unavailable (a crash would lose open runs): {exc}")
            return None

    def observe(self, events: Sequence[ObservedEvent]) -> None:
        if not events:
            return
        if self.journal is not None:
            self.say.guard("journal", functools.partial(self.journal.events, events))
        outputs = []
        for event in events:
            outputs.extend(self.monitor.observe(event))
        self._report(outputs)

    def tick(self, now: float) -> None:
        if self.journal is not None:
            self.say.guard("journal", functools.partial(self.journal.tick, now))
        self._report(self.monitor.tick(now))

    def finish(self, ended: bool) -> None:
        """Conclude and report every open run: as at a recording's end when the traffic `ended` by itself
        (the agent closed the session), else at once (`interrupted`); then drop the journal when every
        report was written (else keep it for `oatf recover`) and release the lock."""
        self._report(self.monitor.end_of_traffic(self.monitor.now) if ended else self.monitor.shutdown())
        if self.journal is not None:
            if self.unwritten:
                self.say.always(f"{self.unwritten} report(s) could not be written: the journal in {self.report_dir} "
                                f"keeps their runs for `oatf recover`")
                self.journal.close()
            else:
                self.journal.clear()
        if self._lock is not None:
            self._lock.close()

    def leave(self) -> None:
        """Stop without concluding (what fed this judge died): the journal, made durable, keeps every open run
        for `oatf recover` or the next judge on the report directory (status `recovered`); the lock is
        released."""
        if self.journal is not None:
            self.journal.close()
        if self._lock is not None:
            self._lock.close()

    def _report(self, outputs: list[Any]) -> None:
        written = []
        for report in (output.report for output in outputs if isinstance(output, RunConcluded)):
            try:
                path = self.writer.write(report)
            except OSError as exc:
                self.unwritten += 1
                self.say.say("report", f"report not written (reported once; the journal keeps the run): {exc}")
                continue
            written.append(report)
            self.reported += 1
            if self.verbose:
                self.say.always(f"{report['attack']['id']}: {report['outcome']} ({path})")
        if not written:
            return
        try:
            self.writer.commit()  # one round of fsyncs per batch of reports
        except OSError as exc:
            self.unwritten += len(written)
            self.say.say("commit", f"reports not made durable (reported once; the journal keeps the runs): {exc}")
            return
        if self.journal is not None:
            for report in written:  # a marker never precedes a durable report
                self.say.guard("journal", functools.partial(self.journal.concluded, run_key(report)))


def serve_monitor(listen: str, attack_paths: list[str], report_dir: str, config: EngineConfig, verbose: bool,
                  stderr: IO[str] = sys.stderr, stop: threading.Event | None = None) -> int:
    """`oatf monitor --listen PATH`: judge the events every tap feeds to the socket at `listen` with one monitor,
    until SIGINT or SIGTERM (or `stop`); then conclude every open run. 0, or 2 when it cannot start."""
    say = Say("oatf monitor", stderr)
    library = load_library(attack_paths, config.lenient, long_lived=True)
    for problem in library.problems:
        say.always(f"not loaded: {problem}")
    try:
        semantic = load_semantic_evaluator(config.semantic_evaluator)
        judge = Judge(list(library.attacks), config, semantic, report_dir, say, verbose)
    except (ImportError, AttributeError, OSError) as exc:
        say.always(str(exc))
        return 2
    inbox: queue.SimpleQueue[list[ObservedEvent]] = queue.SimpleQueue()
    try:
        server = FeedServer(listen, inbox.put, lambda message: say.always(message) if verbose else None)
    except OSError as exc:
        say.always(f"cannot listen on {listen}: {exc}")
        judge.finish(False)
        return 2
    stop = stop or threading.Event()
    previous = {signum: signal.signal(signum, lambda _signum, _frame: stop.set())
                for signum in (signal.SIGINT, signal.SIGTERM)} \
        if threading.current_thread() is threading.main_thread() else {}
    say.always(f"listening on {listen}; {len(library.attacks)} attack(s) loaded; reports in {report_dir}")
    try:
        while not stop.is_set():
            try:
                events = inbox.get(timeout=TICK_SECONDS)
            except queue.Empty:
                say.guard("tick", lambda: judge.tick(time.time()))
                continue
            say.guard("evaluation", functools.partial(judge.observe, events))
        server.close()  # what the feeds already sent is read first
        while True:
            try:
                events = inbox.get_nowait()
            except queue.Empty:
                break
            say.guard("evaluation", functools.partial(judge.observe, events))
        say.guard("shutdown", lambda: judge.finish(False))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    rejected = f", {server.rejected} connection(s) dropped for a bad frame" if server.rejected else ""
    say.always(f"{server.received} event(s) received, {judge.reported} run(s) reported in {report_dir}{rejected}")
    return 0
