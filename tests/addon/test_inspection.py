"""What people read of the addon in the UIs and on the terminal: commands answered as lines, verdicts logged at
the level their outcome deserves, the summary table on the terminal after the console, a closed MCP session
shown closing, and a flow saved by `-w` only once its evaluation has marked it. mitmproxy's test context; a real
monitor process."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.addons.save import Save
from mitmproxy.test import taddons, tflow

import addon.oatf_addon as oatf_addon
from addon.oatf_addon import OatfAddon
from oatf_engine.reports import Reported
from tests.addon.test_monitor_faults import KEY, configured, wait_until
from tests.oatf_engine.monitor.test_monitor import RUG_PULL, call, event
from tests.oatf_engine.test_reports import report


def reported(result: str, session: str, delivered: bool = True) -> Reported:
    run = report(result, session=session, delivered=delivered)
    run["execution_summary"]["started_at"] = 1.0
    return Reported.of(f"r-{session}", run, Path("r.json"))


def test_verdicts_are_logged_at_the_level_their_outcome_deserves(caplog: pytest.LogCaptureFixture) -> None:
    """Exploited and partial runs are warnings (the console's status bar shows them); resisted, not delivered
    and inconclusive ones are information."""
    addon = OatfAddon()
    with caplog.at_level(logging.INFO, logger="oatf"):
        addon._handle([reported("exploited", "a"), reported("partial", "b"), reported("not_exploited", "c"),
                       reported("not_exploited", "d", delivered=False)])
    levels = {record.getMessage().split(":")[1].split()[0]: record.levelname for record in caplog.records}
    assert levels == {"exploited": "WARNING", "partial": "WARNING", "resisted": "INFO", "not_delivered": "INFO"}


def test_verdicts_command_answers_the_sorted_table_one_line_an_item(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A list of lines (the console's data viewer shows one a row; never one string with `\\n` in it), also
    logged as one multi-line record for mitmweb's event log."""
    addon = OatfAddon()
    with taddons.context(addon) as context:
        configured(addon, context, tmp_path)
        assert addon.verdicts() == ["no run has concluded yet"]
        addon._handle([reported("not_exploited", "a"), reported("exploited", "b")])
        with caplog.at_level(logging.INFO, logger="oatf"):
            lines = addon.verdicts()
        addon.done()
    assert all("\n" not in line for line in lines)
    assert [line.split()[1:3] for line in lines[1:3]] == [["b", "exploited"], ["a", "resisted"]]
    assert lines[-1].startswith("2 run(s): 1 exploited")
    assert "oatf.verdicts:\n" + "\n".join(lines) in caplog.text


def test_status_lists_live_runs_as_a_table_and_a_closed_mcp_session_as_closing(tmp_path: Path) -> None:
    """A `DELETE` the server accepted with the session's `Mcp-Session-Id` closes the session: its run shows
    `session closed` (and concludes a grace period later); a refused `DELETE` (405) closes nothing."""
    attack = tmp_path / "rug.yaml"
    attack.write_text(RUG_PULL, encoding="utf-8")
    addon = OatfAddon()
    with taddons.context(addon) as context:
        context.configure(addon, oatf_attacks=str(attack), oatf_report_dir=str(tmp_path / "reports"),
                          oatf_watch=False, oatf_grace_period="60s")
        now = time.time()
        addon._send([event("tools/call", {"arguments": {"q": "x"}}, now, session=s) for s in ("a", "b")])
        assert wait_until(lambda: addon.waiting() == 0)
        for session, status in (("a", 204), ("b", 405)):
            delete = tflow.tflow(req=tflow.treq(method="DELETE"), resp=tflow.tresp(status_code=status))
            delete.request.headers["Mcp-Session-Id"] = session
            addon._closed_session(delete)
        assert addon.monitor is not None
        addon._close_sessions(addon.monitor)
        lines = addon.status()
        addon.done()
    assert lines[0] == "1 attack(s) loaded, 2 live run(s), 0 event(s) waiting for evaluation"
    assert lines[1].split() == ["RUN", "STATE", "MESSAGES", "DELIVERED", "PHASES", "MATCHED"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert "session closed" in rows["TEST-002@mcp_session:a"] and " live " in rows["TEST-002@mcp_session:b"]
    assert " no " in rows["TEST-002@mcp_session:b"] and "trust" in rows["TEST-002@mcp_session:b"]


class TermLog:
    """Stands for mitmproxy's terminal log addon (`mitmdump`, `mitmweb`): the log reaches the terminal."""


@pytest.mark.parametrize("terminal_log", [False, True])
def test_the_summary_table_reaches_the_terminal_after_the_console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  terminal_log: bool) -> None:
    """The `mitmproxy` console logs to its own event log only, and has stopped its UI when `done` runs: the
    table is written to the terminal then. Where a terminal log shows it already, it is not written twice."""
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "__stderr__", terminal)
    addon = OatfAddon()
    with taddons.context(addon, *([TermLog()] if terminal_log else [])) as context:
        configured(addon, context, tmp_path)
        addon._handle([reported("exploited", "a")])
        addon.done()
    if terminal_log:
        assert terminal.getvalue() == ""
    else:
        lines = terminal.getvalue().splitlines()
        assert lines[0] == "oatf verdicts:" and lines[2].split()[:3] == ["ACME-001", "a", "exploited"]
        assert lines[-1] == f"oatf reports in {(tmp_path / 'reports').resolve()}"


@pytest.mark.parametrize("wait", ["2s", "0s"])
def test_with_w_a_flow_is_saved_once_its_evaluation_has_marked_it(tmp_path: Path, wait: str) -> None:
    """The `response` hook hands mitmproxy an awaitable while the flow's events are being evaluated (mitmproxy
    awaits it before the `save` addon's hook): when it ends, the match has marked and commented the flow. With
    `oatf_save_wait` 0 nothing waits (and the flow is not marked yet)."""
    addon = OatfAddon()
    flow = tflow.tflow(resp=True)
    marked: dict[str, Any] = {}

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        addon.flows[flow.id] = flow
        addon._enqueue(call(KEY, time.time(), flow=flow.id))
        saving = addon.response(flow)
        marked["before"] = flow.marked
        addon._send(addon._drain())
        if saving is not None:
            await saving
        marked["saved"] = (flow.marked, flow.comment)

    with taddons.context(Save(), addon) as context:
        configured(addon, context, tmp_path)
        context.configure(addon, save_stream_file=str(tmp_path / "flows.mitm"), oatf_save_wait=wait)
        asyncio.run(proxy())
        addon.done()
    assert marked["before"] == ""
    if wait != "0s":
        assert marked["saved"][0] == oatf_addon.MARK and "TEST-001-01 matched" in marked["saved"][1]
    else:
        assert marked["saved"] == ("", "")
    assert not addon.saving and not addon.unevaluated


def test_with_w_a_flow_evaluated_before_its_response_hook_waits_for_the_mark_already_scheduled(
        tmp_path: Path) -> None:
    """The monitor can answer before mitmproxy runs the `response` hook (a streamed answer's events go out as
    they arrive): nothing of the flow is left to evaluate, but its mark, scheduled on the event loop, is not
    applied yet. The hook still hands mitmproxy an awaitable, which ends once the mark is on the flow."""
    from oatf_engine.monitor import IndicatorMatched

    addon = OatfAddon()
    flow = tflow.tflow(resp=True)
    saved: dict[str, Any] = {}

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        addon.flows[flow.id] = flow
        addon._mark(IndicatorMatched("TEST-001@s", "TEST-001", "TEST-001-01", flow.id, "matched"))
        saving = addon.response(flow)
        assert saving is not None and flow.marked == ""
        await saving
        saved["flow"] = (flow.marked, flow.comment)

    with taddons.context(Save(), addon) as context:
        configured(addon, context, tmp_path)
        context.configure(addon, save_stream_file=str(tmp_path / "flows.mitm"), oatf_save_wait="2s")
        asyncio.run(proxy())
        addon.done()
    assert saved["flow"] == (oatf_addon.MARK, "OATF TEST-001-01 matched: matched")
    assert not addon.marking
