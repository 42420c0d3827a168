"""The live addon's `Monitor`, run in a child process so that evaluation never competes with mitmproxy's event
loop for the interpreter lock (issue 5: "evaluation never blocks the proxy's event loop"). No mitmproxy here.

The parent sends batches of `ObservedEvent`s and commands over a pipe; the child (`python -m
addon.monitor_process READ_FD WRITE_FD`) owns the sans-I/O `Monitor`, writes the report of every run it
concludes (`ReportWriter`: JSON encoding and fsync stay out of the proxy's process; durable in batches, at
most every `COMMIT_SECONDS`, see `oatf_engine.journal`'s fsync policy) and answers with its outputs (phase changes,
indicator matches) and, once their reports are durable, the runs reported (`Reported`: run, outcome, status,
path — not the report), which the parent handles (logs, flow marks, summary table, journal markers).
Pickled messages, in order, one pipe each way:

    parent → child: ("start", (MonitorOptions, semantic spec, report directory, DecoderConfig)) first, then
                    ("events", [event, end of exchange or wire step, ...]) | ("tick", now)
                    | ("options", MonitorOptions) | ("wire", DecoderConfig) | ("prime", Prime)
                    | ("reports", report directory) | ("attacks", [LoadedAttack, ...]) | ("status", None)
                    | ("close", (protocol, session key name, value, time))
                    | ("recover", (report directory, [journal segment, ...], origin, unreleased))
                    | ("shutdown", None)
                    | ("ping", None) | ("counts", None)
    child → parent: ("evaluated", [Output, ..., Held?, Diagnostic, ...]) after each "events" message, in order
                    (possibly empty)
                    | ("outputs", [Output, ...]) | ("reported", [Reported, ...]) | ("status", [run snapshot, ...])
                    | ("failed", message) | ("done", [Reported, ...]) | ("pong", live runs) | ("counts", {name: n})

**Decoding.** The proxy hands most flows over undecoded, as the calls of the wire decoder's exchange API
(`oatf_engine.wire.steps.WireStep`: raw header fields, body bytes, times): the child decodes them with a
`WireDecoder` of its own (configured by `start` and `wire`; its events numbered from `STEP_SEQ_BASE`, apart from
those the proxy decoded itself) and evaluates the events in the order decoded, which is the order the proxy
released the steps in — time order, as replay decodes a recording. Its diagnostics come back with the batch's
answer, for the proxy to count and log. A new child is first given the steps of the exchanges under way
(`prime`), so their rest decodes as it would have in the one it replaces.

`counts` answers what the monitor holds in memory (`counts`): live runs and their sessions, and what the
session resolver remembers; the parent keeps the latest answer (`MonitorProcess.counts`).

`recover` concludes, with this process's library and options, the runs that the given journal segments show
were left open (`oatf_engine.recovery`: a proxy that did not stop cleanly, a monitor process that died or
stalled; `unreleased`: whether the events the proxy still held count, as `recovery.monitor_inputs`), writes
their reports at once and answers `reported` with them, then `outputs` with a `Recovered`.

The child runs in a session of its own: a Ctrl-C or a signal to the proxy's process group does not reach it, so it
lives to conclude its runs when the proxy shuts down. It ends after `shutdown` — whose answer carries every run
still open, reported, so nothing observed is lost: the runs of sessions the agent closed as the clock would have
concluded them (`Monitor.conclude_closed_sessions`, as a recovery does), the others `interrupted` — or when the
pipe closes (the proxy died; the reports written are made durable first), at once: what it held is not torn
down. A report that cannot be written (a full or read-only disk) is answered as `Reported` without a path, with
the error; evaluation goes on. One event that makes evaluation raise is reported as `failed` and the others go
on. Every send goes through a sender thread: no caller (mitmproxy's event loop included) ever waits for the child.

No thread dies silently: the sender, the receiver and the child's loops catch everything, report each kind of
failure once, and go on. An event that cannot be pickled (the decoder cuts JSON at `MAX_DEPTH`, far below
where pickling fails, so none of its events) is cut at `MAX_DEPTH` too, or else left out and counted in
`unsent`; the rest of its batch is sent. Heartbeat: the child reads its pipe on a thread of its own that
answers `ping` at once, even while an evaluation runs, with the number of runs open
(`MonitorProcess.open_runs`: what a shutdown that cannot wait for the child leaves to the journal); a child that
does not answer within `stall_seconds` (stopped, or stuck holding its interpreter) is `stalled`, and the addon
replaces it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from oatf_engine.collector import collector_paused, freeze_long_lived
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.journal import run_key
from oatf_engine.monitor import Held, LoadedAttack, Monitor, MonitorOptions, Output, RunConcluded
from oatf_engine.recovery import Recovered, recover_runs
from oatf_engine.reports import Reported, ReportWriter
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.text import Once, describe, printable
from oatf_engine.wire import DecoderConfig, Diagnostic, WireDecoder
from oatf_engine.wire.jsonrpc import cut
from oatf_engine.wire.steps import STEP_SEQ_BASE, Prime, StepDecoder, WireStep

ROOT = Path(__file__).resolve().parents[1]
STALL_SECONDS = 30.0
"""A monitor process that does not answer a heartbeat within this long is stalled (and replaced)."""
HEARTBEAT_SECONDS = 0.5
"""While the proxy waits for the monitor to conclude its runs, how often it checks that it still answers."""
COMMIT_SECONDS = 0.2
"""The child makes the reports it wrote durable (`ReportWriter.commit`) at most this often, and at shutdown."""



class HeldFlows:
    """The flows whose events the monitor holds (`Held`), told among the outputs of an `events` or `tick`
    message when they changed: a match on them can still come, so the proxy's saving of them waits
    (`addon.deferred_save`). The flows last told."""

    def __init__(self) -> None:
        self.told: frozenset[str] = frozenset()

    def changed(self, monitor: Monitor) -> list[Held]:
        held = monitor.held_flows
        if len(held) == len(self.told) and all(flow in self.told for flow in held):
            return []
        self.told = frozenset(held)
        return [Held(self.told)]


OutputsHandler = Callable[[list[Output | Reported | Recovered | Held | Diagnostic]], None]
Message = tuple[str, Any]
Handed = ObservedEvent | ExchangeEnded | WireStep
"""What the proxy hands over in an `events` message."""


class Reporting:
    """The child's report writing: each concluded run's report written at once, made durable in batches."""

    def __init__(self, directory: str) -> None:
        self.writer = ReportWriter(directory)
        self.pending: list[Reported] = []
        """Runs whose report is written (or failed) and not yet committed: the parent has not heard of them."""
        self.committed = 0.0
        """When the last commit ran (monotonic)."""

    def conclude(self, outputs: list[Output]) -> list[Output]:
        """Write the report of every concluded run among `outputs`; the other outputs."""
        rest: list[Output] = []
        for output in outputs:
            if not isinstance(output, RunConcluded):
                rest.append(output)
                continue
            try:
                path = self.writer.write(output.report)
            except OSError as exc:  # a full or read-only disk: the run is told without a path, the others go on
                self.pending.append(Reported.of(output.run, output.report, None, describe(exc)))
            else:
                self.pending.append(Reported.of(output.run, output.report, path))
        return rest

    def wait(self) -> float | None:
        """Seconds until the pending reports are due for a commit; None when nothing is pending."""
        if not self.pending:
            return None
        return max(0.0, self.committed + COMMIT_SECONDS - time.monotonic())

    def commit(self) -> list[Reported]:
        """Make the written reports durable; the runs to tell the parent (not written, when the fsync failed)."""
        reported, self.pending = self.pending, []
        self.committed = time.monotonic()
        try:
            self.writer.commit()
        except OSError as exc:
            return [dataclasses.replace(r, path=None, error=r.error or describe(exc)) for r in reported]
        return reported

    def move(self, directory: str) -> list[Reported]:
        """Reports go to `directory` from now on; the pending ones are committed first (and returned)."""
        reported = self.commit()
        self.writer = ReportWriter(directory)
        return reported


def serve(inbox: Connection, outbox: Connection) -> None:
    """The child process: a `Monitor` answering the parent's messages until `shutdown` or a closed pipe."""
    try:
        kind, (options, semantic_spec, report_dir, wire) = inbox.recv()
        monitor = Monitor([], options, semantic=load_semantic_evaluator(semantic_spec))
        decoding = Decoding(wire)
    except (EOFError, OSError):
        return
    except Exception:  # the parent checked the semantic evaluator; anything else is reported
        outbox.send(("failed", traceback.format_exc(limit=8)))
        return
    reporting = Reporting(report_dir)
    held = HeldFlows()
    sending = threading.Lock()

    def answer(message: Message) -> None:
        with sending:
            outbox.send(message)

    work: queue.SimpleQueue[Message | None] = queue.SimpleQueue()
    threading.Thread(target=_read, args=(inbox, work, answer, lambda: monitor.live_runs), name="oatf-monitor-reader",
                     daemon=True).start()
    while True:
        try:
            message = work.get(timeout=reporting.wait())
        except queue.Empty:  # reports are due for a commit and nothing else came
            message = ("commit", None)
        if message is None:  # the proxy is gone: what was written is still made durable
            reporting.commit()
            return
        kind, payload = message
        try:
            if not _handle(monitor, decoding, reporting, kind, payload, answer, held):
                return
            if reporting.wait() == 0.0:
                answer(("reported", reporting.commit()))
        except OSError:  # the proxy is gone: nobody is left to report to
            reporting.commit()
            return
        except Exception:  # one bad message must not stop evaluation of the others
            answer(("failed", traceback.format_exc(limit=8)))
            if kind == "events":
                answer(("evaluated", []))


def _read(inbox: Connection, work: queue.SimpleQueue[Message | None], answer: Callable[[Message], None],
          open_runs: Callable[[], int]) -> None:
    """The child's reader thread: the heartbeat is answered at once (with the runs open, a count the evaluation
    thread may be changing meanwhile: read, never iterated), everything else queued for evaluation."""
    while True:
        try:
            message = inbox.recv()
            if message[0] == "ping":
                answer(("pong", open_runs()))
            else:
                work.put(message)
        except (EOFError, OSError):  # the proxy is gone
            work.put(None)
            return
        except Exception:  # a message that cannot be read: reported, the next one read
            with contextlib.suppress(Exception):
                answer(("failed", traceback.format_exc(limit=8)))


class Decoding:
    """The child's decoder of the steps the proxy hands over (see the module docstring), and its diagnostics not
    yet told."""

    def __init__(self, config: DecoderConfig) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.decoder = WireDecoder(config, on_diagnostic=self.diagnostics.append, seq_base=STEP_SEQ_BASE)
        self.steps = StepDecoder(self.decoder)

    def told(self) -> list[Diagnostic]:
        told, self.diagnostics[:] = list(self.diagnostics), []
        return told


def _observe(monitor: Monitor, decoding: Decoding, items: list[Handed],
             answer: Callable[[Message], None]) -> list[Output]:
    """Evaluate a batch: events and ends of exchanges as they are, steps decoded first. An item that makes decoding
    or evaluation raise is reported (once per batch) and the others go on (a step that made the decoder raise ends
    the decoding of its exchange: `StepDecoder`)."""
    outputs: list[Output] = []
    failed = False
    steps = decoding.steps
    for item in items:
        try:
            for decoded in steps.feed(item) if isinstance(item, WireStep) else (item,):
                outputs.extend(monitor.observe(decoded) if isinstance(decoded, ObservedEvent) else
                               monitor.exchange_ended(decoded))
        except Exception:
            if not failed:
                failed = True
                answer(("failed", traceback.format_exc(limit=8)))
        if steps.raised is not None:  # the decoder's own failure: its exchange is cut off (`StepDecoder`)
            if not failed:
                failed = True
                answer(("failed", steps.raised))
            steps.raised = None
    return outputs


def _handle(monitor: Monitor, decoding: Decoding, reporting: Reporting, kind: str, payload: Any,
            answer: Callable[[Message], None], held: HeldFlows) -> bool:
    """Evaluate one message and answer it; False after `shutdown`."""
    if kind == "shutdown":  # closed sessions' runs as the clock (and recovery) would conclude them; the rest cut short
        # The process ends after this answer (`main`): nothing made here needs the cyclic collector, whose passes
        # over the monitor's objects and the thousands of reports made here took ~0.13 s of 9,000 runs' shutdown.
        with collector_paused():
            last = reporting.conclude([*monitor.conclude_closed_sessions(), *monitor.shutdown()])
            if last:
                answer(("outputs", last))
            answer(("done", reporting.commit()))
        return False
    if kind == "status":
        answer(("status", monitor.status()))
        return True
    if kind == "counts":
        answer(("counts", counts(monitor)))
        return True
    if kind == "recover":
        _recover(monitor, reporting, *payload, wire=decoding.decoder.config, answer=answer)
        return True
    if kind in ("commit", "reports"):
        reported = reporting.commit() if kind == "commit" else reporting.move(payload)
        if reported:
            answer(("reported", reported))
        return True
    outputs: list[Output] = []
    try:
        if kind == "events":
            outputs = _observe(monitor, decoding, payload, answer)
        elif kind == "tick":
            outputs = monitor.tick(payload)
        elif kind == "options":
            monitor.set_options(payload)
        elif kind == "wire":
            decoding.decoder.config = payload
        elif kind == "prime":
            decoding.steps.prime(payload.steps)
        elif kind == "attacks":
            outputs = monitor.replace_attacks(payload)
            freeze_long_lived()  # the library, unpickled: this process keeps it
        elif kind == "close":
            monitor.close_session(*payload)
    except Exception:  # one bad event must not stop evaluation of the others
        answer(("failed", traceback.format_exc(limit=8)))
    told: list[Output | Held | Diagnostic] = [*reporting.conclude(outputs),
                                              *(held.changed(monitor) if kind in ("events", "tick") else ()),
                                              *decoding.told()]
    if kind == "events":
        answer(("evaluated", told))
    elif told:
        answer(("outputs", told))
    return True


def counts(monitor: Monitor) -> dict[str, int]:
    """What `monitor` holds in memory: live runs (those materialised, the rest on paper: `oatf_engine.monitor.
    paper`), their sessions, timers queued, and what its session resolver remembers (each bounded:
    `oatf_engine.monitor.sessions`, `.episodes`)."""
    resolver = monitor.sessions
    episodes = resolver.agent_episodes
    return {"runs": monitor.live_runs, "materialised": len(monitor.runs), "sessions": monitor.open_sessions,
            "timers": monitor.queued_timers, "flows": len(resolver.flow_session), "aliases": len(resolver.aliases),
            "routes": len(resolver.last_session), "held": len(resolver.pending) + len(resolver.held),
            "episode_flows": len(episodes.flows) if episodes is not None else 0,
            "agents": len(episodes.agents) if episodes is not None else 0}


def _recover(monitor: Monitor, reporting: Reporting, report_dir: str, segments: list[str], origin: str,
             unreleased: bool, *, wire: DecoderConfig, answer: Callable[[Message], None]) -> None:
    """Conclude and report the runs the journal `segments` show were left open (see the module docstring)."""
    try:
        runs = recover_runs(report_dir, monitor.attacks, monitor.options, monitor.semantic,
                            [Path(segment) for segment in segments], unreleased, wire=wire)
    except Exception:  # a journal that cannot be replayed: kept (incomplete) for the next start
        answer(("failed", traceback.format_exc(limit=8)))
        answer(("outputs", [Recovered(tuple(segments), origin, 0, False)]))
        return
    reporting.conclude(list(runs))
    reported = reporting.commit()
    answer(("reported", reported))
    keys = {run_key(run.report) for run in runs}
    complete = all(r.path is not None for r in reported if r.key in keys)
    answer(("outputs", [Recovered(tuple(segments), origin, len(runs), complete)]))


class MonitorProcess:
    """The parent's side: starts the child, sends to it, and hands what it answers to `on_outputs` (called
    on a receiver thread), then, once a batch of events is evaluated, calls `on_evaluated`; `on_failure` gets
    the child's error reports, each kind of failure of the sender and receiver threads (once), and the news of
    its death."""

    def __init__(self, options: MonitorOptions, semantic_spec: str, report_dir: str, on_outputs: OutputsHandler,
                 on_evaluated: Callable[[], None], on_failure: Callable[[str], None],
                 wire: DecoderConfig | None = None) -> None:
        self.on_outputs = on_outputs
        self.on_evaluated = on_evaluated
        self.on_failure = on_failure
        self.stall_seconds = STALL_SECONDS
        self.unsent = 0
        """Events left out of their batch because they could not be sent (pickled) even cut at `MAX_DEPTH`."""
        self.counts: dict[str, int] = {}
        """The child's latest answer to `ask_counts` (see the module docstring)."""
        self.open_runs: int | None = None
        """The runs open in the child at its latest heartbeat (None before the first)."""
        self._once = Once()
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # The child imports what this process can: this project, and the semantic evaluator's module wherever
        # the proxy found it (mitmproxy puts a script's folder on the path).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *(p for p in sys.path if p)])}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "addon.monitor_process", str(to_child_r), str(from_child_w)],
            pass_fds=(to_child_r, from_child_w), start_new_session=True, stdin=subprocess.DEVNULL, env=env)
        os.close(to_child_r)
        os.close(from_child_w)
        self._to_child = Connection(to_child_w, readable=False)
        self._from_child = Connection(from_child_r, writable=False)
        self._outbox: queue.SimpleQueue[Message | None] = queue.SimpleQueue()
        self._status: list[list[dict[str, Any]]] = []
        self._status_ready = threading.Condition()
        self._ping_sent: float | None = None
        """When the heartbeat the child has not answered yet was asked for (monotonic), else None."""
        self._done = threading.Event()
        """Set when no more answers will come: after `done`, or when the child is gone."""
        self._concluded = False
        """The child answered `shutdown` with its last runs."""
        self._abandoned = False
        """`shutdown` gave up waiting for the child (the caller says what it left): its end is no failure."""
        self._outbox.put(("start", (options, semantic_spec, report_dir, wire or DecoderConfig())))
        self._sender = threading.Thread(target=self._send_all, name="oatf-monitor-sender", daemon=True)
        self._receiver = threading.Thread(target=self._receive, name="oatf-monitor-receiver", daemon=True)
        self._sender.start()
        self._receiver.start()

    @property
    def alive(self) -> bool:
        return self._process.poll() is None and not self._done.is_set()

    @property
    def stalled(self) -> bool:
        """The child has not answered a heartbeat for more than `stall_seconds` (see `ping`)."""
        sent = self._ping_sent
        return sent is not None and time.monotonic() - sent > self.stall_seconds

    def ping(self) -> None:
        """Ask the child for a heartbeat, unless one is awaited. It answers at once, even while it evaluates."""
        if self._ping_sent is None:
            self._ping_sent = time.monotonic()
            self._outbox.put(("ping", None))

    def ask_counts(self) -> None:
        """Ask the child what it holds in memory: `counts` is updated when it answers (after what was sent
        before)."""
        self._outbox.put(("counts", None))

    def observe(self, events: list[Handed]) -> None:
        self._outbox.put(("events", events))

    def set_wire(self, config: DecoderConfig) -> None:
        """The child's decoder's limits and overrides (those of the proxy's `oatf_wire_*` options)."""
        self._outbox.put(("wire", config))

    def prime(self, steps: Prime) -> None:
        """Give the child's decoder the steps of the exchanges under way (see the module docstring)."""
        self._outbox.put(("prime", steps))

    def tick(self, now: float) -> None:
        self._outbox.put(("tick", now))

    def set_options(self, options: MonitorOptions) -> None:
        self._outbox.put(("options", options))

    def set_report_dir(self, directory: str) -> None:
        self._outbox.put(("reports", directory))

    def replace_attacks(self, attacks: list[LoadedAttack]) -> None:
        self._outbox.put(("attacks", attacks))

    def close_session(self, protocol: str, name: str, value: str, at: float) -> None:
        """The agent closed a session (`Monitor.close_session`)."""
        self._outbox.put(("close", (protocol, name, value, at)))

    def recover(self, report_dir: str, segments: list[str], origin: str, unreleased: bool) -> None:
        """Conclude the runs the journal `segments` show were left open by `origin` (see the module docstring)."""
        self._outbox.put(("recover", (report_dir, segments, origin, unreleased)))

    def status(self, timeout: float) -> list[dict[str, Any]] | None:
        """The child's snapshot of its live runs, or None when it does not answer within `timeout` seconds
        (it answers after evaluating what was sent before the request)."""
        with self._status_ready:
            self._status.clear()
            self._outbox.put(("status", None))
            if not self._status_ready.wait_for(lambda: bool(self._status) or self._done.is_set(), timeout):
                return None
            return self._status[0] if self._status else None

    def shutdown(self, timeout: float) -> bool:
        """Conclude every open run in the child (their reports are written and reach `on_outputs` before this
        returns) and end it. False when the child did not finish within `timeout` seconds, or stalled before: it
        is ended, and the caller says what it left (its end is not reported as a failure)."""
        self._outbox.put(("shutdown", None))
        deadline = time.monotonic() + timeout
        while not self._done.wait(HEARTBEAT_SECONDS) and time.monotonic() < deadline and not self.stalled:
            self.ping()  # a busy child may take its time; a stalled one is not waited for
        finished = self._done.is_set() and self._concluded
        self._abandoned = not finished
        self._outbox.put(None)
        self._sender.join(timeout=1.0)
        try:
            self._process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._receiver.join(timeout=1.0)
        self._to_child.close()
        self._from_child.close()
        return finished

    def kill(self) -> None:
        """End a stalled child at once: what it followed is lost (`shutdown` then releases pipes and threads)."""
        self._process.kill()
        self._process.wait()

    def _fail_once(self, place: str, exc: BaseException) -> None:
        if self._once.first(place, type(exc).__name__):
            self.on_failure(f"{place} failed (each kind of failure is logged once); continuing: {describe(exc)}")

    def _send_all(self) -> None:
        while (message := self._outbox.get()) is not None:
            try:
                self._send(message)
            except OSError:  # the child died or the pipe is closed: the receiver reports it
                continue  # (messages still queued are dropped with the child; `None` ends this thread)
            except Exception as exc:  # a message that cannot be sent: the next ones still are
                self._fail_once(f"sending a {message[0]!r} message to the monitor process", exc)

    def _send(self, message: Message) -> None:
        try:
            self._to_child.send(message)  # pickled whole before anything is written: nothing half-sent
        except OSError:
            raise
        except Exception as exc:
            if message[0] != "events":
                raise
            self._fail_once("sending events to the monitor process", exc)
            self._to_child.send(("events", self._sendable(message[1])))  # the child answers every batch

    def _sendable(self, events: list[Handed]) -> list[Handed]:
        """The events of a batch that could not be sent whole, each one that cannot be pickled cut at
        `MAX_DEPTH`, or else left out (counted in `unsent`)."""
        sendable: list[Handed] = []
        for event in events:
            if not isinstance(event, ObservedEvent):  # plain values: it pickles
                sendable.append(event)
                continue
            for candidate in (event, dataclasses.replace(event, content=cut(event.content)[0],
                                                         envelope=cut(event.envelope)[0])):
                try:
                    ForkingPickler.dumps(candidate)
                except Exception:
                    continue
                sendable.append(candidate)
                break
            else:
                self.unsent += 1
        return sendable

    def _receive(self) -> None:
        while True:
            try:
                kind, payload = self._from_child.recv()
            except (EOFError, OSError):
                if not self._done.is_set():
                    if not self._abandoned:
                        self.on_failure(f"the monitor process ended unexpectedly (exit code {self._process.poll()})")
                    self._done.set()
                with self._status_ready:
                    self._status_ready.notify_all()
                return
            except Exception as exc:  # an answer that cannot be read: the next one is
                self._fail_once("reading the monitor process's answer", exc)
                continue
            try:
                if self._dispatch(kind, payload):
                    return
            except Exception as exc:  # handling (logging, reports) must not stop receiving
                self._fail_once("handling the monitor's outputs", exc)
                if kind == "done":
                    return

    def _dispatch(self, kind: str, payload: Any) -> bool:
        """Handle one answer of the child; True after its last (`done`)."""
        if kind == "pong":
            self.open_runs = payload
            self._ping_sent = None
        elif kind == "counts":
            self.counts = payload
        elif kind == "status":
            with self._status_ready:
                self._status.append(payload)
                self._status_ready.notify_all()
        elif kind == "failed":  # a traceback: its last line names the exception
            error = payload.strip().rpartition("\n")[2]
            if self._once.first("evaluation in the monitor process", error.partition(":")[0]):
                self.on_failure(f"evaluation failed in the monitor process (each kind of failure is logged once); "
                                f"continuing: {printable(error, 300)}")
        else:
            try:
                self.on_outputs(payload)
            finally:
                if kind == "evaluated":
                    self.on_evaluated()
                elif kind == "done":
                    self._concluded = True
                    self._done.set()
            return kind == "done"
        return False


def main() -> None:
    """`python -m addon.monitor_process READ_FD WRITE_FD`: the child's entry point."""
    read_fd, write_fd = (int(arg) for arg in sys.argv[1:3])
    with contextlib.closing(Connection(read_fd, writable=False)) as inbox, \
            contextlib.closing(Connection(write_fd, readable=False)) as outbox:
        serve(inbox, outbox)
    # Every report is durable and every answer in the pipe (a send returns once written): nothing is left to do,
    # so the child ends at once instead of tearing down the monitor's objects one by one — after a shutdown with
    # thousands of runs, ~0.5 s the proxy's exit would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
