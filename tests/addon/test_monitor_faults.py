"""Faults around the monitor process, with a real child: a batch that cannot be pickled, a child that stops
answering, a child killed with open runs (concluded from the journal at once), and the addon's reading of
concluded runs while the receiver thread appends to them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.test import taddons

import addon.oatf_addon as oatf_addon
from addon.oatf_addon import OatfAddon
from oatf_engine.monitor import IndicatorMatched
from oatf_engine.recovery import pending_journal
from oatf_engine.reports import Reported
from oatf_engine.wire.jsonrpc import TRUNCATED
from tests.addon.test_monitor_process import Collector, start
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, call, event
from tests.oatf_engine.test_reports import report

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----"


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def start_worker(addon: OatfAddon) -> None:
    """What `running` starts on mitmproxy's event loop: the worker, and the clock marks (`addon.watermark`),
    here from a thread."""
    addon.worker = threading.Thread(target=addon._work, daemon=True)
    addon.worker.start()

    def clock() -> None:
        while not addon.stopping.wait(0.05):
            addon.mark()

    threading.Thread(target=clock, daemon=True).start()


def nested(levels: int, inner: Any) -> Any:
    for _ in range(levels):
        inner = [inner]
    return inner


def test_a_batch_that_cannot_be_pickled_is_sent_cut_and_sending_goes_on(tmp_path: Path) -> None:
    """An event nested 2,000 levels deep (pickling fails from about 800) in a batch: the batch is sent with that
    event cut at MAX_DEPTH, the failure is reported once, and the next batches are still sent and evaluated."""
    collector = Collector()
    monitor = start(collector, tmp_path)
    deep = event("tools/call", {"name": "add", "arguments": {"note": nested(2_000, KEY)}}, 0.0, session="deep")
    monitor.observe([deep, call(KEY, 0.0, session="same-batch")])
    monitor.observe([call(KEY, 1.0, session="next-batch")])
    assert collector.wait(lambda: collector.evaluated == 2)
    matched = {o.run for o in collector.outputs if isinstance(o, IndicatorMatched)}
    assert matched == {"TEST-001@mcp_session:same-batch", "TEST-001@mcp_session:next-batch"}
    [failure] = collector.failures
    assert "sending events to the monitor process failed" in failure and "RecursionError" in failure
    assert monitor.unsent == 0
    leaf = deep.content["arguments"]["note"]
    while isinstance(leaf, list):
        leaf = leaf[0]
    assert leaf == TRUNCATED
    assert monitor.shutdown(timeout=30)
    sessions = {r.summary.session for r in collector.reported()}
    assert sessions == {"mcp_session:deep", "mcp_session:same-batch", "mcp_session:next-batch"}


def test_a_stopped_child_is_stalled_and_shutdown_does_not_wait_for_it(tmp_path: Path) -> None:
    collector = Collector()
    monitor = start(collector, tmp_path)
    monitor.stall_seconds = 0.5
    monitor.ping()
    assert wait_until(lambda: monitor._ping_sent is None)  # answered: not stalled
    assert not monitor.stalled
    os.kill(monitor._process.pid, signal.SIGSTOP)
    monitor.observe([call(KEY, 0.0)])

    def pinged_and_stalled() -> bool:
        monitor.ping()  # a no-op while one is awaited; again if the child answered before the signal stopped it
        return monitor.stalled

    assert wait_until(pinged_and_stalled)
    stopping = threading.Thread(target=monitor.shutdown, args=(120.0,))
    stopping.start()
    stopping.join(timeout=30)  # bounded: a stalled child is not waited for (the shutdown allows it 120 s)
    assert not stopping.is_alive() and not monitor.alive


def configured(addon: OatfAddon, context: Any, tmp_path: Path) -> None:
    attack = tmp_path / "attack.yaml"
    attack.write_text(POISONED_TOOL, encoding="utf-8")
    context.configure(addon, oatf_attacks=str(attack), oatf_report_dir=str(tmp_path / "reports"), oatf_watch=False)


def test_the_addon_replaces_a_stalled_monitor_and_evaluation_goes_on(tmp_path: Path) -> None:
    addon = OatfAddon()
    with taddons.context(addon) as context:
        configured(addon, context, tmp_path)
        first = addon.monitor
        assert first is not None
        first.stall_seconds = 0.5
        os.kill(first._process.pid, signal.SIGSTOP)
        start_worker(addon)
        addon._enqueue(call("lost with the stalled monitor", 0.0, session="before"))
        assert wait_until(lambda: addon.monitor is not first)
        assert not first.alive
        addon._enqueue(call(KEY, time.time(), session="after"))
        assert wait_until(lambda: addon.waiting() == 0)
        addon.done()
    [after] = [r for r in addon.concluded_reports()[0] if r.summary.session == "mcp_session:after"]
    assert after.summary.outcome == "exploited" and after.path is not None


def test_the_runs_of_a_killed_monitor_are_concluded_from_the_journal_at_once_and_once(tmp_path: Path) -> None:
    """SIGKILL of the monitor process with an exploited run open (grace period one hour): the addon replaces it,
    and the new one concludes that run from the journal now (`recovered`, exploited, its evidence), not at the
    next start; evaluation goes on; shutdown reports the later run and, with nothing left to recover, clears
    the journal, so that the next start reports nothing again."""
    addon = OatfAddon()
    with taddons.context(addon) as context:
        configured(addon, context, tmp_path)
        context.configure(addon, oatf_grace_period="1h")
        first = addon.monitor
        assert first is not None
        start_worker(addon)
        addon._enqueue(call(KEY, time.time(), session="before"))
        assert wait_until(lambda: addon.waiting() == 0)  # evaluated: journaled before it was sent
        os.kill(first._process.pid, signal.SIGKILL)
        assert wait_until(lambda: addon.monitor is not first)
        assert wait_until(lambda: any(r.summary.session == "mcp_session:before" for r in addon.concluded_reports()[0]))
        [before] = reports(tmp_path)
        assert (before["execution_summary"]["status"], before["outcome"]) == ("recovered", "exploited")
        assert "PRIVATE KEY" in str(before["verdict"]["indicator_verdicts"])
        assert wait_until(lambda: not addon.unrecovered)  # the recovery answers once its reports are durable
        addon._enqueue(call("nothing here", time.time(), session="after"))
        assert wait_until(lambda: addon.waiting() == 0)
        addon.done()
    assert sorted((r["execution_summary"]["session"], r["execution_summary"]["status"]) for r in reports(tmp_path)) \
        == [("mcp_session:after", "interrupted"), ("mcp_session:before", "recovered")]
    assert not pending_journal(tmp_path / "reports"), "nothing is left for the next start to report again"


def reports(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (tmp_path / "reports").glob("*.json") if not p.name.startswith(".")]


def concluded(session: str) -> Reported:
    return Reported.of("r", {**report("exploited", session=session), "execution_summary": {
        "status": "completed", "session": session, "started_at": 1.0, "ended_at": 2.0}}, "r.json")


def test_done_and_verdicts_read_a_snapshot_of_the_concluded_runs(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver thread appends concluded runs while `done` and `oatf.verdicts` build the summary table:
    they read a snapshot (a deque iterated while it grows raises `deque mutated during iteration`)."""
    addon = OatfAddon()

    def table(reports: Any, width: int | None = None, counts: Any = None) -> str:
        rows = 0
        for _ in reports:
            rows += 1
            addon._handle([concluded(f"s{rows}")])  # the receiver, meanwhile
        return f"{rows} row(s)"

    monkeypatch.setattr(oatf_addon, "summary_table", table)
    with taddons.context(addon) as context:
        configured(addon, context, tmp_path)
        addon._handle([concluded("s0")])
        assert addon.verdicts() == ["1 row(s)"]
        addon.done()
    rows, outcomes = addon.concluded_reports()
    assert len(rows) == 4 and outcomes == {"exploited": 4}  # s0, one appended by verdicts, two by done
