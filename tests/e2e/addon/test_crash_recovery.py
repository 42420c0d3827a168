"""Nothing lost when the proxy is killed: `kill -9` of mitmdump mid-run, then the next start (or `oatf
recover`) concludes every run that was open, from the journal in the report directory (`oatf_engine.journal`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from oatf_engine.events import ObservedEvent
from oatf_engine.journal import JOURNAL_DIR, decode_item, records, take_lock
from oatf_engine.recovery import pending_journal
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.steps import StepDecoder
from testing.oatf_proxy import OatfProxy, Peers, oatf_proxy, run, verdict_of

from . import agents
from .attacks import TOOL_POISONING
from .test_bad_input import monitor_processes

OATF = Path(sys.executable).parent / "oatf"


GRACE = "30m"
"""Long enough that a crash comes inside it; shorter than a run's lifetime (1 h), which would end it first."""


def journaled_closes(report_dir: Path) -> list[str]:
    """The MCP sessions the journal shows closed (`DELETE`)."""
    return [record["closed"][0] for record in records(report_dir / JOURNAL_DIR) if "closed" in record]


def crash_with_open_runs(attackers: Peers, tmp_path: Path) -> tuple[Path, str, str]:
    """An exploited session its agent leaves open and a resisting one its agent closes (`DELETE`), inside a
    30-minute grace period, then SIGKILL to mitmdump's process group: the report directory, and the two MCP
    session ids."""
    url = attackers.url("mcp_poisoned", "/mcp")
    with oatf_proxy(tmp_path, "crash", [TOOL_POISONING], grace=GRACE, record=False) as proxy:
        naive = run(agents.mcp_poisoned_agent(url, proxy.url, "naive", close=False))
        careful = run(agents.mcp_poisoned_agent(url, proxy.url, "careful"))
        proxy.wait_for_log(lambda text: "DEMO-001-01 matched" in text)
        proxy.wait_until(lambda: "2 live run(s), 0 event(s) waiting" in proxy.command("oatf.status"))
        proxy.wait_until(lambda: journaled_closes(proxy.report_dir) == [careful])
        os.killpg(proxy.process.pid, signal.SIGKILL)
        proxy.process.wait(timeout=10)
        assert proxy.reports() == [], "killed inside the grace period: nothing was reported"
        return proxy.report_dir, naive, careful


def assert_recovered(reports: list[dict], naive: str, careful: str) -> None:
    by_session = {r["execution_summary"]["session"]: r for r in reports}
    exploited, resisted = by_session[f"mcp_session:{naive}"], by_session[f"mcp_session:{careful}"]
    assert len(reports) == 2
    assert verdict_of(exploited) == ("exploited", {"DEMO-001-01": "matched"})
    assert exploited["execution_summary"]["status"] == "recovered"
    evidence = exploited["verdict"]["indicator_verdicts"][0]["evidence"]
    assert 'PRIVATE KEY" matched "' in evidence and "BEGIN OPENSSH PRIVATE KEY" not in evidence, "redacted"
    # The careful agent closed its session before the crash: nothing later could change its run, which
    # concludes as the proxy would have concluded it had it gone on — a full grace period after its last
    # message, `resisted` — not `recovered` and cut short (`inconclusive`), as when closes were not journaled.
    summary = resisted["execution_summary"]
    assert (resisted["verdict"]["result"], resisted["outcome"]) == ("not_exploited", "resisted")
    assert (summary["status"], summary["grace_applied"]) == ("completed", True)


def test_the_next_start_concludes_the_runs_a_killed_proxy_left_open(attackers: Peers, tmp_path: Path) -> None:
    report_dir, naive, careful = crash_with_open_runs(attackers, tmp_path)
    with oatf_proxy(tmp_path, "crash", [TOOL_POISONING], grace=GRACE, record=False) as again:
        again.wait_for_log(lambda text: "left open by a proxy that did not stop cleanly" in text)
        assert_recovered(again.reports(), naive, careful)
        assert not list((report_dir / "journal").glob("*.jsonl"))[:-1], "the old journal is gone"
        assert again.interrupt() == 0
    assert len(again.reports()) == 2, "recovered runs are not reported twice"


def test_oatf_recover_concludes_them_from_the_command_line(attackers: Peers, tmp_path: Path) -> None:
    report_dir, naive, careful = crash_with_open_runs(attackers, tmp_path)
    done = subprocess.run([str(OATF), "recover", str(report_dir), "--attacks", str(TOOL_POISONING),
                           "--grace-period", GRACE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # something was exploited
    reports = [json.loads(p.read_text()) for p in report_dir.glob("*.json") if not p.name.startswith(".")]
    assert_recovered(reports, naive, careful)
    assert "2 run(s) recovered" in done.stderr
    again = subprocess.run([str(OATF), "recover", str(report_dir), "--attacks", str(TOOL_POISONING)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing to recover" in again.stderr


@contextlib.contextmanager
def upload_under_way(proxy: OatfProxy) -> Iterator[None]:
    """A request whose headers reached the proxy and whose body has not: the step is under way, so the watermark
    stays at its stamp (`addon.watermark.Steps`, for up to 30 s) and nothing later is handed to the monitor."""
    address = urlsplit(proxy.url)
    with socket.create_connection((address.hostname, address.port)) as upload:
        upload.sendall(b"POST http://127.0.0.1:9/upload HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
                       b"Content-Length: 1000\r\n\r\npartial")
        yield


def journaled_calls(report_dir: Path, session: str) -> int:
    """The answers to `tools/call` of that MCP session in the journal (a proxy killed now leaves them there)."""
    items = [decode_item(fields) for record in records(report_dir / JOURNAL_DIR)
             for key in ("received", "events") for fields in record.get(key, [])]
    # most are wire steps, decoded as the monitor process decodes them
    events = [e for e in StepDecoder(WireDecoder()).decoded(items) if isinstance(e, ObservedEvent)]
    return sum(1 for e in events if e.session_keys.get("mcp_session") == session and e.event_type == "tools/call"
               and e.direction == "response")


def test_a_kill_right_after_the_traffic_loses_nothing_the_watermark_had_not_released(
        attackers: Peers, tmp_path: Path) -> None:
    """Events are journaled as the proxy takes them in, not when the watermark hands them to the monitor: an
    exploit in the last messages before SIGKILL, with the watermark held back (an upload under way), is in the
    journal, and `oatf recover` reports it. (Journaled at hand-over, as before, it was lost.)"""
    url = attackers.url("mcp_poisoned", "/mcp")
    with oatf_proxy(tmp_path, "sudden", [TOOL_POISONING], grace="1h", record=False) as proxy, \
            upload_under_way(proxy):
        naive = run(agents.mcp_poisoned_agent(url, proxy.url, "naive", close=False))
        proxy.wait_until(lambda: journaled_calls(proxy.report_dir, naive) == 1)
        assert "DEMO-001-01 matched" not in proxy.log(), "the watermark had not released the exploit"
        os.killpg(proxy.process.pid, signal.SIGKILL)
        proxy.process.wait(timeout=10)
    done = subprocess.run([str(OATF), "recover", str(proxy.report_dir), "--attacks", str(TOOL_POISONING),
                           "--grace-period", "1h"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # something was exploited
    [report] = [json.loads(p.read_text()) for p in proxy.report_dir.glob("*.json")]
    assert report["execution_summary"]["session"] == f"mcp_session:{naive}"
    assert (report["execution_summary"]["status"], verdict_of(report)) == \
        ("recovered", ("exploited", {"DEMO-001-01": "matched"}))


def test_a_killed_monitor_process_loses_no_event_and_evaluates_none_twice(attackers: Peers, tmp_path: Path) -> None:
    """SIGKILL of the monitor process while the proxy holds events the watermark has not released (an upload
    under way): the new monitor process concludes from the journal the run the lost one followed (`recovered`),
    and gets the held events from the proxy when the watermark moves on — not from the journal too: that run is
    reported once, by the new one."""
    url = attackers.url("mcp_poisoned", "/mcp")
    with oatf_proxy(tmp_path, "lost", [TOOL_POISONING], grace="1h", record=False) as proxy:
        early = run(agents.mcp_poisoned_agent(url, proxy.url, "naive", close=False))
        proxy.wait_for_log(lambda text: "DEMO-001-01 matched" in text)  # released to the first monitor process
        # and so is the rest of the early session (its answer may come one clock mark later): a message still held
        # when the monitor process is lost opens a run of its own in the new one, as after any crash mid-session
        proxy.wait_until(lambda: proxy.backlog() == 0)
        with upload_under_way(proxy):
            late = run(agents.mcp_poisoned_agent(url, proxy.url, "naive", close=False))
            proxy.wait_until(lambda: journaled_calls(proxy.report_dir, late) == 1)  # taken in, held
            [first] = monitor_processes(proxy.process.pid)
            os.kill(first, signal.SIGKILL)
            recovered = proxy.wait_for("DEMO-001", early, timeout=30)  # concluded from the journal at once
            assert (recovered["execution_summary"]["status"], recovered["outcome"]) == ("recovered", "exploited")
            assert "DEMO-001-01 matched" not in proxy.log().partition("starting a new monitor process")[2]
        # the upload ends: the watermark moves on, and the proxy hands the held events to the new monitor process
        proxy.wait_for_log(lambda text: "DEMO-001-01 matched" in text.partition("starting a new monitor process")[2],
                           timeout=60)
        assert proxy.interrupt() == 0
    outcomes = sorted((r["execution_summary"]["session"], r["execution_summary"]["status"], r["outcome"])
                      for r in proxy.reports())
    assert outcomes == sorted([(f"mcp_session:{early}", "recovered", "exploited"),
                               (f"mcp_session:{late}", "interrupted", "exploited")])


def test_a_report_directory_changed_at_runtime_takes_the_journal_of_the_open_runs_with_it(
        attackers: Peers, tmp_path: Path) -> None:
    """`set oatf_report_dir` while a run is open: its journal moves to the new directory with it (the old one is
    left as after a clean shutdown), so after SIGKILL the next start in the new directory recovers every open
    run, the one begun before the change included, and nothing is left to recover in the old one. (Before, the
    old journal stayed behind: its run came back `recovered` at the next start there, and was missing here.)"""
    url = attackers.url("mcp_poisoned", "/mcp")
    moved = tmp_path / "moved-reports"
    with oatf_proxy(tmp_path, "first", [TOOL_POISONING], grace=GRACE, record=False) as proxy:
        before = run(agents.mcp_poisoned_agent(url, proxy.url, "naive", close=False))
        proxy.wait_until(lambda: journaled_calls(proxy.report_dir, before) == 1)
        proxy.command(f"set oatf_report_dir {moved}")
        proxy.wait_for_log(lambda text: "the journal of the open runs moved" in text)
        assert not pending_journal(proxy.report_dir), "the old directory is left with no journal"
        after = run(agents.mcp_poisoned_agent(url, proxy.url, "careful", close=False))
        proxy.wait_until(lambda: "2 live run(s), 0 event(s) waiting" in proxy.command("oatf.status"))
        os.killpg(proxy.process.pid, signal.SIGKILL)
        proxy.process.wait(timeout=10)
    assert journaled_calls(moved, before) == journaled_calls(moved, after) == 1
    with oatf_proxy(tmp_path, "moved", [TOOL_POISONING], grace=GRACE, record=False) as again:
        again.wait_for_log(lambda text: "left open by a proxy that did not stop cleanly" in text)
        recovered = {(r["execution_summary"]["session"], r["execution_summary"]["status"], r["outcome"])
                     for r in again.reports()}
        assert again.interrupt() == 0
    assert recovered == {(f"mcp_session:{before}", "recovered", "exploited"),
                         (f"mcp_session:{after}", "recovered", "inconclusive")}
    assert not list(proxy.report_dir.glob("*.json")) and not pending_journal(proxy.report_dir)


def test_a_report_directory_another_process_journals_in_is_refused(attackers: Peers, tmp_path: Path) -> None:
    """`set oatf_report_dir` to a directory whose journal another process holds: refused with a clear error; the
    reports and the journal stay in the directory in force."""
    url = attackers.url("mcp_poisoned", "/mcp")
    taken = tmp_path / "taken-reports"
    with oatf_proxy(tmp_path, "kept", [TOOL_POISONING], grace=GRACE, record=False) as proxy:
        held = take_lock(taken)
        assert held is not None
        proxy.command(f"set oatf_report_dir {taken}")
        proxy.wait_for_log(lambda text: "oatf_report_dir: another process journals in" in text)
        session = run(agents.mcp_poisoned_agent(url, proxy.url, "naive", close=False))
        proxy.wait_until(lambda: journaled_calls(proxy.report_dir, session) == 1)
        assert proxy.interrupt() == 0
        held.close()
    [report] = proxy.reports()
    assert (report["execution_summary"]["session"], report["outcome"]) == (f"mcp_session:{session}", "exploited")
    assert not list(taken.glob("*.json")) and not pending_journal(taken)
