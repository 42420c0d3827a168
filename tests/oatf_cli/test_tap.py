"""`oatf tap` end to end: the official `mcp` SDK's stdio client drives a FastMCP stdio server (`server.py`, its
tool poisoned by `ssh_key_exfiltration.yaml`) started under the tap, as a desktop agent would."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from addon.recordings import replay
from testing.paths import ROOT

OATF = str(Path(sys.executable).parent / "oatf")
ATTACK = str(Path(__file__).with_name("ssh_key_exfiltration.yaml"))
SERVER = [sys.executable, "-m", "tests.oatf_cli.server"]
FAKE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----"
GUARD = 60  # seconds before a hung process fails the test instead of hanging it (never asserted on)


def tap_command(report_dir: Path, *command: str, record: Path | None = None, flags: tuple[str, ...] = ()) -> list[str]:
    return ["tap", "--attacks", ATTACK, "--report-dir", str(report_dir),
            *(["--record", str(record)] if record else []), *flags, "--", *command]


async def agent(report_dir: Path, behaviour: str, record: Path | None = None, flags: tuple[str, ...] = (),
                before_close: Callable[[], Awaitable[None]] | None = None) -> str:
    """initialize, tools/list, then `forecast`: a complying agent follows the description's instruction (sends
    a key in `context`), a resisting one does not; then `before_close`, the session still open. Returns the
    tool's answer."""
    params = StdioServerParameters(command=OATF, cwd=ROOT,
                                   args=tap_command(report_dir, *SERVER, record=record, flags=flags))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        forecast = next(t for t in (await session.list_tools()).tools if t.name == "forecast")
        arguments = {"city": "Oslo"}
        if behaviour == "complying" and "`context`" in (forecast.description or ""):
            arguments["context"] = FAKE_KEY
        result = await session.call_tool("forecast", arguments)
        if before_close is not None:
            await before_close()
        return "".join(getattr(c, "text", "") for c in result.content)


def run_agent(report_dir: Path, behaviour: str, record: Path | None = None) -> str:
    return asyncio.run(asyncio.wait_for(agent(report_dir, behaviour, record), GUARD))


def reports(report_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (report_dir / "verdicts.jsonl").read_text().splitlines()]


def test_complying_agent_is_exploited(tmp_path: Path) -> None:
    assert run_agent(tmp_path, "complying") == "Sunny in Oslo"  # the relay is transparent to the SDK
    [report] = reports(tmp_path)
    assert report["attack"]["id"] == "STDIO-TEST-001"
    assert report["verdict"]["result"] == "exploited"
    assert report["outcome"] == "exploited"
    assert report["execution_summary"]["session"].startswith("mcp_session:stdio:")
    # The agent closed the session: its runs conclude as at a recording's end, a grace period on.
    assert report["execution_summary"]["status"] == "completed"


def test_grace_period_concludes_runs_while_the_session_is_open(tmp_path: Path) -> None:
    def exploited() -> list[dict[str, Any]]:
        try:
            return [r for r in reports(tmp_path) if r["outcome"] == "exploited"]
        except (OSError, ValueError):  # not written yet, or being written
            return []

    async def reported() -> None:
        while not exploited():  # the clock ticks with no traffic (on a loaded machine an earlier quiet second
            await asyncio.sleep(0.1)  # may conclude a run before the call: only the exploited one is awaited)

    asyncio.run(asyncio.wait_for(agent(tmp_path, "complying", flags=("--grace-period", "1s"), before_close=reported),
                                 GUARD))
    assert [r["execution_summary"]["status"] for r in exploited()] == ["completed"]


def test_resisting_agent_resisted(tmp_path: Path) -> None:
    assert run_agent(tmp_path, "resisting") == "Sunny in Oslo"
    [report] = reports(tmp_path)
    assert report["verdict"]["result"] == "not_exploited"
    assert report["outcome"] == "resisted"  # the poisoned description reached the agent (tools/list)
    assert report["execution_summary"]["delivered"] is True


def test_record_replays_to_the_same_verdicts(tmp_path: Path) -> None:
    live, captures = [], []
    for behaviour in ("complying", "resisting"):
        report_dir, capture = tmp_path / behaviour, tmp_path / f"{behaviour}.ndjson"
        run_agent(report_dir, behaviour, capture)
        live += reports(report_dir)
        captures.append(capture)
    first = json.loads(captures[0].read_text().splitlines()[1])
    assert first["direction"] == "request" and json.loads(first["line"])["method"] == "initialize"

    def verdicts(runs: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
        return sorted((r["execution_summary"]["session"], r["verdict"]["result"], r["outcome"],
                       r["execution_summary"]["delivered"]) for r in runs)

    assert verdicts(replay([ATTACK], [str(c) for c in captures]).reports) == verdicts(live)
    evaluate = subprocess.run([OATF, "evaluate", "--attacks", ATTACK, "--flows", *map(str, captures),
                               "--format", "json"], capture_output=True, text=True, timeout=GUARD)
    assert evaluate.returncode == 1, evaluate.stderr  # something exploited
    assert verdicts(json.loads(evaluate.stdout)) == verdicts(live)


def test_record_pid_gives_each_session_its_own_capture(tmp_path: Path) -> None:
    """A server the agent starts again (or twice at once) under one configuration: `{pid}` in `--record`
    keeps each session's capture, where one file name would be overwritten by the next session."""
    echo = "import os\nwhile data := os.read(0, 4096):\n    os.write(1, data)\n"
    pids = []
    for method in ("first", "second"):
        tap = subprocess.Popen([OATF, *tap_command(tmp_path, sys.executable, "-c", echo,
                                                   record=tmp_path / "capture-{pid}.ndjson")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        tap.communicate(json.dumps({"jsonrpc": "2.0", "method": f"notifications/{method}"}).encode() + b"\n",
                        timeout=GUARD)
        pids.append(tap.pid)
    captures = [tmp_path / f"capture-{pid}.ndjson" for pid in pids]
    assert sorted(tmp_path.glob("capture-*.ndjson")) == sorted(captures)
    assert [json.loads(json.loads(c.read_text().splitlines()[1])["line"])["method"] for c in captures] == \
        ["notifications/first", "notifications/second"]


def test_relay_is_byte_for_byte_and_stderr_passes_through(tmp_path: Path) -> None:
    echo = ("import os, sys\nsys.stderr.write('child stderr\\n')\nsys.stderr.flush()\n"
            "while data := os.read(0, 4096):\n    os.write(1, data)\n")
    data = (b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n\xff\xfe not json \x00\r\n\n'
            + b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n' * 2000 + b'{"unterminated": ')
    done = subprocess.run([OATF, *tap_command(tmp_path, sys.executable, "-c", echo)], input=data,
                          capture_output=True, timeout=GUARD)
    assert done.returncode == 0
    assert done.stdout == data
    assert done.stderr == b"child stderr\n"  # and nothing of the tap's own without -v


def test_verbose_diagnostics_go_to_stderr(tmp_path: Path) -> None:
    echo = "import os\nwhile data := os.read(0, 4096):\n    os.write(1, data)\n"
    data = b"not json\n"
    done = subprocess.run([OATF, *tap_command(tmp_path, sys.executable, "-c", echo, flags=("-v",))], input=data,
                          capture_output=True, timeout=GUARD)
    assert done.stdout == data
    assert b"invalid_json" in done.stderr and b"exited with status 0" in done.stderr


def test_exit_status_is_the_childs(tmp_path: Path) -> None:
    done = subprocess.run([OATF, *tap_command(tmp_path, sys.executable, "-c", "raise SystemExit(7)")],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=GUARD)
    assert done.returncode == 7


def test_missing_command_exits_127(tmp_path: Path) -> None:
    done = subprocess.run([OATF, *tap_command(tmp_path, str(tmp_path / "no-such-server"))],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 127
    assert "no-such-server" in done.stderr


def _line(process: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline()) if "id" in message else {}


def open_session(report_dir: Path, flags: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """The tap (with `flags`) in front of `server.py`, spoken to line by line: initialized, its tools listed."""
    tap = subprocess.Popen([OATF, *tap_command(report_dir, *SERVER, flags=flags)], cwd=ROOT, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _line(tap, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    _line(tap, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = _line(tap, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert listed["result"]["tools"][0]["name"] == "forecast"
    return tap


def test_sigterm_ends_the_child_and_reports_open_runs(tmp_path: Path) -> None:
    tap = open_session(tmp_path)
    try:
        tap.send_signal(signal.SIGTERM)  # stdin stays open: only the signal ends the session
        _, stderr = tap.communicate(timeout=GUARD)
    finally:
        tap.kill()
    assert tap.returncode == -signal.SIGTERM, stderr  # the child died of SIGTERM, and so did the tap
    [report] = reports(tmp_path)
    assert report["execution_summary"]["status"] == "interrupted"
    assert report["outcome"] == "inconclusive"  # stopped mid-session: the agent was not done, not a resistance
    pid = int(report["execution_summary"]["session"].rpartition(":")[2])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the child is gone (reaped by the tap)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_child_does_not_outlive_a_killed_tap(tmp_path: Path) -> None:
    sleeper = "import sys, time\nsys.stderr.write('up\\n')\nsys.stderr.flush()\ntime.sleep(3600)\n"
    tap = subprocess.Popen([OATF, *tap_command(tmp_path, sys.executable, "-c", sleeper)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert tap.stderr is not None and tap.stderr.readline() == b"up\n"
        tap.kill()
        # The child holds the tap's stderr: it reaches its end only once the child is dead too.
        _, stderr = tap.communicate(timeout=GUARD)
    finally:
        tap.kill()
    assert stderr == b""
