"""Judging what `oatf serve` served with the engine the proxy and `oatf tap` use (issue 19: "it judges what it
served with the same engine and writes the same reports").

`WireTap` is ASGI middleware in front of the served endpoints: it hands every HTTP exchange, byte for byte as
it passed (request chunks as the app reads them, response chunks once they were handed to the server), to
the engine's `WireDecoder` exchange API (`oatf_engine.wire`), in wire order. A response chunk is decoded only after
it was sent, so a payload counts as delivered exactly when it reached the agent's connection.

`Judge` does the engine's work on a thread of its own, as `oatf tap`'s evaluation thread does, so the served
endpoints never wait for it: it runs the queued decoder calls, gives each event to the `Monitor` of the
document the exchange belongs to (one monitor per document: a document's runs see only its own endpoints and
the runs its client actors drive), ticks the clocks while traffic is quiet so grace periods end live, and
writes each concluded run with `ReportWriter`. `stop` concludes the runs still open (`interrupted`, as the
proxy does when it stops) and returns every report's summary for the console; `settled` says when nothing
is left to judge.
"""

from __future__ import annotations

import functools
import itertools
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oatf_engine.events import ObservedEvent
from oatf_engine.monitor import Monitor, RunConcluded
from oatf_engine.reports import ReportWriter
from oatf_engine.text import Once, describe, printable
from oatf_engine.wire import DecoderConfig, Diagnostic, WireDecoder
from oatf_engine.wire.decoder import Decoded

TICK_SECONDS = 0.5
"""How often the clocks advance while no traffic comes."""

Call = tuple[int, Callable[..., Sequence[Decoded]], tuple[Any, ...]]



class Judge:
    """The engine fed from the wire tap (see the module docstring)."""

    def __init__(self, decoder: DecoderConfig, monitors: dict[int, Monitor], writer: ReportWriter,
                 stderr: IO[str], verbose: bool = False) -> None:
        self.decoder = WireDecoder(decoder, on_diagnostic=self._diagnose)
        self.monitors = monitors
        """The monitor of each document, by the port it is served on (its key)."""
        self.writer = writer
        self.stderr = stderr
        self.verbose = verbose
        self.reports: list[dict[str, Any]] = []
        self.events = 0
        self._open_runs = 0
        self._once = Once()
        self._exchanges = itertools.count(1)
        self._queue: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="oatf-serve-judge", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def exchange_id(self) -> str:
        """A new exchange's id, unique across every endpoint (the decoder is shared)."""
        return f"serve-{next(self._exchanges)}"

    def put(self, key: int, feed: Callable[..., Sequence[Decoded]], *args: Any) -> None:
        """Queue one decoder call whose events go to document `key`'s monitor (never blocks)."""
        self._queue.put((key, feed, args))

    def settled(self) -> bool:
        """Whether everything queued was judged and no run is open (read from any thread)."""
        return self._queue.empty() and self._open_runs == 0

    def stop(self) -> list[dict[str, Any]]:
        """Decode what is queued, conclude every open run (`interrupted`), report it; every report written
        since the start."""
        self._queue.put(None)
        self._thread.join()
        return self.reports

    def _diagnose(self, diagnostic: Diagnostic) -> None:
        """The decoder's note on traffic it could not decode (shown with `verbose`)."""
        if self.verbose:
            print(f"oatf serve: {diagnostic.code}: {printable(diagnostic.message, 300)}", file=self.stderr, flush=True)

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=TICK_SECONDS)
            except queue.Empty:
                now = time.time()
                for monitor in self.monitors.values():
                    self._guarded("tick", functools.partial(self._tick, monitor, now))
                self._open_runs = sum(monitor.live_runs for monitor in self.monitors.values())
                continue
            if item is None:
                break
            self._guarded("evaluation", functools.partial(self._decode, *item))
            self._open_runs = sum(monitor.live_runs for monitor in self.monitors.values())
        for monitor in self.monitors.values():
            self._guarded("shutdown", functools.partial(self._shutdown, monitor))

    def _tick(self, monitor: Monitor, now: float) -> None:
        self._report(monitor.tick(now))

    def _shutdown(self, monitor: Monitor) -> None:
        self._report(monitor.shutdown())

    def _decode(self, key: int, feed: Callable[..., Sequence[Decoded]], args: tuple[Any, ...]) -> None:
        monitor = self.monitors[key]
        for event in feed(*args):
            if isinstance(event, ObservedEvent):
                self.events += 1
                self._report(monitor.observe(event))
            else:  # an exchange that ended unanswered: its requests' waits end
                self._report(monitor.exchange_ended(event))

    def _report(self, outputs: list[Any]) -> None:
        concluded = [output.report for output in outputs if isinstance(output, RunConcluded)]
        for report in concluded:
            path = self.writer.write(report)
            self.reports.append(report)
            if self.verbose:
                print(f"oatf serve: {printable(report['attack']['id'], 60)}: {report['outcome']} ({path})",
                      file=self.stderr, flush=True)
        if concluded:
            self.writer.commit()

    def _guarded(self, kind: str, work: Callable[[], None]) -> None:
        """Run `work`; a failure is reported once per kind and type, and judging goes on."""
        try:
            work()
        except Exception as exc:  # the served endpoints must outlive any failure of the judge
            if self._once.first(kind, type(exc).__name__):
                print(f"oatf serve: {kind} failed (reported once): {describe(exc)}", file=self.stderr, flush=True)


class WireTap:
    """ASGI middleware feeding every HTTP exchange to a `Judge` (see the module docstring)."""

    def __init__(self, app: ASGIApp, judge: Judge, key: int) -> None:
        self.app = app
        self.judge = judge
        self.key = key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        judge, decoder = self.judge, self.judge.decoder
        exchange = judge.exchange_id()
        host, port = scope.get("server") or ("127.0.0.1", 0)
        query = scope.get("query_string", b"").decode("latin-1")
        url = f"http://{host}:{port}{scope.get('path', '/')}" + (f"?{query}" if query else "")
        client = "{}:{}".format(*scope["client"]) if scope.get("client") else ""
        judge.put(self.key, decoder.request_headers, exchange, scope.get("method", "GET"), url,
                  scope.get("headers", []), client, time.time())
        done = False

        async def tapped_receive() -> Message:
            nonlocal done
            message = await receive()
            if message["type"] == "http.request":
                if message.get("body"):
                    judge.put(self.key, decoder.request_data, exchange, message["body"], time.time())
                if not message.get("more_body", False):
                    judge.put(self.key, decoder.request_end, exchange, time.time())
            elif message["type"] == "http.disconnect" and not done:
                done = True
                judge.put(self.key, decoder.abort, exchange, time.time())
            return message

        async def tapped_send(message: Message) -> None:
            nonlocal done
            await send(message)
            if done:
                return
            if message["type"] == "http.response.start":
                judge.put(self.key, decoder.response_headers, exchange, message["status"], message.get("headers", []),
                          time.time())
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    judge.put(self.key, decoder.response_data, exchange, message["body"], time.time())
                if not message.get("more_body", False):
                    done = True
                    judge.put(self.key, decoder.response_end, exchange, time.time())

        try:
            await self.app(scope, tapped_receive, tapped_send)
        finally:
            if not done:
                done = True
                judge.put(self.key, decoder.abort, exchange, time.time())
