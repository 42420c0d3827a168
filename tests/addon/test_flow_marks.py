"""What a flow shows of the OATF runs it took part in: the mark of its most severe state (a pending match, then
each outcome), the comment naming attack, indicator and verdict, the metadata `oatf.flow` reads back, and
`oatf.flow`'s answer — the messages decoded from the flow and each run with its indicators, path and excerpt.
mitmproxy's test context and flows; a real monitor process for the command."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow

from addon import flow_marks
from addon.oatf_addon import OatfAddon
from oatf_engine.monitor import IndicatorMatched, PhaseChanged
from oatf_engine.monitor.actors import PhaseChange
from oatf_engine.reports import Reported
from tests.addon.test_monitor_faults import KEY, configured
from tests.oatf_engine.test_reports import report


def concluded(outcome: str, run: str, flows: tuple[str, ...], delivered: bool = True) -> Reported:
    """A `Reported` of `run` whose report cites `flows`; `outcome` as `report` spells results."""
    body = report(outcome, session=run.partition("@")[2], delivered=delivered)
    body["execution_summary"].update(flows_cited=list(flows), started_at=1.0)
    return Reported.of(run, body, "reports/r.json")


def match(run: str, flow: http.HTTPFlow, indicator: str = "ACME-001-01") -> IndicatorMatched:
    return IndicatorMatched(run, run.partition("@")[0], indicator, flow.id,
                            'tools/call request (flow x): arguments.note: matched "\\u001b[31mKEY"',
                            "arguments.note", "\x1b[31mKEY")


def test_a_match_marks_the_flow_pending_and_the_verdict_replaces_it() -> None:
    """A match: ⚠ and a comment naming the indicator; the run's verdict: its outcome's mark and a comment line
    naming attack, outcome and run. Traffic text reaches neither raw (escape sequences are escaped)."""
    flow = tflow.tflow(resp=True)
    flow_marks.record_match(flow, match("ACME-001@s1", flow))
    assert flow.marked == ":warning:"
    assert flow.comment.startswith("OATF ACME-001-01 matched: ") and "\x1b" not in flow.comment
    flow_marks.record_outcome(flow, concluded("exploited", "ACME-001@s1", (flow.id,)))
    assert flow.marked == ":red_circle:"
    assert flow.comment.splitlines()[-1] == "OATF ACME-001: exploited (completed), run ACME-001@s1"
    assert flow_marks.runs(flow)["ACME-001@s1"]["outcome"] == "exploited"


@pytest.mark.parametrize(("outcome", "delivered", "mark"), [
    ("exploited", True, ":red_circle:"), ("partial", True, ":orange_circle:"),
    ("not_exploited", True, ":green_circle:"), ("not_exploited", False, ":white_circle:"),
    ("not_exploited", True, ":green_circle:"), ("not_exploited", False, ":white_circle:"),
    ("error", True, ":purple_circle:")])
def test_each_outcome_has_its_mark(outcome: str, delivered: bool, mark: str) -> None:
    flow = tflow.tflow(resp=True)
    flow_marks.record_outcome(flow, concluded(outcome, "ACME-001@s1", (flow.id,), delivered))
    assert flow.marked == mark


def test_a_flow_in_several_runs_shows_the_most_severe() -> None:
    """Resisted and a pending match: the match (⚠); then that run exploited: 🔴, whatever order they come in."""
    flow = tflow.tflow(resp=True)
    flow_marks.record_outcome(flow, concluded("not_exploited", "ACME-001@a", (flow.id,)))
    assert flow.marked == ":green_circle:"
    flow_marks.record_match(flow, match("ACME-002@b", flow, "ACME-002-01"))
    assert flow.marked == ":warning:"
    flow_marks.record_outcome(flow, concluded("exploited", "ACME-002@b", (flow.id,)))
    assert flow.marked == ":red_circle:"
    flow_marks.record_outcome(flow, concluded("not_exploited", "ACME-003@c", (flow.id,)))
    assert flow.marked == ":red_circle:"


def test_a_mark_the_user_set_is_kept() -> None:
    flow = tflow.tflow(resp=True)
    flow.marked = ":star:"
    flow_marks.record_match(flow, match("ACME-001@s1", flow))
    flow_marks.record_outcome(flow, concluded("exploited", "ACME-001@s1", (flow.id,)))
    assert flow.marked == ":star:" and "exploited" in flow.comment


def test_phase_changes_are_recorded_per_run() -> None:
    flow = tflow.tflow(resp=True)
    change = PhaseChange("attacker", "trust", "swap", "trigger tools/call", flow.id, 1.0)
    flow_marks.record_phase(flow, PhaseChanged("ACME-001@s1", change))
    assert flow_marks.runs(flow)["ACME-001@s1"]["phases"] == ["attacker: trust → swap (trigger tools/call)"]
    assert flow.marked == ""  # a phase change is no finding


def mcp_call_flow(note: str) -> http.HTTPFlow:
    """A `tools/call` of `add` with `note`, answered, in an MCP session."""
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add",
                                                                        "arguments": {"a": 1, "note": note}}}
    body = json.dumps(call).encode()
    request = tflow.treq(method=b"POST", path=b"/mcp", content=body, headers=http.Headers(
        content_type="application/json", accept="application/json, text/event-stream", mcp_session_id="sess-flow",
        content_length=str(len(body))))
    answer = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "2"}]}}
    response = tflow.tresp(content=json.dumps(answer).encode(),
                           headers=http.Headers(content_type="application/json"))
    return tflow.tflow(req=request, resp=response)


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Let the event loop run (the addon applies what the monitor tells there) until `condition` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.02)


def test_oatf_flow_answers_the_messages_and_every_run_with_its_verdict(tmp_path: Path) -> None:
    """Through the addon's hooks and its monitor process: a `tools/call` carrying the key. `oatf.flow` lists the
    two decoded messages and the live run with the indicator, its path and excerpt; once the run concluded, its
    outcome, status and report."""
    addon = OatfAddon()
    flow = mcp_call_flow(f"{KEY}\x1b[2J")
    answers: dict[str, Any] = {}

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        for hook in (addon.requestheaders, addon.request, addon.responseheaders, addon.response):
            hook(flow)
        addon._flush()
        await until(lambda: bool(flow_marks.matches(flow)))
        answers["live"] = addon.flow_command([flow])
        assert addon.monitor is not None
        addon.monitor.tick(flow.request.timestamp_start + 700)  # its grace period ended
        await until(lambda: any(run["outcome"] for run in flow_marks.runs(flow).values()))
        answers["concluded"] = addon.flow_command([flow])

    with taddons.context(addon) as context:
        configured(addon, context, tmp_path)
        context.configure(addon, oatf_grace_period="10m")  # the flow is from 1999: live until the tick
        asyncio.run(proxy())
        assert addon.flow_command([]) == ["no flow matched"]
        addon.done()
    live, done = answers["live"], answers["concluded"]
    assert live[0].startswith(f"flow {flow.id} · POST http://address:22/mcp · 200 · MCP")
    assert live[1] == "2 message(s) decoded:"
    assert live[2].startswith('  request tools/call · id 3 (client → server): {"name":"add"')
    assert live[3].startswith('  response tools/call · id 3 (server → client): ')
    assert live[4] == "1 OATF run(s) took part in this flow:"
    assert live[5] == ("  run TEST-001@mcp_session:sess-flow · attack TEST-001 · grace, 2 message(s), "
                       "not delivered yet, verdict pending")
    assert live[6] == ('    indicator TEST-001-01 matched at arguments.note: '
                       '"-----BEGIN OPENSSH PRIVATE KEY-----\\x1b[2J"')
    assert all("\x1b" not in line and "\n" not in line for line in live + done)
    assert done[5].startswith("  run TEST-001@mcp_session:sess-flow · attack TEST-001 · exploited (completed) · "
                              "report ") and done[5].endswith(".json")
