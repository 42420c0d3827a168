"""mitmproxy addon: live OATF evaluation of agent traffic. Load with `mitmdump -s addon/oatf_addon.py`.

Thin glue only (mitmproxy's addon conventions: options declared in `load`, reacting in `configure`, hooks
that do one thing, commands for users):
- the wire tap (`addon.mitm_tap`) decodes MCP/A2A/AG-UI traffic into `ObservedEvent`s as flows pass,
  streaming SSE responses chunk by chunk, never altering a byte;
- events go through a queue to one worker thread that sends them in batches to the sans-I/O `Monitor`, which
  runs in a child process (`addon.monitor_process`: CEL and every other evaluation, and writing the reports,
  stay off the proxy's event loop and out of its interpreter lock), and ticks its clock; a receiver thread
  handles what the monitor answers: logs, the summary table, the journal's markers of reported runs;
- flows that matched an indicator are marked and commented (on the event loop);
- `oatf_listen`: the events of `oatf tap --monitor PATH` (stdio servers, `oatf_engine.feed`) join the same queue,
  so one monitor judges an agent's stdio and HTTP traffic in one episode;
- on shutdown every open run is concluded and reported: nothing observed is lost.
"""

from __future__ import annotations

import difflib
import logging
import queue
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # loaded by path (`-s addon/oatf_addon.py`): make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mitmproxy import command, ctx, http

from addon.mitm_tap import MitmTap
from addon.monitor_process import MonitorProcess
from addon.views import MAX_MATCHES, METADATA_KEY, ContentViews
from oatf_engine.attest_traces import TraceCollector, write_traces
from oatf_engine.engine_config import SETTINGS, engine_config
from oatf_engine.events import ObservedEvent
from oatf_engine.feed import SOCKET_NAME, FeedServer
from oatf_engine.journal import Journal
from oatf_engine.monitor import (
    IndicatorMatched,
    Library,
    MonitorOptions,
    Output,
    PhaseChanged,
    load_library,
)
from oatf_engine.recovery import conclude_pending, pending_journal
from oatf_engine.reports import Reported, summary_table
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.text import Once, describe, printable

log = logging.getLogger("oatf")

TICK_SECONDS = 0.25
RELOAD_POLL_SECONDS = 2.0
MARK = ":warning:"
MAX_SUMMARY_ROWS = 1_000
MAX_BATCH = 256
"""Events sent to the monitor process in one message, at most."""
STATUS_SECONDS = 2.0
"""How long `oatf.status` waits for the monitor process's answer."""
SHUTDOWN_SECONDS = 120.0
"""How long the proxy's shutdown waits for the monitor to evaluate what is queued and conclude every run."""
BACKLOG_WARNING = 10_000
"""Events waiting for the worker: each further multiple of this is logged (evaluation is behind the traffic).
Events are never dropped — a dropped event could turn an `exploited` run into a false `not_exploited`."""


class OatfAddon:
    """The `oatf_*` options, hooks and `oatf.*` commands."""

    def __init__(self) -> None:
        self.tap = MitmTap(on_event=self._enqueue)
        self.events: queue.Queue[ObservedEvent | None] = queue.Queue()
        self.backlog_warned = 0
        self.lock = threading.Lock()
        self.monitor: MonitorProcess | None = None
        self.options = MonitorOptions()
        self.report_dir: Path | None = None
        self.library = Library((), ())
        self.concluded: deque[Reported] = deque(maxlen=MAX_SUMMARY_ROWS)
        """The latest concluded runs, for the summary table (all of their reports are on disk, unless
        `unwritten`); appended by the receiver thread, read through `concluded_reports` only."""
        self.unwritten = 0
        """Reports the monitor process could not write: their runs stay in the journal, which shutdown keeps."""
        self.concluded_lock = threading.Lock()
        self.flows: weakref.WeakValueDictionary[str, http.HTTPFlow] = weakref.WeakValueDictionary()
        self.in_evaluation: deque[tuple[int, list[http.HTTPFlow]]] = deque()
        """Each batch of events sent to the monitor and not yet evaluated, oldest first: its size, and its
        flows, kept alive so that a match can still mark and comment its flow (mitmdump keeps no flow of its
        own)."""
        self.events_in_flight = 0
        """Events sent to the monitor and not yet evaluated."""
        self.flight_lock = threading.Lock()
        """Guards `in_evaluation` and `events_in_flight` (worker and receiver threads)."""
        self.worker: threading.Thread | None = None
        self.stopping = threading.Event()
        self.watched: dict[str, float] = {}
        self.loop: Any = None
        self.traces = TraceCollector(on_evict=self._write_evicted_trace)
        self.journal: Journal | None = None
        """The monitor's inputs and the reported runs, for recovery after a crash (`oatf_engine.journal`)."""
        self.semantic_spec = ""
        self.monitor_lost = False
        """A monitor process died or stalled: its runs are only in the journal, which shutdown then keeps."""
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
        self.tap.load(loader)

    def configure(self, updated: set[str]) -> None:
        try:
            self.tap.configure(updated)
        except Exception as exc:  # the tap's option errors: reported without a traceback (see below)
            log.error("oatf: invalid option: %s", exc)
            return
        if updated & {"oatf_listen", "oatf_report_dir"}:
            self._listen()
        if not updated & {"oatf_attacks", "oatf_report_dir", *(s.option for s in SETTINGS)}:
            return
        try:
            config = engine_config({s.name: getattr(ctx.options, s.option) for s in SETTINGS})
            options = config.monitor
            load_semantic_evaluator(config.semantic_evaluator)  # checked here, loaded in the child
            report_dir = Path(ctx.options.oatf_report_dir)
            report_dir.mkdir(parents=True, exist_ok=True)  # checked here, written by the monitor process
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
                if self.monitor is not None:
                    self._stop_monitor(self.monitor)
                self.monitor = self._start_monitor()
            elif moved:
                self.monitor.set_report_dir(str(report_dir))
            self.monitor.set_options(options)
        self.reload()
        if self.journal is None or "oatf_report_dir" in updated:
            self._open_journal()

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

    def _open_journal(self) -> None:
        """Journal the monitor's inputs in the report directory (`oatf_engine.journal`); first conclude and report
        the runs a previous proxy that did not stop cleanly left in it (`oatf_engine.recovery`)."""
        directory = ctx.options.oatf_report_dir
        try:
            if pending_journal(directory):
                reports = conclude_pending(directory, list(self.library.attacks), self.options,
                                           load_semantic_evaluator(self.semantic_spec))
                log.warning("oatf: %d run(s) left open by a proxy that did not stop cleanly were concluded from "
                            "its journal (status `recovered`) into %s", len(reports), directory)
            with self.lock:
                if self.journal is not None:
                    self.journal.close()
                self.journal = Journal(directory)
        except (OSError, ImportError, AttributeError) as exc:
            log.error("oatf: the evaluation journal is unavailable (a crash would lose open runs): %s",
                      describe(exc))

    def _start_monitor(self) -> MonitorProcess:
        """A monitor process with the current options, semantic evaluator and library."""
        monitor = MonitorProcess(self.options, ctx.options.oatf_semantic_evaluator, str(self.report_dir),
                                 self._handle, self._evaluated, self._failure)
        if self.library.attacks:
            monitor.replace_attacks(list(self.library.attacks))
        return monitor

    # --- lifecycle -------------------------------------------------------------------------------------
    def running(self) -> None:
        import asyncio

        self.loop = asyncio.get_running_loop()
        self._warn_unknown_options()
        if self.worker is None:
            self.worker = threading.Thread(target=self._work, name="oatf-monitor", daemon=True)
            self.worker.start()

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
        with self.lock:
            if self.monitor is not None:
                self._send(self._drain())  # events the worker did not reach
                stopped = self._stop_monitor(self.monitor)
                if self.unwritten:
                    log.error("oatf: %d report(s) could not be written: the journal in %s keeps their runs; the "
                              "next start with a writable report directory (or `oatf recover`) reports them",
                              self.unwritten, self.report_dir)
                elif stopped and self.journal is not None and not self.monitor_lost:
                    self.journal.clear()  # every run is reported: nothing left to recover
        if ctx.options.oatf_trace_dir and self.traces.sessions:
            paths = write_traces(self.traces.traces(), ctx.options.oatf_trace_dir)
            log.info("oatf: %d Attest trace(s) in %s", len(paths), ctx.options.oatf_trace_dir)
        concluded = self.concluded_reports()
        if concluded:
            log.info("oatf verdicts:\n%s", summary_table(r.summary for r in concluded))
            if self.report_dir is not None:
                log.info("oatf reports in %s", self.report_dir.resolve())

    # --- hooks: decoding only, on the event loop ------------------------------------------------------
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        self.tap.requestheaders(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        self.flows[flow.id] = flow
        self.tap.request(flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self.tap.responseheaders(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        self.tap.response(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self.tap.error(flow)

    def _enqueue(self, event: ObservedEvent) -> None:
        self.events.put_nowait(event)
        waiting = self.waiting()
        if waiting // BACKLOG_WARNING > self.backlog_warned:
            self.backlog_warned = waiting // BACKLOG_WARNING
            log.warning("oatf: evaluation is behind the traffic: %d event(s) waiting", waiting)

    def waiting(self) -> int:
        """Events observed and not yet evaluated: queued here, or sent to the monitor process."""
        return self.events.qsize() + self.events_in_flight

    # --- the worker thread: events to the monitor process ----------------------------------------------
    def _work(self) -> None:
        next_poll = time.monotonic() + RELOAD_POLL_SECONDS
        while not self.stopping.is_set():
            try:
                first = self.events.get(timeout=TICK_SECONDS)
            except queue.Empty:
                first = None
            try:
                batch = [first, *self._drain(MAX_BATCH - 1)] if first is not None else []
                with self.lock:
                    if self.monitor is not None and not self.stopping.is_set():
                        self._replace_if_gone(self.monitor)
                    if self.monitor is not None:
                        self.monitor.ping()
                        if batch:
                            self._send(batch)
                        else:
                            now = time.time()
                            if self.journal is not None:
                                self._journal(self.journal.tick, now)
                            self.monitor.tick(now)
                if time.monotonic() >= next_poll:
                    next_poll = time.monotonic() + RELOAD_POLL_SECONDS
                    if ctx.options.oatf_watch and self._changed_on_disk():
                        self.reload()
            except Exception as exc:  # one bad batch must not stop evaluation of the others
                if self.once.first("worker", type(exc).__name__):
                    log.error("oatf: evaluation failed (each kind of failure is logged once); continuing: %s",
                              describe(exc))

    def _replace_if_gone(self, monitor: MonitorProcess) -> None:
        """A new monitor process for one that ended or stalled: what the old one followed is gone with it."""
        if monitor.alive and not monitor.stalled:
            return
        if monitor.alive:
            log.error("oatf: the monitor process did not answer for %g s (%d event(s) waiting): ending it",
                      monitor.stall_seconds, self.waiting())
            monitor.kill()
        # A death is logged by the receiver thread. Its runs are in the journal, kept for the next start.
        self.monitor_lost = True
        log.error("oatf: starting a new monitor process; evaluation goes on with new runs (the lost ones are "
                  "recovered from the journal at the next start, or with `oatf recover`)")
        self._stop_monitor(monitor)
        self.monitor = self._start_monitor()

    def _drain(self, limit: int | None = None) -> list[ObservedEvent]:
        """Events waiting in the queue (at most `limit`), without blocking."""
        events: list[ObservedEvent] = []
        while limit is None or len(events) < limit:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                break
            if event is not None:
                events.append(event)
        return events

    def _send(self, events: list[ObservedEvent]) -> None:
        """Hand events to the monitor (and to the Attest trace collector when traces are wanted)."""
        if not events or self.monitor is None:
            return
        if ctx.options.oatf_trace_dir:
            try:
                for event in events:
                    self.traces.observe(event)
            except Exception as exc:  # traces are a by-product: evaluation goes on
                if self.once.first("traces", type(exc).__name__):
                    log.error("oatf: collecting Attest traces failed (each kind of failure is logged once): %s",
                              describe(exc))
        if self.journal is not None:
            self._journal(self.journal.events, events)
        flows = {event.flow_id: self.flows.get(event.flow_id) for event in events}
        with self.flight_lock:
            self.in_evaluation.append((len(events), [flow for flow in flows.values() if flow is not None]))
            self.events_in_flight += len(events)
        self.monitor.observe(events)

    def _write_evicted_trace(self, trace: dict[str, Any]) -> None:
        """A session the trace collector evicts to bound its memory: its trace is written now, not lost (the
        collector is fed only while `oatf_trace_dir` is set)."""
        write_traces([trace], ctx.options.oatf_trace_dir)

    def _stop_monitor(self, monitor: MonitorProcess) -> bool:
        """Conclude every open run of `monitor` (the monitor process writes their reports before this returns)
        and end it; whether it concluded them all."""
        concluded = False
        if not monitor.alive:
            log.error("oatf: the monitor process had ended: the runs it followed are not reported (the journal "
                      "keeps them for `oatf recover`)")
            monitor.shutdown(timeout=1.0)
        elif not monitor.shutdown(SHUTDOWN_SECONDS):
            log.error("oatf: the monitor did not conclude its runs (it stalled, or took over %d s); some reports "
                      "are missing (the journal keeps them for `oatf recover`)", SHUTDOWN_SECONDS)
        else:
            concluded = True
        self._forget_in_flight()
        return concluded

    # --- the receiver thread: what the monitor answers -------------------------------------------------
    def _evaluated(self) -> None:
        with self.flight_lock:
            if self.in_evaluation:
                count, _ = self.in_evaluation.popleft()
                self.events_in_flight -= count

    def _forget_in_flight(self) -> None:
        with self.flight_lock:
            self.in_evaluation.clear()
            self.events_in_flight = 0

    def _failure(self, message: str) -> None:
        log.error("oatf: %s", printable(message, 1000))
        if self.monitor is not None and not self.monitor.alive:
            self._forget_in_flight()  # no answer will come for them

    def _handle(self, outputs: Sequence[Output | Reported]) -> None:
        for output in outputs:
            # Everything shown comes from the traffic or an attack file: printable, bounded.
            if isinstance(output, PhaseChanged):
                c = output.change
                log.info("oatf %s: actor %s %s -> %s (%s, flow %s)", printable(output.run), printable(c.actor),
                         printable(c.from_phase), printable(c.to_phase), c.reason, c.flow_id or "-")
            elif isinstance(output, IndicatorMatched):
                log.warning("oatf %s: indicator %s matched (flow %s): %s", printable(output.run),
                            printable(output.indicator_id), output.flow_id, printable(output.evidence))
                self._mark(output)
            elif isinstance(output, Reported):
                self._reported(output)

    def _reported(self, output: Reported) -> None:
        """A run the monitor process concluded and reported: its report is written and durable, or could not
        be written (its run stays in the journal; each kind of failure is logged once)."""
        with self.concluded_lock:
            self.concluded.append(output)
        if output.path is None:
            self.unwritten += 1
            if self.once.first("report", (output.error or "").partition(":")[0]):
                log.error("oatf: report not written (each kind of failure is logged once; the journal keeps the "
                          "runs): %s", printable(output.error or "", 300))
        elif self.journal is not None:
            self._journal(self.journal.concluded, output.key)
        log.warning("oatf %s: %s (%s) -> %s", printable(output.run), output.summary.outcome,
                    printable(output.summary.status), output.path or "-")

    def _journal(self, write: Callable[[Any], None], value: Any) -> None:
        """One journal record; a full or read-only disk is logged once per kind and evaluation goes on."""
        try:
            write(value)
        except Exception as exc:  # a full or read-only disk, a value it cannot encode: never stops evaluation
            if self.once.first("journal", type(exc).__name__):
                log.error("oatf: journal write failed (each kind of failure is logged once): %s", describe(exc))

    def concluded_reports(self) -> list[Reported]:
        """A snapshot of the latest concluded runs (the receiver thread appends meanwhile)."""
        with self.concluded_lock:
            return list(self.concluded)

    def _mark(self, output: IndicatorMatched) -> None:
        flow = self.flows.get(output.flow_id)
        if flow is None or self.loop is None:
            return

        def apply() -> None:
            flow.marked = MARK
            note = f"OATF {printable(output.indicator_id)} matched: {printable(output.evidence, 300)}"
            flow.comment = f"{flow.comment}\n{note}" if flow.comment else note
            matches = flow.metadata.setdefault(METADATA_KEY, [])  # shown first by the content views
            if len(matches) < MAX_MATCHES:
                matches.append({"attack": output.attack_id, "indicator": output.indicator_id,
                                "evidence": printable(output.evidence, 300)})
            ctx.master.addons.trigger(_update_hook(flow))

        self.loop.call_soon_threadsafe(apply)

    # --- library ---------------------------------------------------------------------------------------
    def _paths(self) -> list[str]:
        return [p.strip() for p in ctx.options.oatf_attacks.split(",") if p.strip()]

    def _changed_on_disk(self) -> bool:
        return self._snapshot() != self.watched

    def _snapshot(self) -> dict[str, float]:
        stamps: dict[str, float] = {}
        for name in self._paths():
            root = Path(name)
            files = [root] if not root.is_dir() else [p for p in root.rglob("*") if p.suffix in (".yaml", ".yml")]
            for path in files:
                try:
                    stamps[str(path)] = path.stat().st_mtime
                except OSError:
                    continue
        return stamps

    def reload(self) -> None:
        """Load (again) every document named by `oatf_attacks`; report each problem once."""
        self.watched = self._snapshot()
        library = load_library(self._paths(), ctx.options.oatf_lenient)
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
                self.monitor.replace_attacks(list(library.attacks))
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
    def status(self) -> str:
        """Live runs: phases per actor and indicators matched so far."""
        monitor = self.monitor
        runs = monitor.status(STATUS_SECONDS) if monitor is not None else []
        if runs is None:
            return (f"the monitor did not answer within {STATUS_SECONDS:g} s; "
                    f"{self.waiting()} event(s) waiting for evaluation")
        lines = [f"{len(self.library.attacks)} attack(s) loaded, {len(runs)} live run(s), "
                 f"{self.waiting()} event(s) waiting for evaluation", *self._diagnostics()]
        lines += [printable(f"{r['run']}: {r['messages']} msgs, phases {r['phases']}, matched {r['matched'] or '-'}",
                            1000) for r in runs]
        return "\n".join(lines)

    def _diagnostics(self) -> list[str]:
        """What was not inspected or not evaluated as sent, if anything: the decoder's diagnostics by code (an
        `oversize_batch` drops batch members), events the monitor could not be sent, trace sessions evicted."""
        counts = {**self.tap.diagnostics, "unsent_events": self.monitor.unsent if self.monitor is not None else 0,
                  "evicted_trace_sessions": self.traces.evicted,
                  "rejected_feeds": self.feed.rejected if self.feed is not None else 0}
        shown = ", ".join(f"{code} {count}" for code, count in sorted(counts.items()) if count)
        return [f"diagnostics: {shown}"] if shown else []

    @command.command("oatf.verdicts")
    def verdicts(self) -> str:
        """The verdicts of the runs concluded so far."""
        concluded = self.concluded_reports()
        return summary_table(r.summary for r in concluded) if concluded else "no run has concluded yet"


def _update_hook(flow: http.HTTPFlow) -> Any:
    from mitmproxy.hooks import UpdateHook

    return UpdateHook([flow])


addons = [OatfAddon()]
