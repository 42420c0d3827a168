"""The live addon's `Monitor`, run in a child process so that evaluation never competes with mitmproxy's event
loop for the interpreter lock (issue 5: "evaluation never blocks the proxy's event loop"). No mitmproxy here.

The parent sends batches of `ObservedEvent`s and commands over a pipe; the child (`python -m
addon.monitor_process READ_FD WRITE_FD`) owns the sans-I/O `Monitor` and answers with its outputs (phase
changes, indicator matches, concluded runs), which the parent handles (logs, flow marks, report files).
Pickled messages, in order, one pipe each way:

    parent → child: ("start", (MonitorOptions, semantic spec)) first, then
                    ("events", [event, ...]) | ("tick", now) | ("options", MonitorOptions)
                    | ("attacks", [LoadedAttack, ...]) | ("status", None) | ("shutdown", None)
    child → parent: ("evaluated", [Output, ...]) after each "events" message, in order (possibly empty)
                    | ("outputs", [Output, ...]) | ("status", [run snapshot, ...]) | ("failed", message)
                    | ("done", [Output, ...])

The child runs in a session of its own: a Ctrl-C or a signal to the proxy's process group does not reach it,
so it lives to conclude its runs when the proxy shuts down. It ends after `shutdown` — whose answer carries
every run still open, concluded as `interrupted`, so nothing observed is lost — or when the pipe closes (the
proxy died). One event that makes evaluation raise is reported as `failed` and the others go on. Every send
goes through a sender thread: no caller (mitmproxy's event loop included) ever waits for the child.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from addon.events import ObservedEvent
from addon.monitor import LoadedAttack, Monitor, MonitorOptions, Output
from addon.semantic import load_semantic_evaluator

ROOT = Path(__file__).resolve().parents[1]

OutputsHandler = Callable[[list[Output]], None]


def serve(inbox: Connection, outbox: Connection) -> None:
    """The child process: a `Monitor` answering the parent's messages until `shutdown` or a closed pipe."""
    try:
        kind, (options, semantic_spec) = inbox.recv()
        monitor = Monitor([], options, semantic=load_semantic_evaluator(semantic_spec))
    except (EOFError, OSError):
        return
    except Exception:  # the parent checked the semantic evaluator; anything else is reported
        outbox.send(("failed", traceback.format_exc(limit=8)))
        return
    while True:
        try:
            kind, payload = inbox.recv()
        except (EOFError, OSError):  # the proxy is gone: nobody is left to report to
            return
        if kind == "shutdown":
            outbox.send(("done", monitor.shutdown()))
            return
        if kind == "status":
            outbox.send(("status", monitor.status()))
            continue
        outputs: list[Output] = []
        try:
            if kind == "events":
                for event in payload:
                    outputs.extend(monitor.observe(event))
            elif kind == "tick":
                outputs = monitor.tick(payload)
            elif kind == "options":
                monitor.set_options(payload)
            elif kind == "attacks":
                outputs = monitor.replace_attacks(payload)
        except Exception:  # one bad event must not stop evaluation of the others
            outbox.send(("failed", traceback.format_exc(limit=8)))
        if kind == "events":
            outbox.send(("evaluated", outputs))
        elif outputs:
            outbox.send(("outputs", outputs))


class MonitorProcess:
    """The parent's side: starts the child, sends to it, and hands what it answers to `on_outputs` (called
    on a receiver thread), then, once a batch of events is evaluated, calls `on_evaluated`; `on_failure` gets
    the child's error reports and the news of its death."""

    def __init__(self, options: MonitorOptions, semantic_spec: str, on_outputs: OutputsHandler,
                 on_evaluated: Callable[[], None], on_failure: Callable[[str], None]) -> None:
        self.on_outputs = on_outputs
        self.on_evaluated = on_evaluated
        self.on_failure = on_failure
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
        self._outbox: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._status: list[list[dict[str, Any]]] = []
        self._status_ready = threading.Condition()
        self._done = threading.Event()
        """Set when no more answers will come: after `done`, or when the child is gone."""
        self._concluded = False
        """The child answered `shutdown` with its last runs."""
        self._outbox.put(("start", (options, semantic_spec)))
        self._sender = threading.Thread(target=self._send_all, name="oatf-monitor-sender", daemon=True)
        self._receiver = threading.Thread(target=self._receive, name="oatf-monitor-receiver", daemon=True)
        self._sender.start()
        self._receiver.start()

    @property
    def alive(self) -> bool:
        return self._process.poll() is None and not self._done.is_set()

    def observe(self, events: list[ObservedEvent]) -> None:
        self._outbox.put(("events", events))

    def tick(self, now: float) -> None:
        self._outbox.put(("tick", now))

    def set_options(self, options: MonitorOptions) -> None:
        self._outbox.put(("options", options))

    def replace_attacks(self, attacks: list[LoadedAttack]) -> None:
        self._outbox.put(("attacks", attacks))

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
        """Conclude every open run in the child (its outputs reach `on_outputs` before this returns) and
        end it. False when the child did not finish within `timeout` seconds."""
        self._outbox.put(("shutdown", None))
        self._outbox.put(None)
        finished = self._done.wait(timeout) and self._concluded
        self._sender.join(timeout=1.0)
        self._receiver.join(timeout=1.0)
        try:
            self._process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._to_child.close()
        self._from_child.close()
        return finished

    def _send_all(self) -> None:
        while (message := self._outbox.get()) is not None:
            try:
                self._to_child.send(message)
            except (OSError, ValueError):  # the child died or the pipe is closed: the receiver reports it
                return

    def _receive(self) -> None:
        while True:
            try:
                kind, payload = self._from_child.recv()
            except (EOFError, OSError):
                if not self._done.is_set():
                    self.on_failure(f"the monitor process ended unexpectedly (exit code {self._process.poll()})")
                    self._done.set()
                with self._status_ready:
                    self._status_ready.notify_all()
                return
            if kind == "status":
                with self._status_ready:
                    self._status.append(payload)
                    self._status_ready.notify_all()
            elif kind == "failed":
                self.on_failure(f"evaluation failed in the monitor process; continuing:\n{payload}")
            else:
                try:
                    self.on_outputs(payload)
                    if kind == "evaluated":
                        self.on_evaluated()
                except Exception as exc:  # handling (logging, reports) must not stop receiving
                    self.on_failure(f"handling the monitor's outputs failed: {exc!r}")
                if kind == "done":
                    self._concluded = True
                    self._done.set()
                    return


def main() -> None:
    """`python -m addon.monitor_process READ_FD WRITE_FD`: the child's entry point."""
    read_fd, write_fd = (int(arg) for arg in sys.argv[1:3])
    with contextlib.closing(Connection(read_fd, writable=False)) as inbox, \
            contextlib.closing(Connection(write_fd, readable=False)) as outbox:
        serve(inbox, outbox)


if __name__ == "__main__":
    main()
