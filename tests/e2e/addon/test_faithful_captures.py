"""Faithful captures, end to end: mitmdump running the addon and recording with `-w … --set
store_streamed_bodies=true` in front of the official `mcp` SDK servers, over the legacy HTTP+SSE transport
(whose GET stream the client always closes) and over Streamable HTTP with priming events (whose standalone GET
stream the client closes when the session ends). mitmproxy stores a streamed body only when its stream ends
cleanly; the tap keeps what it forwarded, so the recording replays to the events and reports seen live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from addon.recordings import decode_flows, read_flows
from oatf_engine.wire import Diagnostic, WireDecoder
from testing import clients
from testing.oatf_proxy import Report, assert_replay_agrees, oatf_proxy, run
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
