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
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mitmproxy.addons.save import Save
from mitmproxy.io import FlowReader
from mitmproxy.test import taddons, tflow

from addon import flow_marks
from addon.oatf_addon import OatfAddon
from oatf_engine.monitor import Held, IndicatorMatched
from oatf_engine.reports import Reported
from tests.addon.test_monitor_faults import KEY, configured, wait_until
from tests.oatf_engine.monitor.test_monitor import RUG_PULL, call, event
from tests.oatf_engine.test_reports import report


def reported(result: str, session: str, delivered: bool = True) -> Reported:
    run = report(result, session=session, delivered=delivered)
    run["execution_summary"]["started_at"] = 1.0
    return Reported.of(f"r-{session}", run, "r.json")


def test_verdicts_are_logged_at_the_level_their_outcome_deserves(caplog: pytest.LogCaptureFixture) -> None:
    """Exploited and partial runs are warnings (the console's status bar shows them); resisted, not delivered
    and inconclusive ones are information (a line each, in one record per batch)."""
    addon = OatfAddon()
    with caplog.at_level(logging.INFO, logger="oatf"):
        addon._handle([reported("exploited", "a"), reported("partial", "b"), reported("not_exploited", "c"),
                       reported("not_exploited", "d", delivered=False)])
    levels = {line.split(":")[1].split()[0]: record.levelname for record in caplog.records  # a record a batch
              for line in record.getMessage().splitlines()}
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
        addon._flush()
        lines = addon.status()
        addon.done()
    assert lines[0] == "1 attack(s) loaded, 2 live run(s), 0 event(s) waiting for evaluation"
    assert lines[1].startswith("in memory: runs 2, materialised 2, sessions 2, ")  # the monitor process's `counts`
    assert lines[2].split() == ["RUN", "STATE", "MESSAGES", "DELIVERED", "PHASES", "MATCHED"]
    rows = {line.split()[0]: line for line in lines[3:]}
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


def saved_file(path: Path) -> dict[str, tuple[str, str]]:
    """{flow id: (mark, comment)} of the flows mitmproxy's `save` addon wrote to `path`."""
    with path.open("rb") as handle:
        return {f.id: (f.marked, f.comment) for f in FlowReader(handle).stream()}


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.01)


def saving(addon: OatfAddon, save: Save, tmp_path: Path, wait: str, proxy: Coroutine[Any, Any, None],
           **options: Any) -> None:
    """Run `proxy` on an event loop, the addon (configured, `oatf_save_wait` `wait`, and `options`) and
    mitmproxy's `save` addon (writing `flows.mitm`) loaded; then shut both down as mitmproxy does."""
    with taddons.context(save, addon) as context:
        configured(addon, context, tmp_path)
        context.configure(save, save_stream_file=str(tmp_path / "flows.mitm"))
        context.configure(addon, oatf_save_wait=wait, **options)
        asyncio.run(proxy)
        addon.done()
        save.done()


@pytest.mark.parametrize("wait", ["2s", "0s"])
def test_with_w_a_flow_is_written_once_its_evaluation_has_marked_it(tmp_path: Path, wait: str) -> None:
    """mitmproxy's `save` addon writes a flow right after the addon's `response` hook, which never holds the
    flow (the agent gets its response at once): the write is deferred while the flow's events are being
    evaluated, and happens once the match has marked and commented it — and, its run still live then, once the
    run has concluded (here at shutdown: the verdict the monitor concluded then is in the file, comment and
    mark). With `oatf_save_wait` 0 it is written at once, unmarked."""
    addon, save = OatfAddon(), Save()
    flow = tflow.tflow(resp=True)
    seen: dict[str, Any] = {}

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        addon.flows[flow.id] = flow
        addon._enqueue(call(KEY, time.time(), flow=flow.id))
        seen["hook"] = addon.response(flow)
        save.response(flow)
        seen["deferred"] = flow.id in addon.saving.deferred
        addon._flush()
        await until(lambda: not addon.saving.deferred and addon.waiting() == 0)

    saving(addon, save, tmp_path, wait, proxy())
    assert seen["hook"] is None
    (mark, comment), = saved_file(tmp_path / "flows.mitm").values()
    if wait != "0s":  # then held for its run's verdict, which the shutdown concluded
        assert seen["deferred"]
        matched, verdict = comment.split("\n")
        assert matched.startswith("OATF TEST-001-01 matched")
        (run,) = flow_marks.runs(flow).values()
        outcome = run["outcome"]
        assert verdict.startswith(f"OATF TEST-001: {outcome} (") and mark == flow_marks.MARKS[outcome]
    else:
        assert not seen["deferred"] and (mark, comment) == ("", "")
    assert not addon.marking and not addon.unevaluated


def test_with_w_a_flow_evaluated_before_its_end_is_written_after_the_mark_already_scheduled(
        tmp_path: Path) -> None:
    """The monitor can answer before the flow ends (a streamed answer's events go out as they arrive): nothing
    of the flow is left to evaluate, but its mark, scheduled on the event loop, is not applied yet. The write
    waits for it."""
    addon, save = OatfAddon(), Save()
    flow = tflow.tflow(resp=True)

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        addon.flows[flow.id] = flow
        addon._handle([IndicatorMatched("TEST-001@s", "TEST-001", "TEST-001-01", flow.id, "matched")])
        save.response(flow)
        assert flow.id in addon.saving.deferred and flow.marked == ""
        await until(lambda: not addon.saving.deferred)

    saving(addon, save, tmp_path, "2s", proxy())
    assert saved_file(tmp_path / "flows.mitm") == {flow.id: (":warning:", "OATF TEST-001-01 matched: matched")}
    assert not addon.marking


def test_with_w_a_flow_the_monitor_holds_is_written_once_placed_and_marked(tmp_path: Path) -> None:
    """Events the monitor holds to place them in a session (a keyless exchange, `Held`) are evaluated later: the
    flow's write waits until the monitor no longer holds them and their match has marked the flow. The flow is
    never held (the exchange that places it is the agent's next one); a flow still held at shutdown is written
    with what the monitor concluded then."""
    addon, save = OatfAddon(), Save()
    flow, late = tflow.tflow(resp=True), tflow.tflow(resp=True)
    seen: dict[str, Any] = {}

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        addon.flows[flow.id] = flow
        addon.flows[late.id] = late
        addon._handle([Held(frozenset({flow.id, late.id}))])
        save.response(flow)
        save.response(late)
        await asyncio.sleep(0.1)
        seen["held"] = sorted(addon.saving.deferred)
        addon._handle([IndicatorMatched("TEST-001@s", "TEST-001", "TEST-001-01", flow.id, "matched"),
                       Held(frozenset({late.id}))])
        await until(lambda: flow.id not in addon.saving.deferred)
        seen["left"] = sorted(addon.saving.deferred)
        addon._handle([IndicatorMatched("TEST-001@t", "TEST-001", "TEST-001-01", late.id, "late")])

    saving(addon, save, tmp_path, "60s", proxy())
    assert seen == {"held": sorted([flow.id, late.id]), "left": [late.id]}
    assert saved_file(tmp_path / "flows.mitm") == {flow.id: (":warning:", "OATF TEST-001-01 matched: matched"),
                                                   late.id: (":warning:", "OATF TEST-001-01 matched: late")}


def test_a_deferred_flow_the_save_addon_hands_over_again_is_written_once() -> None:
    """mitmproxy's `save` addon can hand a flow over twice (its `response`, then its `error` hook when the
    connection fails afterwards): while its write is deferred, the second is not written apart from it."""
    from addon.deferred_save import SaveDeferral

    busy = {"yes": True}
    written: list[str] = []
    deferral = SaveDeferral(lambda _flow_id: busy["yes"])
    deferral.install(SimpleNamespace(stream=object(), save_flow=lambda flow: written.append(flow.id)))
    deferral.wait = 5.0
    flow = tflow.tflow(resp=True)

    async def proxy() -> None:
        deferral.write_or_defer(flow)
        deferral.write_or_defer(flow)
        busy["yes"] = False
        deferral.settled(flow.id)

    asyncio.run(proxy())
    assert written == [flow.id]


def test_the_summary_says_what_traffic_was_not_inspected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A `tools/call` over `oatf_wire_max_body` passes uninspected (the monitor process decodes its steps and says
    `oversize_body`): the shutdown's summary says so beside the verdicts — a run of that session may read
    `resisted` for want of what it held."""
    from mitmproxy import http

    from tests.addon.test_monitor_faults import start_worker

    addon = OatfAddon()
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "' + \
        b"x" * 4096 + b'"}}}'
    with taddons.context(addon) as context, caplog.at_level(logging.WARNING, logger="oatf"):
        configured(addon, context, tmp_path)
        context.configure(addon, oatf_wire_max_body="1k")
        start_worker(addon)
        flow = tflow.tflow(resp=False)
        flow.request = http.Request.make("POST", "http://127.0.0.1:8000/mcp", body, {
            "content-type": "application/json", "mcp-session-id": "big"})
        flow.request.timestamp_start = flow.request.timestamp_end = time.time()
        addon.requestheaders(flow)
        addon.request(flow)
        assert wait_until(lambda: addon.tap.diagnostics["oversize_body"] == 1)
        addon.done()
    [said] = [r.getMessage() for r in caplog.records if "not inspected" in r.getMessage()]
    assert said.startswith("oatf: traffic not inspected (oversize_body 1): a run of its sessions may read resisted")
