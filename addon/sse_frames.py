"""Rewriting a `text/event-stream` as it streams through mitmproxy, whole event by whole event (WHATWG HTML
§9.2.6 event stream framing), for inject mode (`addon.inject`): events not rewritten pass byte for byte, a
partial event waits for its end, so the framing the agent receives stays correct in any chunking."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from oatf_engine.wire.sse import SSEParser

log = logging.getLogger("oatf.inject")

MAX_EVENT = 8 << 20
"""An SSE event larger than this (bytes) passes unaltered, and so does the rest of its stream."""
PUSH = b"\x00oatf inject: push\x00"
"""The chunk inject mode hands a stream function (by identity, `addon.inject_push`) to let it send what waits
for the agent: not server data, never forwarded as such."""
_LINE = re.compile(rb"([^\r\n]*)(\r\n|\r|\n)")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class EventFramer:
    """Cuts a `text/event-stream` into whole events, byte for byte, in any chunking (WHATWG HTML §9.2.6: lines
    end with CRLF, LF or CR; an empty line ends an event). Bytes after the last whole event wait in `pending`."""

    def __init__(self) -> None:
        self.pending = bytearray()
        self._line = 0  # where the unterminated line starts in `pending`

    def feed(self, data: bytes) -> list[bytes]:
        """The events `data` completes, each with its lines and the empty line that ends it."""
        self.pending += data
        events: list[bytes] = []
        start, line = 0, self._line
        for match in _LINE_END.finditer(self.pending, line):
            if match.group() == b"\r" and match.end() == len(self.pending):
                break  # perhaps the first half of a CRLF: wait for the next byte
            if match.start() == line:
                events.append(bytes(self.pending[start:match.end()]))
                start = match.end()
            line = match.end()
        del self.pending[:start]
        self._line = line - start
        return events

    def drain(self) -> bytes:
        """Every byte still waiting (the end of the stream, or a stream given up on), unaltered."""
        rest = bytes(self.pending)
        self.pending.clear()
        self._line = 0
        return rest


class EventRewriter:
    """A `stream` callable for mitmproxy, run after `inner` (one another addon set, if any): the stream cut into
    whole events, each handed to `rewrite` (which returns the bytes the agent gets in its place: itself,
    something else, several events, nothing). Once `passing` is set (by `rewrite`, or by an event over
    `MAX_EVENT`), everything passes as it came. Between whole events, `waiting()` may add events of its own
    (notifications pushed into a stream); the `PUSH` chunk lets it do so when the server sends nothing."""

    def __init__(self, flow_id: str, inner: Any, rewrite: Callable[[bytes], bytes],
                 waiting: Callable[[], bytes] = lambda: b"") -> None:
        self.flow_id = flow_id
        self.previous = inner if callable(inner) else None
        self.rewrite = rewrite
        self.waiting = waiting
        self.framer = EventFramer()
        self.passing = False

    def __call__(self, data: bytes) -> bytes:
        pushed = data is PUSH
        out = data if pushed or self.previous is None else self.previous(data)
        chunk = b"" if pushed else out if isinstance(out, bytes) else b"".join(out)
        if self.passing:
            return self.framer.drain() + chunk
        events = self.framer.feed(chunk) if chunk else []
        rewritten = b"".join(self.rewrite(raw) for raw in events)
        if len(self.framer.pending) > MAX_EVENT:
            self.passing = True
            log.warning("oatf inject: flow %s: an SSE event over %d bytes: the stream passes unaltered",
                        self.flow_id, MAX_EVENT)
        if self.passing or (not chunk and not pushed):  # the end of the stream: a partial event as it came
            return rewritten + self.framer.drain()
        return rewritten + (self.waiting() if not self.framer.pending else b"")


def sse_event(message: Mapping[str, Any]) -> bytes:
    """One JSON-RPC message as an SSE `message` event."""
    return b"event: message\ndata: " + json_bytes(message) + b"\n\n"


def with_data(raw: bytes, data: bytes) -> bytes:
    """The SSE event `raw` with its `data` lines replaced by one line carrying `data` (JSON: no line break);
    its other fields and comments stay as they were, in order."""
    out: list[bytes] = []
    replaced = False
    for match in _LINE.finditer(raw):
        content, end = match.groups()
        name = content.removeprefix(_BOM).split(b":", 1)[0] if content else b""
        if name != b"data":
            out.append(content + end)
        elif not replaced:
            out.append(b"data: " + data + end)
            replaced = True
    return b"".join(out)


def json_bytes(value: Any) -> bytes:
    """Compact JSON, as the agent gets it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def event_data(raw: bytes) -> Any:
    """The JSON value one whole SSE event carries, or None (no data, not JSON)."""
    parsed = SSEParser(MAX_EVENT).feed(raw) if raw else []
    if len(parsed) != 1:
        return None
    try:
        return json.loads(parsed[0].data)
    except ValueError:
        return None

