"""Shutdown with many runs open: how long mitmdump + the addon takes to exit after SIGINT, reporting every run.

    .venv/bin/python benchmarks/bench_shutdown.py [--sessions 1000] [--concurrency 50] [--against DIR] [--rounds N]
                                                  [--churn FILES]

A FastMCP server (Streamable HTTP, `tests/e2e/wire/peers.py`) behind mitmdump with the addon; `--sessions` MCP
sessions opened through the proxy with raw HTTP JSON-RPC (`initialize`, `notifications/initialized`,
`tools/list`, `tools/call`; each session left open, with a one-hour grace period so that no run concludes
before the shutdown). Once the addon has evaluated every event (`oatf.status`: nothing waiting), it is asked
for its live runs, mitmdump gets SIGINT, and the time until it exits is measured. Configurations, each its own
mitmdump, measured in the same run:
- baseline: the addon with no attack loaded (no run: the shutdown's fixed cost);
- library: the addon with the whole `attacks/` library (every MCP attack opens a run per session).
Printed per configuration: runs open at SIGINT and reports with status `interrupted`, reports written (per-run
files, `verdicts.jsonl` lines, distinct runs in them) and the seconds from SIGINT to exit; and the library's
shutdown time against the baseline's. `--against DIR` also measures the library with the addon of the checkout
at `DIR` (e.g. `/work/main`: its `addon/oatf_addon.py` imports that checkout's engine, and its monitor process
runs it) right after this checkout's, `--rounds` times alternating, and prints both shutdown times.
Each measurement also gives the CPU seconds mitmdump and its monitor process spend from SIGINT to exit, and
per run; the cost of creating a report-sized file on this disk at the time is printed before and after (it
varies tenfold on ext4 with what was deleted nearby in the last minutes, see `creation_cost`); `--churn FILES`
creates and deletes that many files beside the reports right before each SIGINT, for that disk's slow state.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.clients import http_client  # noqa: E402
from testing.oatf_proxy import COMMAND_SCRIPT, CONTROL_HOST, OatfProxy  # noqa: E402
from testing.processes import mitmdump, peers  # noqa: E402

ATTACKS = ROOT / "attacks"
ADDON = ROOT / "addon" / "oatf_addon.py"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
STATUS = re.compile(r"(\d+) attack\(s\) loaded, (\d+) live run\(s\), (\d+) event\(s\) waiting")


async def mcp_session(client: httpx.AsyncClient, url: str) -> None:
    """One MCP session over raw JSON-RPC, left open."""

    async def post(url: str, headers: dict[str, str], json: dict[str, object]) -> httpx.Response:
        for attempt in range(3):  # a loaded loopback drops a kept-alive connection now and then
            try:
                return await client.post(url, headers=headers, json=json)
            except httpx.TransportError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
    init = await post(url, headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench-shutdown", "version": "1"}}})
    headers = {**HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    await post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    await post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    await post(url, headers=headers, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                           "params": {"name": "add", "arguments": {"a": 1, "b": 2}}})


async def open_sessions(url: str, proxy: str, sessions: int, concurrency: int) -> None:
    limit = asyncio.Semaphore(concurrency)
    async with http_client(proxy, timeout=60.0) as client:
        async def one() -> None:
            async with limit:
                await mcp_session(client, url)

        await asyncio.gather(*(one() for _ in range(sessions)))


def status(proxy: OatfProxy) -> tuple[int, int, int]:
    """(attacks loaded, live runs, events waiting) from `oatf.status`, asked until the monitor answers."""
    while (found := STATUS.search(proxy.command("oatf.status"))) is None:
        time.sleep(0.5)
    loaded, live, waiting = (int(group) for group in found.groups())
    return loaded, live, waiting


def _cpu(pid: int) -> tuple[float, float]:
    """(own, waited-for children's) CPU seconds, user + system, of process `pid` (`/proc/PID/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


TICK = os.sysconf("SC_CLK_TCK")


class ShutdownCpu:
    """The CPU seconds mitmdump and its monitor process spend from now (just before the SIGINT) to mitmdump's
    exit, each: read from `/proc` now, the monitor's total from mitmdump's `cutime` once it has waited for
    it (read every 10 ms until it exits), mitmdump's own total from `wait4`'s resource usage."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        children = {int(c) for task in Path(f"/proc/{process.pid}/task").iterdir()
                    for c in (task / "children").read_text().split()}
        self.child = next(c for c in children
                          if b"addon.monitor_process" in Path(f"/proc/{c}/cmdline").read_bytes())
        self.proxy_start, _ = _cpu(process.pid)
        self.child_start, _ = _cpu(self.child)
        self.child_end = self.child_start
        self.proxy = self.monitor = 0.0

    def wait(self) -> None:
        """Until mitmdump exits (at most 600 s); then `proxy` and `monitor` hold their CPU seconds."""
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.01):
                try:
                    self.child_end = max(self.child_end, _cpu(self.process.pid)[1])
                except OSError:
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        deadline = time.monotonic() + 600
        while (ended := os.wait4(self.process.pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                raise TimeoutError("mitmdump did not exit within 600 s of SIGINT")
            time.sleep(0.01)
        done.set()
        sampler.join()
        _, status, usage = ended
        self.process.returncode = os.waitstatus_to_exitcode(status)
        self.monitor = self.child_end - self.child_start
        self.proxy = usage.ru_utime + usage.ru_stime - self.child_end - self.proxy_start


def creation_cost(workdir: Path, files: int) -> str:
    """What creating a report-sized file (3 KB, a report's name length, temporary file renamed into place, as
    `ReportWriter` does) costs on this disk now, `files` of them in a new folder: CPU (system part) and wall per
    file. On ext4 it varies tenfold with what was deleted nearby in the last minutes (the kernel's inode allocator
    skips recently freed inodes one by one), so the shutdown's figures are read beside it."""
    folder = Path(tempfile.mkdtemp(dir=workdir))
    data = b"x" * 3000 + b"\n"
    before, started = os.times(), time.monotonic()
    for n in range(files):
        name = f"{n:060d}-attack__session__0123456789ab__1795573653.483.json"
        tmp = folder / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.close(fd)
        os.replace(tmp, folder / name)
    wall, after = time.monotonic() - started, os.times()
    cpu = (after.user + after.system - before.user - before.system) / files * 1e6
    return (f"creating a 3 KB file here now: {cpu:.0f} us CPU ({(after.system - before.system) / files * 1e6:.0f} us "
            f"system), {wall / files * 1e6:.0f} us wall per file ({files} files)")


def churn(workdir: Path, files: int) -> None:
    """Create and delete `files` small files beside the report directories: what other processes' temporary
    files do to a shared disk (on ext4 without a journal, the inode allocator then skips the freed inodes one by
    one for a minute or more, and each new report file costs several times its CPU)."""
    folder = Path(tempfile.mkdtemp(dir=workdir))
    for n in range(files):
        (folder / str(n)).write_bytes(b"x")
    shutil.rmtree(folder)


def measure(workdir: Path, name: str, attacks: str, url: str, sessions: int,
            concurrency: int, addon: Path = ADDON, churned: int = 0) -> dict[str, float]:
    report_dir = workdir / f"{name}-reports"
    extra = ("--set", "termlog_verbosity=warn", "-s", str(addon), "-s", str(COMMAND_SCRIPT),
             "--set", f"oatf_attacks={attacks}", "--set", f"oatf_report_dir={report_dir}",
             "--set", "oatf_grace_period=1h", "--set", "oatf_watch=false", "--set", "oatf_max_runs=1000000",
             # the remote control's requests are no traffic: they would count as waiting while they ask
             "--set", f"oatf_wire_protocols={CONTROL_HOST}=ignore")
    with mitmdump(workdir, tap=False, name=name, extra=extra) as running:
        proxy = OatfProxy(running, report_dir, None, [])
        started = time.monotonic()
        asyncio.run(open_sessions(url, proxy.url, sessions, concurrency))
        traffic = time.monotonic() - started
        while (current := status(proxy))[2]:
            time.sleep(0.2)
        caught_up = time.monotonic() - started
        loaded, live, _ = current
        churn(workdir, churned)
        cpu = ShutdownCpu(running.process)
        interrupted = time.monotonic()
        os.killpg(running.process.pid, signal.SIGINT)
        cpu.wait()
        seconds = time.monotonic() - interrupted
    files = len([p for p in report_dir.glob("*.json") if not p.name.startswith(".")])
    jsonl = report_dir / "verdicts.jsonl"
    lines = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()] if jsonl.exists() else []
    runs = {(r["attack"]["id"], r["execution_summary"]["session"], r["execution_summary"]["started_at"])
            for r in lines}
    interrupted = sum(r["execution_summary"]["status"] == "interrupted" for r in lines)
    print(f"  {name:9} {loaded:3d} attack(s): {sessions} sessions in {traffic:5.1f} s, evaluated after "
          f"{caught_up:5.1f} s; {live:6d} runs open at SIGINT -> {interrupted:6d} reported `interrupted`; "
          f"{files:6d} report files, {len(lines):6d} verdicts.jsonl lines, {len(runs):6d} runs; SIGINT to exit "
          f"{seconds:6.2f} s, CPU {cpu.proxy:5.2f} s mitmdump + {cpu.monitor:5.2f} s monitor"
          + (f" ({(cpu.proxy + cpu.monitor) / live * 1e3:.2f} ms per run)" if live else ""))
    return {"seconds": seconds, "cpu": cpu.proxy + cpu.monitor, "live": live, "interrupted": interrupted,
            "files": files, "lines": len(lines),
            "runs": len(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50, help="sessions being opened at once")
    parser.add_argument("--against", metavar="DIR", help="also measure the addon of the checkout at DIR")
    parser.add_argument("--rounds", type=int, default=1, help="with --against: library measurements of each")
    parser.add_argument("--churn", type=int, default=0, metavar="FILES",
                        help="before each SIGINT, create and delete this many files beside the reports (`churn`)")
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"{args.sessions} MCP sessions (raw JSON-RPC through the proxy, {args.concurrency} at a time), grace "
          f"1h, then SIGINT; addon {ADDON}")
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp, peers(Path(tmp), kinds=("mcp_http",)) as running:
        workdir = Path(tmp)  # on the project's disk, as reports would be (not a tmpfs): fsyncs cost what they do
        url = running.url("mcp_http", "/mcp")
        print(f"  {creation_cost(workdir, 30 * args.sessions)}")
        baseline = measure(workdir, "baseline", "", url, args.sessions, args.concurrency, churned=args.churn)
        library = measure(workdir, "library", str(ATTACKS), url, args.sessions, args.concurrency, churned=args.churn)
        if args.against:
            theirs, mine = [], [library]
            other = Path(args.against).resolve() / "addon" / "oatf_addon.py"
            for n in range(args.rounds):
                if n:
                    mine.append(measure(workdir, f"library{n}", str(ATTACKS), url, args.sessions, args.concurrency,
                                        churned=args.churn))
                theirs.append(measure(workdir, f"against{n}", str(ATTACKS), url, args.sessions, args.concurrency,
                                      other, args.churn))
            print(f"  {creation_cost(workdir, 30 * args.sessions)}")

            def shown(runs: list[dict[str, float]]) -> str:
                return (f"{', '.join(f'{r['seconds']:.2f}' for r in runs)} s, CPU "
                        f"{', '.join(f'{r['cpu'] / r['live'] * 1e3:.2f}' for r in runs)} ms per run")

            def ratio(key: str) -> float:
                return statistics.median(r[key] for r in theirs) / statistics.median(r[key] for r in mine)

            print(f"  SIGINT to exit, library: this checkout {shown(mine)}; {args.against} {shown(theirs)} "
                  f"(alternating); ratio of the medians: wall {ratio('seconds'):.2f}, CPU {ratio('cpu'):.2f}")
    complete = library["interrupted"] == library["live"] and library["files"] == library["lines"] == library["runs"]
    print(f"  library vs baseline: shutdown {library['seconds'] / baseline['seconds']:.1f}x the baseline's "
          f"({library['seconds'] - baseline['seconds']:+.2f} s for {library['live']:.0f} runs); every open run "
          f"reported exactly once: {'yes' if complete else 'NO'}")


if __name__ == "__main__":
    main()
