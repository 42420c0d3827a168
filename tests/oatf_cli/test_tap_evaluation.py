"""`oatf tap`'s evaluation process (`oatf_cli.tap_evaluation`): it is not the tap (the relay never waits for
its interpreter lock), dies with the tap, and when it dies the relay goes on, another one concludes its open
runs from its journal and evaluates the rest."""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oatf_cli.judge import Judge, Say
from oatf_cli.tap import TapOptions
from oatf_cli.tap_evaluation import BEGIN, DATA, FINISH, OPTIONS, READY, Evaluator, Frame, FrameReader, header
from oatf_engine.engine_config import engine_config
from oatf_engine.events import ObservedEvent
from oatf_engine.monitor import load_library
from oatf_engine.recovery import pending_journal
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.ndjson import StdioSession, endpoint_of
from testing.paths import ROOT
from tests.oatf_cli.test_tap import ATTACK, GUARD, OATF, _line, open_session, reports

LEAK = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "forecast", "arguments": {
    "city": "Oslo", "context": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----"}}}


def evaluation_process(tap: int, other_than: int | None = None) -> int:
    """The tap's evaluation process (Linux `/proc`), once there is one other than `other_than`."""
    deadline = time.monotonic() + GUARD
    while True:
        children = [int(child) for task in Path(f"/proc/{tap}/task").iterdir()
                    for child in (task / "children").read_text().split()]
        found = [child for child in children if child != other_than
                 and b"oatf_cli.tap_evaluation" in Path(f"/proc/{child}/cmdline").read_bytes()]
        if found:
            [pid] = found
            return pid
        assert time.monotonic() < deadline, "no evaluation process"
        time.sleep(0.05)


def journaled(report_dir: Path, text: bytes) -> None:
    deadline = time.monotonic() + GUARD
    while text not in b"".join(p.read_bytes() for p in (report_dir / "journal").glob("*.jsonl")):
        assert time.monotonic() < deadline, f"{text!r} was never journaled"
        time.sleep(0.05)


def gone(pid: int) -> bool:
    deadline = time.monotonic() + GUARD
    while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_frames_are_read_back_in_any_chunking() -> None:
    stream = (header(b"D", "client", 1.5, 8) + b'{"a":1}\n' + header(b"E", "server", 2.0)
              + header(FINISH, "client", 3.0, 1) + b"1")
    reader = FrameReader()
    frames = [frame for i in range(len(stream)) for frame in reader.feed(stream[i:i + 1])]
    assert frames == [Frame(b"D", "client", 1.5, b'{"a":1}\n'), Frame(b"E", "server", 2.0, b""),
                      Frame(FINISH, "client", 3.0, b"1")]


def _frame(kind: bytes, data: bytes, side: str = "client") -> bytes:
    return header(kind, side, time.time(), len(data)) + data  # type: ignore[arg-type]


def recovered_exploited(report_dir: Path) -> None:
    """No run was concluded in `report_dir`: its journal keeps the open run, which `oatf recover` reports
    `exploited` (status `recovered`)."""
    assert not (report_dir / "verdicts.jsonl").exists(), "a run was concluded: the journal should keep it"
    done = subprocess.run([OATF, "recover", str(report_dir), "--attacks", ATTACK], capture_output=True, text=True,
                          timeout=GUARD)
    assert done.returncode == 1, done.stderr  # something exploited
    [report] = reports(report_dir)
    assert (report["outcome"], report["execution_summary"]["status"]) == ("exploited", "recovered")


def test_an_evaluation_process_whose_tap_is_gone_leaves_its_runs_to_the_journal(tmp_path: Path) -> None:
    """Its stdin ends without FINISH (the tap was killed, or crashed): it concludes nothing — whether its end of
    the pipe or the tap's death signal (`PR_SET_PDEATHSIG`) comes first, the open runs are in the journal — and
    `oatf recover` reports the run `exploited` (status `recovered`). Started here, by the test, so that no death
    signal races the pipe's end."""
    options = TapOptions(["server"], [ATTACK], str(tmp_path), engine_config({}))
    process = subprocess.Popen([sys.executable, "-m", "oatf_cli.tap_evaluation", str(os.getpid())], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(_frame(OPTIONS, pickle.dumps(options)))
    process.stdin.flush()
    assert process.stdout.readline() == READY
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, LEAK]
    process.stdin.write(_frame(BEGIN, pickle.dumps((4242, ["server"], True)))
                        + b"".join(_frame(DATA, json.dumps(line).encode() + b"\n") for line in lines))
    process.stdin.flush()
    journaled(tmp_path, b'"tools/call"')
    _, stderr = process.communicate(timeout=GUARD)  # its stdin closed, no FINISH
    assert process.returncode == 0, stderr
    recovered_exploited(tmp_path)


@pytest.mark.skipif(sys.platform != "linux", reason="/proc")
def test_a_dead_evaluation_process_is_said_the_relay_goes_on_and_its_runs_are_recovered(tmp_path: Path) -> None:
    """`kill -9` of the evaluation process after the agent leaked the key (journaled): the next call is still
    answered, the tap says what happened, and the run the dead process left open is reported `exploited`
    (status `recovered`) by its replacement; the tap exits as the server did."""
    tap = open_session(tmp_path)
    try:
        _line(tap, LEAK)
        journaled(tmp_path, b'"tools/call"')
        evaluation = evaluation_process(tap.pid)
        os.kill(evaluation, signal.SIGKILL)
        assert gone(evaluation)
        answer = _line(tap, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                             "params": {"name": "forecast", "arguments": {"city": "Bergen"}}})
        assert answer["id"] == 3 and not answer["result"]["isError"], answer
        replacement = evaluation_process(tap.pid, other_than=evaluation)
        _, stderr = tap.communicate(timeout=GUARD)
    finally:
        tap.kill()
    assert tap.returncode == 0, stderr
    assert stderr.count(b"the evaluation process died") == 1, stderr
    assert b"1 run(s) left open by a process that did not stop cleanly were concluded" in stderr, stderr
    recovered = [r for r in reports(tmp_path) if r["execution_summary"]["status"] == "recovered"]
    assert [r["outcome"] for r in recovered] == ["exploited"]
    assert gone(replacement)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_the_evaluation_process_dies_with_the_tap(tmp_path: Path) -> None:
    tap = open_session(tmp_path)
    try:
        evaluation = evaluation_process(tap.pid)
        tap.kill()
        tap.communicate(timeout=GUARD)
    finally:
        tap.kill()
    assert gone(evaluation)


class Unacknowledged:
    """A shared monitor's feed that acknowledged none of `events` when it is closed (the monitor stalled or died)."""

    def __init__(self, events: list[ObservedEvent]) -> None:
        self.events = events

    def close(self) -> list[ObservedEvent]:
        return self.events


@pytest.mark.parametrize("unacked", [True, False])
def test_a_tap_gone_while_feeding_a_shared_monitor_journals_what_it_did_not_acknowledge(
        tmp_path: Path, unacked: bool) -> None:
    """The tap dies while its events go to a shared monitor (`oatf monitor --listen`): the events the monitor did
    not acknowledge are judged by a judge of this process's own, which concludes nothing and leaves them in its
    journal (its lock released), so `oatf recover` reports the run `exploited` (status `recovered`). When the
    monitor acknowledged everything, nothing is judged here and no journal is left."""
    session = StdioSession(WireDecoder(), "stdio:1", endpoint_of(["server"], 1), "127.0.0.1")
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, LEAK]
    events = [event for line in lines
              for event in session.message("client", json.dumps(line).encode() + b"\n", time.time())]
    assert [e.event_type for e in events] == ["initialize", "tools/call"]
    library = load_library([ATTACK])
    stderr = io.StringIO()
    say = Say("oatf tap", stderr)
    make_judge = functools.partial(Judge, list(library.attacks), engine_config({}), None, str(tmp_path), say, False)
    evaluator = Evaluator(session, make_judge, None, None, say, "/nowhere/monitor.sock")
    evaluator.feed = Unacknowledged(events if unacked else [])  # type: ignore[assignment]
    evaluator.leave()
    assert evaluator.feed is None or not unacked
    if not unacked:
        assert evaluator.judge is None and not pending_journal(str(tmp_path)) and stderr.getvalue() == ""
        return
    assert "did not acknowledge every event" in stderr.getvalue() and "2 event(s)" in stderr.getvalue()
    recovered_exploited(tmp_path)
