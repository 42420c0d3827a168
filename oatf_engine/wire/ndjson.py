"""MCP's stdio transport (MCP 2025-11-25 "Transports", stdio): the client writes JSON-RPC messages to the
server's stdin and reads the server's from its stdout, "delimited by newlines" and never containing one.
Sans-I/O: bytes in (one direction at a time, in any chunking), `ObservedEvent`s out.

- `LineSplitter` frames one direction's bytes into lines (without the `\\n`; a `\\r` before it is JSON
  whitespace), holding at most `max_line + 1` bytes whatever the peer writes.
- `StdioSession` is one stdio session: the client (the agent, writing to stdin) sends `request`s, the server
  (the child's stdout) `response`s, exactly as the HTTP client and server do (`oatf_engine.events`). Each line is
  decoded by `WireDecoder.stream_message`, the JSON-RPC → MCP event logic the HTTP transports use. Every
  event carries the session key `mcp_session` = the session's name (`stdio:<pid>` for `oatf tap`), and as its
  client `<agent>:<pid>`: stdio has no client address, so the agent is named by whoever runs the server
  (`oatf tap --agent`: a name of `oatf_agents` or a host, by default the local host; the episode rules join its
  exchanges with that agent's HTTP traffic, `oatf_engine.monitor.episodes`).
- `record_header` / `record_line` / `read_capture` / `decode_capture`: the NDJSON capture `oatf tap --record`
  writes and `oatf evaluate` replays — a header line `{"oatf_stdio": 1, "session": …, "pid": …, "command":
  […], "agent": …, "t": …}` (a capture without `agent` is replayed with agent `stdio`, as it was taken),
  then one line per observed message `{"t": <seconds since the epoch>, "direction":
  "request"|"response", "line": <the line as sent>}` (undecodable bytes kept as surrogate escapes, so replay
  sees the same bytes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any, NamedTuple

from oatf_engine.events import DIRECTION, Endpoint, ObservedEvent, Role, Side

from .decoder import WireDecoder

RECORD_FORMAT = "oatf_stdio"
"""The key whose presence in a capture's first line marks an `oatf tap --record` capture."""
RECORD_VERSION = 1
_SENDER: dict[Role, Side] = {role: side for side, role in DIRECTION.items()}


class LineSplitter:
    """One direction's bytes framed into lines. A line longer than `max_line` bytes is handed on cut to
    `max_line + 1` bytes (too long to inspect: the decoder says so) and the rest of it skipped."""

    __slots__ = ("_buffer", "_skipping", "max_line")

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes]:
        """The lines `data` completes, in order."""
        lines: list[bytes] = []
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            if not self._skipping:
                lines.append(self._take(data[start:end]))
            self._skipping = False
            start = end + 1
        if not self._skipping and start < len(data):
            self._buffer += data[start:]
            if len(self._buffer) > self.max_line:
                lines.append(self._take(b""))
                self._skipping = True
        return lines

    def gap(self) -> None:
        """Bytes of the stream were left out: what is buffered is dropped, and lines resume after the next
        newline."""
        self._buffer.clear()
        self._skipping = True

    def close(self) -> bytes | None:
        """The stream ended: its last line when it was not newline-terminated."""
        rest = self._take(b"") if self._buffer else None
        self._skipping = False
        return rest

    def _take(self, tail: bytes) -> bytes:
        """The buffered start of a line and its `tail`, cut to `max_line + 1` bytes; the buffer emptied."""
        line = bytes(self._buffer) + tail if self._buffer else tail
        self._buffer.clear()
        return line[: self.max_line + 1]


class StdioSession:
    """One MCP stdio session decoded into events (see the module docstring)."""

    def __init__(self, decoder: WireDecoder, session: str, endpoint: Endpoint, agent: str) -> None:
        self.decoder = decoder
        self.session = session
        decoder.open_stream(session, endpoint, f"{agent}:{endpoint.port}", {"mcp_session": session})
        limit = decoder.config.max_body_size
        self._splitters: dict[Side, LineSplitter] = {"client": LineSplitter(limit), "server": LineSplitter(limit)}

    def lines(self, sender: Side, data: bytes) -> list[bytes]:
        """The lines `sender`'s next bytes complete (`LineSplitter`, bounded by the decoder's `max_body_size`)."""
        return self._splitters[sender].feed(data)

    def gap(self, sender: Side) -> None:
        """Bytes `sender` sent were left out (`LineSplitter.gap`)."""
        self._splitters[sender].gap()

    def end(self, sender: Side) -> bytes | None:
        """`sender`'s stream ended: its unterminated last line, if any."""
        return self._splitters[sender].close()

    def message(self, sender: Side, line: bytes, timestamp: float) -> list[ObservedEvent]:
        """The events of one line `sender` sent; a blank line is none."""
        if not line.strip():
            return []
        return self.decoder.stream_message(self.session, line, sender, timestamp)

    def close(self) -> None:
        """Forget the session in the decoder."""
        self.decoder.close_stream(self.session)


def endpoint_of(command: list[str], pid: int) -> Endpoint:
    """The endpoint a stdio server's events name: host `stdio`, the child's pid as port, `/<program name>`."""
    return Endpoint("stdio", pid, "/" + (PurePath(command[0]).name if command else ""))


def record_header(session: str, pid: int, command: list[str], agent: str, timestamp: float) -> str:
    """A capture's first line (with its newline)."""
    return json.dumps({RECORD_FORMAT: RECORD_VERSION, "session": session, "pid": pid, "command": command,
                       "agent": agent, "t": timestamp}) + "\n"


def record_line(sender: Side, line: bytes, timestamp: float) -> str:
    """A capture's line for one observed message (with its newline)."""
    text = line.decode("utf-8", "surrogateescape")
    return json.dumps({"t": timestamp, "direction": DIRECTION[sender], "line": text}) + "\n"


class Recorded(NamedTuple):
    """One message of a capture."""

    sender: Side
    line: bytes
    timestamp: float


class Capture(NamedTuple):
    """A capture read back: its session, the command it ran, its agent, and its messages."""

    session: str
    pid: int
    command: list[str]
    agent: str
    messages: list[Recorded]


def is_capture(data: bytes) -> bool:
    """Whether a file's bytes are an `oatf tap --record` capture (its first line is our header)."""
    first = data.split(b"\n", 1)[0]
    if not first.lstrip().startswith(b"{"):
        return False
    try:
        header = json.loads(first)
    except ValueError:
        return False
    return isinstance(header, dict) and RECORD_FORMAT in header


def read_capture(data: bytes) -> Capture:
    """A capture's content; raises ValueError naming the first bad line. A torn last line (the tap was killed
    mid-write) is ignored."""
    lines = data.split(b"\n")
    header = json.loads(lines[0])
    if header.get(RECORD_FORMAT) != RECORD_VERSION:
        raise ValueError(f"unsupported capture version {header.get(RECORD_FORMAT)!r}")
    messages = []
    last = len(lines) - 1
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        try:
            messages.append(_recorded(json.loads(raw)))
        except (ValueError, KeyError, TypeError) as exc:
            if number - 1 == last:
                break  # torn last line
            raise ValueError(f"line {number}: not a capture record ({exc})") from None
    return Capture(str(header["session"]), int(header.get("pid", 0)), list(header.get("command", [])),
                   str(header.get("agent", "stdio")), messages)


def _recorded(record: Any) -> Recorded:
    return Recorded(_SENDER[record["direction"]], record["line"].encode("utf-8", "surrogateescape"),
                    float(record["t"]))


def decode_capture(decoder: WireDecoder, capture: Capture) -> Iterator[ObservedEvent]:
    """The events of a capture, decoded as `oatf tap` decoded them live."""
    session = StdioSession(decoder, capture.session, endpoint_of(capture.command, capture.pid), capture.agent)
    try:
        for message in capture.messages:
            yield from session.message(message.sender, message.line, message.timestamp)
    finally:
        session.close()
