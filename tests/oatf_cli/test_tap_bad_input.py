"""`oatf tap` facing bad input and bad peers (issue 18, "Bad input"): a 50 MB line, a child that crashes, one that
never reads its stdin, one that floods its stdout, the agent closing stdin in the middle of a request, SIGINT.
Each time: the bytes are relayed unaltered, nothing deadlocks (every wait is bounded by `GUARD`), the tap says
what it could not judge, and the runs are reported. (Non-JSON and binary lines, a last line without its
newline: `test_tap.test_relay_is_byte_for_byte_and_stderr_passes_through`; SIGTERM and a killed tap:
`test_tap`; chunking and arbitrary lines: `tests/oatf_engine/wire/test_ndjson.py`.)"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from testing.paths import ROOT
from testing.taps import Tee
from tests.oatf_cli.test_tap import FAKE_KEY, GUARD, OATF, SERVER, reports, tap_command

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

ECHO = "import os\nwhile data := os.read(0, 1 << 16):\n    os.write(1, data)\n"
"""A child that writes back every byte it reads (its stdout is what the agent sent: the relay's proof)."""


def leak(request_id: int) -> bytes:
    """A `forecast` call that sends the key (`ssh_key_exfiltration.yaml`'s indicator), as one line."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": "forecast", "arguments": {"city": "Oslo", "context": FAKE_KEY}}}).encode() + b"\n"


def test_a_50_mb_line_is_relayed_whole_and_said_too_long_to_inspect(tmp_path: Path) -> None:
    """Both directions' 50 MB line relayed whole, said too long to inspect, and the framing resumes after it:
    the next line's leak is judged. The line is sent 16 MiB at a time, each piece once the evaluation caught up
    with the one before (its clock ticked — it ticks after `TICK_SECONDS` with nothing to evaluate — after the
    piece came back): sent at once, the 100 MB burst can outrun the evaluation process past `MAX_QUEUED_BYTES`,
    and a chunk beyond it is left out (said; `test_tap_shared.test_the_queue_is_bounded_…`), the line's end
    with it, and the framing then resumes after the next line."""
    huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "forecast", "arguments": {"city": "x" * (50 << 20)}}}).encode() + b"\n"
    tap = subprocess.Popen([OATF, *tap_command(tmp_path, sys.executable, "-c", ECHO, flags=("-v",))], bufsize=0,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert tap.stdin is not None and tap.stdout is not None and tap.stderr is not None
    echoed = []
    try:
        for start in range(0, len(huge), 16 << 20):
            piece = huge[start:start + (16 << 20)]
            writer = threading.Thread(target=tap.stdin.write, args=(piece,), daemon=True)  # unbuffered: bufsize 0
            writer.start()
            echoed.append(b"")
            while len(echoed[-1]) < len(piece):
                echoed[-1] += tap.stdout.read(len(piece) - len(echoed[-1]))
            writer.join(GUARD)
            back = time.time()
            deadline = time.monotonic() + GUARD
            while not any(record.get("tick", 0) > back for record in journal(tmp_path)):
                assert time.monotonic() < deadline, "the evaluation never caught up"
                time.sleep(0.1)
        tap.stdin.write(leak(2))
        tap.stdin.close()
        echoed.append(b"".join(iter(tap.stdout.read, b"")))
        stderr = b"".join(iter(tap.stderr.read, b""))
        assert tap.wait(GUARD) == 0, stderr[-2000:]
    finally:
        tap.kill()
    assert b"".join(echoed) == huge + leak(2)
    assert stderr.count(b"oversize_body") == 2  # said, not inspected
    assert [r["outcome"] for r in reports(tmp_path)] == ["exploited"]


def journal(report_dir: Path) -> list[dict[str, Any]]:
    lines = b"".join(p.read_bytes() for p in (report_dir / "journal").glob("*.jsonl")).splitlines()
    return [json.loads(line) for line in lines if line.endswith(b"}")]


def test_a_child_that_crashes_mid_session_ends_the_tap_with_its_status_and_runs_reported(tmp_path: Path) -> None:
    crash = ("import os, sys\nline = sys.stdin.buffer.readline()\nsys.stdout.buffer.write(line)\n"
             "sys.stdout.flush()\nos.abort()\n")
    tap = subprocess.Popen([OATF, *tap_command(tmp_path, sys.executable, "-c", crash)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = tap.communicate(leak(1), timeout=GUARD)  # stdin stays open until the tap ends
    finally:
        tap.kill()
    assert tap.returncode == -signal.SIGABRT, stderr  # the tap ends as its child did
    assert stdout == leak(1)
    [report] = reports(tmp_path)
    assert (report["outcome"], report["execution_summary"]["status"]) == ("exploited", "interrupted")


def test_a_child_that_never_reads_does_not_deadlock_the_tap(tmp_path: Path) -> None:
    """The agent writes 4 MB (far more than a pipe holds) to a server that never reads and exits after a
    while: the tap ends with it, the agent's writes are not stuck behind it, what the server wrote is relayed."""
    deaf = "import sys, time\ntime.sleep(1)\nsys.stdout.write('bye\\n')\n"
    tap = subprocess.Popen([OATF, *tap_command(tmp_path, sys.executable, "-c", deaf)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = tap.communicate(leak(1) * ((4 << 20) // len(leak(1))), timeout=GUARD)
    finally:
        tap.kill()
    assert tap.returncode == 0, stderr
    assert stdout == b"bye\n"
    assert [r["outcome"] for r in reports(tmp_path)] == ["exploited"]  # what the tap read is still judged


def test_a_child_that_floods_stdout_is_relayed_unaltered(tmp_path: Path) -> None:
    """80 MB of notifications as fast as the child can write them: every byte reaches the agent in order (the
    relay never waits for the evaluation; what the bounded queue could not hold is counted and said)."""
    line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": "y" * 1000}}) + "\n"
    count = (80 << 20) // len(line)
    flood = (f"import sys\nline = {line!r}.encode()\nout = sys.stdout.buffer\n"
             f"for _ in range({count}):\n    out.write(line)\nout.flush()\n")
    done = subprocess.run([OATF, *tap_command(tmp_path, sys.executable, "-c", flood)], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=GUARD * 3)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = hashlib.sha256(line.encode() * count).hexdigest()
    assert len(done.stdout) == len(line) * count and hashlib.sha256(done.stdout).hexdigest() == expected
    stderr = done.stderr.decode()
    assert stderr == "" or "relayed but not evaluated" in stderr, stderr


def test_stdin_closed_in_the_middle_of_a_request(tmp_path: Path) -> None:
    """The agent closes stdin with half a `tools/call` line sent: the server (`tee` on both its streams) gets
    exactly what the agent sent, the agent exactly what the server wrote (FastMCP logs an error for the torn
    line), the tap says the torn line is not JSON and was not inspected (-v), and reports the session's run as
    inconclusive, not resisted: the server got bytes of the agent's that nothing judged."""
    tee = Tee(tmp_path / "tee")
    tap = subprocess.Popen([OATF, *tap_command(tmp_path, *tee.wrap(SERVER), flags=("-v",))], cwd=ROOT,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sent = received = b""
    try:
        assert tap.stdin is not None and tap.stdout is not None
        for message in INITIALIZE, INITIALIZED, LIST:
            sent += json.dumps(message).encode() + b"\n"
            tap.stdin.write(sent.splitlines(keepends=True)[-1])
            tap.stdin.flush()
            received += tap.stdout.readline() if "id" in message else b""
        torn = leak(2)[:40]
        stdout, stderr = tap.communicate(torn, timeout=GUARD)
    finally:
        tap.kill()
    assert tap.returncode == 0, stderr
    assert b'"forecast"' in received  # listed
    assert tee.streams() == (sent + torn, received + stdout)
    assert b"invalid_request_json" in stderr, stderr
    [report] = reports(tmp_path)
    assert (report["outcome"], report["execution_summary"]["status"]) == ("inconclusive", "completed")


def test_sigint_is_forwarded_to_the_child_and_the_open_run_reported(tmp_path: Path) -> None:
    """Ctrl-C: the tap forwards SIGINT to its child (which dies of it here), ends the same way, and reports the
    run the agent left open."""
    child = "import os, signal\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\n" + ECHO
    tap = subprocess.Popen([OATF, *tap_command(tmp_path, sys.executable, "-c", child)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert tap.stdin is not None and tap.stdout is not None
        tap.stdin.write(leak(1))
        tap.stdin.flush()
        assert tap.stdout.readline() == leak(1)  # relayed both ways: stdin stays open
        tap.send_signal(signal.SIGINT)
        # stdin stays open until the tap is gone: closed at once, the child would read its end and exit 0
        # before the forwarded SIGINT reached it (seen in CI on a loaded machine)
        tap.wait(timeout=GUARD)
        _, stderr = tap.communicate(timeout=GUARD)
    finally:
        tap.kill()
    assert tap.returncode == -signal.SIGINT, stderr
    [report] = reports(tmp_path)
    assert (report["outcome"], report["execution_summary"]["status"]) == ("exploited", "interrupted")
