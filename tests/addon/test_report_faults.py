"""A report directory the monitor process cannot write to (read-only, or a full disk): the proxy keeps
evaluating, logs the failure once, keeps the journal at shutdown, and the next start (here `oatf recover`, the
same recovery) with the directory writable again reports those runs — each run's report written exactly once.
mitmproxy's test context, a real child."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mitmproxy.test import taddons

from addon.oatf_addon import OatfAddon
from oatf_engine.journal import JOURNAL_DIR
from oatf_engine.reports import JSONL_NAME
from tests.addon.test_monitor_faults import KEY, start_worker, wait_until
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, call


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """`directory` where no file can be created: mode 0500, and immutable for root (whom modes do not stop);
    its existing subdirectories (the journal) stay writable. Skips the test where neither works."""
    directory.chmod(0o500)
    immutable = os.geteuid() == 0 and subprocess.run(["chattr", "+i", str(directory)],
                                                     capture_output=True).returncode == 0
    try:
        probe = directory / "probe"
        try:
            probe.touch()
        except OSError:
            yield
        else:
            probe.unlink()
            pytest.skip("cannot make a directory read-only here")
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
        directory.chmod(0o700)


def start(addon: OatfAddon, context: taddons.context, tmp_path: Path) -> None:
    attack = tmp_path / "attack.yaml"
    attack.write_text(POISONED_TOOL, encoding="utf-8")
    context.configure(addon, oatf_attacks=str(attack), oatf_report_dir=str(tmp_path / "reports"),
                      oatf_watch=False, oatf_grace_period="1s")
    start_worker(addon)


def test_an_unwritable_report_directory_keeps_the_runs_for_the_next_start(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reports = tmp_path / "reports"
    addon = OatfAddon()
    with taddons.context(addon) as context:
        start(addon, context, tmp_path)
        with read_only(reports), caplog.at_level(logging.ERROR, logger="oatf"):
            now = time.time()
            addon._enqueue(call(KEY, now, session="early"))
            addon._enqueue(call("nothing", now, session="quiet"))
            assert wait_until(lambda: len(addon.concluded_reports()[0]) == 2)  # concluded by the clock, not written
            addon._enqueue(call(KEY, time.time(), session="late"))  # evaluation goes on
            addon.done()  # "late" is concluded at shutdown, and not written either
        failures = [r.message for r in caplog.records if "report not written" in r.message]
        assert len(failures) == 1 and "Errno" in failures[0], failures
        assert any("3 report(s) could not be written" in r.message for r in caplog.records)
    outcomes = {r.summary.session: (r.summary.outcome, r.path) for r in addon.concluded_reports()[0]}
    assert outcomes == {"mcp_session:early": ("exploited", None), "mcp_session:quiet": ("not_delivered", None),
                        "mcp_session:late": ("exploited", None)}
    assert not list(reports.glob("*.json")) and list((reports / JOURNAL_DIR).glob("*.jsonl")), "journal kept"

    # The directory is writable again: the next start (or `oatf recover`, the same code) reports the three runs.
    done = subprocess.run([str(Path(sys.executable).parent / "oatf"), "recover", str(reports), "--attacks",
                           str(tmp_path / "attack.yaml"), "--grace-period", "1s"], capture_output=True, text=True,
                          timeout=120)
    assert "3 run(s) recovered" in done.stderr, done.stdout + done.stderr
    written = [json.loads(p.read_text()) for p in reports.glob("*.json")]
    sessions = sorted(r["execution_summary"]["session"] for r in written)
    assert sessions == ["mcp_session:early", "mcp_session:late", "mcp_session:quiet"]
    lines = [json.loads(line) for line in (reports / JSONL_NAME).read_text().splitlines()]
    assert sorted(r["execution_summary"]["session"] for r in lines) == sessions, "each run reported once"
    assert not list((reports / JOURNAL_DIR).glob("*.jsonl")), "every run reported: the journal is cleared"
