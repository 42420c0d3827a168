"""The sans-I/O NDJSON MCP stdio decoder (`oatf_engine.wire.ndjson`) and the decoder's message stream API."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from oatf_engine.events import UNINSPECTED_EVENT, ObservedEvent
from oatf_engine.wire import DecoderConfig, Diagnostic, WireDecoder
from oatf_engine.wire.ndjson import (
    LineSplitter,
    StdioSession,
    decode_capture,
    endpoint_of,
    is_capture,
    read_capture,
    record_header,
    record_line,
)

SESSION = "stdio:42"


def session(max_body: int = 1 << 20) -> tuple[StdioSession, list[Diagnostic]]:
    diagnostics: list[Diagnostic] = []
    decoder = WireDecoder(DecoderConfig(max_body_size=max_body), on_diagnostic=diagnostics.append)
    return StdioSession(decoder, SESSION, endpoint_of(["npx", "-y", "server"], 42), "stdio"), diagnostics


def feed(stdio: StdioSession, sender: str, *messages: Any) -> list[ObservedEvent]:
    data = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
    return [e for line in stdio.lines(sender, data) for e in stdio.message(sender, line, 1.0)]  # type: ignore[arg-type]


def test_events_follow_the_http_model() -> None:
    stdio, diagnostics = session()
    call = feed(stdio, "client", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "add", "arguments": {"a": 1}}})
    sampling = feed(stdio, "server", {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage",
                                      "params": {"maxTokens": 5}})
    answer = feed(stdio, "client", {"jsonrpc": "2.0", "id": 1, "result": {"model": "m"}})
    result = feed(stdio, "server", {"jsonrpc": "2.0", "id": 1, "result": {"content": []}})
    events = call + sampling + answer + result
    assert [(e.event_type, e.direction, e.sender) for e in events] == [
        ("tools/call", "request", "client"), ("sampling/createMessage", "response", "server"),
        ("sampling/createMessage", "request", "client"), ("tools/call", "response", "server")]
    assert result[0].content == {"content": [], "params": {"name": "add", "arguments": {"a": 1}}}
    assert answer[0].content == {"model": "m", "params": {"maxTokens": 5}}
    assert {e.session_keys["mcp_session"] for e in events} == {SESSION}
    assert {(e.endpoint.host, e.endpoint.port, e.endpoint.path) for e in events} == {("stdio", 42, "/npx")}
    assert [e.seq for e in events] == sorted({e.seq for e in events})
    assert diagnostics == []


def test_each_exchange_of_a_stream_is_a_flow_of_its_own() -> None:
    """A stdio session is one long stream; the episode rules place each exchange by when it began, so each
    request and its answer share a flow, and no other exchange shares it."""
    stdio, _ = session()
    first = feed(stdio, "client", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    note = feed(stdio, "client", {"jsonrpc": "2.0", "method": "notifications/initialized"})
    second = feed(stdio, "client", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "a"}})
    sampling = feed(stdio, "server", {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {}})
    answers = feed(stdio, "server", {"jsonrpc": "2.0", "id": 2, "result": {}},
                   {"jsonrpc": "2.0", "id": 1, "result": {}})
    sampled = feed(stdio, "client", {"jsonrpc": "2.0", "id": 1, "result": {}})
    flows = [e.flow_id for e in (*first, *note, *second, *sampling)]
    assert len(set(flows)) == 4 and all(f.startswith(SESSION + "#") for f in flows)
    assert [e.flow_id for e in answers] == [second[0].flow_id, first[0].flow_id]
    assert sampled[0].flow_id == sampling[0].flow_id


def test_a_response_is_correlated_once() -> None:
    stdio, diagnostics = session()
    feed(stdio, "client", {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert len(feed(stdio, "server", {"jsonrpc": "2.0", "id": 7, "result": {"tools": []}})) == 1
    again = feed(stdio, "server", {"jsonrpc": "2.0", "id": 7, "result": {"tools": []}})
    assert [(e.event_type, e.sender, e.content["code"]) for e in again] == [
        (UNINSPECTED_EVENT, "server", "uncorrelated_response")]
    assert [d.code for d in diagnostics] == ["uncorrelated_response"]


def test_bad_lines_are_diagnosed_not_raised() -> None:
    stdio, diagnostics = session(max_body=64)
    lines = stdio.lines("server", b"server log line\n" + b'{"x": 1}\n' + b"[" * 100 + b"\n\n")
    marks = [e for line in lines for e in stdio.message("server", line, 1.0)]
    assert [(e.event_type, e.sender, e.content["code"]) for e in marks] == [
        (UNINSPECTED_EVENT, "server", "oversize_body")]
    assert [d.code for d in diagnostics] == ["invalid_json", "invalid_jsonrpc", "oversize_body"]


@given(st.binary(max_size=300), st.lists(st.integers(1, 40), max_size=20), st.integers(1, 50))
def test_any_chunking_frames_the_same_lines(data: bytes, cuts: list[int], max_line: int) -> None:
    whole, chunked = LineSplitter(max_line), LineSplitter(max_line)
    expected = whole.feed(data) + [rest for rest in [whole.close()] if rest is not None]
    got, start = [], 0
    for size in [*cuts, len(data)]:
        got += chunked.feed(data[start:start + size])
        start += size
    got += [rest for rest in [chunked.close()] if rest is not None]
    assert got == expected
    assert all(len(line) <= max_line + 1 for line in got)
    assert [line[:max_line + 1] for line in data.split(b"\n")][: len(got)] == got


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=12)
MESSAGE = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0"]) | JSON, "id": st.integers(0, 3) | st.text(max_size=2) | JSON,
    "method": st.sampled_from(["tools/call", "tools/list", "sampling/createMessage", "initialize"]) | JSON,
    "params": JSON, "result": JSON, "error": JSON})
LINE = (st.binary(max_size=80) | MESSAGE.map(lambda m: json.dumps(m).encode())
        | st.lists(MESSAGE, max_size=3).map(lambda b: json.dumps(b).encode()))


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["client", "server"]), LINE), max_size=30))
def test_arbitrary_lines_never_raise(traffic: list[tuple[str, bytes]]) -> None:
    stdio, _ = session(max_body=200)
    for sender, line in traffic:
        for chunk in (line[:5], line[5:] + b"\n"):
            for framed in stdio.lines(sender, chunk):  # type: ignore[arg-type]
                for event in stdio.message(sender, framed, 1.0):  # type: ignore[arg-type]
                    assert event.direction == ("request" if sender == "client" else "response")
    for sender in ("client", "server"):
        stdio.end(sender)  # type: ignore[arg-type]
    stdio.close()


def test_capture_round_trip_keeps_every_byte() -> None:
    lines = [("client", b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'), ("server", b"\xff\xfe log \x00"),
             ("server", b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}\r')]
    data = (record_header(SESSION, 42, ["npx", "server"], "stdio", 1.0)
            + "".join(record_line(sender, line, 2.0 + i) for i, (sender, line) in enumerate(lines))  # type: ignore[arg-type]
            + '{"t": 9, "direction": "requ').encode()  # torn last line: the tap was killed mid-write
    assert is_capture(data)
    capture = read_capture(data)
    assert (capture.session, capture.pid, capture.command) == (SESSION, 42, ["npx", "server"])
    assert [(m.sender, m.line, m.timestamp) for m in capture.messages] == [
        (sender, line, 2.0 + i) for i, (sender, line) in enumerate(lines)]
    events = list(decode_capture(WireDecoder(), capture))
    assert [(e.event_type, e.direction, e.timestamp) for e in events] == [
        ("tools/list", "request", 2.0), ("tools/list", "response", 4.0)]


def test_a_capture_decodes_to_the_same_flows_whatever_was_decoded_before() -> None:
    """`oatf evaluate` decodes a tap's capture with the proxy's recording and other captures, in one decoder:
    the flows a report cites are numbered within the stream, as the tap numbered them live (its decoder saw
    that stream alone)."""
    lines = [("client", b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'),
             ("server", b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}')]
    capture = read_capture((record_header(SESSION, 42, ["server"], "stdio", 1.0)
                            + "".join(record_line(sender, line, 2.0) for sender, line in lines)).encode())  # type: ignore[arg-type]
    alone = [e.flow_id for e in decode_capture(WireDecoder(), capture)]
    decoder = WireDecoder()
    other = StdioSession(decoder, "stdio:7", endpoint_of(["other"], 7), "stdio")
    other.message("client", b'{"jsonrpc":"2.0","method":"notifications/initialized"}', 1.0)
    other.message("client", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 1.0)
    assert [e.flow_id for e in decode_capture(decoder, capture)] == alone == [f"{SESSION}#1", f"{SESSION}#1"]


def test_other_recordings_are_not_captures() -> None:
    assert not is_capture(b'{\n  "log": {"version": "1.2", "entries": []}}')  # HAR, pretty-printed
    assert not is_capture(b'{"log": {"version": "1.2", "entries": []}}')  # HAR, one line
    assert not is_capture(b"1234:5:state;...")  # a mitmproxy flow file (tnetstring)
