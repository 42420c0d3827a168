"""NDJSON framing of the input stream (Attest protocol v1 §1.2 "Message Framing"), sans-I/O.

`LineSplitter` takes bytes as they arrive and yields complete lines (without the `\\n`). A line longer
than `max_line_bytes` is never held in memory: its first `prefix_bytes` are kept (to recover the request's
`id` and `method` for the error answer) and the rest is counted and discarded until its newline. At end of
input an unterminated last line is yielded too. Lines holding only whitespace are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

PREFIX_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    """One complete message line."""

    data: bytes


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A line over the limit: its first bytes and its full length."""

    prefix: bytes
    total_bytes: int


class LineSplitter:
    """Splits an input byte stream into `Line`s and `OversizedLine`s."""

    def __init__(self, max_line_bytes: int, prefix_bytes: int = PREFIX_BYTES) -> None:
        self._max = max_line_bytes
        self._prefix_bytes = prefix_bytes
        self._buffer = bytearray()
        self._discarding: bytes | None = None  # prefix of the oversized line being skipped
        self._discarded = 0

    def feed(self, chunk: bytes) -> Iterator[Line | OversizedLine]:
        """The messages completed by `chunk`."""
        start = 0
        while start < len(chunk):
            if self._discarding is not None:
                newline = chunk.find(b"\n", start)
                end = len(chunk) if newline < 0 else newline
                self._discarded += end - start
                if newline < 0:
                    return
                yield OversizedLine(self._discarding, self._discarded)
                self._discarding = None
                start = newline + 1
                continue
            newline = chunk.find(b"\n", start)
            if newline >= 0 and len(self._buffer) + newline - start <= self._max:
                self._buffer += chunk[start:newline]
                line = bytes(self._buffer)
                self._buffer.clear()
                start = newline + 1
                if line.strip():
                    yield Line(line)
                continue
            end = len(chunk) if newline < 0 else newline
            self._buffer += chunk[start:end]
            if len(self._buffer) > self._max:
                self._discarding = bytes(self._buffer[: self._prefix_bytes])
                self._discarded = len(self._buffer)
                self._buffer.clear()
                if newline >= 0:
                    yield OversizedLine(self._discarding, self._discarded)
                    self._discarding = None
                    start = newline + 1
                    continue
            return

    def finish(self) -> Iterator[Line | OversizedLine]:
        """The unterminated last line, if any, at end of input."""
        if self._discarding is not None:
            yield OversizedLine(self._discarding, self._discarded)
        elif self._buffer.strip():
            yield Line(bytes(self._buffer))
        self._discarding = None
        self._buffer.clear()
