"""The shared monitor's feed: how `oatf tap` hands its decoded events to one monitor that also judges the
agent's other traffic (the addon's `oatf_listen`, or `oatf monitor --listen`), so one agent has one judge.

**Frames.** A Unix stream socket (mode 0600: only its owner may feed it) carrying length-prefixed frames both
ways: a 4-byte big-endian length, then that many bytes of one UTF-8 JSON object (never pickle: a socket's
bytes are not trusted to build objects). At most `MAX_FRAME` bytes each.

    tap → monitor: {"feed": 1, "source": "<what is feeding>"} first, then {"events": [event, ...]}, ...
    monitor → tap: {"ready": 1} after the hello, then {"ack": n} after each events frame: n events so far
                   handed to the monitor's queue

An event is `oatf_engine.journal.encode_event`'s JSON list of its fields, checked field by field when read
(`decode_event`). Events keep their flow ids, times, clients and session keys; the monitor renumbers their
`seq` (`REMOTE_SEQ_BASE` up, above every number a proxy's decoder gives) so sequence numbers stay unique
across every source.

**Nothing lost.** The tap keeps each event until it is acknowledged (`FeedClient.unacked`); when the
connection fails — the monitor stopped or died — the unacknowledged events are the tap's to judge (it falls
back to judging alone). A frame that is not a frame (a length over `MAX_FRAME`, bytes that are not a JSON
object, an event that does not decode) is a counted diagnostic: that connection is dropped (its peer falls
back), the monitor serves the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import select
import socket
import stat
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from oatf_engine.events import ObservedEvent
from oatf_engine.journal import decode_event, encode_event

FEED_VERSION = 1
SOCKET_NAME = "monitor.sock"
"""The socket's name in a report directory when the monitor is told to listen without a path."""
MAX_FRAME = 256 << 20
"""A frame's largest body: an events frame holds one decoded message's events at least (a body of up to
`oatf_wire_max_body`, JSON-escaped, in content and envelope)."""
MAX_CONNECTIONS = 256
REMOTE_SEQ_BASE = 1 << 48
HANDSHAKE_SECONDS = 5.0
"""How long a tap waits for the monitor's `ready` (and, at its end, for the last acknowledgements)."""
DRAIN_SECONDS = 1.0
"""When the monitor stops, how long it goes on reading what its feeds already sent."""
MAX_UNACKED = 10_000
"""Events a tap sends ahead of the monitor's acknowledgements before it waits for them."""
_LENGTH = struct.Struct(">I")
_SEQ = itertools.count(REMOTE_SEQ_BASE)


class FrameError(ValueError):
    """Bytes that are not a frame of this protocol."""


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), default=str).encode("utf-8", "surrogatepass")
    if len(body) > MAX_FRAME:
        raise FrameError(f"a frame of {len(body)} bytes is over {MAX_FRAME}")
    return _LENGTH.pack(len(body)) + body


class FrameDecoder:
    """One direction's bytes, in any chunking, framed into messages. Sans-I/O."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The messages `data` completes, in order; FrameError at the first bad frame (the stream is then
        unusable: a connection is dropped)."""
        self._buffer += data
        messages: list[dict[str, Any]] = []
        while len(self._buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self._buffer)
            if length > self.max_frame:
                raise FrameError(f"frame length {length} is over {self.max_frame}")
            if len(self._buffer) < _LENGTH.size + length:
                break
            body = bytes(self._buffer[_LENGTH.size:_LENGTH.size + length])
            del self._buffer[:_LENGTH.size + length]
            try:
                message = json.loads(body)
            except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
                raise FrameError(f"a frame that is not JSON ({type(exc).__name__})") from None
            if not isinstance(message, dict):
                raise FrameError("a frame that is not a JSON object")
            messages.append(message)
        return messages

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held."""
        return len(self._buffer)


def decode_events(message: dict[str, Any]) -> list[ObservedEvent]:
    """The events of an events frame, renumbered (see the module docstring); FrameError when it holds
    anything else."""
    fields = message.get("events")
    if not isinstance(fields, list):
        raise FrameError("an events frame without a list of events")
    try:
        return [dataclasses.replace(decode_event(event), seq=next(_SEQ)) for event in fields]
    except (ValueError, TypeError) as exc:
        raise FrameError(f"an event that does not decode: {exc}") from None


class FeedServer:
    """Serves the feed on a Unix socket at `path`: each connection's events go to `on_events` (called on that
    connection's thread, in order), what happens to `on_message` (connections, dropped ones). `rejected`
    counts the connections dropped for a bad frame, `refused` those beyond `MAX_CONNECTIONS`."""

    def __init__(self, path: str, on_events: Callable[[list[ObservedEvent]], None],
                 on_message: Callable[[str], None]) -> None:
        self.path = path
        self.on_events = on_events
        self.on_message = on_message
        self.rejected = 0
        self.refused = 0
        self.received = 0
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._stopping = threading.Event()
        self._listener = _bind(path)
        self._accepter = threading.Thread(target=self._accept, name="oatf-feed-accept", daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                readable, _, _ = select.select([self._listener], [], [], 0.2)
                if not readable:
                    continue
                conn, _ = self._listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                continue
            with self._lock:
                if len(self._connections) >= MAX_CONNECTIONS:
                    self.refused += 1
                    conn.close()
                    continue
                thread = threading.Thread(target=self._serve, args=(conn,), name="oatf-feed-conn", daemon=True)
                self._connections[conn] = thread
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        source: str | None = None
        acked = 0
        try:
            while True:
                data = _recv(conn, self._stopping)
                if not data:
                    return
                for message in decoder.feed(data):
                    if source is None:
                        if message.get("feed") != FEED_VERSION:
                            raise FrameError(f"a first frame that is not a feed {FEED_VERSION} hello")
                        source = str(message.get("source", "?"))
                        conn.sendall(encode_frame({"ready": FEED_VERSION}))
                        self.on_message(f"feed: {source} connected")
                        continue
                    events = decode_events(message)
                    if events:
                        self.on_events(events)
                    acked += len(events)
                    self.received += len(events)
                    conn.sendall(encode_frame({"ack": acked}))
        except FrameError as exc:
            self.rejected += 1
            self.on_message(f"feed: connection from {source or 'an unknown source'} dropped: {exc}")
        except OSError:
            pass  # the peer went away: it judges what was not acknowledged
        finally:
            with self._lock:
                self._connections.pop(conn, None)
            conn.close()
            if source is not None:
                self.on_message(f"feed: {source} disconnected ({acked} event(s) received)")

    def close(self) -> None:
        """Stop serving: no new connection; each open one reads what its peer already sent, then is closed
        (its peer judges the rest); the socket file is removed."""
        self._stopping.set()
        self._accepter.join()
        self._listener.close()
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        with self._lock:
            threads = list(self._connections.values())
        for thread in threads:
            thread.join(HANDSHAKE_SECONDS)


def _bind(path: str) -> socket.socket:
    """A listening socket at `path`, mode 0600 before anyone can connect; a stale socket file (nobody
    listening) is replaced, a live one or any other file is an error."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise FileExistsError(f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # stale: its monitor is gone
        else:
            raise OSError(f"{path}: another monitor is listening there")
        finally:
            probe.close()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        os.chmod(path, 0o600)  # before listen(): until then a connection is refused
        listener.listen(64)
    except OSError:
        listener.close()
        raise
    return listener


def _recv(conn: socket.socket, stopping: threading.Event) -> bytes:
    """The next bytes from `conn`; b"" at its end, or once stopping and nothing more came within
    `DRAIN_SECONDS` of the stop."""
    deadline: float | None = None
    while True:
        readable, _, _ = select.select([conn], [], [], 0.2)
        if stopping.is_set():
            deadline = deadline or time.monotonic() + DRAIN_SECONDS
            if not readable or time.monotonic() > deadline:
                return b""
        if readable:
            return conn.recv(1 << 16)


class FeedClient:
    """A tap's end of the feed: connects and shakes hands (OSError, or FrameError from something that is not
    a monitor, when it cannot), then `send`s events. Every event is kept in `unacked` until the monitor
    acknowledges it."""

    def __init__(self, path: str, source: str, timeout: float = HANDSHAKE_SECONDS) -> None:
        self.unacked: deque[ObservedEvent] = deque()
        self.timeout = timeout
        self._acked = 0
        self._sent = 0
        self._decoder = FrameDecoder()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(path)
            self._sock.sendall(encode_frame({"feed": FEED_VERSION, "source": source}))
            reply = self._read_one()
            if reply.get("ready") != FEED_VERSION:
                raise FrameError(f"{path} did not answer as a monitor")
        except (OSError, FrameError):
            self._sock.close()
            raise

    def send(self, events: Sequence[ObservedEvent]) -> None:
        """Send events (kept until acknowledged; beyond `MAX_UNACKED` waits for acknowledgements); OSError or
        FrameError when the connection failed."""
        if not events:
            return
        self.unacked.extend(events)  # first: whatever fails next, they are the caller's to judge
        self._sent += len(events)
        self._sock.sendall(encode_frame({"events": [encode_event(e) for e in events]}))
        self._take_acks(self._sent - MAX_UNACKED if len(self.unacked) > MAX_UNACKED else None)

    def close(self) -> list[ObservedEvent]:
        """End the feed: wait (up to the timeout) for the monitor to acknowledge what was sent; the events it
        did not acknowledge, to be judged by the caller."""
        with contextlib.suppress(OSError, FrameError):
            self._sock.shutdown(socket.SHUT_WR)
            self._take_acks(self._sent)
        self._sock.close()
        return list(self.unacked)

    def _take_acks(self, until: int | None) -> None:
        """Read the acknowledgements that came (None), or wait for them to reach `until` (the socket's
        timeout between two reads)."""
        if until is None:
            self._sock.setblocking(False)
        try:
            while until is None or self._acked < until:
                try:
                    data = self._sock.recv(1 << 16)
                except BlockingIOError:
                    return
                if not data:
                    raise ConnectionResetError("the monitor closed the feed")
                for message in self._decoder.feed(data):
                    self._ack(message)
        finally:
            self._sock.settimeout(self.timeout)  # sends wait at most that long for the monitor to read

    def _ack(self, message: dict[str, Any]) -> None:
        acked = message.get("ack")
        if not isinstance(acked, int) or not self._acked <= acked <= self._sent:
            raise FrameError("a bad acknowledgement")
        for _ in range(acked - self._acked):
            self.unacked.popleft()
        self._acked = acked

    def _read_one(self) -> dict[str, Any]:
        while True:
            data = self._sock.recv(1 << 16)
            if not data:
                raise ConnectionResetError("the monitor closed the feed")
            messages = self._decoder.feed(data)
            if messages:
                return messages[0]
