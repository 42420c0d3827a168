"""`MitmTap` driven through mitmproxy's hooks with test flows: streaming set-up, chunks forwarded unchanged and
decoded at once, no exception escaping, options."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import logging
from collections import Counter

import pytest
from mitmproxy import exceptions, http
from mitmproxy import flow as flow_module
from mitmproxy.test import taddons, tflow

from addon.mitm_tap import FORWARDED, MitmTap
from addon.recordings import decode_flow
from oatf_engine.events import UNINSPECTED_EVENT, ExchangeEnded, ObservedEvent
from oatf_engine.wire import Diagnostic, WireDecoder
from oatf_engine.wire.steps import STEP_SEQ_BASE, StepDecoder, WireStep
from tests.oatf_engine.wire.replay import FIXTURES, load

RUN = {"threadId": "th", "runId": "r", "messages": []}


def flow(body: dict | bytes, *, path: str = "/agent", headers: dict[str, str] | None = None) -> http.HTTPFlow:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = http.Request.make("POST", f"http://127.0.0.1:8000{path}", content,
                                headers if headers is not None else {"content-type": "application/json"})
    return tflow.tflow(req=request)


def respond(f: http.HTTPFlow, body: bytes, content_type: str) -> None:
    f.response = http.Response.make(200, body, {"content-type": content_type})


def run_request(tap: MitmTap, f: http.HTTPFlow) -> None:
    tap.requestheaders(f)
    tap.request(f)


@pytest.fixture
def collected() -> tuple[MitmTap, list[ObservedEvent]]:
    events: list[ObservedEvent] = []
    return MitmTap(on_event=events.append), events


def test_buffered_json_exchange(collected: tuple[MitmTap, list[ObservedEvent]]) -> None:
    tap, events = collected
    f = flow({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, path="/mcp")
    run_request(tap, f)
    respond(f, b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}', "application/json")
    tap.responseheaders(f)
    assert f.response is not None and not f.response.stream
    tap.response(f)
    assert [(e.event_type, e.direction) for e in events] == [("tools/list", "request"), ("tools/list", "response")]
    assert events[0].flow_id == f.id and events[0].client == "127.0.0.1:22"
    assert tap.decoder.open_exchanges == 0


def test_sse_response_is_streamed_unchanged_and_decoded_per_chunk(
        collected: tuple[MitmTap, list[ObservedEvent]]) -> None:
    tap, events = collected
    f = flow(RUN)
    run_request(tap, f)
    respond(f, b"", "text/event-stream")
    tap.responseheaders(f)
    assert f.response is not None and callable(f.response.stream)
    chunks = [b'data: {"type": "RUN_STA', b'RTED"}\n\n', b"data: {\"type\": \"CUSTOM\"}\r\n\r", b"\n: ping\n"]
    seen = []
    for chunk in chunks:
        assert f.response.stream(chunk) is chunk  # the very same bytes go on
        seen.append([e.event_type for e in events])
    assert seen == [["run_agent_input"], ["run_agent_input", "run_started"], ["run_agent_input", "run_started",
                    "custom"], ["run_agent_input", "run_started", "custom"]]
    assert f.response.stream(b"") == b""
    tap.response(f)
    assert len(events) == 3
    assert [size for _, size in f.metadata["wire_chunks"]] == [len(chunk) for chunk in chunks]  # for replay


def test_streams_requests_without_content_length_and_composes_other_stream_functions(
        collected: tuple[MitmTap, list[ObservedEvent]]) -> None:
    tap, events = collected
    f = flow(b"", headers={"content-type": "application/json", "transfer-encoding": "chunked"})
    tap.requestheaders(f)
    assert callable(f.request.stream)
    assert f.request.stream(json.dumps(RUN).encode()) == json.dumps(RUN).encode()
    tap.request(f)
    assert [e.event_type for e in events] == ["run_agent_input"]

    respond(f, b"", "text/event-stream")
    assert f.response is not None
    f.response.stream = lambda data: [data.upper()]  # another addon's stream function
    tap.responseheaders(f)
    assert f.response.stream(b'data: {"type": "custom"}\n\n') == [b'DATA: {"TYPE": "CUSTOM"}\n\n']


def test_a_request_is_streamed_only_without_a_content_length() -> None:
    """A request body is streamed when the client streams it: no `Content-Length` among its fields, in any case
    (a field of the same length, `Mcp-Session-Id`, is no Content-Length)."""
    for fields, streamed in (([("CONTENT-LENGTH", "2")], False), ([("Content-Length", "2")], False),
                             ([("Mcp-Session-Id", "s"), ("Transfer-Encoding", "chunked")], True),
                             ([("Content-Lengths", "2")], True)):
        tap = MitmTap(on_event=lambda _event: None)
        f = flow(b"{}", path="/mcp")
        f.request.headers = http.Headers([(name.encode(), value.encode()) for name, value in fields])
        tap.requestheaders(f)
        assert callable(f.request.stream) is streamed, fields


def test_no_exception_escapes(collected: tuple[MitmTap, list[ObservedEvent]], caplog: pytest.LogCaptureFixture,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    tap, _ = collected

    def broken(*_args: object) -> list[ObservedEvent]:
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(tap.decoder, "response_data", broken)
    with caplog.at_level(logging.ERROR, logger="oatf.wire"):
        for _ in range(3):
            f = flow(RUN)
            run_request(tap, f)
            respond(f, b"", "text/event-stream")
            tap.responseheaders(f)
            assert f.response is not None
            assert f.response.stream(b"data: x\n\n") == b"data: x\n\n"
            assert f.response.stream(b"data: y\n\n") == b"data: y\n\n"
            tap.response(f)
    assert len([r for r in caplog.records if "failed" in r.getMessage()]) == 1  # logged once
    assert tap.decoder.open_exchanges == 0

    def raising(_event: ObservedEvent) -> None:
        raise ValueError("owner bug")

    tap.on_event = raising
    with caplog.at_level(logging.ERROR, logger="oatf.wire"):
        run_request(tap, flow(RUN))
        run_request(tap, flow(RUN))
    assert len([r for r in caplog.records if "on_event" in r.getMessage()]) == 1

    tap.decoder = None  # type: ignore[assignment]  # even a broken tap never raises into mitmproxy
    f = flow(RUN)
    for hook in (tap.requestheaders, tap.request, tap.responseheaders, tap.response, tap.error):
        hook(f)


def test_a_flow_the_tap_fails_on_is_marked_cut_off_here_and_in_the_monitor_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoded here (inject mode, traces): the decoder raising on the response marks its exchange cut off
    (`decoder_failure`), so that its session's runs cannot read `resisted`. Handed on as steps: the tap failing
    on the flow hands a `cut_off` step, which the monitor process's decoder turns into the same mark."""
    events: list[ObservedEvent] = []
    here = MitmTap(on_event=events.append)

    def broken(*_args: object) -> list[ObservedEvent]:
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(here.decoder, "response_headers", broken)
    f = flow(RUN)
    run_request(here, f)
    respond(f, b"", "text/event-stream")
    here.responseheaders(f)
    here.response(f)
    assert [(e.event_type, e.sender, e.content.get("code")) for e in events] == [
        ("run_agent_input", "client", None), (UNINSPECTED_EVENT, "server", "decoder_failure")]

    handed: list[WireStep] = []

    def on_step(step: WireStep) -> None:
        if step.call == "response_headers":
            raise RuntimeError("tap bug")
        handed.append(step)

    remote = MitmTap(on_event=pytest.fail, on_step=on_step)
    f = flow(RUN)
    run_request(remote, f)
    respond(f, b"", "text/event-stream")
    remote.responseheaders(f)
    remote.response(f)
    assert [s.call for s in handed] == ["request_headers", "request_end", "cut_off", "abort"]
    decoded = [e for e in StepDecoder(WireDecoder()).decoded(handed) if isinstance(e, ObservedEvent)]
    assert [(e.event_type, e.sender, e.content.get("code")) for e in decoded] == [
        ("run_agent_input", "client", None), (UNINSPECTED_EVENT, "server", "decoder_failure")]


def test_error_forgets_the_exchange(collected: tuple[MitmTap, list[ObservedEvent]]) -> None:
    tap, events = collected
    f = flow(RUN)
    run_request(tap, f)
    respond(f, b"", "text/event-stream")
    tap.responseheaders(f)
    assert f.response is not None
    f.response.stream(b'data: {"type": "RUN_STARTED"')
    tap.error(f)
    assert tap.decoder.open_exchanges == 0 and tap.diagnostics["truncated_stream"] == 1
    assert [e.event_type for e in events] == ["run_agent_input"]


def streaming(tap: MitmTap, inner: object = None) -> http.HTTPFlow:
    """A flow whose SSE response is being streamed through `tap`, with no body stored yet (as mitmproxy has it)."""
    f = flow(RUN)
    run_request(tap, f)
    respond(f, b"", "text/event-stream")
    assert f.response is not None
    f.response.raw_content, f.response.stream = None, inner
    tap.responseheaders(f)
    return f


def test_a_stream_that_ends_early_keeps_the_bytes_forwarded() -> None:
    """mitmproxy stores a streamed body only when the stream ends cleanly (with `store_streamed_bodies`): at
    `error`, or at `response` without a stored body, the flow gets the bytes that went on (after another
    addon's stream function), at most `oatf_wire_max_body` of them; a body mitmproxy stored is left alone."""
    tap = MitmTap(on_event=lambda _event: None)
    with taddons.context(tap) as context:
        context.configure(tap, oatf_wire_max_body="20")
        dropped = streaming(tap, inner=lambda data: data.upper())
        assert dropped.response is not None and callable(dropped.response.stream)
        dropped.response.stream(b'data: {"type": "x"}\n\n')
        dropped.response.stream(b"data: {")
        tap.error(dropped)
        assert dropped.response.raw_content == b'DATA: {"TYPE": "X"}\n'  # the first 20 bytes forwarded

        unstored = streaming(tap)
        assert unstored.response is not None and callable(unstored.response.stream)
        unstored.response.stream(b"data: {}\n\n")
        tap.response(unstored)
        assert unstored.response.raw_content == b"data: {}\n\n"

        stored = streaming(tap)
        assert stored.response is not None and callable(stored.response.stream)
        stored.response.stream(b"data: {}\n\n")
        stored.response.raw_content = b"data: {}\n\n as mitmproxy stored it"
        tap.response(stored)
        assert stored.response.raw_content == b"data: {}\n\n as mitmproxy stored it"
    assert tap._kept == {}  # nothing kept after the flows ended


def test_a_stream_longer_than_its_flow_keeps_replays_marked_not_inspected() -> None:
    """A stream mitmproxy stored no body for keeps its first `oatf_wire_max_body` bytes (above), while live decoding
    read all of it: the flow says how many bytes went on (`FORWARDED`), and its replay marks the rest not inspected
    (`oversize_body`, sent by the server) where the kept bytes end — its session's runs read `inconclusive`, not
    `resisted` for want of what the recording lost — with the chunks' times noted or not."""
    deltas = ["first part", "second part", "the part the recording lost"]
    chunks = [json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d}).encode() for d in deltas]
    live: list[ObservedEvent] = []
    tap = MitmTap(on_event=live.append, clock=itertools.count(100.0).__next__)
    with taddons.context(tap) as context:
        context.configure(tap, oatf_wire_max_body="150")
        cut = streaming(tap)
        assert cut.response is not None and callable(cut.response.stream)
        for chunk in chunks:
            cut.response.stream(b"data: " + chunk + b"\n\n")
        tap.error(cut)  # the client closed it: mitmproxy stored nothing
    assert [e.content.get("delta") for e in live if e.sender == "server"] == deltas
    assert len(cut.response.raw_content or b"") == 150 and cut.metadata[FORWARDED] == sum(len(c) + 8 for c in chunks)

    untimed = copy.deepcopy(cut)
    del untimed.metadata["wire_chunks"]
    for recorded in (cut, untimed):
        replayed = [e for e in decode_flow(WireDecoder(), recorded) if e.sender == "server"]
        assert [e.content.get("delta") for e in replayed if e.event_type != UNINSPECTED_EVENT] == deltas[:1]
        marks = [e for e in replayed if e.event_type == UNINSPECTED_EVENT]
        assert [m.content["code"] for m in marks] == ["oversize_body"] and marks[0].protocol == "ag_ui"
    assert marks[0].timestamp == cut.response.timestamp_end  # untimed: where the response ended
    timed = [e for e in decode_flow(WireDecoder(), cut) if e.event_type == UNINSPECTED_EVENT]
    assert timed[0].timestamp == cut.metadata["wire_chunks"][1][0]  # timed: the chunk kept in part


def test_a_request_body_the_client_streams_is_kept_and_replays_as_decoded_live() -> None:
    """mitmproxy stores a request body the client streams (no Content-Length) only with `store_streamed_bodies`:
    without it the flow gets the bytes forwarded at `request`, so its recording replays to the events seen live
    (not to an answer to nothing seen); one over `oatf_wire_max_body`, not inspected live, keeps one byte more and
    is not inspected in replay either."""
    call = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "transfer", "arguments": {"to": "attacker", "note": "x" * 600}}}).encode()
    answer = b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "sent"}]}}'
    for limit, expected in ((1024, ["tools/call", "tools/call"]), (300, [UNINSPECTED_EVENT])):
        live: list[ObservedEvent] = []
        tap = MitmTap(on_event=live.append)
        with taddons.context(tap) as context:
            context.configure(tap, oatf_wire_max_body=str(limit))
            f = flow(b"", path="/mcp", headers={"content-type": "application/json", "transfer-encoding": "chunked"})
            f.request.raw_content = None  # as mitmproxy has a streamed request
            tap.requestheaders(f)
            assert callable(f.request.stream)
            for start in range(0, len(call), 100):
                f.request.stream(call[start:start + 100])
            tap.request(f)
            respond(f, answer, "application/json")
            tap.responseheaders(f)
            tap.response(f)
            assert f.request.raw_content == call[:limit + 1]
            replayed = decode_flow(WireDecoder(tap.decoder.config), f)
        assert [e.event_type for e in live][:len(expected)] == expected
        assert [(e.event_type, e.direction, e.content) for e in replayed] == [
            (e.event_type, e.direction, e.content) for e in live]


def test_every_event_of_a_long_stream_replays_at_its_live_time() -> None:
    """A stream of many chunks (12,000 events, each its own chunk: a session-long SSE stream) has every chunk's
    arrival noted, so each event its replay reads carries the time it carried live — not the response's end for
    those past a count of chunks, which moved them after other flows' events and changed verdicts."""
    live: list[ObservedEvent] = []
    tap = MitmTap(on_event=live.append, clock=itertools.count(100.0, 0.001).__next__)
    f = streaming(tap)
    assert f.response is not None and callable(f.response.stream)
    for n in range(12_000):
        f.response.stream(b'data: {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "%d"}\n\n' % n)
    f.response.timestamp_end = tap.clock()
    tap.response(f)
    replayed = decode_flow(WireDecoder(), f)
    assert len(live) == len(replayed) == 12_001
    assert [(e.content.get("delta"), e.timestamp) for e in replayed] == [
        (e.content.get("delta"), e.timestamp) for e in live]


def test_chunk_times_are_noted_for_the_bytes_the_flow_keeps() -> None:
    """The chunk record is bounded by what the flow keeps: without `store_streamed_bodies`, the chunks that begin
    within the first `oatf_wire_max_body` bytes (the rest are not in the flow, `FORWARDED`); with it, every chunk
    (mitmproxy keeps the whole body of a stream that ends cleanly)."""
    tap = MitmTap(on_event=lambda _event: None)
    chunk = b'data: {"type": "CUSTOM", "name": "n", "value": "%s"}\n\n' % (b"x" * 40)
    noted = []
    with taddons.context(tap) as context:
        context.options.add_option("store_streamed_bodies", bool, False, "mitmproxy's own option")
        context.configure(tap, oatf_wire_max_body="1k")
        for stores in (False, True):
            context.configure(tap, store_streamed_bodies=stores)
            f = streaming(tap)
            assert f.response is not None and callable(f.response.stream)
            for _ in range(100):
                f.response.stream(chunk)
            noted.append(len(f.metadata["wire_chunks"]))
    assert noted == [-(-1024 // len(chunk)), 100]


def test_options() -> None:
    tap = MitmTap(on_event=lambda _event: None)
    with taddons.context(tap) as context:
        context.configure(tap, oatf_wire_max_body="1k", oatf_wire_protocols="api.local/x=a2a")
        assert tap.decoder.config.max_body_size == 1024
        assert tap.decoder.config.overrides[0].protocol == "a2a"
        for bad in ({"oatf_wire_protocols": "nonsense"}, {"oatf_wire_max_body": "0"}):
            with pytest.raises(exceptions.OptionsError):
                context.configure(tap, **bad)
        assert tap.decoder.config.max_body_size == 1024


def test_decode_flow_replays_a_recorded_flow() -> None:
    flows = load("a2a_v1")
    events = [e for f in flows for e in decode_flow(WireDecoder(), f)]
    assert events[0].event_type == "agent_card/get" and events[0].timestamp == flows[0].request.timestamp_start
    assert sum(e.event_type == "task/status" for e in events) == 2


def test_the_ends_of_exchanges_that_left_requests_unanswered_are_handed_on() -> None:
    """At `response` (a 502 without a JSON-RPC body; a streamed response closed before the answer) and at
    `error` (a connection reset): `on_ended` gets the exchange's end, after its events; answered exchanges say
    nothing."""
    events: list[ObservedEvent] = []
    ended: list[ExchangeEnded] = []
    tap = MitmTap(on_event=events.append, on_ended=ended.append)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}

    bad_gateway = flow(request, path="/mcp")
    run_request(tap, bad_gateway)
    bad_gateway.response = http.Response.make(502, b"Bad Gateway", {"content-type": "text/plain"})
    tap.responseheaders(bad_gateway)
    tap.response(bad_gateway)

    cut = flow(request, path="/mcp")
    run_request(tap, cut)
    respond(cut, b"", "text/event-stream")
    tap.responseheaders(cut)
    assert cut.response is not None and callable(cut.response.stream)
    cut.response.stream(b'data: {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}\n\n')
    tap.response(cut)

    reset = flow(RUN)
    run_request(tap, reset)
    reset.error = flow_module.Error("connection reset")
    tap.error(reset)

    answered = flow(request, path="/mcp")
    run_request(tap, answered)
    respond(answered, b'{"jsonrpc": "2.0", "id": 1, "result": {"content": []}}', "application/json")
    tap.responseheaders(answered)
    tap.response(answered)

    assert [(e.flow_id, e.unanswered) for e in ended] == [
        (bad_gateway.id, ((bad_gateway.id, "client", 1),)), (cut.id, ((cut.id, "client", 1),)),
        (reset.id, ((reset.id, "client", None),))]
    assert ended[1].seq == next(e.seq for e in events if e.event_type == "notifications/progress")


def through_hooks(tap: MitmTap, recorded: http.HTTPFlow) -> None:
    """A recorded flow through the tap's hooks as mitmproxy makes them: a streamed response chunk by chunk (at its
    recorded chunk sizes), with no body stored until its end."""
    f = copy.deepcopy(recorded)
    response, f.response = f.response, None
    run_request(tap, f)
    if response is None:
        return
    body, f.response = response.raw_content or b"", response
    response.raw_content = None
    tap.responseheaders(f)
    if callable(response.stream):
        offset = 0
        for _, size in recorded.metadata.get("wire_chunks") or [[0, len(body)]]:
            response.stream(body[offset:offset + size])
            offset += size
    else:
        response.raw_content = body
    tap.response(f)


@pytest.mark.parametrize("fixture", sorted(p.stem for p in FIXTURES.glob("*.mitm")))
def test_flows_handed_on_as_steps_decode_to_the_events_decoded_here(fixture: str) -> None:
    """The monitor process decodes the steps handed over (`on_step`, issue 15: no decoding on the event loop): the
    same events, ends of exchanges and diagnostics as the tap's own decoder gives, event for event (their `seq`
    counted from `STEP_SEQ_BASE`), on every recorded fixture."""
    here: list[ObservedEvent | ExchangeEnded] = []
    local = MitmTap(on_event=here.append, on_ended=here.append, clock=itertools.count(1.0).__next__)
    handed: list[WireStep] = []
    remote = MitmTap(on_event=pytest.fail, on_ended=pytest.fail, on_step=handed.append,
                     clock=itertools.count(1.0).__next__)  # chunks are stamped as they pass: the same times
    for recorded in load(fixture):
        through_hooks(local, recorded)
        through_hooks(remote, recorded)
    diagnostics: list[Diagnostic] = []
    child = WireDecoder(on_diagnostic=diagnostics.append, seq_base=STEP_SEQ_BASE)
    there = [dataclasses.replace(item, seq=item.seq - STEP_SEQ_BASE) for item in StepDecoder(child).decoded(handed)]
    assert here and there == here
    assert Counter(d.code for d in diagnostics) == local.diagnostics
    assert remote.decoder.open_exchanges == 0 and child.open_exchanges == 0


def test_traffic_an_override_ignores_is_neither_decoded_nor_handed_on() -> None:
    """`oatf_wire_protocols` `HOST=ignore`: the flow costs the event loop one lookup, and nothing is queued."""
    handed: list[WireStep] = []
    tap = MitmTap(on_event=pytest.fail, on_step=handed.append)
    with taddons.context(tap) as context:
        context.configure(tap, oatf_wire_protocols="127.0.0.1=ignore")
        ignored = flow({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, path="/mcp")
        run_request(tap, ignored)
        respond(ignored, b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}', "application/json")
        tap.responseheaders(ignored)
        tap.response(ignored)
        assert handed == [] and tap._ignored == set()
        context.configure(tap, oatf_wire_protocols="")
        run_request(tap, flow({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, path="/mcp"))
        assert [(step.call, len(step.args)) for step in handed] == [("request_headers", 4), ("request_end", 1)]
