"""Faithful captures, end to end: mitmdump running the addon and recording with `-w … --set
store_streamed_bodies=true` in front of the official `mcp` SDK servers, over the legacy HTTP+SSE transport
(whose GET stream the client always closes) and over Streamable HTTP with priming events (whose standalone GET
stream the client closes when the session ends). mitmproxy stores a streamed body only when its stream ends
cleanly; the tap keeps what it forwarded, so the recording replays to the events and reports seen live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from addon.mitm_tap import FORWARDED
from addon.recordings import decode_flows, read_flows
from oatf_engine.wire import Diagnostic, WireDecoder
from testing import clients
from testing.oatf_proxy import Report, assert_replay_agrees, evaluate, oatf_proxy, run
from testing.processes import peers
from tests.oatf_engine.wire.expected import EXPECTED

SAMPLING_THROUGH_A_TOOL = """\
oatf: "0.1"
attack:
  id: E2E-CAPTURE-001
  name: "A tool asks the agent's model; everything the server streams is judged"
  version: 1
  severity: medium
  execution:
    mode: mcp_server
    state:
      tools: [{name: ask, description: "Ask the client's model.", inputSchema: {type: object}}]
  indicators:
    - id: E2E-CAPTURE-001-01
      surface: sampling/createMessage
      direction: response
      target: "messages[*].content.text"
      pattern: {contains: "meaning of life"}
    - id: E2E-CAPTURE-001-02
      surface: sampling/createMessage
      direction: request
      target: content.text
      pattern: {contains: "forty-two"}
    - id: E2E-CAPTURE-001-03
      surface: tools/call
      direction: response
      target: "content[*].text"
      pattern: {contains: "model said: forty-two"}
    - id: E2E-CAPTURE-001-04
      surface: notifications/tools/list_changed
      direction: response
      target: ""
      pattern: {condition: {exists: true}}
  correlation:
    logic: any
"""


def _run_summary(report: Report) -> tuple[Any, ...]:
    """What a run's report says about the traffic: session, verdict and evidence, messages seen, and per actor
    the messages seen and phases reached (times and paths aside)."""
    verdict, summary = report["verdict"], report["execution_summary"]
    return (summary["session"], verdict["result"],
            [(v["indicator_id"], v["result"], v.get("evidence")) for v in verdict["indicator_verdicts"]],
            summary["messages_seen"], [(a["messages_seen"], a["phases_reached"]) for a in summary["actors"]])


def test_streams_closed_early_are_recorded_and_replay_as_seen_live(tmp_path: Path) -> None:
    attack = tmp_path / "capture.yaml"
    attack.write_text(SAMPLING_THROUGH_A_TOOL, encoding="utf-8")
    with peers(tmp_path, kinds=("mcp_sse", "mcp_resumable")) as servers, \
            oatf_proxy(tmp_path, "capture", [attack]) as proxy:
        legacy = run(clients.mcp_legacy_sse(servers.url("mcp_sse", "/sse"), proxy.url))
        changed: list[str] = []
        streamable = run(clients.mcp_streamable(servers.url("mcp_resumable", "/mcp"), proxy.url, changed))
        assert legacy[-1] == streamable[-2] == "model said: forty-two" and changed
        proxy.wait_until(lambda: len(proxy.reports()) == 2)
        live = proxy.reports()
        offline = assert_replay_agrees(proxy, tmp_path, live)

    # live: everything matched but list_changed, which only the Streamable HTTP session's GET stream carries
    assert sorted(tuple(v["result"] for v in r["verdict"]["indicator_verdicts"]) for r in live) == [
        ("matched", "matched", "matched", "matched"), ("matched", "matched", "matched", "not_matched")]
    assert sorted(map(_run_summary, offline.reports)) == sorted(map(_run_summary, live))

    diagnostics: list[Diagnostic] = []
    assert proxy.flows is not None
    events = decode_flows(WireDecoder(on_diagnostic=diagnostics.append), read_flows(str(proxy.flows)))
    ports = {"mcp_sse": servers.ports["mcp_sse"], "mcp_http": servers.ports["mcp_resumable"]}
    for session, port in ports.items():
        decoded = [(e.event_type, e.direction, e.sender) for e in events if e.endpoint.port == port]
        # The GET stream's list_changed and a POST stream's answer race on the wire: compare as multisets.
        assert sorted(decoded) == sorted(EXPECTED[session])
    assert diagnostics == []  # the priming events (ID, empty data) included



def test_request_bodies_the_client_streams_are_recorded_and_replay_as_seen_live(tmp_path: Path) -> None:
    """A client that streams its request bodies (chunked, no Content-Length: here the official `mcp` client over
    a transport that streams them) in front of the official `mcp` server, recorded without
    `store_streamed_bodies`: mitmproxy stores none of those bodies, the tap keeps what it forwarded, and the
    recording replays to the reports seen live. Before, each request was recorded empty and replayed as nothing,
    its answer answering nothing seen."""
    attack = tmp_path / "capture.yaml"
    attack.write_text(SAMPLING_THROUGH_A_TOOL, encoding="utf-8")
    with peers(tmp_path, kinds=("mcp_resumable",)) as servers, \
            oatf_proxy(tmp_path, "streamed", [attack], options={"store_streamed_bodies": "false"}) as proxy:
        changed: list[str] = []
        seen = run(clients.mcp_streamable(servers.url("mcp_resumable", "/mcp"), proxy.url, changed,
                                          stream_bodies=True))
        assert seen[-2] == "model said: forty-two" and changed
        proxy.wait_until(lambda: len(proxy.reports()) == 1)
        live = proxy.reports()
        assert proxy.flows is not None
        assert_replay_agrees(proxy, tmp_path, live)
    assert [v["result"] for v in live[0]["verdict"]["indicator_verdicts"]] == ["matched"] * 4
    posts = [f for f in read_flows(str(proxy.flows)) if f.request.method == "POST"]
    assert posts and all(f.request.raw_content and "content-length" not in f.request.headers for f in posts)


TOOL_RESULT_ONLY = """\
oatf: "0.1"
attack:
  id: E2E-CAPTURE-002
  name: "What the tool that asks the agent's model returns is judged"
  version: 1
  severity: medium
  execution:
    mode: mcp_server
    state:
      tools:
        - name: ask
          description: "Ask the client's model (sampling) and report what it said."
          inputSchema: {type: object}
  indicators:
    - id: E2E-CAPTURE-002-01
      surface: tools/call
      direction: response
      target: "content[*].text"
      pattern: {contains: "model said: forty-two"}
"""


def test_a_stream_longer_than_its_capture_keeps_replays_inconclusive_not_resisted(tmp_path: Path) -> None:
    """The legacy transport's GET stream, which the client always closes, is kept with its flow up to
    `oatf_wire_max_body` bytes, while live decoding reads all of it. Here the stream is longer than that: live, the
    tool's answer at its end matches (exploited); the capture holds the stream's first bytes only — the tool listing,
    which delivers the payload, but not the answer — and its replay marks the rest not inspected: `inconclusive`, exit
    status 2. Before, the replay read `resisted` with exit status 0: a false not_exploited."""
    attack = tmp_path / "tool-result.yaml"
    attack.write_text(TOOL_RESULT_ONLY, encoding="utf-8")
    with peers(tmp_path, kinds=("mcp_sse",)) as servers, \
            oatf_proxy(tmp_path, "cut", [attack], options={"oatf_wire_max_body": "2k"}) as proxy:
        assert run(clients.mcp_legacy_sse(servers.url("mcp_sse", "/sse"), proxy.url))[-1] == "model said: forty-two"
        proxy.wait_until(lambda: len(proxy.reports()) == 1)
        [live] = proxy.reports()
        proxy.interrupt()
    assert (live["outcome"], live["execution_summary"]["delivered"]) == ("exploited", True)
    assert proxy.flows is not None
    [stream] = [f for f in read_flows(str(proxy.flows)) if f.request.method == "GET"]
    assert stream.response is not None and stream.response.raw_content is not None
    kept = stream.response.raw_content
    assert len(kept) == 2048 < stream.metadata[FORWARDED] and b"(sampling)" in kept  # the listing is kept whole,
    assert b"model said" in kept.split(b"\r\n\r\n")[-1]  # the answer in part only: an event the replay cannot read

    offline = evaluate([attack], proxy.flows, tmp_path / "replayed")
    [report] = offline.reports
    assert (report["outcome"], offline.status) == ("inconclusive", 2), offline.stderr
    assert report["verdict"]["result"] == "not_exploited" and report["execution_summary"]["delivered"]
    assert report["execution_summary"]["uninspected_messages"] == 1 and "oversize_body 1" in offline.stderr
