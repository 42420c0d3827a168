"""The addon's count of events waiting for evaluation includes those sent to the monitor process and not yet
evaluated (`oatf.status`, the backlog warning). mitmproxy's test context; a real monitor process, paused with
SIGSTOP so that its backlog is certain."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from mitmproxy.test import taddons

from addon.oatf_addon import OatfAddon
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, call


def test_events_sent_to_a_busy_monitor_count_as_waiting(tmp_path: Path) -> None:
    attack = tmp_path / "attack.yaml"
    attack.write_text(POISONED_TOOL, encoding="utf-8")
    addon = OatfAddon()
    with taddons.context(addon) as context:
        context.configure(addon, oatf_attacks=str(attack), oatf_report_dir=str(tmp_path / "reports"),
                          oatf_watch=False)
        assert addon.monitor is not None
        child = addon.monitor._process.pid
        os.kill(child, signal.SIGSTOP)
        try:
            addon._send([call("x", 0.0, session=f"s{n}") for n in range(5)])
            assert addon.waiting() == 5
            assert "5 event(s) waiting for evaluation" in addon.status()[0]
        finally:
            os.kill(child, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while addon.waiting() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert addon.waiting() == 0
        addon.done()
    assert len(list((tmp_path / "reports").glob("*.json"))) == 5
