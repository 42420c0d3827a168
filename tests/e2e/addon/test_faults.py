"""Hostile traffic end to end (real mitmdump + the addon + its monitor process, real attacker peers): JSON
nested deeper than pickling allows must not turn evaluation off, and text from the traffic (session keys,
evidence) must not reach the log, the summary table, flow comments or command output as terminal escapes or
forged log lines."""

from __future__ import annotations

import json
from pathlib import Path

from testing.clients import raw_exchange
from testing.oatf_proxy import Peers, oatf_proxy, run, verdict_of
from testing.processes import tracebacks

from . import agents
from .attacks import TOOL_POISONING

HOSTILE = "\x1b[31m\r\nFAKE LOG LINE"

HOSTILE_TEXT_ATTACK = """\
oatf: "0.1"
attack:
  id: E2E-ESCAPE-001
  name: "A message that tries to forge log lines"
  version: 1
  severity: low
  execution:
    mode: a2a_server
    state:
      agent_card: {name: "Echo", description: "Echoes.", url: "http://echo.example/a2a", version: "1",
                   skills: []}
  indicators:
    - id: E2E-ESCAPE-001-01
      surface: message/send
      direction: request
      target: "message.parts[*].text"
      tier: ingested
      description: "The forged line, escape sequence and all (any character before `[31m`, CR LF after)."
      pattern:
        regex: "[^a][[]31m[^a][^a]FAKE LOG LINE"
"""


def nested_call(levels: int) -> bytes:
    """A JSON-RPC tools/call whose arguments nest `levels` arrays deep (an 800-level one is ~1.7 kB)."""
    deep = "[" * levels + '"x"' + "]" * levels
    return ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": '
            '{"a": 1, "b": 2, "note": ' + deep + '}}}').encode()


def test_deeply_nested_requests_do_not_turn_evaluation_off(attackers: Peers, tmp_path: Path) -> None:
    """Requests nested 800 and 1,500 levels deep are evaluated (cut at MAX_DEPTH, one diagnostic each); an
    exploit session afterwards is still judged; SIGINT concludes at once with every open run reported."""
    mcp = attackers.url("mcp_poisoned", "/mcp")
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    with oatf_proxy(tmp_path, "deep", [TOOL_POISONING], grace="60s") as proxy:
        for levels in (800, 1_500):
            run(raw_exchange("POST", mcp, proxy.url, nested_call(levels),
                             {**headers, "mcp-session-id": f"deep-{levels}"}))
        session = run(agents.mcp_poisoned_agent(mcp, proxy.url, "naive"))
        proxy.wait_until(lambda: "3 live run(s)" in proxy.command("oatf.status"))
        assert "deep_json 2" in proxy.command("oatf.status")
        assert proxy.interrupt(timeout=30) == 0  # bounded: a wedged monitor would hold the shutdown 120 s
        log = proxy.log()
    reports = {r["execution_summary"]["session"]: r for r in proxy.reports()}
    assert set(reports) == {"mcp_session:deep-800", "mcp_session:deep-1500", f"mcp_session:{session}"}
    # The raw sessions are still open at the stop; the agent closed its own, which concludes as the clock would.
    assert [reports[f"mcp_session:deep-{n}"]["execution_summary"]["status"] for n in (800, 1_500)] == \
        ["interrupted"] * 2
    assert reports[f"mcp_session:{session}"]["execution_summary"]["status"] == "completed"
    assert verdict_of(reports[f"mcp_session:{session}"])[0] == "exploited"
    assert not tracebacks(log) and "failed" not in log


def test_text_from_the_traffic_cannot_forge_log_lines_or_colour_the_terminal(attackers: Peers,
                                                                             tmp_path: Path) -> None:
    """An A2A message whose contextId (the run's session key) and matched text (the evidence) hold an ESC
    sequence and CR LF + a fake log line: mitmdump's output, `oatf.status`, `oatf.verdicts`, the flow
    comment and the shutdown summary table show them escaped; the report on disk keeps them raw."""
    attack = tmp_path / "escape.yaml"
    attack.write_text(HOSTILE_TEXT_ATTACK, encoding="utf-8")
    message = {"jsonrpc": "2.0", "id": "1", "method": "message/send", "params": {"message": {
        "kind": "message", "role": "user", "messageId": "m1", "contextId": HOSTILE,
        "parts": [{"kind": "text", "text": f"hello {HOSTILE} bye"}]}}}
    with oatf_proxy(tmp_path, "escape", [attack], grace="60s") as proxy:
        run(raw_exchange("POST", attackers.url("a2a"), proxy.url, json.dumps(message).encode(),
                         {"content-type": "application/json"}))
        proxy.wait_until(lambda: "E2E-ESCAPE-001-01" in proxy.command("oatf.status"))
        shown = [proxy.command("oatf.status"), *(m["comment"] for m in proxy.marked().values())]
        assert proxy.interrupt(timeout=30) == 0
        log = proxy.log()
    [report] = proxy.reports()
    assert report["execution_summary"]["session"] == f"a2a_context:{HOSTILE}"  # raw on disk
    assert "FAKE LOG LINE" in report["verdict"]["indicator_verdicts"][0]["evidence"]
    assert log.count("\\x1b[31m\\r\\nFAKE LOG LINE") >= 3  # shown escaped: the match, the verdict, the table
    for text in [log, *shown]:
        assert "\x1b" not in text and "\r" not in text
        assert not [line for line in text.splitlines() if line.startswith("FAKE")]
