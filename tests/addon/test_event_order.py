"""`addon.recordings` feeds recorded flows to the decoder in wire order without making every step up front
(`_wire_steps`: a flow's steps are made as the merge reaches its start), and `events_in_order` hands the events
on sorted by (timestamp, seq) as soon as no later step can give an earlier one. Both are checked against the
plain algorithm (every step in a list, sorted stably by time; every event in a list, sorted) on every recorded
fixture, the library's sessions, and generated flows whose times go backwards, tie, or are missing."""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from addon import recordings
from addon.flow_file import (
    AnyHTTPFlow,
    RecordedClient,
    RecordedError,
    RecordedFlow,
    RecordedRequest,
    RecordedResponse,
    read_flow_file,
)
from addon.inject_tags import METADATA_KEY, tagged
from addon.recordings import decode_flows, decode_recordings, events_in_order, replay
from oatf_engine.events import ObservedEvent
from oatf_engine.monitor import load_library
from oatf_engine.replay import SessionClose, evaluate_events
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.steps import WireStep, feed
from testing import sessions
from testing.paths import ROOT
from tests.addon.test_flow_file import edge_flows, written
from tests.oatf_engine.wire.replay import FIXTURES


def reference_events(flows: list[AnyHTTPFlow]) -> list[ObservedEvent]:
    """The events of `flows` as replay decoded them before steps were merged lazily: every step of every flow
    in one list, sorted stably by time, fed in that order; then tagged."""
    decoder = WireDecoder()
    steps: list[tuple[float, WireStep]] = []
    for flow in flows:
        steps += recordings._flow_steps(flow)
    steps.sort(key=lambda step: step[0])
    events = [event for _, step in steps for event in feed(decoder, step)
              if isinstance(event, ObservedEvent)]  # not the ends of exchanges: no messages
    injected = {f.id: f.metadata[METADATA_KEY] for f in flows if f.metadata.get(METADATA_KEY)}
    return [tagged(e, injected[e.flow_id]) if e.flow_id in injected else e for e in events]


def rows(events: list[ObservedEvent]) -> list[tuple[Any, ...]]:
    return [dataclasses.astuple(event) for event in events]


def assert_same_order(flows: list[AnyHTTPFlow]) -> list[ObservedEvent]:
    """Decoded in windows of 1, 2, 3 and 512 flows, `flows` give the reference's events, in the same order."""
    expected = reference_events(flows)
    ordered: list[ObservedEvent] = []
    for window in (1, 2, 3, 512):
        with mock.patch.object(recordings, "_WINDOW", window):
            through: list[int] = []
            assert rows(decode_flows(WireDecoder(), flows, through.append)) == rows(expected)
            assert through[-1] == len(flows)
            ordered = [e for e in events_in_order(WireDecoder(), flows) if isinstance(e, ObservedEvent)]
            assert rows(ordered) == rows(sorted(expected, key=lambda e: (e.timestamp, e.seq)))
    return ordered


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.mitm")), ids=lambda p: p.stem)
def test_recorded_fixtures(path: Any) -> None:
    flows = read_flow_file(path.read_bytes())
    assert assert_same_order(flows)
    assert assert_same_order(flows[::-1])  # recordings concatenated out of order: flow order breaks ties


def test_library_sessions_and_edge_flows() -> None:
    flows = [f for attack_id in sessions.script_ids() for variant in sessions.VARIANTS
             for f in sessions.to_flows(sessions.play(sessions.load_script(attack_id), variant), seed=attack_id)]
    flows += edge_flows()
    assert assert_same_order(read_flow_file(written(flows)))


def test_events_wait_only_for_flows_in_progress() -> None:
    """A long recording of short exchanges: an event is handed on before the recording's later flows are
    decoded (memory bounded by the flows in progress)."""
    flows = read_flow_file(written(sessions.to_flows(sessions.play({"steps": [
        {"mcp_init": {"session": "s"}},
        {"repeat": {"times": 50, "steps": [{"wait": 0.05, "mcp": {
            "method": "tools/call", "params": {"name": "t", "arguments": {}},
            "result": {"content": [{"type": "text", "text": "ok"}]}}}]}}]}, "complying"))))
    decoded: list[int] = []
    with mock.patch.object(recordings, "_WINDOW", 4), mock.patch.object(recordings, "UPDATE_EVERY", 1):
        stream = events_in_order(WireDecoder(), flows, decoded.append)
        first = next(stream)
        assert first.event_type == "initialize" and len(decoded) <= 4, "handed on before most flows were decoded"
        assert len([first, *stream]) > 100 and decoded[-1] == len(flows)


TIMES = st.sampled_from([0.0, 1.0, 1.5, 2.0, 3.0])


@st.composite
def flow(draw: st.DrawFn, number: int) -> RecordedFlow:
    """An MCP exchange (JSON or a two-event SSE answer, maybe with chunk times, maybe failed) whose times are
    drawn from a few values: they tie, and answers may be recorded before their requests."""
    session = draw(st.sampled_from(["a", "b"]))
    call = {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": "t", "arguments": {}}}
    request = RecordedRequest("POST", "http://mcp.test/mcp", (
        (b"content-type", b"application/json"), (b"mcp-session-id", session.encode())),
        json.dumps(call).encode(), draw(TIMES), draw(st.none() | TIMES))
    metadata: dict[str, Any] = {}
    response = None
    if draw(st.booleans()):
        answer = {"jsonrpc": "2.0", "id": number, "result": {"content": []}}
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}}
        sse = draw(st.booleans())
        body = (b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in (note, answer)) if sse
                else json.dumps(answer).encode())
        response = RecordedResponse(200, ((b"content-type", b"text/event-stream" if sse else b"application/json"),),
                                    body, draw(TIMES), draw(st.none() | TIMES))
        if sse and draw(st.booleans()):
            half = body.index(b"\n\n") + 2
            metadata["wire_chunks"] = [[draw(TIMES), half], [draw(TIMES), len(body) - half]]
    if draw(st.booleans()):
        metadata[METADATA_KEY] = [{"drawn": number}]
    error = RecordedError("killed", draw(TIMES)) if response is None or draw(st.booleans()) else None
    return RecordedFlow(f"flow-{number}", request, response, error, RecordedClient(("10.0.0.1", 5000)), metadata)


@st.composite
def flow_lists(draw: st.DrawFn) -> list[AnyHTTPFlow]:
    count = draw(st.integers(0, 12))
    return [draw(flow(n)) for n in range(count)]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(flow_lists())
def test_generated_flows(flows: list[AnyHTTPFlow]) -> None:
    assert_same_order(flows)
    assert_same_order(sorted(flows, key=lambda f: f.request.timestamp_start))


def test_a_time_that_does_not_compare_is_sorted_as_a_list() -> None:
    flows = read_flow_file(written(edge_flows()))
    broken = flows[3]
    assert isinstance(broken, RecordedFlow) and broken.response is not None
    broken.response.timestamp_end = float("nan")
    assert_same_order(flows)


def test_streamed_replay_reports_as_decoding_everything_first(tmp_path: Any) -> None:
    """`replay` in one process (events streamed to the monitor) and the events all decoded first, then evaluated
    (`decode_recordings`, `evaluate_events`: the path of several processes) give the same reports, over every
    attack's recorded sessions (two recordings, read together) and the library."""
    played = [(attack_id, sessions.to_flows(sessions.play(sessions.load_script(attack_id), variant),
                                            seed=f"{attack_id}/{variant}"))
              for attack_id in sessions.script_ids() for variant in sessions.VARIANTS]
    paths = [tmp_path / "first.mitm", tmp_path / "second.mitm"]
    for n, path in enumerate(paths):
        sessions.write_flows(path, [f for k, (_, flows) in enumerate(played) if k % 2 == n for f in flows])
    attacks = [str(ROOT / "attacks")]
    streamed = replay(attacks, [str(p) for p in paths])
    closes: list[SessionClose] = []
    events, flow_count = decode_recordings([str(p) for p in paths], closes=closes)
    reports = evaluate_events(list(load_library(attacks).attacks), events, closes=closes)
    assert (streamed.events, streamed.flows) == (len(events), flow_count)
    assert len(reports) > len(played)
    assert json.dumps(streamed.reports, sort_keys=True) == json.dumps(reports, sort_keys=True)
