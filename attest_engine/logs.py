"""Structured JSON logs on stderr (Attest protocol v1 §1.3 "Stderr Logging").

One JSON object per line: `{"level","ts","logger":"engine","msg", ...fields}`, filtered by `--log-level`.

SDKs may never read the engine's stderr (attest-ai 0.9.0 opens it as a pipe and never drains it), so a
write could block once the pipe's buffer is full. Lines are therefore handed to one writer thread through
a bounded queue: when the queue is full a line is dropped (and counted), never waited for, so logging can
not stall evaluation or the protocol on stdout.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from datetime import UTC, datetime
from typing import Any

LEVELS = {"debug": 10, "info": 20, "warn": 30, "error": 40}
"""§1.3 log levels, in increasing severity."""

LEVEL_ALIASES = {"warning": "warn"}

_QUEUE_LINES = 1000


class JsonLogger:
    """Writes §1.3 log lines to a file descriptor from a background thread; drops lines it can't queue."""

    def __init__(self, level: str = "warn", fd: int = 2) -> None:
        self._threshold = LEVELS[level]
        self._fd = fd
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUE_LINES)
        self.dropped = 0
        self._thread = threading.Thread(target=self._write_loop, name="attest-engine-log", daemon=True)
        self._thread.start()

    def log(self, level: str, msg: str, **fields: Any) -> None:
        """Queue one log line at `level` with extra `fields`."""
        if LEVELS[level] < self._threshold:
            return
        now = datetime.now(UTC)
        record = {
            "level": level,
            "ts": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            "logger": "engine",
            "msg": msg,
            **fields,
        }
        line = json.dumps(record, separators=(",", ":"), default=str).encode() + b"\n"
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            self.dropped += 1

    def debug(self, msg: str, **fields: Any) -> None:
        self.log("debug", msg, **fields)

    def info(self, msg: str, **fields: Any) -> None:
        self.log("info", msg, **fields)

    def warn(self, msg: str, **fields: Any) -> None:
        self.log("warn", msg, **fields)

    def error(self, msg: str, **fields: Any) -> None:
        self.log("error", msg, **fields)

    def close(self, timeout_s: float = 1.0) -> None:
        """Flush what is queued, waiting at most `timeout_s` (the reader of stderr may be gone)."""
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            return
        self._thread.join(timeout_s)

    def _write_loop(self) -> None:
        while (line := self._queue.get()) is not None:
            try:
                while line:
                    line = line[os.write(self._fd, line) :]
            except OSError:
                return  # stderr closed: nothing more can be logged
