"""The shared monitor's feed (`oatf_engine.feed`): frames, the server's handling of bad peers, and the client's
keeping of what was not acknowledged."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oatf_engine.events import Endpoint, ObservedEvent
from oatf_engine.feed import (
    REMOTE_SEQ_BASE,
    FeedClient,
    FeedServer,
    FrameDecoder,
    FrameError,
    encode_frame,
)
from oatf_engine.journal import encode_event

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=10)


def event(n: int = 1, content: Any = None) -> ObservedEvent:
    return ObservedEvent("mcp", "tools/call", "request", "client", content or {"name": "x"}, f"stdio:9#{n}", n,
                         1000.0 + n, Endpoint("stdio", 9, "/server"), "assistant:9", {"mcp_session": "stdio:9"}, n)


@given(st.lists(st.dictionaries(st.text(), json_values, max_size=3), max_size=5),
       st.lists(st.integers(1, 30), max_size=20))
def test_any_chunking_decodes_the_same_messages(messages: list[dict[str, Any]], cuts: list[int]) -> None:
    data = b"".join(encode_frame(m) for m in messages)
    decoder, got, start = FrameDecoder(), [], 0
    for size in [*cuts, len(data)]:
        got += decoder.feed(data[start:start + size])
        start += size
    assert got == json.loads(json.dumps(messages)) and decoder.pending == 0


@given(st.binary(max_size=200), st.lists(st.integers(1, 30), max_size=10))
def test_garbage_is_a_frame_error_never_anything_else(data: bytes, cuts: list[int]) -> None:
    decoder, start = FrameDecoder(max_frame=64), 0
    try:
        for size in [*cuts, len(data)]:
            for message in decoder.feed(data[start:start + size]):
                assert isinstance(message, dict)
            start += size
    except FrameError:
        pass


@pytest.mark.parametrize("frame", [
    struct.pack(">I", 1 << 30),  # a length over the limit: refused before any of it is buffered
    struct.pack(">I", 3) + b"\xff\xfe{",  # not UTF-8 JSON
    struct.pack(">I", 2) + b"[]",  # not an object
    struct.pack(">I", 1000) + b"[" * 1000,  # nested past the parser
])
def test_a_bad_frame_is_a_frame_error(frame: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder(max_frame=1 << 20).feed(frame)


@pytest.fixture
def socket_path() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="oatf-")  # short: a Unix socket's path holds 108 bytes
    yield os.path.join(directory, "monitor.sock")


class Received:
    def __init__(self) -> None:
        self.events: list[ObservedEvent] = []
        self.messages: list[str] = []

    def until(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 10
        while not condition():
            assert time.monotonic() < deadline, self.messages
            time.sleep(0.01)


@pytest.fixture
def served(socket_path: str) -> Iterator[tuple[FeedServer, Received]]:
    received = Received()
    server = FeedServer(socket_path, received.events.extend, received.messages.append)
    yield server, received
    server.close()


def raw(path: str, data: bytes) -> bytes:
    """Send `data` on a new connection; everything the server answers until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(data)
        answer = b""
        while chunk := conn.recv(1 << 16):
            answer += chunk
        return answer


def test_events_arrive_renumbered_and_acknowledged(served: tuple[FeedServer, Received], socket_path: str) -> None:
    server, received = served
    assert stat.S_IMODE(os.stat(socket_path).st_mode) == 0o600
    client = FeedClient(socket_path, "test")
    client.send([event(1), event(2)])
    client.send([event(3, {"deep": [[["x"]]]})])
    assert client.close() == []  # every event acknowledged
    received.until(lambda: len(received.events) == 3)
    assert [e.flow_id for e in received.events] == ["stdio:9#1", "stdio:9#2", "stdio:9#3"]
    assert all(e.seq >= REMOTE_SEQ_BASE for e in received.events)
    assert [e.seq for e in received.events] == sorted({e.seq for e in received.events})
    assert received.events[2].content == {"deep": [[["x"]]]} and received.events[0].client == "assistant:9"
    assert server.received == 3 and server.rejected == 0


@pytest.mark.parametrize("data", [
    encode_frame({"events": []}),  # no hello first
    encode_frame({"feed": 1, "source": "t"}) + struct.pack(">I", 1 << 31),
    encode_frame({"feed": 1, "source": "t"}) + encode_frame({"events": [["mcp", "tools/call"]]}),
    encode_frame({"feed": 1, "source": "t"})  # session keys, id, error flag, envelope of the wrong kinds
    + encode_frame({"events": [[*encode_event(event())[:-5], "x", 1, 2, 3, 4]]}),
    encode_frame({"feed": 1, "source": "t"}) + encode_frame({"events": "no"}),
])
def test_a_bad_frame_drops_its_connection_and_the_monitor_serves_on(served: tuple[FeedServer, Received],
                                                                    socket_path: str, data: bytes) -> None:
    server, received = served
    raw(socket_path, data)  # the server closes the connection
    received.until(lambda: server.rejected == 1)
    assert received.events == [] and any("dropped" in m for m in received.messages)
    client = FeedClient(socket_path, "after")
    client.send([event()])
    assert client.close() == [] and len(received.events) == 1


def test_what_the_monitor_did_not_acknowledge_stays_with_the_tap(socket_path: str) -> None:
    """A monitor that takes the events and dies before acknowledging them: the tap keeps them to judge."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(1)

    def monitor() -> None:
        conn, _ = listener.accept()
        conn.recv(1 << 16)
        conn.sendall(encode_frame({"ready": 1}))
        conn.recv(1 << 16)
        conn.close()  # dies without acknowledging

    thread = threading.Thread(target=monitor)
    thread.start()
    client = FeedClient(socket_path, "t")
    with contextlib.suppress(OSError):  # the send may already see the connection fail
        client.send([event(1), event(2)])
    thread.join()
    assert [e.flow_id for e in client.close()] == ["stdio:9#1", "stdio:9#2"]
    listener.close()


def test_a_socket_in_use_or_another_file_is_not_taken(served: tuple[FeedServer, Received], socket_path: str,
                                                      tmp_path: Path) -> None:
    with pytest.raises(OSError, match="another monitor"):
        FeedServer(socket_path, lambda events: None, lambda message: None)
    regular = tmp_path / "file"
    regular.write_text("x")
    with pytest.raises(FileExistsError):
        FeedServer(str(regular), lambda events: None, lambda message: None)


def test_a_stale_socket_is_replaced(socket_path: str) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(socket_path)
    stale.close()  # its monitor died: the file stays, nobody listens
    server = FeedServer(socket_path, lambda events: None, lambda message: None)
    FeedClient(socket_path, "t").close()
    server.close()
    assert not os.path.exists(socket_path)


def test_nobody_listening_is_an_os_error(socket_path: str) -> None:
    with pytest.raises(OSError):
        FeedClient(socket_path, "t")
