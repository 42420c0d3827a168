"""`addon.flow_file` reads flow files as mitmproxy's `FlowReader` does: the same HTTP flows (views of the parts
replay reads, for the records it recognises; mitmproxy's own flows for the others) and the same decoded events;
unreadable content is a `FlowReadException` (`addon.recordings.read_flows`: a `ReplayError`), never another error."""

from __future__ import annotations

import dataclasses
import io
import json
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mitmproxy import http
from mitmproxy.addons.savehar import SaveHar
from mitmproxy.exceptions import FlowReadException
from mitmproxy.io import FlowReader, FlowWriter, tnetstring
from mitmproxy.test import tflow, tutils

from addon import flow_file
from addon.flow_file import AnyHTTPFlow, RecordedFlow, read_flow_file
from addon.recordings import ReplayError, decode_flows, read_capture_file, read_flows
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.ndjson import record_header, record_line
from testing import sessions
from tests.oatf_engine.wire.replay import FIXTURES


def written(flows: list[Any]) -> bytes:
    out = io.BytesIO()
    writer = FlowWriter(out)
    for flow in flows:
        writer.add(flow)
    return out.getvalue()


def read_by_mitmproxy(data: bytes) -> list[http.HTTPFlow]:
    return [f for f in FlowReader(io.BytesIO(data)).stream() if isinstance(f, http.HTTPFlow)]


def decoded(flows: list[Any]) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """The events (as tuples) and diagnostics of replaying `flows` in recorded order."""
    diagnostics: list[Any] = []
    ordered = sorted(flows, key=lambda f: f.request.timestamp_start)
    events = decode_flows(WireDecoder(on_diagnostic=diagnostics.append), ordered)
    return [dataclasses.astuple(e) for e in events], diagnostics


def replay_view(flow: AnyHTTPFlow) -> tuple[Any, ...]:
    """Everything replay reads of a flow (mitmproxy's or a view), comparable."""
    request, response, error = flow.request, flow.response, flow.error

    def fields(headers: Any) -> tuple[tuple[bytes, bytes], ...]:
        return tuple(headers.fields) if isinstance(headers, http.Headers) else headers

    return (
        flow.id, flow.client_conn.peername, flow.metadata,
        (request.method, request.url, fields(request.headers), request.raw_content, request.timestamp_start,
         request.timestamp_end),
        response and (response.status_code, fields(response.headers), response.raw_content,
                      response.timestamp_start, response.timestamp_end),
        error and (error.msg, error.timestamp),
    )


def assert_read_as_mitmproxy_reads(data: bytes, *, fast: bool = True) -> list[AnyHTTPFlow]:
    """`data` reads as mitmproxy reads it, and replays to the same events; with `fast`, every flow is a view."""
    ours, theirs = read_flow_file(data), read_by_mitmproxy(data)
    assert [replay_view(f) for f in ours] == [replay_view(f) for f in theirs]
    assert decoded(ours) == decoded(theirs)
    if fast:
        assert all(isinstance(f, RecordedFlow) for f in ours)
    return ours


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.mitm")), ids=lambda p: p.stem)
def test_recorded_fixtures(path: Path) -> None:
    flows = assert_read_as_mitmproxy_reads(path.read_bytes())
    assert decoded(flows)[0]


def test_attack_library_sessions() -> None:
    """Every attack's recorded sessions (MCP JSON and SSE answers, A2A streams, AG-UI runs)."""
    flows = [f for attack_id in sessions.script_ids() for variant in sessions.VARIANTS
             for f in sessions.to_flows(sessions.play(sessions.load_script(attack_id), variant), seed=attack_id)]
    assert len(decoded(assert_read_as_mitmproxy_reads(written(flows)))[0]) > len(flows)


def edge_flows() -> list[http.HTTPFlow]:
    """HTTP flows with what a URL, a body, headers, an error and metadata can be."""
    json_rpc = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    headers = http.Headers([(b"Content-Type", b"application/json"), (b"MCP-Session-Id", b"s1"),
                            (b"mcp-session-id", b"s2"), (b"X-Bytes", b"\xff\xfe")])
    flows = [
        tflow.tflow(resp=True),  # integer timestamps
        tflow.tflow(err=True),  # no response, an error
        tflow.tflow(resp=True, err=True),
        tflow.tflow(resp=True, ws=True),
        tflow.tflow(req=tutils.treq(method=b"post", content=json_rpc, headers=headers, timestamp_end=None),
                    resp=tutils.tresp(content=None, timestamp_end=None)),
        tflow.tflow(req=tutils.treq(scheme=b"https", port=443, path=b"/caf\xc3\xa9?q=\xff")),
        tflow.tflow(req=tutils.treq(scheme=b"http", port=443, host="::1")),
        tflow.tflow(req=tutils.treq(scheme=b"http", port=80, host="xn--bcher-kva.example", content=None)),
        tflow.tflow(req=tutils.treq(method=b"CONNECT", host="example.com", port=443, path=b"", authority=b"x")),
        tflow.tflow(req=tutils.treq(method=b"OPTIONS", path=b"*")),
    ]
    sse = tflow.tflow(resp=tutils.tresp(headers=http.Headers([(b"content-type", b"text/event-stream")]),
                                        content=b'data: {"type": "RUN_STARTED"}\n\ndata: {"type": "CUSTOM"}\n\n'))
    sse.request.content = json.dumps({"threadId": "t", "runId": "r", "messages": []}).encode()
    sse.metadata["wire_chunks"] = [[946681202.5, 31], [946681202.75, 26]]
    sse.metadata["other"] = {"nested": [1, 2.5, None, True, b"x"]}
    marked = tflow.tflow(resp=True)
    marked.backup()
    marked.marked, marked.comment = ":star:", "a comment"
    marked.request.path = "/changed"
    return [*flows, sse, marked]


def test_edge_flows() -> None:
    assert_read_as_mitmproxy_reads(written(edge_flows()))


def test_other_flow_types_are_skipped() -> None:
    flows = [tflow.ttcpflow(), tflow.tflow(resp=True), tflow.tudpflow(), tflow.tdnsflow(), tflow.tflow(err=True)]
    assert len(assert_read_as_mitmproxy_reads(written(flows), fast=False)) == 2


def state_record(flow: http.HTTPFlow, **changes: Any) -> bytes:
    state = flow.get_state()
    state.update(changes)
    return tnetstring.dumps(state)


def test_records_not_recognised_are_read_by_mitmproxy() -> None:
    """An older format (mitmproxy migrates it), another key order, another client address form: mitmproxy's
    reader reads them, between records read here."""
    recognised, older = tflow.tflow(resp=True), tflow.tflow(resp=True)
    reordered_state = tflow.tflow(err=True).get_state()
    ipv6 = tflow.tflow(resp=True)
    ipv6.client_conn.peername = ("::1", 22, 0, 0)
    data = b"".join([written([recognised]), state_record(older, version=20),
                     tnetstring.dumps(dict(sorted(reordered_state.items()))), written([ipv6])])
    flows = assert_read_as_mitmproxy_reads(data, fast=False)
    assert [type(f) for f in flows] == [RecordedFlow, http.HTTPFlow, http.HTTPFlow, http.HTTPFlow]


def test_har() -> None:
    """HAR files (with or without a byte order mark) are mitmproxy's to read (each read gives new flow ids)."""
    flows = read_by_mitmproxy((FIXTURES / "mcp_http.mitm").read_bytes())
    har = json.dumps(SaveHar().make_har(flows)).encode()
    for data in (har, b"\xef\xbb\xbf" + har):
        read = read_flow_file(data)
        assert [replay_view(f)[1:] for f in read] == [replay_view(f)[1:] for f in read_by_mitmproxy(data)]
        assert len(read) == len(flows) and all(isinstance(f, http.HTTPFlow) for f in read)


def test_empty_file() -> None:
    assert read_flow_file(b"") == []


@pytest.mark.parametrize("data", [
    pytest.param(b"hello", id="text"), pytest.param(b"{not json", id="broken-json"),
    pytest.param(b"12:", id="length-only"), pytest.param(b"0:]", id="empty-list"),
    pytest.param(b"3:abc,", id="string-not-flow"), pytest.param(b"1" * 13 + b":", id="length-too-long"),
    pytest.param(b"\n" + written([tflow.tflow()]), id="leading-newline"),
    pytest.param(written([tflow.tflow()]) + b"\n", id="trailing-newline"),
    pytest.param(written([tflow.tflow()])[:-1], id="truncated"),
    pytest.param(state_record(tflow.tflow(), version=99), id="future-version"),
    pytest.param(state_record(tflow.tflow(), unknown=1), id="unknown-field"),  # mitmproxy: an AssertionError
    pytest.param(state_record(tflow.tflow(), request=None), id="no-request"),
])
def test_unreadable_content(data: bytes) -> None:
    with pytest.raises(FlowReadException):
        read_flow_file(data)


class CountedReads(io.BytesIO):
    """A file that remembers how many bytes each `read` asked for (-1: all)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sizes: list[int] = []

    def read(self, size: int | None = -1, /) -> bytes:
        self.sizes.append(-1 if size is None else size)
        return super().read(size)


def test_read_in_chunks() -> None:
    """A flow file is read a chunk at a time, never whole (memory bounded by the flows read, not the file):
    records across chunk boundaries, records larger than a chunk, and prefixes cut by a boundary read as when
    the content is read at once; `position` is told the bytes read so far, in order."""
    flows = [f for attack_id in sessions.script_ids()[:6] for variant in sessions.VARIANTS
             for f in sessions.to_flows(sessions.play(sessions.load_script(attack_id), variant), seed=attack_id)]
    data = written([*flows, *edge_flows()])
    whole = [replay_view(f) for f in read_flow_file(data)]
    assert len(whole) == len(flows) + len(edge_flows())
    for chunk in (1, 2, 13, 14, 100, 4096):
        handle, positions = CountedReads(data), []
        with mock.patch.object(flow_file, "_CHUNK", chunk):
            assert [replay_view(f) for f in read_flow_file(handle, positions.append)] == whole
        largest = max(len(written([f])) for f in [*flows, *edge_flows()])
        assert -1 not in handle.sizes and max(handle.sizes) <= max(chunk, 13, largest), chunk
        assert positions == sorted(positions) and positions[0] == 0 and positions[-1] < len(data)


def test_a_flow_file_is_not_read_whole_to_tell_it_from_a_capture(tmp_path: Path) -> None:
    """Telling a flow file from an `oatf tap --record` capture reads its first bytes, not its first line (a flow
    file may hold no line break: it was read whole, over 400 MB of a 218 MB recording)."""
    data = written([tflow.tflow(resp=True) for _ in range(2000)])
    assert b"\n" not in data and len(data) > 2_000_000
    path = tmp_path / "recording.mitm"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        assert read_capture_file(str(path)) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100_000, peak
    capture = tmp_path / "capture.jsonl"
    for blank in ("", " " * 5000):  # a capture is still one, its header past the first bytes read or not
        capture.write_text(blank + record_header("s", 42, ["server"], "stdio", 1.0)
                           + record_line("client", b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 2.0))
        read = read_capture_file(str(capture))
        assert read is not None and len(read.messages) == 1


def read_file(data: bytes) -> list[AnyHTTPFlow] | ReplayError:
    """`read_flows` of a file holding `data`: the flows, or the error."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recording.mitm"
        path.write_bytes(data)
        try:
            return read_flows(str(path))
        except ReplayError as exc:
            return exc


def test_read_flows_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ReplayError, match="cannot read"):
        read_flows(str(tmp_path / "missing.mitm"))
    assert "not a mitmproxy flow file" in str(read_file(b"garbage"))
    # mitmproxy checks a request's types only when Python runs without -O
    no_start = tflow.tflow()
    no_start.request.data.timestamp_start = None  # type: ignore[assignment]
    monkeypatch.setattr("addon.recordings.read_flow_file", lambda _data, _position: [tflow.tflow(), no_start])
    assert "start time" in str(read_file(b""))


def test_read_flows_sorts_by_request_start() -> None:
    early, late = tflow.tflow(), tflow.tflow()
    early.request.timestamp_start, late.request.timestamp_start = 1.0, 2.0
    flows = read_file(written([late, early]))
    assert not isinstance(flows, ReplayError) and [f.id for f in flows] == [early.id, late.id]


SAMPLE = written([tflow.tflow(resp=True), edge_flows()[-2], tflow.tflow(err=True)])


def assert_read_or_refused(data: bytes) -> None:
    """Reading gives flows or a `ReplayError`; whatever mitmproxy reads is read the same; reading in small
    chunks reads the same."""
    result = read_file(data)
    with mock.patch.object(flow_file, "_CHUNK", 7):
        chunked = read_file(data)
    assert type(chunked) is type(result)
    if not isinstance(result, ReplayError):
        assert isinstance(chunked, list) and [replay_view(f) for f in chunked] == [replay_view(f) for f in result]
    try:
        theirs: list[http.HTTPFlow] | None = read_by_mitmproxy(data)
    except Exception:
        theirs = None
    if theirs is not None:
        assert not isinstance(result, ReplayError), result
        theirs.sort(key=lambda f: f.request.timestamp_start)
        assert [replay_view(f) if isinstance(f, RecordedFlow) else f.get_state() for f in result] == \
            [replay_view(t) if isinstance(f, RecordedFlow) else t.get_state() for f, t in zip(result, theirs,
                                                                                               strict=True)]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data: bytes) -> None:
    assert_read_or_refused(data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SAMPLE)))
def test_fuzz_truncated(size: int) -> None:
    assert_read_or_refused(SAMPLE[:size])


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.binary(max_size=3)), min_size=1, max_size=3))
def test_fuzz_corrupted(edits: list[tuple[int, bytes]]) -> None:
    data = SAMPLE
    for at, replacement in edits:
        data = data[:at] + replacement + data[at + 1:]
    assert_read_or_refused(data)
