"""`oatf tap` beyond one session judged alone: several taps feeding one shared monitor (`oatf monitor --listen`,
`oatf_engine.feed`), falling back to judging alone, its journal after `kill -9`, and its bounded queue."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from oatf_cli import tap as tap_module
from oatf_cli.judge import Say
from oatf_cli.tap import Backlog, Chunk, encode_batch
from oatf_cli.tap_evaluation import Evaluator, FrameReader
from oatf_engine.journal import Journal, take_lock
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.ndjson import StdioSession, endpoint_of
from testing.paths import ROOT
from tests.oatf_cli.test_tap import ATTACK, GUARD, OATF, SERVER, _line, agent, open_session, reports, tap_command


def socket_path() -> str:
    return os.path.join(tempfile.mkdtemp(prefix="oatf-"), "monitor.sock")  # a Unix socket's path is short


def wait_for(path: str) -> None:
    deadline = time.monotonic() + GUARD
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"no socket at {path}"
        time.sleep(0.05)


SHARED_GRACE = "3s"
"""The shared monitor's grace period here: shorter than the slowest answer in these sessions on a loaded machine,
the server's start-up, which answers `initialize` (1.6 s on an idle machine, 3.1-3.7 s with two cores busy).
A request waiting for its answer holds its session's runs (`oatf_engine.monitor.run`, issue 12), so each session
is still one run. (Before that, only requests asking an agent to work did: the run split in two — a
`not_delivered` run holding the `initialize` request, then the rest — 7 times in 10 with two busy cores.)"""


def test_two_taps_feed_one_shared_monitor(tmp_path: Path) -> None:
    """Two stdio servers of one agent, each behind its tap, judged by one `oatf monitor`: its report directory
    holds both verdicts (one run each, concluded by a grace period of quiet), the taps' none; SIGTERM
    concludes and exits 0."""
    listen = socket_path()
    monitor = subprocess.Popen([OATF, "monitor", "--listen", listen, "--attacks", ATTACK, "--report-dir",
                                str(tmp_path / "shared"), "--grace-period", SHARED_GRACE, "-v"], cwd=ROOT,
                               stderr=subprocess.PIPE, text=True)
    try:
        wait_for(listen)

        async def both() -> list[str]:
            return list(await asyncio.gather(
                agent(tmp_path / "tap-a", "complying", flags=("--monitor", listen)),
                agent(tmp_path / "tap-b", "resisting", flags=("--monitor", listen))))

        assert asyncio.run(asyncio.wait_for(both(), GUARD)) == ["Sunny in Oslo"] * 2
        deadline = time.monotonic() + GUARD
        while len(list((tmp_path / "shared").glob("*.json"))) < 2:  # a grace period of quiet: both concluded
            assert time.monotonic() < deadline, "the shared monitor did not conclude both runs"
            time.sleep(0.05)
        monitor.send_signal(signal.SIGTERM)
        _, stderr = monitor.communicate(timeout=GUARD)
    finally:
        monitor.kill()
    assert monitor.returncode == 0, stderr
    outcomes = sorted(r["outcome"] for r in reports(tmp_path / "shared"))
    assert outcomes == ["exploited", "resisted"], stderr
    assert "2 run(s) reported" in stderr and stderr.count(") connected") == 2
    assert not (tmp_path / "tap-a" / "verdicts.jsonl").exists() and not (tmp_path / "tap-b").exists()
    assert not os.path.exists(listen)  # removed when the monitor stopped


def test_a_tap_that_cannot_reach_the_monitor_judges_alone_and_says_so(tmp_path: Path) -> None:
    listen = socket_path()  # nobody listens there
    stderr_file = tmp_path / "stderr"

    async def session() -> str:
        with stderr_file.open("w") as errlog:
            from mcp import ClientSession, StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(command=OATF, cwd=ROOT, args=tap_command(
                tmp_path, *SERVER, flags=("--monitor", listen)))
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                await client.list_tools()
                result = await client.call_tool("forecast", {"city": "Oslo", "context": "-----BEGIN OPENSSH "
                                                             "PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY"})
                return "".join(getattr(c, "text", "") for c in result.content)

    assert asyncio.run(asyncio.wait_for(session(), GUARD)) == "Sunny in Oslo"
    assert f"cannot reach the shared monitor at {listen}" in stderr_file.read_text()
    [report] = reports(tmp_path)
    assert report["outcome"] == "exploited"


def test_a_killed_tap_leaves_a_journal_that_oatf_recover_concludes(tmp_path: Path) -> None:
    """`kill -9` of the tap after the agent leaked the key: nothing was reported, the journal holds the
    session, and `oatf recover` reports the run `exploited` (status `recovered`)."""
    tap = open_session(tmp_path)
    try:
        _line(tap, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "forecast", "arguments": {
            "city": "Oslo", "context": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----"}}})
        deadline = time.monotonic() + GUARD
        while b'"tools/call"' not in b"".join(p.read_bytes() for p in (tmp_path / "journal").glob("*.jsonl")):
            assert time.monotonic() < deadline, "the call was never journaled"
            time.sleep(0.05)
        tap.kill()
        tap.communicate(timeout=GUARD)
    finally:
        tap.kill()
    assert not (tmp_path / "verdicts.jsonl").exists()
    done = subprocess.run([OATF, "recover", str(tmp_path), "--attacks", ATTACK], capture_output=True, text=True,
                          timeout=GUARD)
    assert done.returncode == 1, done.stderr  # something exploited
    [report] = reports(tmp_path)
    assert (report["outcome"], report["execution_summary"]["status"]) == ("exploited", "recovered")
    assert not list((tmp_path / "journal").glob("*.jsonl"))


def test_oatf_recover_leaves_a_live_writers_journal_alone(tmp_path: Path) -> None:
    """`oatf recover` is a writer too: while another process holds the report directory's lock (a live proxy,
    tap or monitor, whose runs are open, not left open), it refuses and the journal stays; once the lock is
    free it recovers."""
    Journal(tmp_path).tick(1.0)
    recover = [OATF, "recover", str(tmp_path), "--attacks", ATTACK]
    held = take_lock(tmp_path)
    assert held is not None
    with held:
        refused = subprocess.run(recover, capture_output=True, text=True, timeout=GUARD)
    assert refused.returncode == 2 and "another process journals in" in refused.stderr, refused.stderr
    assert list((tmp_path / "journal").glob("*.jsonl")), "the journal is left alone"
    done = subprocess.run(recover, capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0 and "0 run(s) recovered" in done.stderr, done.stderr


def test_the_queue_is_bounded_and_overflow_is_counted_said_and_resynchronised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay never waits: past `MAX_QUEUED_BYTES` a chunk is left out (counted), the evaluation says so,
    and the framing of that direction resumes at the next whole line."""
    monkeypatch.setattr(tap_module, "MAX_QUEUED_BYTES", 100)
    seen: list[str] = []

    class Judged:
        report_dir = str(tmp_path)

        def observe(self, events: list) -> None:  # type: ignore[type-arg]
            seen.extend(e.event_type for e in events)

        def finish(self, ended: bool) -> None:
            """Nothing to conclude."""

    stderr = io.StringIO()
    session = StdioSession(WireDecoder(), "stdio:1", endpoint_of(["server"], 1), "127.0.0.1")
    say = Say("oatf tap", stderr)
    evaluator = Evaluator(session, Judged, Judged(), None, say, None)  # type: ignore[arg-type]
    reader = FrameReader()
    backlog = Backlog(lambda batch: evaluator.evaluate(list(reader.feed(b"".join(encode_batch(batch))))), say)
    ping = b'{"jsonrpc":"2.0","method":"notifications/a"}\n'
    backlog.put("client", ping)
    started = time.monotonic()
    backlog.put("client", b'{"jsonrpc":"2.0","method":"notifications/lost", "pad": "' + b"x" * 200)
    backlog.put("client", b'"}\n' + ping.replace(b"/a", b"/b"))  # the rest of the lost line, then a whole one
    assert time.monotonic() - started < 0.1  # never blocked
    backlog.queue.put(None)
    backlog.run()
    assert seen == ["notifications/a", "notifications/b"]
    assert backlog.dropped_chunks == 1 and backlog.dropped_bytes > 200
    assert "relayed but not evaluated" in stderr.getvalue()


def test_the_evaluation_takes_the_chunks_in_batches_bounded_in_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What was queued within `BATCH_SECONDS` is evaluated together: its events reach the judge (and its journal)
    in one batch, in order, a batch holding at most `BATCH_BYTES` of chunks (a tap handing on each chunk as it
    came woke and journaled per message)."""
    monkeypatch.setattr(tap_module, "BATCH_BYTES", 100)
    batches: list[list[Chunk]] = []
    backlog = Backlog(batches.append, Say("oatf tap", io.StringIO()))
    pings = [b'{"jsonrpc":"2.0","method":"notifications/%s"}\n' % name.encode() for name in "abcd"]
    for ping in pings:  # 46 bytes each: three chunks reach BATCH_BYTES
        backlog.put("client", ping)
    backlog.queue.put(None)
    backlog.run()
    assert [[data for _side, data, _time in batch] for batch in batches] == [pings[:3], pings[3:]]


def test_a_full_batch_is_taken_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once `BATCH_BYTES` are queued the evaluation does not wait out `BATCH_SECONDS` (a flood would fill the
    queue meanwhile, and chunks beyond `MAX_QUEUED_BYTES` are not evaluated)."""
    monkeypatch.setattr(tap_module, "BATCH_SECONDS", 10 * GUARD)
    monkeypatch.setattr(tap_module, "BATCH_BYTES", 100)
    observed = threading.Event()
    backlog = Backlog(lambda _batch: observed.set(), Say("oatf tap", io.StringIO()))
    sending = threading.Thread(target=backlog.run, daemon=True)
    sending.start()
    ping = b'{"jsonrpc":"2.0","method":"notifications/a"}\n'
    backlog.put("client", ping)
    assert not observed.wait(0.2)  # gathering
    backlog.put("client", ping * 2)  # 138 bytes queued
    assert observed.wait(GUARD), "the full batch waited for BATCH_SECONDS"
    backlog.queue.put(None)
    sending.join(GUARD)


def test_the_capture_names_the_agent(tmp_path: Path) -> None:
    capture = tmp_path / "capture.ndjson"
    asyncio.run(asyncio.wait_for(agent(tmp_path, "resisting", record=capture, flags=("--agent", "assistant")), GUARD))
    assert json.loads(capture.read_text().splitlines()[0])["agent"] == "assistant"
