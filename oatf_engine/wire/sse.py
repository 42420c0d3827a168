"""Incremental `text/event-stream` parser: WHATWG HTML Living Standard §9.2.6 "Interpreting an event stream".

Sans-I/O: bytes in, `SSEEvent`s out, in any chunking. What it follows from §9.2.6:
- the stream is decoded as UTF-8 with replacement characters (invalid bytes never raise), one leading BOM is
  dropped, lines end with CRLF, LF or CR (a CRLF split across two chunks is one line end);
- an empty line dispatches the event; a line starting with `:` is a comment; `field: value` loses one space
  after the colon; a line without a colon is a field with an empty value;
- `data` lines are joined with LF; `event` sets the type (default `message`); `id` sets the last event ID
  unless it contains NUL, and it persists across events; `retry` sets the reconnection time when it is all
  ASCII digits; other fields are ignored;
- an event whose data buffer is empty is not dispatched (its type is reset);
- at the end of the stream an incomplete event (no blank line after it) is discarded, not dispatched (`close`).
  `finish` dispatches it instead, its unterminated last line included, as A2A's and AG-UI's JavaScript clients
  read a stream's end (`@a2a-js/sdk`'s `parseSseStream` yields the event under way; `@ag-ui/client` parses what
  is left).

Memory is bounded: an event (or a single line) larger than `max_event_size` characters is dropped whole and
counted in `dropped`; parsing resumes with the next event.
"""

from __future__ import annotations

import codecs
from typing import NamedTuple


class SSEEvent(NamedTuple):
    """One dispatched server-sent event (§9.2.6 "dispatch the event")."""

    event: str
    """The event type: the last `event` field, or `message`."""
    data: str
    """The `data` lines joined with LF."""
    last_event_id: str
    """The last event ID string when the event was dispatched ("" when none was set)."""


class SSEParser:
    """Feed bytes with `feed`, get the events completed by them; `close` at the end of the stream."""

    __slots__ = (
        "_data",
        "_data_size",
        "_decoder",
        "_discarding",
        "_event",
        "_last_id",
        "_line_overflow",
        "_pending",
        "_pending_size",
        "_skip_lf",
        "_started",
        "dropped",
        "max_event_size",
        "retry",
    )

    def __init__(self, max_event_size: int = 1 << 20) -> None:
        self.max_event_size = max_event_size
        """Largest event (sum of its data lines) or line kept, in characters."""
        self.retry: int | None = None
        """The last valid `retry` field (milliseconds), if any."""
        self.dropped = 0
        """How many events were dropped for exceeding `max_event_size`."""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._started = False  # a non-empty piece of text has been seen (the BOM check is done)
        self._skip_lf = False  # the previous text ended with CR: a leading LF completes that CRLF
        self._pending: list[str] = []  # pieces of the line not yet terminated
        self._pending_size = 0
        self._line_overflow = False  # the unterminated line grew too long: drop it when it ends
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._last_id = ""
        self._discarding = False  # the event being read is oversize: ignore its lines until the blank line

    @property
    def in_event(self) -> bool:
        """Whether an event has started but not been dispatched (what `close` would discard)."""
        return bool(self._data or self._event or self._pending or self._discarding or self._line_overflow)

    @property
    def last_event_id(self) -> str:
        """The stream's last event ID so far ("" when none was set): what a client would resume from."""
        return self._last_id

    def feed(self, data: bytes) -> list[SSEEvent]:
        """The events completed by `data` (the next bytes of the stream)."""
        text = self._decoder.decode(data)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        return self._feed_text(text)

    def close(self) -> bool:
        """End of stream: discard any incomplete event (§9.2.6). True when one was discarded."""
        discarded = self.in_event
        self._decoder.reset()
        self._pending.clear()
        self._pending_size = 0
        self._line_overflow = False
        self._reset_event()
        return discarded

    def finish(self) -> list[SSEEvent]:
        """End of stream, read as `@a2a-js/sdk` and `@ag-ui/client` read it: the event under way (its unterminated
        last line included) is dispatched, where §9.2.6 discards it (`close`); then the parser is reset as by
        `close`."""
        tail = self._decoder.decode(b"", True)
        events = self._feed_text(tail + "\n\n") if self.in_event or tail else []
        self.close()
        return events

    # --- internals ----------------------------------------------------------------------------------------

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        tail = lines.pop()
        if not lines:  # no line end in this text
            self._add_pending(tail)
            return []
        if self._pending or self._line_overflow:
            self._pending.append(lines[0])
            first = "".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
            if self._line_overflow:
                self._line_overflow = False
                self._start_discarding()
                lines[0] = ":"  # the overlong line is dropped; a comment keeps the line count
            else:
                lines[0] = first  # an overlong one is dropped by _process
        events = self._process(lines)
        if tail:
            self._add_pending(tail)
        return events

    def _add_pending(self, piece: str) -> None:
        if self._line_overflow:
            return
        self._pending.append(piece)
        self._pending_size += len(piece)
        if self._pending_size > self.max_event_size:
            self._pending.clear()
            self._pending_size = 0
            self._line_overflow = True

    def _process(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for line in lines:
            if not line:
                if self._discarding:
                    self._discarding = False
                    self._reset_event()
                elif self._data:
                    events.append(SSEEvent(self._event or "message", "\n".join(self._data), self._last_id))
                    self._reset_event()
                else:
                    self._event = ""
                continue
            if self._discarding:
                continue
            if len(line) > self.max_event_size:
                self._start_discarding()
                continue
            if line[0] == ":":
                continue
            name, colon, value = line.partition(":")
            if colon and value[:1] == " ":
                value = value[1:]
            if name == "data":
                self._data.append(value)
                self._data_size += len(value) + 1
                if self._data_size > self.max_event_size:
                    self._start_discarding()
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\0" not in value:
                    self._last_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry = int(value)
        return events

    def _start_discarding(self) -> None:
        if not self._discarding:
            self.dropped += 1
        self._discarding = True
        self._data.clear()
        self._data_size = 0

    def _reset_event(self) -> None:
        self._data.clear()
        self._data_size = 0
        self._event = ""
        self._discarding = False
