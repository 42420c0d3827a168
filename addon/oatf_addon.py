"""mitmproxy addon: live OATF evaluation of agent traffic. Load with `mitmdump -s addon/oatf_addon.py`.

Thin glue only (mitmproxy's addon conventions: options declared in `load`, reacting in `configure`, hooks
that do one thing, commands for users):
- the wire tap (`addon.mitm_tap`) decodes MCP/A2A/AG-UI traffic into `ObservedEvent`s as flows pass,
  streaming SSE responses chunk by chunk, never altering a byte;
- inject mode (`addon.inject`, `oatf_inject`, off by default) plays documents' MCP and A2A server actors and
  AG-UI client actors into the traffic; its hooks run before the tap's, so the tap decodes what the agent
  receives;
- events go through a queue to one worker thread that sends them in batches to the sans-I/O `Monitor`, which
  runs in a child process (`addon.monitor_process`: CEL and every other evaluation, and writing the reports,
  stay off the proxy's event loop and out of its interpreter lock); the worker hands them over in time order,
  up to the watermark the event loop queues with them, and moves the monitor's clock to it
  (`addon.watermark`: a hook that runs late never lets a run conclude before an event inside its grace period
  is evaluated); a receiver thread handles what the monitor answers: logs, the summary table, the journal's
  markers of reported runs;
- the flows a run took part in are marked with its state and commented (`addon.flow_marks`, on the event
  loop): an indicator's match first, the run's verdict when it concludes; `oatf.flow` tells everything
  recorded of a flow (`addon.flow_details`). With `-w` (`save_stream_file`) mitmproxy's `save` addon writes a
  flow when it ends, before the monitor process has evaluated its messages; with `oatf_save_wait` set, the
  write (never the flow: the agent gets its response at once) waits until the flow's events are evaluated —
  those the monitor holds to place them in a session included — and their marks applied, or that long at most
  (`addon.deferred_save`; the receiver thread schedules a flow's marks on the event loop before it tells that
  the flow is evaluated, so the marks come first);
- an MCP session the agent closed (a `DELETE` with its `Mcp-Session-Id`, accepted by the server) concludes
  its runs a grace period later (`Monitor.close_session`) rather than at the end of their lifetime; the close
  is journaled like an event, so after a crash those runs conclude as closed (`session_closed`), not `recovered`;
- an exchange that ended without the answer to a request of it (an HTTP error without a JSON-RPC body, a stream
  closed early, a connection reset: `MitmTap`'s `on_ended`) is queued, journaled and handed over in its place
  among the events (`oatf_engine.events.ExchangeEnded`): the runs stop waiting for that answer
  (`Monitor.exchange_ended`), as a replay of the recording does;
- `oatf_listen`: the events of `oatf tap --monitor PATH` (stdio servers, `oatf_engine.feed`) join the same queue,
  so one monitor judges an agent's stdio and HTTP traffic in one episode;
- on shutdown every open run is concluded and reported: nothing observed is lost; the summary table is logged,
  and printed to the terminal once the `mitmproxy` console has given it back (the console shows no log
  after it exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import logging
import os
import queue
import sys
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

if __package__ in (None, ""):  # loaded by path (`-s addon/oatf_addon.py`): make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mitmproxy import command, ctx, exceptions, http
from mitmproxy import flow as mitmflow
from mitmproxy.utils import human

import oatf
from addon import flow_marks
from addon.deferred_save import HOLD_FLOWS, HOLD_SIZE, SaveDeferral
from addon.flow_details import flow_lines
from addon.inject import Inject, inject_paths
from addon.mitm_tap import MitmTap
from addon.monitor_process import Handed, MonitorProcess
from addon.views import ContentViews
from addon.watermark import TICK_SECONDS, ClockMark, SessionClosed, Steps
from oatf_engine.attest_traces import TraceCollector, write_traces
from oatf_engine.engine_config import SETTINGS, engine_config
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.feed import SOCKET_NAME, FeedServer
from oatf_engine.journal import Journal, RunKey, take_lock
from oatf_engine.monitor import (
    Held,
    IndicatorMatched,
    Library,
    MonitorOptions,
    Output,
    PhaseChanged,
    load_library,
)
from oatf_engine.recovery import Recovered
from oatf_engine.reorder import Reorder
from oatf_engine.reports import Reported, columns, summary_table
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.text import Once, describe, printable
from oatf_engine.wire import Diagnostic, uninspected
from oatf_engine.wire.mcp import CLOSE_METHOD, SESSION_HEADER, closed_session
from oatf_engine.wire.steps import OpenSteps, WireStep

log = logging.getLogger("oatf")

RELOAD_POLL_SECONDS = 2.0
MAX_SUMMARY_ROWS = 1_000
MAX_BATCH = 256
"""Events sent to the monitor process in one message, at most."""
COALESCE_SECONDS = 0.01
"""How long the worker lets the traffic add to a batch once an event wakes it: one wake-up of its thread, one
journal record and one hand-over for every event of that time, not for each (each wake-up takes the interpreter
lock from the event loop). Evaluation is not delayed by it: events wait for the watermark's next clock mark
(`addon.watermark.TICK_SECONDS`) anyway; an event is journaled at most this much later than it was observed."""
PING_SECONDS = 1.0
"""How often the worker asks the monitor process for a heartbeat, at most (it is stalled after
`MonitorProcess.stall_seconds` without an answer): not at every batch, each ping being a round trip through two
more threads and the pipe."""
STATUS_SECONDS = 2.0
"""How long `oatf.status` and `oatf.flow` wait for the monitor process's answer."""
MAX_FLOWS_SHOWN = 20
"""Flows `oatf.flow` describes in one answer."""
SHUTDOWN_SECONDS = 120.0
"""How long the proxy's shutdown waits for the monitor to evaluate what is queued and conclude every run."""
ATTENTION = frozenset({"exploited", "partial", "error"})
"""Outcomes logged at warning level (the console's status bar shows them); the others are logged at info."""
Ordered = Handed | SessionClosed
"""What the worker holds until the watermark passes it (`order`)."""
Queued = Ordered | ClockMark
"""What the hooks (and the feed) queue for the worker (`events`)."""
BACKLOG_WARNING = 10_000
"""Events waiting for the worker: each further multiple of this is logged (evaluation is behind the traffic).
Events are never dropped — a dropped event could turn an `exploited` run into a false `not_exploited`."""


class OatfAddon:
    """The `oatf_*` options, hooks and `oatf.*` commands."""

    def __init__(self) -> None:
        # Inject mode and the tap are called by this addon's hooks, in that order, rather than registered as
        # sub-addons: mitmproxy runs a parent's hook before its sub-addons', and the tap must decode what inject
        # mode rewrote (what the agent received). The content views have no such order: a sub-addon (`addons`).
        self.inject = Inject()
        # A flow is handed to the monitor process undecoded (`WireStep`s, decoded there) unless something here reads
        # its events: inject mode's players and tags, the Attest trace collector (`_decodes_here`).
        self.tap = MitmTap(on_event=lambda event: self._enqueue(self.inject.tag(event)), on_ended=self._exchange_ended,
                           on_step=lambda step: self._enqueue(step), decode_here=self._decodes_here)
        self.events: queue.SimpleQueue[Queued | None] = \
            queue.SimpleQueue()
        """What the hooks (and the feed) queue for the worker: events, the ends of exchanges that left requests
        unanswered, the MCP sessions closed, and the event loop's clock marks (`addon.watermark`)."""
        self.steps = Steps()
        """Steps of flows under way whose hook has not run yet: they hold the watermark back (event loop only)."""
        self.order: Reorder[Ordered] = Reorder()
        """Events, ends of exchanges and closes the worker holds until the watermark passes them (with `lock`
        held)."""
        self.clock_due = 0.0
        """When (the event loop's time) the next clock mark is due."""
        self.backlog_warned = 0
        self.lock = threading.Lock()
        self.monitor: MonitorProcess | None = None
        self.options = MonitorOptions()
        self.report_dir: Path | None = None
        self.library = Library((), ())
        self.library_ready = threading.Event()
        """Set once a library is in place in the monitor: until then the worker leaves the traffic queued, to be
        evaluated with it (`reload`)."""
        self.loaders: list[threading.Thread] = []
        """Threads loading the library in the background (`reload`): shutdown waits for them."""
        self.load_lock = threading.Lock()
        """One load at a time (`_load`)."""
        self.deferred_recoveries: list[tuple[list[Path], str, bool]] = []
        """Journal segments to recover (`_recover_segments`) before the first library was in place: once it is."""
        self.concluded: deque[Reported] = deque(maxlen=MAX_SUMMARY_ROWS)
        """The latest concluded runs, for the summary table (all of their reports are on disk, unless
        `unwritten`); appended by the receiver thread, read through `concluded_reports` only."""
        self.outcomes: Counter[str] = Counter()
        """Outcome → runs concluded in the proxy's life, all of them (the summary's last line counts these)."""
        self.unwritten = 0
        """Reports the monitor process could not write: their runs stay in the journal, which shutdown keeps."""
        self.concluded_lock = threading.Lock()
        self.flows: weakref.WeakValueDictionary[str, http.HTTPFlow] = weakref.WeakValueDictionary()
        self.in_evaluation: deque[Counter[str]] = deque()
        """Each batch of events sent to the monitor and not yet evaluated, oldest first: its events per flow id."""
        self.events_in_flight = 0
        """Events sent to the monitor and not yet evaluated."""
        self.in_hand = 0
        """Items the worker took from `events` and has not yet journaled and held (written by the worker only)."""
        self.unevaluated: Counter[str] = Counter()
        """Events of each flow observed and not yet evaluated (queued, held or in flight), for the flows' saving."""
        self.pinned: dict[str, http.HTTPFlow] = {}
        """The flows in `unevaluated`, kept alive (mitmdump keeps no flow of its own) so that a match can still
        mark and comment its flow."""
        self.marking: Counter[str] = Counter()
        """Updates of each flow (marks, comments) the receiver thread scheduled on the event loop and not yet
        applied: a flow whose events were all evaluated may still be waiting for its mark."""
        self.held: frozenset[str] = frozenset()
        """Flows with events the monitor holds to place them in a session (`Held`): not evaluated yet."""
        self.flight_lock = threading.Lock()
        """Guards `in_evaluation`, `events_in_flight`, `unevaluated`, `pinned`, `marking` and `held` (event loop,
        worker and receiver threads)."""
        self.flow_updates: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        """Updates of flows to apply on the event loop (`_update_flow`), in order."""
        self.saving = SaveDeferral(self._busy)
        """With `-w`: holds back mitmproxy's write of a flow until it is evaluated and marked (`oatf_save_wait`)."""
        self.worker: threading.Thread | None = None
        self.stopping = threading.Event()
        self.watched: dict[str, float] = {}
        self.loop: Any = None
        self.traces = TraceCollector(on_evict=self._write_evicted_trace)
        self.open_steps = OpenSteps(self.tap.decoder.config.max_body_size)
        """The steps handed to the monitor process of the exchanges under way, to prime a new one with (written by
        the worker, with `lock` held)."""
        self.tracing = False
        """Whether `oatf_trace_dir` is set (Attest traces are collected from the events: decoded here)."""
        self.journal: Journal | None = None
        """The monitor's inputs and the reported runs, for recovery after a crash (`oatf_engine.journal`)."""
        self.journal_lock: IO[str] | None = None
        """The report directory's writer lock, held while journaling there (`oatf_engine.journal.take_lock`)."""
        self.semantic_spec = ""
        self.unrecovered: set[str] = set()
        """Journal segments whose runs a recovery has not reported yet (`_recover`): shutdown keeps the journal."""
        self.left: str | None = None
        """What a monitor process that could not conclude its runs in time left to the journal, and how to report
        it (`_stop_monitor`): said again with the shutdown's summary."""
        self.once = Once()
        self.feed: FeedServer | None = None
        """The socket `oatf tap --monitor` feeds (`oatf_listen`), when listening."""
        self.addons = [ContentViews()]
        """Sub-addons: the MCP, A2A and AG-UI content views (`addon.views`)."""

    # --- options ---------------------------------------------------------------------------------------
    def load(self, loader: Any) -> None:
        loader.add_option("oatf_attacks", str, "", "OATF documents to evaluate: files or directories, comma-separated.")
        loader.add_option("oatf_report_dir", str, "oatf-reports", "Directory for verdict reports (JSON per run, "
                          "verdicts.jsonl).")
        for setting in SETTINGS:  # the engine's settings, shared with `oatf evaluate` (`oatf_engine.engine_config`)
            if not setting.name.startswith("wire_"):  # those are the tap's (`MitmTap.load`)
                loader.add_option(setting.option, setting.kind, setting.default, setting.help, setting.choices)
        loader.add_option("oatf_watch", bool, True, "Reload attack documents when they change on disk.")
        loader.add_option("oatf_listen", str, "", "Unix socket where `oatf tap --monitor PATH` sends its stdio "
                          "servers' events, judged with the proxy's traffic (`auto`: monitor.sock in oatf_report_dir).")
        loader.add_option("oatf_trace_dir", str, "", "Write each observed agent session as an Attest v1 trace "
                          "into this directory when the proxy stops.")
        loader.add_option("oatf_save_wait", str, "0s", "With -w (save_stream_file): how long mitmproxy's write of "
                          "a flow waits, at most, for the evaluation of its messages, so that the saved flow carries "
                          "its OATF mark and comment (a duration: 500ms, 5s). Only the write waits: the agent gets "
                          "the response at once. 0s (default): written at once.")
        loader.add_option("oatf_save_hold", int, HOLD_FLOWS, "With -w: flows whose write waits for the verdicts of "
                          "their runs still live (where an indicator matched, an actor changed phase), at most; "
                          "beyond it the oldest is written with what is known. 0: none waits.")
        loader.add_option("oatf_save_hold_size", str, HOLD_SIZE, "With -w: bytes (bodies and headers) of the flows "
                          "waiting for their runs' verdicts, at most (a size: 64m, 512k).")
        self.tap.load(loader)
        self.inject.load(loader)

    def configure(self, updated: set[str]) -> None:
        if "oatf_trace_dir" in updated:
            self.tracing = bool(ctx.options.oatf_trace_dir)
        if "oatf_save_wait" in updated:
            try:
                self.saving.wait = oatf.parse_duration(ctx.options.oatf_save_wait).total_seconds()
            except oatf.OATFParseError as exc:
                raise exceptions.OptionsError(f"oatf_save_wait: {exc.errors[0].message}") from None
            self.saving.install(ctx.master.addons.get("save"))
        if updated & {"oatf_save_hold", "oatf_save_hold_size"}:
            try:
                max_bytes = human.parse_size(ctx.options.oatf_save_hold_size) or 0
            except ValueError as exc:
                raise exceptions.OptionsError(f"oatf_save_hold_size: {exc}") from None
            if max_bytes < 0 or ctx.options.oatf_save_hold < 0:
                raise exceptions.OptionsError("oatf_save_hold and oatf_save_hold_size cannot be negative")
            self.saving.hold.max_flows, self.saving.hold.max_bytes = ctx.options.oatf_save_hold, max_bytes
        try:
            self.tap.configure(updated)
            self.inject.configure(updated)
        except Exception as exc:  # the tap's option errors: reported without a traceback (see below)
            log.error("oatf: invalid option: %s", exc)
            return
        if updated & {"oatf_wire_max_body", "oatf_wire_protocols"}:
            with self.lock:
                self.open_steps.max_bytes = self.tap.decoder.config.max_body_size
                if self.monitor is not None:
                    self.monitor.set_wire(self.tap.decoder.config)
        if updated & {"oatf_listen", "oatf_report_dir"}:
            self._listen()
        if not updated & {"oatf_attacks", "oatf_inject", "oatf_report_dir", *(s.option for s in SETTINGS)}:
            return
        try:
            config = engine_config({s.name: getattr(ctx.options, s.option) for s in SETTINGS})
            options = config.monitor
            load_semantic_evaluator(config.semantic_evaluator)  # checked here, loaded in the child
            report_dir = Path(ctx.options.oatf_report_dir)
            report_dir.mkdir(parents=True, exist_ok=True)  # checked here, written by the monitor process
            lock = self._lock_new_report_dir(report_dir)
        except (ValueError, ImportError, AttributeError, OSError) as exc:
            # Logged, not raised: mitmproxy would print a traceback. An error logged during start-up makes
            # mitmdump exit with this message; later, the previous settings stay in force.
            log.error("oatf: invalid option: %s", exc)
            return
        with self.lock:
            self.options = options
            self.semantic_spec = config.semantic_evaluator
            moved = self.report_dir is not None and report_dir != self.report_dir
            self.report_dir = report_dir
            if self.monitor is None or "oatf_semantic_evaluator" in updated:
                stopped = self.monitor is None or self._stop_monitor(self.monitor)
                self.monitor = self._start_monitor()
                if not stopped:  # what the old one left in the journal is reported now, not at the next start
                    self.left = None
                    self._recover("a monitor process that did not conclude its runs in time", unreleased=False)
            elif moved:
                self.monitor.set_report_dir(str(report_dir))
            self.monitor.set_options(options)
        self.reload()
        if self.journal is None or lock is not None:
            self._open_journal(lock)

    def _lock_new_report_dir(self, report_dir: Path) -> IO[str] | None:
        """When the proxy journals and `oatf_report_dir` changed to `report_dir`: its writer lock, taken (the journal
        moves there, `_open_journal`); else None. ValueError while another process journals there: the change is
        refused, the previous directory stays in force (its journal with it)."""
        if self.journal is None or report_dir.resolve() == self.journal.path.parent.resolve():
            return None
        lock = take_lock(report_dir)
        if lock is None:
            raise ValueError(f"oatf_report_dir: another process journals in {printable(str(report_dir))} (a proxy, "
                             f"`oatf tap` or `oatf monitor`); reports and the journal stay in "
                             f"{printable(str(self.journal.path.parent))}")
        return lock

    def _listen(self) -> None:
        """Serve the feed at `oatf_listen` (stopping the previous one)."""
        if self.feed is not None:
            self.feed.close()
            self.feed = None
        path = ctx.options.oatf_listen
        if path == "auto":
            path = str(Path(ctx.options.oatf_report_dir) / SOCKET_NAME)
        if not path:
            return
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.feed = FeedServer(path, self._enqueue_all, lambda message: log.info("oatf %s", printable(message)))
        except OSError as exc:
            log.error("oatf: invalid option: oatf_listen: %s", describe(exc))
            return
        log.info("oatf: listening for `oatf tap --monitor %s`", path)

    def _enqueue_all(self, events: list[ObservedEvent]) -> None:
        for event in events:
            self._enqueue(event)

    def _open_journal(self, lock: IO[str] | None = None) -> None:
        """Journal the monitor's inputs in the report directory (`oatf_engine.journal`), holding its writer lock
        (`lock` when taken already); have the monitor process conclude and report the runs a previous proxy that
        did not stop cleanly left in it. When the directory changed at runtime, the journal of the live runs
        moves there with them (`Journal.hand_over`): the old directory is left as after a clean shutdown, and a
        crash now recovers every open run into the new one. While another process holds the lock (a proxy,
        `oatf tap` or `oatf monitor` judging there), neither: an error, said once (at start-up, mitmdump then
        exits)."""
        directory = ctx.options.oatf_report_dir
        try:
            with self.lock:
                lock = lock or take_lock(directory)
                if lock is None:
                    self._close_journal()
                    if self.once.first("journal", directory):
                        log.error("oatf: another process journals in %s (a proxy, `oatf tap` or `oatf monitor`): "
                                  "its journal is left alone, and this proxy would evaluate without one (a crash "
                                  "would lose its open runs); give it a report directory of its own",
                                  printable(directory))
                    return
                journal = Journal(directory)
                left = journal.cut()  # by a proxy that did not stop cleanly: recovered apart from the live runs
                if self.journal is not None:
                    self.journal.hand_over(journal)
                    log.info("oatf: the journal of the open runs moved from %s to %s",
                             printable(str(self.journal.path.parent)), printable(directory))
                self._close_journal()
                self.journal, self.journal_lock = journal, lock
                self._recover_segments(left, "a proxy that did not stop cleanly", unreleased=True)
        except OSError as exc:
            log.error("oatf: the evaluation journal is unavailable (a crash would lose open runs): %s",
                      describe(exc))

    def _close_journal(self) -> None:
        """Stop journaling (the journal's file closed, the lock released). Called with `lock` held."""
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        if self.journal_lock is not None:
            self.journal_lock.close()
            self.journal_lock = None

    def _recover(self, origin: str, unreleased: bool) -> None:
        """Have the monitor process conclude the runs that every journal segment so far shows were left open by
        `origin` — status `recovered`, reported once, now (`oatf_engine.recovery`; `unreleased`: whether the
        events journaled and not released yet count, as after a crash of the proxy, or are handed to the new
        monitor process, as after the loss of one) — while the journal goes on in a new segment, which starts
        with the events held now (they would be lost with the segments); the segments are dropped once their
        reports are durable (`_recovered`). Called with `lock` held."""
        if self.journal is None or self.monitor is None:
            return
        segments = self.journal.cut()
        if segments:
            held = self.order.held()
            if held or self.open_steps:
                self._journal(self.journal.held, [item for item in held if not isinstance(item, SessionClosed)],
                              [(item.session, item.at) for item in held if isinstance(item, SessionClosed)],
                              self.open_steps.prime().steps)
        self._recover_segments(segments, origin, unreleased)

    def _recover_segments(self, segments: list[Path], origin: str, unreleased: bool) -> None:
        """Have the monitor process conclude the runs these journal segments (`Journal.cut`) show were left open by
        `origin` (`_recover`); asked before the first library is in place (it judges the runs recovered), once it
        is (`_load`). Called with `lock` held."""
        if not segments or self.journal is None or self.monitor is None:
            return
        if not self.library_ready.is_set():  # the library judges the runs recovered
            self.deferred_recoveries.append((segments, origin, unreleased))
            return
        names = [str(segment) for segment in segments]
        with self.concluded_lock:
            self.unrecovered.update(names)
        self.monitor.recover(str(self.journal.path.parent), names, origin, unreleased)

    def _start_monitor(self) -> MonitorProcess:
        """A monitor process with the current options, semantic evaluator and library."""
        monitor = MonitorProcess(self.options, ctx.options.oatf_semantic_evaluator, str(self.report_dir),
                                 self._handle, self._evaluated, self._failure, wire=self.tap.decoder.config)
        if self.open_steps:  # a replacement: the exchanges under way decode on as they would have in the old one
            monitor.prime(self.open_steps.prime())
        if self.library.attacks:
            monitor.replace_attacks(list(self.library.attacks))
        return monitor

    # --- lifecycle -------------------------------------------------------------------------------------
    def running(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._warn_unknown_options()
        if self.worker is None:
            self.worker = threading.Thread(target=self._work, name="oatf-monitor", daemon=True)
            self.worker.start()
            self.clock_due = self.loop.time()
            self._clock()

    def _clock(self) -> None:
        """On the event loop, every `TICK_SECONDS`: queue a clock mark (`addon.watermark`)."""
        if self.stopping.is_set():
            return
        now = self.loop.time()
        self.mark(late=max(0.0, now - self.clock_due))
        self.clock_due = now + TICK_SECONDS
        self.loop.call_at(self.clock_due, self._clock)

    def mark(self, late: float = 0.0) -> None:
        """Queue a clock mark: everything stamped up to its watermark is queued before it (the event loop's
        clock calls this; so do tests that run the worker without one)."""
        self.events.put_nowait(ClockMark(self.steps.watermark(time.time(), late)))

    def _warn_unknown_options(self) -> None:
        """mitmproxy keeps a `--set` of an option no addon declares as deferred, silently: an `oatf_` one is
        almost certainly a typo (`oatf_atacks`) that leaves the proxy watching nothing."""
        known = [name for name, _ in ctx.options.items() if name.startswith("oatf_")]
        for name in sorted(ctx.options.deferred):
            if name.startswith("oatf_"):
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(sorted(known))})"
                log.warning("oatf: unknown option %s is ignored%s", name, hint)

    def done(self) -> None:
        """Shutdown (SIGINT/SIGTERM or end of a replay): conclude and report every open run."""
        if self.feed is not None:
            self.feed.close()  # what the taps already sent is queued first; the rest they judge themselves
        self.stopping.set()
        self.events.put_nowait(None)
        if self.worker is not None:
            self.worker.join(timeout=30)
        for loader in self.loaders:
            loader.join()  # the traffic queued while the library loads is evaluated with it, not without
        with self.lock:
            if self.monitor is not None:
                self._flush()  # what the worker did not reach
                stopped = self._stop_monitor(self.monitor)
                self._apply_flow_updates()  # the event loop is here: the last marks, before the flows are saved
                self.saving.flush()
                if self.unwritten:
                    log.error("oatf: %d report(s) could not be written: the journal in %s keeps their runs; the "
                              "next start with a writable report directory (or `oatf recover`) reports them",
                              self.unwritten, self.report_dir)
                elif stopped and self.journal is not None and not self.unrecovered:
                    self.journal.clear()  # every run is reported: nothing left to recover
            self._close_journal()  # the lock released: a reloaded addon (or the next process) takes it
        if ctx.options.oatf_trace_dir and self.traces.sessions:
            paths = write_traces(self.traces.traces(), ctx.options.oatf_trace_dir)
            log.info("oatf: %d Attest trace(s) in %s", len(paths), ctx.options.oatf_trace_dir)
        concluded, outcomes = self.concluded_reports()
        summary = []
        if concluded:
            table = summary_table((r.summary for r in concluded), _terminal_width(), outcomes)
            log.info("oatf verdicts:\n%s", table)
            summary.append(f"oatf verdicts:\n{table}")
            if self.report_dir is not None:
                summary.append(f"oatf reports in {self.report_dir.resolve()}")
                log.info("%s", summary[-1])
        if missed := uninspected(self.tap.diagnostics):
            summary.append(f"oatf: traffic not inspected ({missed}): a run of its sessions may read resisted for want "
                           "of what it held (`oatf_wire_max_body` bounds bodies and SSE events)")
            log.warning("%s", summary[-1])
        if self.left is not None:
            directory = printable(str(self.report_dir), 300)
            summary.append(f"oatf: not reported yet: {self.left}; the next start of the proxy with this report "
                           f"directory reports them (status `recovered`), or `oatf recover {directory} --attacks "
                           f"{printable(ctx.options.oatf_attacks, 300)}` with the proxy's settings")
            log.warning("%s", summary[-1])
        if summary and ctx.master.addons.get("termlog") is None:
            _to_terminal("\n".join(summary))

    # --- hooks: inject mode (when on), then decoding; on the event loop ---------------------------------
    # (`steps`: a request whose headers came is under way until its `request` hook, a buffered response until
    # its `response` hook; a streamed one's chunks are stamped as they pass, in the hook's own turn.)
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        self.steps.begin(flow.id, flow.request.timestamp_start)
        self.tap.requestheaders(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        self.flows[flow.id] = flow
        self.inject.request(flow)
        self.tap.request(flow)
        self.steps.end(flow.id)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self.inject.responseheaders(flow)
        self.tap.responseheaders(flow)
        if flow.response is not None and not flow.response.stream:
            self.steps.begin(flow.id, flow.response.timestamp_start)

    def response(self, flow: http.HTTPFlow) -> None:
        self.inject.response(flow)
        self.tap.response(flow)
        self._closed_session(flow)
        self.steps.end(flow.id)

    def error(self, flow: http.HTTPFlow) -> None:
        self.inject.error(flow)
        self.tap.error(flow)
        self.steps.end(flow.id)

    def _closed_session(self, flow: http.HTTPFlow) -> None:
        """An MCP client's `DELETE` the server accepted closes that session (`oatf_engine.wire.mcp.closed_session`;
        offline, `addon.recordings` finds the same closes in the recording)."""
        response = flow.response
        if response is None or flow.request.method != CLOSE_METHOD:  # (mitmproxy's method: upper case) no header read
            return
        session = closed_session(flow.request.method, flow.request.headers.get(SESSION_HEADER), response.status_code)
        if session is not None:
            # mitmproxy's time, saved with the flow: replay closes the session at the same moment
            self.events.put_nowait(SessionClosed(session, response.timestamp_end or time.time()))

    def _exchange_ended(self, item: ExchangeEnded) -> None:
        """Queue the end of an exchange that left requests unanswered (`addon.mitm_tap`) for the worker, in its
        place among the events (its requests' waits end: `Monitor.exchange_ended`)."""
        self.events.put_nowait(item)

    def _busy(self, flow_id: str) -> bool:
        """Whether OATF is not done with the flow: events of it not evaluated yet (queued, in flight, or held by
        the monitor), or updates of it not applied yet."""
        with self.flight_lock:
            return bool(self.unevaluated[flow_id] or self.marking[flow_id] or flow_id in self.held)

    def _decodes_here(self) -> bool:
        """Whether a flow starting now is decoded on the event loop (`MitmTap`): inject mode's players advance on
        its events and tag them, and the Attest trace collector reads them; otherwise the monitor process decodes
        it (issue 15: no JSON parsing on the event loop)."""
        return self.inject.on or self.tracing

    def _enqueue(self, event: ObservedEvent | WireStep) -> None:
        with self.flight_lock:
            self.unevaluated[event.flow_id] += 1
            if event.flow_id not in self.pinned and (flow := self.flows.get(event.flow_id)) is not None:
                self.pinned[event.flow_id] = flow
        self.events.put_nowait(event)

    def _warn_of_backlog(self) -> None:
        """Log once per `BACKLOG_WARNING` more events waiting (checked by the worker at each batch it takes, not by
        the event loop at each event)."""
        waiting = self.waiting()
        if waiting // BACKLOG_WARNING > self.backlog_warned:
            self.backlog_warned = waiting // BACKLOG_WARNING
            log.warning("oatf: evaluation is behind the traffic: %d event(s) waiting", waiting)

    def waiting(self) -> int:
        """Events observed and not yet evaluated: queued, in the worker's hands (taken from the queue, not yet
        journaled and held: `COALESCE_SECONDS`), held here, or sent to the monitor process (clock marks and
        closes queued count too: a handful)."""
        return self.events.qsize() + self.in_hand + len(self.order) + self.events_in_flight

    # --- the worker thread: events to the monitor process ----------------------------------------------
    def _work(self) -> None:
        next_poll = time.monotonic() + RELOAD_POLL_SECONDS
        next_ping = 0.0
        while not self.stopping.is_set():
            if not self.library_ready.wait(TICK_SECONDS):
                continue  # the first library is loading: the traffic waits in the queue, to be evaluated with it
            try:
                first = self.events.get(timeout=TICK_SECONDS)
            except queue.Empty:
                first = None
            self.in_hand = int(first is not None)  # counted as waiting until journaled and held
            if first is not None and self.events.qsize() < MAX_BATCH - 1:
                self.stopping.wait(COALESCE_SECONDS)
            try:
                items = [first, *self._drain(MAX_BATCH - 1)] if first is not None else []
                self.in_hand = len(items)
                self._warn_of_backlog()
                with self.lock:
                    if self.monitor is not None and not self.stopping.is_set():
                        self._replace_if_gone(self.monitor)
                    if self.monitor is not None and time.monotonic() >= next_ping:
                        next_ping = time.monotonic() + PING_SECONDS
                        self.monitor.ping()
                    self._hand_over(items)
                self.in_hand = 0
                if time.monotonic() >= next_poll:
                    next_poll = time.monotonic() + RELOAD_POLL_SECONDS
                    if ctx.options.oatf_watch and self._changed_on_disk():
                        self.reload()
            except Exception as exc:  # one bad batch must not stop evaluation of the others
                self.in_hand = 0
                if self.once.first("worker", type(exc).__name__):
                    log.error("oatf: evaluation failed (each kind of failure is logged once); continuing: %s",
                              describe(exc))

    def _replace_if_gone(self, monitor: MonitorProcess) -> None:
        """A new monitor process for one that ended or stalled; the runs the old one followed are concluded from
        the journal at once, by the new one (`_recover`)."""
        if monitor.alive and not monitor.stalled:
            return
        if monitor.alive:
            log.error("oatf: the monitor process did not answer for %g s (%d event(s) waiting): ending it",
                      monitor.stall_seconds, self.waiting())
            monitor.kill()
        # A death is logged by the receiver thread.
        log.error("oatf: starting a new monitor process; the runs the lost one followed are concluded from the "
                  "journal (status `recovered`), and evaluation goes on with new runs")
        self._stop_monitor(monitor)
        self.monitor = self._start_monitor()
        self._recover("a monitor process that was lost", unreleased=False)

    def _hand_over(self, items: list[Queued]) -> None:
        """Journal and hold events and ends of exchanges, hold closes; at each clock mark, hand the monitor what its
        watermark releases, then move the monitor's clock to it (`addon.watermark`). Called with `lock` held."""
        received: list[Handed] = []
        for item in items:
            if isinstance(item, ClockMark):
                self._receive(received)
                received = []
                self._release(item.watermark)
            elif isinstance(item, SessionClosed):
                if self.journal is not None:  # a crash then concludes its runs as closed, not `recovered`
                    self._journal(self.journal.closed, item.session, item.at)
                self.order.add(item.at, item, rank=0)  # as replay: a close is told before events of its time
            else:
                received.append(item)
        self._receive(received)

    def _receive(self, events: list[Handed]) -> None:
        """Journal these events (and ends of exchanges), in one record (`received`: a crash loses none of them,
        however far the watermark is behind), and hold them until the watermark passes them. Called with `lock`
        held."""
        if events and self.journal is not None:
            self._journal(self.journal.received, events)
        for event in events:
            self.order.add(event.timestamp, event)

    def _release(self, watermark: float) -> None:
        """Send the monitor the events and closes up to `watermark`, in time order, and tick its clock to it (the
        journal's tick is also its "released up to" marker). Called with `lock` held."""
        self._hand(self.order.release(watermark))
        if self.monitor is not None:
            if self.journal is not None:
                self._journal(self.journal.tick, self.order.watermark)
            self.monitor.tick(self.order.watermark)

    def _hand(self, released: list[Ordered]) -> None:
        """Send the monitor these events, ends of exchanges and closes, in this order (all were journaled as they
        were taken in, `_hand_over`). Called with `lock` held."""
        batch: list[Handed] = []
        for item in released:
            if isinstance(item, SessionClosed):
                self._send(batch)
                batch = []
                if self.monitor is not None:
                    self.monitor.close_session("mcp", "mcp_session", item.session, item.at)
            else:
                batch.append(item)
                if len(batch) == MAX_BATCH:
                    self._send(batch)
                    batch = []
        self._send(batch)

    def _flush(self) -> None:
        """Hand the monitor everything queued and held, in time order, before a library swap or the shutdown
        (the watermark and the clock stay where they are). Called with `lock` held."""
        self._hand_over(self._drain())
        drained = self.order.drain()
        self._hand(drained)
        if drained and self.journal is not None:
            self._journal(self.journal.drained)

    def _drain(self, limit: int | None = None) -> list[Queued]:
        """What waits in the queue (at most `limit` items), without blocking."""
        items: list[Queued] = []
        while limit is None or len(items) < limit:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                items.append(item)
        return items

    def _send(self, batch: list[Handed]) -> None:
        """Hand events (and ends of exchanges, in their place) to the monitor (and the events to the Attest trace
        collector when traces are wanted)."""
        if not batch:
            return
        per_flow = Counter(item.flow_id for item in batch if type(item) is not ExchangeEnded)
        if self.monitor is None:
            with self.flight_lock:
                self._settle(per_flow)  # never evaluated
            return
        if self.tracing:
            try:
                for item in batch:
                    if isinstance(item, ObservedEvent):
                        self.traces.observe(item)
            except Exception as exc:  # traces are a by-product: evaluation goes on
                if self.once.first("traces", type(exc).__name__):
                    log.error("oatf: collecting Attest traces failed (each kind of failure is logged once): %s",
                              describe(exc))
        add_step = self.open_steps.add
        for item in batch:
            if type(item) is WireStep:
                add_step(item)
        with self.flight_lock:
            self.in_evaluation.append(per_flow)
            self.events_in_flight += per_flow.total()
        self.monitor.observe(batch)

    def _write_evicted_trace(self, trace: dict[str, Any]) -> None:
        """A session the trace collector evicts to bound its memory: its trace is written now, not lost (the
        collector is fed only while `oatf_trace_dir` is set)."""
        write_traces([trace], ctx.options.oatf_trace_dir)

    def _stop_monitor(self, monitor: MonitorProcess) -> bool:
        """Conclude every open run of `monitor` (the monitor process writes their reports before this returns)
        and end it; whether it concluded them all."""
        concluded = False
        if not monitor.alive:
            log.error("oatf: the monitor process had ended: the runs it followed are left to the journal")
            monitor.shutdown(timeout=1.0)
        elif not monitor.shutdown(SHUTDOWN_SECONDS):
            self.left = self._left_to_journal(monitor)
            log.error("oatf: %s", self.left)
        else:
            concluded = True
        self._forget_in_flight()
        return concluded

    def _left_to_journal(self, monitor: MonitorProcess) -> str:
        """What a monitor process that did not conclude its runs in time (stalled, or behind the traffic) leaves
        to the journal: every event handed to it is journaled, and the runs reported meanwhile are marked there
        or have their report file, so a recovery (the next start in this report directory, `oatf recover`, or a
        new monitor process at once) reports each other run once."""
        runs = "an unknown number of" if monitor.open_runs is None else f"{monitor.open_runs:,}"
        return (f"the monitor did not conclude its runs within {SHUTDOWN_SECONDS:g} s (it stalled, or was behind "
                f"the traffic): {runs} run(s) open and {self.events_in_flight:,} event(s) not evaluated yet are "
                f"left to the journal in {printable(str(self.report_dir), 300)}")

    # --- the receiver thread: what the monitor answers -------------------------------------------------
    def _evaluated(self) -> None:
        with self.flight_lock:
            if self.in_evaluation:
                per_flow = self.in_evaluation.popleft()
                self.events_in_flight -= per_flow.total()
                self._settle(per_flow)

    def _forget_in_flight(self) -> None:
        with self.flight_lock:
            while self.in_evaluation:
                self._settle(self.in_evaluation.popleft())
            self.events_in_flight = 0

    def _settle(self, per_flow: Counter[str]) -> None:
        """These events are evaluated (or never will be): a flow none of whose events is left may be saved,
        through the event loop, after the marks the receiver thread scheduled before (with `flight_lock` held)."""
        for flow_id, count in per_flow.items():
            left = self.unevaluated[flow_id] - count
            if left > 0:
                self.unevaluated[flow_id] = left
                continue
            del self.unevaluated[flow_id]
            self._unpin(flow_id)
            self._maybe_save(flow_id)

    def _unpin(self, flow_id: str) -> None:
        """Let the flow go once no event of it waits for evaluation, in flight or held by the monitor (with
        `flight_lock` held)."""
        if flow_id not in self.held and not self.unevaluated[flow_id]:
            self.pinned.pop(flow_id, None)

    def _maybe_save(self, flow_id: str) -> None:
        """Have the event loop write the flow if its saving was deferred and OATF is done with it."""
        if self.saving.wait > 0 and self.loop is not None:
            self.loop.call_soon_threadsafe(self.saving.settled, flow_id)

    def _failure(self, message: str) -> None:
        log.error("oatf: %s", printable(message, 1000))
        if self.monitor is not None and not self.monitor.alive:
            self._forget_in_flight()  # no answer will come for them

    def _handle(self, outputs: Sequence[Output | Reported | Recovered | Held | Diagnostic]) -> None:
        """What the monitor answered, in order. The runs reported are journaled together, logged in one record
        (`_reported`), and the flow updates reach the event loop in one call per batch (a session's runs conclude
        together: with 2,000 documents, over a thousand at once; a shutdown, thousands)."""
        reported: list[RunKey] = []
        concluded: list[Reported] = []
        lines: list[str] = []
        unremarkable: Counter[tuple[str, str]] = Counter()
        for output in outputs:
            # Everything shown comes from the traffic or an attack file: printable, bounded.
            if isinstance(output, PhaseChanged):
                c = output.change
                log.info("oatf %s: actor %s %s -> %s (%s, flow %s)", printable(output.run), printable(c.actor),
                         printable(c.from_phase), printable(c.to_phase), c.reason, c.flow_id or "-")
                if c.flow_id:
                    self._update_flow(c.flow_id, flow_marks.record_phase, output)
            elif isinstance(output, IndicatorMatched):
                log.warning("oatf %s: indicator %s matched (flow %s): %s", printable(output.run),
                            printable(output.indicator_id), output.flow_id, printable(output.evidence))
                self._update_flow(output.flow_id, flow_marks.record_match, output)
            elif isinstance(output, Reported):
                if self._reported(output, lines, unremarkable):
                    reported.append(output.key)
                for flow_id in output.flows:
                    self._update_flow(flow_id, flow_marks.record_outcome, output)
                concluded.append(output)
            elif isinstance(output, Recovered):
                self._recovered(output)
            elif isinstance(output, Diagnostic):  # of the monitor process's decoder
                self.tap.diagnosed(output)
            elif isinstance(output, Held):
                with self.flight_lock:
                    placed, self.held = self.held - output.flows, output.flows
                    for flow_id in placed:
                        self._unpin(flow_id)
                for flow_id in placed:
                    self._maybe_save(flow_id)
        if concluded and self.loop is not None:  # after their flows' marks
            self.flow_updates.put(functools.partial(self._concluded, concluded))
        if reported and self.journal is not None:
            self._journal(self.journal.concluded, *reported)
        if lines:
            log.info("%s", "\n".join(lines))
        if unremarkable:
            log.info("oatf: %s run(s) concluded while stopping (in the summary table; a report each in %s): %s",
                     f"{unremarkable.total():,}", printable(str(self.report_dir), 300),
                     ", ".join(f"{n:,} {outcome} ({status})" for (outcome, status), n in unremarkable.items()))
        self._to_loop()

    def _reported(self, output: Reported, lines: list[str], unremarkable: Counter[tuple[str, str]]) -> bool:
        """A run the monitor process concluded and reported: its report is written and durable (True: the caller
        journals it), or could not be written (its run stays in the journal; each kind of failure is logged
        once). Logged: a run whose outcome needs attention (`ATTENTION`) or whose report was not written in a
        record of its own; the others as a line appended to `lines`, which the caller logs as one record — every
        log record costs mitmproxy's event loop a hook (its `add_log`, dispatched to every addon, whatever the
        verbosity), and a session's runs conclude together. While the proxy stops, those are only counted in
        `unremarkable` (outcome, status), which the caller logs in one line: a shutdown concludes every open run
        at once, thousands."""
        with self.concluded_lock:
            self.concluded.append(output)
            self.outcomes[output.summary.outcome] += 1
        if output.path is None:
            self.unwritten += 1
            if self.once.first("report", (output.error or "").partition(":")[0]):
                log.error("oatf: report not written (each kind of failure is logged once; the journal keeps the "
                          "runs): %s", printable(output.error or "", 300))
        outcome = output.summary.outcome
        line = (f"oatf {printable(output.run)}: {outcome} ({printable(output.summary.status)}) -> "
                f"{output.path or '-'}")
        if outcome in ATTENTION or output.path is None:
            log.log(logging.WARNING if outcome in ATTENTION else logging.INFO, "%s", line)
        elif self.stopping.is_set():
            unremarkable[outcome, printable(output.summary.status, 20)] += 1
        else:
            lines.append(line)
        return output.path is not None

    def _recovered(self, output: Recovered) -> None:
        """The monitor process concluded the runs of a recovery (`_recover`): the segments are dropped once every
        report is durable; else they stay, and shutdown keeps the journal for the next start."""
        if not output.complete:
            log.error("oatf: %d run(s) left open by %s were concluded from the journal, not all reported: the "
                      "journal keeps them for the next start (or `oatf recover`)", output.runs, output.origin)
            return
        if self.journal is not None:
            self.journal.drop([Path(segment) for segment in output.segments])
        with self.concluded_lock:
            self.unrecovered.difference_update(output.segments)
        if output.runs:
            log.warning("oatf: %d run(s) left open by %s were concluded from its journal (status `recovered`) "
                        "into %s", output.runs, output.origin, self.report_dir)

    def _journal(self, write: Callable[..., None], *values: Any) -> None:
        """One journal record; a full or read-only disk is logged once per kind and evaluation goes on."""
        try:
            write(*values)
        except Exception as exc:  # a full or read-only disk, a value it cannot encode: never stops evaluation
            if self.once.first("journal", type(exc).__name__):
                log.error("oatf: journal write failed (each kind of failure is logged once): %s", describe(exc))

    def concluded_reports(self) -> tuple[list[Reported], Counter[str]]:
        """A snapshot of the latest concluded runs and of the outcomes of all (the receiver thread appends
        meanwhile)."""
        with self.concluded_lock:
            return list(self.concluded), Counter(self.outcomes)

    def _update_flow[T](self, flow_id: str, record: Callable[[http.HTTPFlow, T], None], output: T) -> None:
        """`record` what the monitor told of a flow on the flow (`addon.flow_marks`: mark, comment, metadata),
        on the event loop (queued for `_to_loop`); counted in `marking` until done (a flow's saving waits for
        it)."""
        flow = self.flows.get(flow_id)
        if flow is None or self.loop is None:
            return

        def apply() -> None:
            record(flow, output)
            with self.flight_lock:
                left = self.marking[flow_id] - 1
                if left > 0:
                    self.marking[flow_id] = left
                else:
                    del self.marking[flow_id]
            ctx.master.addons.trigger(_update_hook(flow))
            self.saving.settled(flow_id)

        with self.flight_lock:
            self.marking[flow_id] += 1
        self.flow_updates.put(apply)

    def _to_loop(self) -> None:
        """Have the event loop apply the flow updates queued so far (`flow_updates`, in order), with one call."""
        if self.loop is not None and not self.flow_updates.empty():
            with contextlib.suppress(RuntimeError):  # the loop is closed: `done` applies what is queued
                self.loop.call_soon_threadsafe(self._apply_flow_updates)

    def _concluded(self, concluded: list[Reported]) -> None:
        """Runs concluded and their verdicts marked the flows their reports name (on the event loop): the flows
        whose write waited for them are written once no other live run holds them (`addon.deferred_save`). A
        flow held for one that its report does not name (the report cites a bounded number) gets its verdict
        here. Nothing to do while no flow is held (no `-w`, or none waits): a session's runs conclude together,
        over a thousand of them with 2,000 documents."""
        if not len(self.saving.hold):
            return
        for reported in concluded:
            run, named = flow_marks.run_key(reported.run), set(reported.flows)
            for flow in self.saving.hold.waiting_for(run):
                if flow.id not in named and isinstance(flow, http.HTTPFlow):
                    flow_marks.record_outcome(flow, reported)
                    ctx.master.addons.trigger(_update_hook(flow))
            self.saving.concluded(run)

    def _apply_flow_updates(self) -> None:
        """Apply the flow updates queued so far (on the event loop)."""
        while True:
            try:
                update = self.flow_updates.get_nowait()
            except queue.Empty:
                return
            update()

    # --- library ---------------------------------------------------------------------------------------
    def _paths(self) -> list[str]:
        """The documents evaluated: `oatf_attacks`, and those inject mode plays (`oatf_inject`)."""
        paths = [p.strip() for p in ctx.options.oatf_attacks.split(",") if p.strip()]
        return paths + [p for p in inject_paths() if p not in paths]

    def _changed_on_disk(self) -> bool:
        return self._snapshot() != self.watched

    def _snapshot(self) -> dict[str, float]:
        """Each document's modification time (a directory's `.yaml`/`.yml` files, at any depth). Read every
        `RELOAD_POLL_SECONDS` by the worker, holding the interpreter lock the event loop needs: `os.walk` and
        `os.stat` on strings cost less than half of `Path.rglob` and `Path.stat` (2,000 documents: 8 ms, not 19)."""
        stamps: dict[str, float] = {}
        for name in self._paths():
            if not os.path.isdir(name):
                files = [name]
            else:
                files = [os.path.join(directory, file) for directory, _, names in os.walk(name) for file in names
                         if file.endswith((".yaml", ".yml"))]
            for path in files:
                try:
                    stamps[path] = os.stat(path).st_mtime
                except OSError:
                    continue
        return stamps

    def reload(self) -> None:
        """Load (again) every document named by `oatf_attacks`; report each problem once. On mitmproxy's event
        loop (start-up, an option set, `oatf.reload`), on a thread of its own: the proxy forwards traffic while
        the documents load (seconds for thousands), and what it sees meanwhile is evaluated with the library
        it comes under — the new one at start-up (the worker hands nothing to the monitor before: `_work`),
        the previous one at a reload. Elsewhere (the worker's watch of the files), now."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._load()
            return
        if not self.library_ready.is_set():
            log.info("oatf: loading the attack documents; traffic is forwarded meanwhile and evaluated once they are")
        self.loaders = [loader for loader in self.loaders if loader.is_alive()]
        loader = threading.Thread(target=self._load, name="oatf-load", daemon=True)
        self.loaders.append(loader)
        loader.start()

    def _load(self) -> None:
        """`reload`, in the calling thread."""
        with self.load_lock:
            self.watched = self._snapshot()
            try:
                library = load_library(self._paths(), ctx.options.oatf_lenient, long_lived=True)
            except Exception as exc:  # a bug, not a bad document (those are problems): the proxy goes on
                log.error("oatf: loading the attack documents failed: %s", describe(exc))
                library = self.library
            seen = {str(p) for p in (*self.library.problems, *self.library.waived)}
            # Warnings, not errors: mitmdump exits on errors logged at start-up, and one bad document must not
            # stop the proxy or the other attacks.
            for problem in library.problems:
                if str(problem) not in seen:
                    log.warning("oatf: not loaded: %s", problem)
            for waived in library.waived:
                if str(waived) not in seen:
                    log.warning("oatf: loaded anyway (oatf_lenient): %s", waived)
            self.library = library
            with self.lock:
                if self.monitor is not None:
                    if self.library_ready.is_set():
                        self._flush()  # the traffic so far is evaluated with the library it came under
                    self.monitor.replace_attacks(list(library.attacks))
                self.library_ready.set()
                recoveries, self.deferred_recoveries = self.deferred_recoveries, []
                for segments, origin, unreleased in recoveries:
                    self._recover_segments(segments, origin, unreleased)
        log.info("oatf: %d attack(s) loaded, %d problem(s)", len(library.attacks), len(library.problems))
        if not library.attacks:
            log.warning("oatf: no attack loaded: the proxy evaluates nothing%s",
                        "" if self._paths() else " (oatf_attacks is empty)")

    # --- commands --------------------------------------------------------------------------------------
    @command.command("oatf.reload")
    def reload_command(self) -> None:
        """Reload the attack documents named by oatf_attacks."""
        self.reload()

    @command.command("oatf.status")
    def status(self) -> Sequence[str]:
        """Live runs: state, messages, delivery, phases per actor and indicators matched so far."""
        monitor = self.monitor
        if monitor is not None:
            monitor.ask_counts()  # answered before the status
        runs = monitor.status(STATUS_SECONDS) if monitor is not None else []
        if runs is None:
            return _shown("oatf.status", [f"the monitor did not answer within {STATUS_SECONDS:g} s; "
                                          f"{self.waiting()} event(s) waiting for evaluation"])
        lines = [f"{len(self.library.attacks)} attack(s) loaded, {len(runs)} live run(s), "
                 f"{self.waiting()} event(s) waiting for evaluation", *self._diagnostics()]
        if monitor is not None and monitor.counts:
            lines.append("in memory: " + ", ".join(f"{name} {n:,}" for name, n in monitor.counts.items()))
        if runs:
            rows = [("RUN", "STATE", "MESSAGES", "DELIVERED", "PHASES", "MATCHED")]
            rows += [(printable(r["run"], 300), r["state"], str(r["messages"]), "yes" if r["delivered"] else "no",
                      printable(", ".join(f"{actor}: {phase}" for actor, phase in r["phases"].items()), 300),
                      printable(", ".join(r["matched"]) or "-", 300)) for r in runs]
            lines += columns(rows)
        return _shown("oatf.status", lines)

    def _diagnostics(self) -> list[str]:
        """What was not inspected or not evaluated as sent, if anything: the decoder's diagnostics by code (an
        `oversize_batch` drops batch members), events the monitor could not be sent, trace sessions evicted."""
        counts = {**self.tap.diagnostics, "unsent_events": self.monitor.unsent if self.monitor is not None else 0,
                  "evicted_trace_sessions": self.traces.evicted,
                  "rejected_feeds": self.feed.rejected if self.feed is not None else 0}
        shown = ", ".join(f"{code} {count}" for code, count in sorted(counts.items()) if count)
        return [f"diagnostics: {shown}"] if shown else []

    @command.command("oatf.flow")
    def flow_command(self, flows: Sequence[mitmflow.Flow]) -> Sequence[str]:
        """What OATF knows of the flows (`@focus` in the console, `@ID`, `@marked`, a filter): the protocol
        messages decoded from each, and every run it took part in, with its verdict, the indicators that
        matched on it (path, excerpt) and the phase changes it caused."""
        if not flows:
            return _shown("oatf.flow", ["no flow matched"])
        monitor = self.monitor
        snapshot = monitor.status(STATUS_SECONDS) if monitor is not None else []
        live = None if snapshot is None else {r["run"]: r for r in snapshot}
        lines: list[str] = []
        for shown in flows[:MAX_FLOWS_SHOWN]:
            lines += [*([""] if lines else []), *flow_lines(shown, live)]
        if len(flows) > MAX_FLOWS_SHOWN:
            lines.append(f"… {len(flows) - MAX_FLOWS_SHOWN} more flow(s) matched (at most {MAX_FLOWS_SHOWN} shown)")
        return _shown("oatf.flow", lines)

    @command.command("oatf.verdicts")
    def verdicts(self) -> Sequence[str]:
        """The verdicts of the runs concluded so far, most severe first, with the count of each outcome."""
        concluded, outcomes = self.concluded_reports()
        table = (summary_table((r.summary for r in concluded), counts=outcomes) if concluded
                 else "no run has concluded yet")
        return _shown("oatf.verdicts", table.splitlines())


def _shown(name: str, lines: list[str]) -> list[str]:
    """A command's output for people: returned one line per item (the `mitmproxy` console shows them as rows
    of its data viewer, mitmweb's command bar as a list of strings) and logged as one multi-line record, which
    mitmweb's event log shows as it is. Every line is printable already."""
    log.info("%s:\n%s", name, "\n".join(lines))
    return lines


def _terminal_width() -> int | None:
    """The columns of the terminal the proxy was started from; None when its output goes to a file or pipe
    (the summary table's session column then never wraps)."""
    stream = sys.__stderr__
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream is not None and stream.isatty() else None
    except (OSError, ValueError):
        return None


def _to_terminal(text: str) -> None:
    """`text` (printable) on the terminal the proxy was started from, if any: where the `mitmproxy` console,
    which stops its UI before the `done` hooks, has given it back."""
    stream = sys.__stderr__
    if stream is not None:
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # no terminal left (closed, detached): the log has the table
            pass


def _update_hook(flow: http.HTTPFlow) -> Any:
    from mitmproxy.hooks import UpdateHook

    return UpdateHook([flow])


addons = [OatfAddon()]
