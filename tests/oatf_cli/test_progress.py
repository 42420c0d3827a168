"""Progress of long work (`oatf_engine.progress`, `oatf_cli.progress`): the stages a replay (`oatf evaluate`) and a
recovery from a journal (`oatf recover`) report with their totals and counts (one process and forked workers), the
occasional lines written when stderr is not a terminal, the bars drawn when it is (a real pseudo-terminal), and
nothing when neither is asked for."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.console import Console

from addon import flow_file, recordings
from addon.recordings import replay
from oatf_cli.progress import Bar, Lines
from oatf_engine import journal as journal_module
from oatf_engine import replay as replay_module
from oatf_engine.journal import JOURNAL_DIR, Journal
from oatf_engine.monitor import MonitorOptions, load_library
from oatf_engine.progress import size as size_text
from oatf_engine.recovery import conclude_pending
from oatf_engine.reports import ReportWriter
from tests.oatf_cli.test_ci_outputs import AWS_KEY, OW_001, captures
from tests.oatf_cli.test_cli import ROOT, run
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, call, event
from tests.oatf_engine.test_journal import journal_reported_run

__all__ = ["captures"]  # the fixture, shared


class Recorder:
    """A `Progress` that keeps what it is told: (stage, total, unit, [counts], summary) per stage."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, int, str, list[int], str | None]] = []

    def start(self, stage: str, total: int, unit: str) -> None:
        assert not self.stages or self.stages[-1][4] is not None, "a stage begins after the previous one ended"
        self.stages.append((stage, total, unit, [], None))

    def update(self, done: int) -> None:
        self.stages[-1][3].append(done)

    def finish(self, summary: str) -> None:
        stage, total, unit, counts, _ = self.stages[-1]
        self.stages[-1] = (stage, total, unit, counts, summary)


def check_counts(recorder: Recorder) -> None:
    """Every stage's counts go up, never past its total, and the last one is the total."""
    for stage, total, _, counts, summary in recorder.stages:
        assert summary is not None, stage
        assert counts == sorted(counts) and counts[-1] == total, (stage, total, counts)


def test_a_replay_reports_each_stage_with_its_total(captures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recording = captures / "OW-001.complying.mitm"
    monkeypatch.setattr(replay_module, "UPDATE_EVERY", 4)
    monkeypatch.setattr(flow_file, "UPDATE_EVERY", 2)
    monkeypatch.setattr(recordings, "UPDATE_EVERY", 4)
    recorder = Recorder()
    result = replay([str(OW_001)], [str(recording)], progress=recorder)
    assert [(stage, total, unit) for stage, total, unit, _, _ in recorder.stages] == [
        ("loading attacks", 1, "documents"), ("reading recordings", recording.stat().st_size, "bytes"),
        ("evaluating", 8, "flows")]  # in one process, each event is evaluated as it is decoded
    check_counts(recorder)
    reading, evaluating = recorder.stages[1][3], recorder.stages[2][3]
    assert len(set(reading)) >= 4, f"positions inside the file as its records are read: {reading}"
    assert evaluating == [4, 8, 8]
    assert [summary for *_, summary in recorder.stages] == [
        "loaded 1 attack(s) from 1 document(s)",
        f"read 8 flow(s) from 1 recording(s), {recording.stat().st_size / 1000:.1f} kB",
        "decoded and evaluated 14 event(s) from 8 flow(s) in 1 process: 2 run(s) concluded"]
    assert len(result.reports) == 2 and result.events == 14 and result.flows == 8


def test_forked_workers_evaluate_as_the_flows_are_decoded(captures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_module, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(recordings, "UPDATE_EVERY", 3)
    # `worker_count` stays in one process while other threads run (forking them is unsafe); in the whole suite an
    # earlier test's idle daemon thread may still be alive in this process, so the test asks for the fork itself.
    monkeypatch.setattr(replay_module.threading, "active_count", lambda: 1)
    recorder = Recorder()
    result = replay([str(OW_001)], [str(captures / "OW-001.complying.mitm"), str(captures / "OW-010.complying.mitm")],
                    workers=2, progress=recorder)
    assert result.workers == 2, "the sessions were split over two processes"
    assert [stage for stage, *_ in recorder.stages] == ["loading attacks", "reading recordings", "evaluating"]
    stage, total, unit, counts, summary = recorder.stages[-1]
    assert (stage, total, unit, summary) == (
        "evaluating", result.flows, "flows", f"decoded and evaluated {result.events} event(s) from {total} flow(s) in "
        f"2 processes: {len(result.reports)} run(s) concluded")
    assert counts and counts[-1] == total, "every flow decoded, its events sent to the processes as it goes"
    check_counts(recorder)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_occasional_with_done_rate_and_time_left() -> None:
    stream, clock = io.StringIO(), Clock()
    lines = Lines("oatf evaluate", stream, every=5.0, clock=clock)
    lines.start("reading recordings", 12_000_000, "bytes")
    clock.now += 1
    lines.update(2_000_000)  # within 5 s of the last line: nothing
    clock.now += 4
    lines.update(4_000_000)
    clock.now += 1
    lines.finish("read 10 flow(s) from 1 recording(s), 12.0 MB")
    lines.start("evaluating", 0, "events")
    clock.now += 6
    lines.update(600)
    lines.finish("evaluated 600 event(s) in 1 process(es): 3 run(s) concluded")
    lines.close()
    assert stream.getvalue().splitlines() == [
        "oatf evaluate: reading recordings: 12.0 MB",
        "oatf evaluate: reading recordings: 4.0 MB/12.0 MB (33%), 800.0 kB/s, about 10.0 s left",
        "oatf evaluate: read 10 flow(s) from 1 recording(s), 12.0 MB in 6.0 s",
        "oatf evaluate: evaluating…",
        "oatf evaluate: evaluating: 600 events, 100 events/s",
        "oatf evaluate: evaluated 600 event(s) in 1 process(es): 3 run(s) concluded in 6.0 s",
        "oatf evaluate: done in 12.0 s (reading recordings 6.0 s, evaluating 6.0 s)"]


def test_no_closing_line_when_a_stage_was_cut_short() -> None:
    stream = io.StringIO()
    lines = Lines("oatf evaluate", stream, clock=Clock())
    lines.start("reading recordings", 10, "bytes")
    lines.close()
    assert stream.getvalue() == "oatf evaluate: reading recordings: 10 bytes\n"


def test_the_bar_shows_done_of_total_rate_time_left_and_time_taken() -> None:
    out, clock = io.StringIO(), Clock()
    console = Console(file=out, force_terminal=True, width=200, color_system=None)
    bar = Bar("oatf evaluate", console, clock=clock)
    bar.start("evaluating", 1000, "events")
    for _ in range(4):
        clock.now += 1
        bar.update(int((clock.now - 100) * 100))
    shown = out.getvalue()
    assert re.search(r"evaluating +━+╺?━* +40% 400/1,000 events 100 events/s 0:00:06 0:00:04", shown), shown
    clock.now += 6
    bar.update(1000)
    bar.finish("evaluated 1,000 event(s) in 1 process(es): 9 run(s) concluded")
    bar.close()
    last = out.getvalue()[len(shown):]
    assert re.search(r"evaluated 1,000 event\(s\) in 1 process\(es\): 9 run\(s\) concluded +━+ +100% "
                     r"1,000/1,000 events", last), last
    assert last.rstrip().endswith("oatf evaluate: done in 10.0 s (evaluating 10.0 s)")


# --- the command line --------------------------------------------------------------------------------------------

STAGES = ("loading attacks", "reading recordings", "evaluating", "writing reports")


def on_a_terminal(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    """`oatf ARGS` with stderr on a pseudo-terminal of 250 columns and stdout a pipe: (status, stdout, what the
    terminal showed)."""
    terminal, child_side = os.openpty()
    fcntl.ioctl(child_side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 250, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")}
    process = subprocess.Popen([str(Path(sys.executable).parent / "oatf"), *args], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=child_side, cwd=ROOT, env={**env, "TERM": "xterm"})
    os.close(child_side)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([terminal], [], [], 0.1)[0]:
                try:
                    data = os.read(terminal, 65536)
                except OSError:  # the process ended: its side of the terminal is closed
                    break
                if not data:
                    break
                shown += data
        stdout, _ = process.communicate(timeout=timeout)
    finally:
        os.close(terminal)
        if process.poll() is None:
            process.kill()
    return process.returncode, stdout.decode(), shown.decode("utf-8", "replace")


def test_a_terminal_gets_bars_and_a_summary_and_never_the_traffic(captures: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports\x1b[31m"
    status, stdout, shown = on_a_terminal("evaluate", "--attacks", str(OW_001), "--flows",
                                          str(captures / "OW-001.complying.mitm"), "--report-dir", str(reports), "-q")
    assert status == 1 and stdout.startswith("2 run(s): 2 exploited"), (stdout, shown)
    assert "━" in shown and "\x1b[" in shown, "drawn as bars, with the terminal's escapes"
    for summary in ("loaded 1 attack(s) from 1 document(s)", "read 8 flow(s) from 1 recording(s)",
                    "decoded and evaluated 14 event(s) from 8 flow(s) in 1 process: 2 run(s) concluded",
                    "wrote 2 report(s) to", "1/1 documents", "8/8 flows", "2/2 reports"):
        assert summary in shown, summary
    assert re.search(r"oatf evaluate: done in \d+\.\d s \(" + r" \d+\.\d s, ".join(STAGES) + r" \d+\.\d s\)", shown)
    assert "reports\\x1b[31m" in shown and "reports\x1b[31m" not in shown, "paths are shown escaped"
    assert AWS_KEY not in shown and "AKIA" not in shown, "counts and sizes only, never what the traffic carries"

    status, _, shown = on_a_terminal("evaluate", "--attacks", str(OW_001), "--flows",
                                     str(captures / "OW-001.complying.mitm"), "-q", "--no-progress")
    assert status == 1 and "━" not in shown and "done in" not in shown and not any(s in shown for s in STAGES)


def test_not_a_terminal_lines_only_when_asked(captures: Path) -> None:
    base = ["evaluate", "--attacks", str(OW_001), "--flows", str(captures / "OW-001.complying.mitm"), "-q"]
    quiet = run(*base)
    assert quiet.stderr == "" and quiet.returncode == 1, "nothing unless asked"
    asked = run(*base, "--progress").stderr.splitlines()
    assert asked[0] == "oatf evaluate: loading attacks: 1 documents"
    for line in ("oatf evaluate: reading recordings: ", "oatf evaluate: evaluating: 8 flows",
                 "oatf evaluate: redacting evidence: 2 reports",
                 "oatf evaluate: redacted 2 report(s) in ", "oatf evaluate: done in "):
        assert any(a.startswith(line) for a in asked), line
    assert all("━" not in line and "\x1b" not in line for line in asked)


def test_export_trace_progress(captures: Path, tmp_path: Path) -> None:
    result = run("export-trace", "--flows", str(captures / "OW-001.complying.mitm"), "--out", str(tmp_path),
                 "--progress")
    assert result.returncode == 0
    assert "oatf export-trace: decoded 14 event(s) from 8 flow(s) in " in result.stderr
    assert re.search(r"oatf export-trace: done in \d+\.\d s \(reading recordings \d+\.\d s, decoding \d+\.\d s\)",
                     result.stderr)


# --- oatf recover ------------------------------------------------------------------------------------------------

RECOVERED_COUNTS = "3 run(s): 1 exploited, 0 partial, 0 resisted, 0 inconclusive, 2 not delivered, 0 error"


def crashed_proxy(report_dir: Path) -> Path:
    """A report directory as a proxy killed with runs open leaves it: a journal of three sessions (one leaked a
    private key, two did not act) and a fourth, reported before the crash; the attack document beside it."""
    attack_path = report_dir.parent / "attack.yaml"
    attack_path.write_text(POISONED_TOOL)
    journal = Journal(report_dir)
    ReportWriter(report_dir).write(journal_reported_run(journal, MonitorOptions(grace_period=5), "done"))
    journal.events([event("tools/list", {}, 7.0, session="a"), call("-----BEGIN PRIVATE KEY", 7.5, session="a")])
    journal.events([event("tools/list", {}, 8.0, session="b"), call("hello", 8.5, session="b")])
    journal.events([event("tools/list", {}, 9.0, session="c")])
    journal.close()
    return attack_path


def test_recovery_reports_each_stage_with_its_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attack_path = crashed_proxy(tmp_path / "reports")
    monkeypatch.setattr(journal_module, "UPDATE_EVERY", 2)
    size = sum(p.stat().st_size for p in (tmp_path / "reports" / JOURNAL_DIR).glob("*.jsonl"))
    recorder = Recorder()
    library = load_library([str(attack_path)], progress=recorder)
    reports = conclude_pending(tmp_path / "reports", list(library.attacks), MonitorOptions(grace_period=5),
                               progress=recorder)
    assert [(stage, total, unit) for stage, total, unit, _, _ in recorder.stages] == [
        ("loading attacks", 1, "documents"), ("replaying journal", size, "bytes"), ("writing reports", 3, "reports")]
    check_counts(recorder)
    assert len(recorder.stages[1][3]) == 4, "every second line of seven, and the end"
    assert [summary for *_, summary in recorder.stages] == [
        "loaded 1 attack(s) from 1 document(s)",
        f"replayed 6 event(s) and 1 tick(s) from 1 journal segment(s), {size_text(size)}: 4 run(s), 1 already "
        "reported", f"wrote 3 report(s) to {tmp_path / 'reports'}"]
    assert sorted(r["execution_summary"]["session"] for r in reports) == [f"mcp_session:{s}" for s in "abc"]


def test_recover_shows_progress_on_a_terminal_only_and_counts_by_result(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    attack_path = crashed_proxy(reports)
    command = ("recover", str(reports), "--attacks", str(attack_path), "--grace-period", "5s")
    quiet = run(*command)
    assert quiet.returncode == 1, quiet.stderr  # a recovered run was exploited
    assert quiet.stderr == f"3 run(s) recovered into {reports}\n", "no progress when stderr is not a terminal"
    table = quiet.stdout.splitlines()
    assert table[-1] == RECOVERED_COUNTS
    assert [line.split()[2] for line in table[1:-1]] == ["exploited", "not", "not"]

    crashed_proxy(reports)  # the same crash again, its three runs not reported (their files removed)
    for path in reports.glob("*.json"):
        if '"mcp_session:done"' not in path.read_text():
            path.unlink()
    size = sum(p.stat().st_size for p in (reports / JOURNAL_DIR).glob("*.jsonl"))  # its times vary in length
    status, stdout, shown = on_a_terminal(*command)
    assert status == 1 and stdout.splitlines()[-1] == RECOVERED_COUNTS, (stdout, shown)
    assert "━" in shown and "\x1b[" in shown, "drawn as bars, with the terminal's escapes"
    for summary in ("loaded 1 attack(s) from 1 document(s)", "1/1 documents", "replayed 6 event(s) and 1 tick(s) "
                    f"from 1 journal segment(s), {size_text(size)}: 4 run(s), 1 already reported",
                    "wrote 3 report(s) to", "3/3 reports", "3 run(s) recovered into"):
        assert summary in shown, summary
    assert re.search(r"oatf recover: done in \d+\.\d s \(loading attacks \d+\.\d s, replaying journal \d+\.\d s, "
                     r"writing reports \d+\.\d s\)", shown), shown
    assert "PRIVATE KEY" not in shown, "counts and sizes only, never what the traffic carries"

    crashed_proxy(reports)
    asked = run(*command, "--progress")
    assert "oatf recover: replaying journal: " in asked.stderr and "\x1b" not in asked.stderr
