"""`addon.recordings` places an agent's calls inside its AG-UI run also in recordings without the tap's chunk
times (a plain `mitmdump -w`, a HAR): a POST's stream is fed as it began, its last event (`RUN_FINISHED`) at
the response's end, so the run's window is its flow's own span (README "Recordings without chunk times")."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from mitmproxy import http
from mitmproxy.addons.savehar import SaveHar
from mitmproxy.io import FlowWriter
from mitmproxy.test import tflow

from addon.recordings import decode_flows, decode_recordings
from oatf_engine.events import UNINSPECTED_EVENT, ExchangeEnded, ObservedEvent
from oatf_engine.monitor import MonitorOptions
from oatf_engine.replay import place_events
from oatf_engine.wire import WireDecoder

AGENT = "127.0.0.1"
RUN_INPUT = {"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
             "messages": [{"id": "m1", "role": "user", "content": "Sync my contacts"}]}
STREAM = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in (
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "Synced."},
    {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
))


def exchange(url: str, body: object, answer: bytes, media: str, times: tuple[float, float, float, float],
             client: tuple[str, int], headers: dict[str, str] | None = None) -> http.HTTPFlow:
    """A recorded exchange without chunk times: request start/end, response start/end."""
    request = http.Request.make("POST", url, json.dumps(body).encode(),
                                {"content-type": "application/json", "accept": "application/json, text/event-stream",
                                 **(headers or {})})
    flow = tflow.tflow(req=request)
    flow.client_conn.peername = client
    request.timestamp_start, request.timestamp_end = times[0], times[1]
    flow.response = http.Response.make(200, answer, {"content-type": media, **(headers or {})})
    flow.response.timestamp_start, flow.response.timestamp_end = times[2], times[3]
    return flow


def recording() -> list[http.HTTPFlow]:
    """The user's AG-UI run (a stream open from 100.1 s to 110 s) and the agent's MCP tool call at 105 s."""
    run = exchange(f"http://{AGENT}:9000/agent", RUN_INPUT, STREAM, "text/event-stream",
                   (100.0, 100.01, 100.1, 110.0), ("10.0.0.50", 40000))
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sync", "arguments": {}}}
    result = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "ok"}]}}
    mcp = exchange("http://127.0.0.1:8080/mcp", call, json.dumps(result).encode(), "application/json",
                   (105.0, 105.01, 105.2, 105.3), (AGENT, 50001), {"mcp-session-id": "s-1"})
    return [run, mcp]


def episodes(path: Path) -> dict[str, set[str]]:
    """event type → the episodes its events were placed in, after reading the recording at `path`."""
    events, _flows = decode_recordings([str(path)])
    found: dict[str, set[str]] = {}
    for event, session, _clock in place_events(events, MonitorOptions()):
        found.setdefault(event.event_type, set()).add(session)
    return found


@pytest.mark.parametrize("kind", ["mitm", "har"])
def test_an_agents_call_lands_in_its_ag_ui_run_without_chunk_times(tmp_path: Path, kind: str) -> None:
    flows = recording()
    path = tmp_path / f"plain.{kind}"
    if kind == "mitm":
        out = io.BytesIO()
        writer = FlowWriter(out)
        for flow in flows:
            writer.add(flow)
        path.write_bytes(out.getvalue())
    else:
        path.write_text(json.dumps(SaveHar().make_har(flows)), encoding="utf-8")
    found = episodes(path)
    assert found["tools/call"] == {"ag_ui_thread:t1"}, found
    assert found["run_finished"] == {"ag_ui_thread:t1"}


def test_reading_recordings_imports_neither_inject_modes_players_nor_the_a2a_sdk() -> None:
    """`oatf evaluate` reads recordings through this module: importing inject mode's players (`oatf_serve`, the A2A
    SDK) with it cost seconds before anything was read."""
    code = ("import sys, addon.recordings; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'oatf_serve', 'a2a', 'httpx'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


def test_a_step_the_decoder_raises_at_cuts_off_its_exchange_as_live(caplog: pytest.LogCaptureFixture) -> None:
    """Replay feeds a recording's flows as the live tap's steps (`_flow_steps`) through the `StepDecoder` the
    monitor process uses: a step that makes the decoder raise (a bug) ends that exchange's decoding — its request
    stays, unanswered, ended by an abort, and the decoder marks the exchange cut off there (`WireDecoder.cut_off`)
    — while every other flow decodes as without the failure, and the
    replay says so (before, the exception ended the whole replay)."""
    run, mcp = recording()
    whole = decode_flows(WireDecoder(), [run, mcp])
    original = WireDecoder.response_headers

    def response_headers(self: WireDecoder, exchange_id: str, *args: object) -> object:
        if exchange_id == mcp.id:
            raise RuntimeError("a decoder bug")
        return original(self, exchange_id, *args)  # type: ignore[arg-type]

    endings: list[ExchangeEnded] = []
    with mock.patch.object(WireDecoder, "response_headers", response_headers):
        cut = decode_flows(WireDecoder(), [run, mcp], endings=endings)
    def of_run(events: list[ObservedEvent]) -> list[tuple[object, ...]]:  # (their `seq`s differ: fewer events)
        return [(e.event_type, e.content, e.timestamp, e.session_keys) for e in events if e.flow_id == run.id]

    assert of_run(cut) == of_run(whole) and len(of_run(whole)) == 6
    assert [(e.event_type, e.direction) for e in cut if e.flow_id == mcp.id] == [
        ("tools/call", "request"), (UNINSPECTED_EVENT, "response")], "marked where it was cut off"
    assert [(e.flow_id, len(e.unanswered)) for e in endings] == [(mcp.id, 1)]
    assert "1 step(s) made the wire decoder raise" in caplog.text
