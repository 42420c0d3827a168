"""The engine on stdin/stdout (Attest protocol v1 §1.1 "Mechanism", §1.2 framing, §1.4 lifecycle).

Two threads do the blocking I/O so the event loop never waits on a pipe and any kind of stdin/stdout
(pipe, file, terminal) works:

- the reader reads stdin in chunks, frames lines (`ndjson.LineSplitter`), parses each (`server.parse_item`)
  and hands it to the engine in arrival order, waiting while the engine applies back-pressure; at end of
  input it tells the engine, which drains and stops;
- the writer writes response lines to stdout in the order the engine emits them. Only response lines ever
  go to stdout. If stdout is closed (the client went away) responses are dropped and the engine goes on
  until its input ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import threading
from concurrent.futures import CancelledError

from .assertions import Providers
from .config import EngineConfig
from .logs import JsonLogger
from .ndjson import LineSplitter
from .server import Engine, parse_item

_READ_CHUNK = 1 << 20


class StdoutWriter:
    """Writes lines to a file descriptor from a dedicated thread, in order."""

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.broken = False
        self._thread = threading.Thread(target=self._write_loop, name="attest-engine-stdout", daemon=True)
        self._thread.start()

    def write(self, line: bytes) -> None:
        self._queue.put(line)

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued, then stop (waiting at most `timeout_s` for a stalled reader)."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _write_loop(self) -> None:
        while (line := self._queue.get()) is not None:
            if self.broken:
                continue
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError:
                self.broken = True


def _read_loop(loop: asyncio.AbstractEventLoop, engine: Engine, max_line_bytes: int) -> None:
    splitter = LineSplitter(max_line_bytes)
    while True:
        try:
            chunk = os.read(0, _READ_CHUNK)
        except OSError:
            chunk = b""
        for item in splitter.feed(chunk) if chunk else splitter.finish():
            try:
                keep_reading = asyncio.run_coroutine_threadsafe(engine.admit(parse_item(item)), loop).result()
            except (RuntimeError, CancelledError):  # the engine stopped (a signal) while this line waited
                return
            if not keep_reading:
                return
        if not chunk:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(engine.input_ended)
            return


async def serve(config: EngineConfig, logger: JsonLogger, providers: Providers) -> None:
    """Run the engine on this process's stdin and stdout until `shutdown`, end of input or SIGTERM/SIGINT."""
    loop = asyncio.get_running_loop()
    writer = StdoutWriter()
    engine = Engine(config, logger, writer.write, providers)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, engine.input_ended)
    reader = threading.Thread(
        target=_read_loop, args=(loop, engine, config.max_message_bytes), name="attest-engine-stdin", daemon=True
    )
    reader.start()
    logger.info("engine started", capabilities=engine.session.capabilities, pid=os.getpid())
    await engine.stopped.wait()
    writer.close()
