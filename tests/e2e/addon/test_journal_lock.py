"""One writer per report directory (`oatf_engine.journal.take_lock`): the proxy's addon takes `journal.lock` in
its report directory as `oatf tap`, `oatf monitor` and `oatf recover` do, so two writers never share a journal.
A real mitmdump with the addon, and a second writer — an `oatf tap` judging alone — on the same directory, in
both orders: the tap started second judges without a journal, the proxy started second refuses to start."""

from __future__ import annotations

import time
from pathlib import Path

from testing.oatf_proxy import oatf_proxy, refused_start
from testing.taps import reports
from tests.oatf_cli.test_tap import ATTACK, GUARD, _line, open_session

BUSY = "another process journals in"


def journaled(report_dir: Path, text: bytes) -> bool:
    return text in b"".join(p.read_bytes() for p in (report_dir / "journal").glob("*.jsonl"))


def test_a_tap_on_the_proxys_report_directory_finds_the_lock_taken(tmp_path: Path) -> None:
    """The proxy holds the lock while it runs: a tap started on its report directory says so and judges
    without a journal (its run still reported), and takes the lock once the proxy has stopped."""
    with oatf_proxy(tmp_path, "shared", [Path(ATTACK)], record=False) as proxy:
        _, stderr = open_session(proxy.report_dir).communicate(timeout=GUARD)  # stdin closed: the session ends
        assert BUSY.encode() in stderr, stderr
        assert proxy.interrupt() == 0
    assert [r["execution_summary"]["status"] for r in reports(proxy.report_dir)] == ["completed"]
    _, stderr = open_session(proxy.report_dir).communicate(timeout=GUARD)
    assert BUSY.encode() not in stderr, stderr


def test_a_proxy_refuses_a_live_taps_report_directory(tmp_path: Path) -> None:
    """A tap judging alone journals an open run (grace 10 min) in a directory; a proxy started there must not
    take that journal for a crashed proxy's and report the tap's live run as `recovered` (nor delete its
    segments): it says so and does not start. The tap's run is reported once, by the tap."""
    report_dir = tmp_path / "shared-reports"
    tap = open_session(report_dir, flags=("--grace-period", "10m"))
    try:
        deadline = time.monotonic() + GUARD
        while not journaled(report_dir, b'"tools/list"'):
            assert time.monotonic() < deadline, "the tap never journaled its session"
            time.sleep(0.05)
        log = refused_start(tmp_path, {"oatf_attacks": ATTACK, "oatf_report_dir": str(report_dir)})
        assert BUSY in log and "did not stop cleanly" not in log, log
        assert journaled(report_dir, b'"tools/list"'), "the tap's journal is intact"
        _line(tap, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "forecast", "arguments": {
            "city": "Oslo", "context": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----"}}})
        tap.communicate(timeout=GUARD)  # stdin closed: the session ends, the tap reports its run
    finally:
        tap.kill()
    assert [(r["outcome"], r["execution_summary"]["status"]) for r in reports(report_dir)] == \
        [("exploited", "completed")]
