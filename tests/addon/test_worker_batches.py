"""The worker takes the traffic in batches (`addon.oatf_addon.COALESCE_SECONDS`): the events that come while it
lets an event that woke it wait are journaled in one record with it, not one record each. A real monitor
process; no clock marks (each mark also closes a record)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.test import taddons

import addon.oatf_addon as oatf_addon
from addon.oatf_addon import OatfAddon
from tests.addon.test_monitor_faults import KEY, configured, wait_until
from tests.oatf_engine.monitor.test_monitor import call


def received(report_dir: Path) -> list[list[Any]]:
    """The `received` records of the journal, in order."""
    lines = [line for segment in sorted((report_dir / "journal").glob("*.jsonl"))
             for line in segment.read_text(encoding="utf-8").splitlines() if line]
    return [record["received"] for record in map(json.loads, lines) if "received" in record]


def start_worker_only(addon: OatfAddon, context: Any, tmp_path: Path) -> None:
    """The addon configured with its library loaded, and its worker running without the clock marks."""
    configured(addon, context, tmp_path)
    assert addon.library_ready.wait(30)
    addon.worker = threading.Thread(target=addon._work, daemon=True)
    addon.worker.start()


@pytest.mark.parametrize("window", [2.0, 0.0])
def test_events_that_come_while_the_worker_waits_join_one_journal_record(tmp_path: Path, window: float,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Five events 20 ms apart: with a 2 s window, one record of five; without one (the window 0), the worker
    wakes for each and journals it alone (or with the next, when its thread was late)."""
    monkeypatch.setattr(oatf_addon, "COALESCE_SECONDS", window)
    addon = OatfAddon()
    with taddons.context(addon) as context:
        start_worker_only(addon, context, tmp_path)
        for n in range(5):
            addon._enqueue(call(KEY, float(n), session=f"s{n}"))
            time.sleep(0.02)
        assert wait_until(lambda: sum(map(len, received(tmp_path / "reports"))) == 5)
        sizes = [len(record) for record in received(tmp_path / "reports")]
        addon.done()
    if window:
        assert sizes == [5]
    else:
        assert len(sizes) > 1, sizes


def test_an_event_the_worker_holds_back_for_its_batch_counts_as_waiting(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """While the worker lets an event wait for the traffic after it (not journaled yet), `waiting` counts it: a
    status of 0 events waiting means every event is journaled (a SIGKILL then loses none)."""
    monkeypatch.setattr(oatf_addon, "COALESCE_SECONDS", 2.0)
    addon = OatfAddon()
    with taddons.context(addon) as context:
        start_worker_only(addon, context, tmp_path)
        addon._enqueue(call(KEY, 0.0, session="held back"))
        assert wait_until(lambda: addon.events.qsize() == 0)  # taken by the worker
        assert not received(tmp_path / "reports") and addon.waiting() == 1
        assert wait_until(lambda: received(tmp_path / "reports") != [])
        addon.done()


def test_a_growing_backlog_is_logged_once_per_step_by_the_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Events queued faster than they are evaluated (here: while no clock mark releases any): the worker warns
    when `BACKLOG_WARNING` more are waiting, once per step (the event loop only queues them)."""
    monkeypatch.setattr(oatf_addon, "BACKLOG_WARNING", 10)
    addon = OatfAddon()
    with taddons.context(addon) as context:
        start_worker_only(addon, context, tmp_path)
        caplog.set_level("WARNING", logger="oatf")
        for n in range(25):
            addon._enqueue(call(KEY, float(n), session=f"s{n}"))
        assert wait_until(lambda: sum(map(len, received(tmp_path / "reports"))) == 25)
        addon._enqueue(call(KEY, 25.0, session="s25"))  # the worker's next batch sees the backlog
        assert wait_until(lambda: "behind the traffic" in caplog.text)
        warnings = [r.getMessage() for r in caplog.records if "behind the traffic" in r.getMessage()]
        addon.done()
    assert 1 <= len(warnings) <= 2 and all(int(w.split(": ")[-1].split()[0]) >= 10 for w in warnings)
