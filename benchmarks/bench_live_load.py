"""Load (and soak) through a real mitmdump: many MCP agent sessions at once with the whole `attacks/` library,
a known number of them exploited; every run reported exactly once, none evicted, nothing lost at SIGINT.

    .venv/bin/python benchmarks/bench_live_load.py [--in-flight 1000] [--sessions 3000]
    .venv/bin/python benchmarks/bench_live_load.py --minutes 20 [--in-flight 100] [--interval 60]   # soak
    .venv/bin/python benchmarks/bench_live_load.py --bare [...]   # the same traffic through mitmdump alone

The OW-001 invoice server (`tests/e2e/addon/peers.py --mcp-invoice`, the official `mcp` server) behind
`mitmdump -s addon/oatf_addon.py` with the whole library and the addon's defaults (`oatf_max_runs` included;
`--set` changes one) but the grace period (`--grace`); `--in-flight` agents at once (`testing/load.py`),
each running sessions one after another — `--sessions` in all, or for `--minutes` — every `--exploit-every`th
one complying with the poisoned tool description (OW-001 exploited), the others resisting. An agent thinks
`--pause` seconds before its tool call; the grace period must exceed that plus the proxy's latency at that
load, else a run rightly concludes in mid-session (quiet for a grace period) and the session gets two runs
(the default 10 s grace period would on two shared cores: 1,000 agents keep the proxy at its capacity). When the traffic
ends, mitmdump gets SIGINT at once: the runs still in their grace period, and any backlog, are concluded then.

Printed: every `--interval` seconds the proxy's and the monitor process's RSS, the backlog (events observed
and not yet evaluated), the CPU share each process used since the last sample (mitmdump, its monitor process,
the MCP server, and this process: the agents), and what the monitor holds in memory (live runs and their
sessions, timers, and what its session resolver remembers: `MonitorProcess.counts`, as of the sample
before); then the traffic (sessions, sessions/s, failed sessions, requests sent again, each step's latency as
the agents saw it: p50, p99, max; `pause` is how much longer than asked an agent's think time took, i.e. how
late this process ran), the count of the reports (from `verdicts.jsonl`): runs per session, every exploit
session reported exactly once as exploited, (attack, session) pairs reported twice or never, evictions,
statuses and outcomes; the backlog's maximum, RSS at start, peak and end (and, for a soak, over its second half:
range and growth per minute, least squares), CPU seconds per process, SIGINT to exit, and whether the summary
table was printed. Sessions that failed are counted by cause: the request that failed and the HTTP status with
mitmproxy's reason (its 502 page names the upstream error), or the exception.

`--bare` runs the same traffic through mitmdump without the addon (no reports, no monitor): the baseline
that tells whether a failure or a latency is the addon's or mitmproxy's own at that load (`--set` then sets
mitmproxy's options: `--bare --set stream_large_bodies=1` streams every response, as the addon streams SSE).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.load import SERVER_KEEP_ALIVE, agents, count  # noqa: E402
from testing.oatf_proxy import ADDON_PEERS, OatfProxy, oatf_proxy  # noqa: E402
from testing.processes import Proxy, mitmdump, peer_process  # noqa: E402

ATTACKS = ROOT / "attacks"


def rss(pid: int | None) -> int:
    """Resident memory of process `pid` in bytes (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration, TypeError):
        return 0


def cpu(pid: int | None) -> float:
    """CPU seconds (user + system) process `pid` has used (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def monitor_child(pid: int) -> int | None:
    """The monitor process (`python -m addon.monitor_process`) among the children of mitmdump `pid`."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                if b"addon.monitor_process" in Path(f"/proc/{child}/cmdline").read_bytes():
                    return int(child)
            except OSError:
                continue
    return None


@dataclass
class Sample:
    seconds: float
    proxy_rss: int
    monitor_rss: int
    backlog: int
    counts: dict[str, int]
    """What the monitor process holds in memory (`MonitorProcess.counts`, as of the previous sample)."""
    cpu: dict[str, float]
    """CPU seconds used so far by each process: `PROCESSES`."""


PROCESSES = ("proxy", "monitor", "server", "agents")
"""mitmdump, its monitor process, the MCP server, and this process (the load generator)."""


class BareProxy:
    """mitmdump without the addon (`--bare`): nothing to ask for counts, no reports."""

    def __init__(self, proxy: Proxy) -> None:
        self.running = proxy
        self.process, self.url = proxy.process, proxy.url

    def counts(self) -> dict[str, int]:
        raise LookupError("no addon")

    def interrupt(self, timeout: float, sig: signal.Signals) -> int:
        os.killpg(self.process.pid, sig)
        return self.process.wait(timeout=timeout)

    def log(self) -> str:
        return self.running.log.read_text(encoding="utf-8", errors="replace")


class Sampler:
    """Every `interval` seconds (on a thread of its own): RSS of mitmdump and of its monitor process, the
    addon's backlog and the CPU each process used; printed as it goes, kept for the maxima."""

    def __init__(self, proxy: OatfProxy | BareProxy, server_pid: int, interval: float, start: float) -> None:
        self.proxy, self.server_pid, self.interval, self.start = proxy, server_pid, interval, start
        self.samples: list[Sample] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> Sample:
        pid = self.proxy.process.pid
        child = monitor_child(pid)
        try:
            counts = self.proxy.counts()
        except Exception:  # a loaded proxy may not answer in time (or --bare): the sample has no backlog
            counts = {"waiting": -1}
        own = os.times()
        sample = Sample(time.monotonic() - self.start, rss(pid), rss(child), counts.pop("waiting"), counts, {
            "proxy": cpu(pid), "monitor": cpu(child), "server": cpu(self.server_pid), "agents": own.user + own.system})
        self.samples.append(sample)
        return sample

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            last = self.samples[-1]
            now = self.sample()
            busy = "  ".join(f"{name} {100 * (now.cpu[name] - last.cpu[name]) / (now.seconds - last.seconds):3.0f}%"
                             for name in PROCESSES)
            held = ", ".join(f"{name} {n:,}" for name, n in now.counts.items())
            print(f"  {now.seconds:7.0f} s  proxy RSS {now.proxy_rss / 2**20:6.1f} MiB  monitor RSS "
                  f"{now.monitor_rss / 2**20:6.1f} MiB  backlog {now.backlog:,} event(s)  CPU {busy}\n"
                  f"            in memory: {held}", flush=True)

    def __enter__(self) -> Sampler:
        self.sample()
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join()
        self.sample()


def jsonl(report_dir: Path) -> Iterator[dict[str, object]]:
    """The reports in `report_dir`'s `verdicts.jsonl`; none when no run was reported (`--set oatf_attacks=`)."""
    if not (report_dir / "verdicts.jsonl").exists():
        return
    with open(report_dir / "verdicts.jsonl", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


@contextlib.contextmanager
def bare_mitmdump(workdir: Path, options: dict[str, str]) -> Iterator[BareProxy]:
    """mitmdump without the addon, with mitmproxy's `options` (`--set`; e.g. `stream_large_bodies=1`: every
    response streamed, as the addon streams MCP's SSE answers)."""
    extra = tuple(arg for key, value in options.items() for arg in ("--set", f"{key}={value}"))
    with mitmdump(workdir, tap=False, name="bare", extra=extra) as proxy:
        yield BareProxy(proxy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-flight", type=int, default=1000, help="agents running sessions at once")
    parser.add_argument("--sessions", type=int, default=3000, help="sessions in all (unless --minutes)")
    parser.add_argument("--minutes", type=float, help="soak: run sessions for this long instead")
    parser.add_argument("--exploit-every", type=int, default=5)
    parser.add_argument("--pause", type=float, nargs=2, default=(20.0, 40.0), metavar=("MIN", "MAX"),
                        help="seconds an agent thinks before its tool call")
    parser.add_argument("--grace", default="60s", help="oatf_grace_period: above the longest pause and latency")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                        help="an option (the addon's; with --bare, mitmproxy's)")
    parser.add_argument("--bare", action="store_true", help="mitmdump without the addon: the baseline")
    parser.add_argument("--server-keep-alive", type=int, default=SERVER_KEEP_ALIVE, metavar="SECONDS",
                        help="how long the MCP server keeps an idle connection (uvicorn's default: 5)")
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    options = dict(item.split("=", 1) for item in args.set)
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp, \
            peer_process(ADDON_PEERS / "peers.py", ("mcp_invoice",), Path(tmp) / "peers.log",
                         extra=("--keep-alive", str(args.server_keep_alive))) as server, \
            proxy_under_test(Path(tmp), args, options) as proxy:
        url = server.url("mcp_invoice", "/mcp")
        setup = f"mitmdump alone (--bare), options {options or 'defaults'}" if isinstance(proxy, BareProxy) else (
            f"{proxy.log().count('not loaded')} document(s) not loaded; grace {args.grace}; "
            f"other options {options or 'defaults'}")
        print(f"{args.in_flight} agents at once, "
              + (f"for {args.minutes:g} min" if args.minutes else f"{args.sessions:,} sessions")
              + f", one in {args.exploit_every} exploited; pause {args.pause[0]:g}-{args.pause[1]:g} s; server "
              f"keep-alive {args.server_keep_alive} s; {setup}",
              flush=True)
        started = time.monotonic()
        with Sampler(proxy, server.process.pid, args.interval, started) as sampler:
            traffic = asyncio.run(agents(
                proxy.url, url, args.in_flight, sessions=None if args.minutes else args.sessions,
                until=started + args.minutes * 60 if args.minutes else None, exploit_every=args.exploit_every,
                pause=tuple(args.pause)))
        seconds = time.monotonic() - started
        print(f"  traffic: {len(traffic.sessions):,} sessions in {seconds:.0f} s "
              f"({len(traffic.sessions) / seconds:.1f}/s); failed {traffic.failed}, requests sent again "
              f"{traffic.retried}", flush=True)
        for error, times in traffic.errors.most_common(5):
            print(f"    failed {times}x: {error}", flush=True)
        for error, times in traffic.resent.most_common(3):
            print(f"    sent again {times}x after: {error}", flush=True)
        for line in traffic.latencies():
            print(f"    {line}", flush=True)
        interrupted = time.monotonic()
        status = proxy.interrupt(timeout=1800, sig=signal.SIGINT)
        shutdown = time.monotonic() - interrupted
        log = proxy.log()
        counted = None if isinstance(proxy, BareProxy) else count(jsonl(proxy.report_dir), traffic.sessions)
    if counted is None:
        print(f"  SIGINT to exit {shutdown:.2f} s (exit status {status}); Traceback in the log: "
              f"{log.count('Traceback')}")
        report_resources(sampler.samples, args.interval)
        return
    for line in counted.lines():
        print(f"  {line}")
    report_resources(sampler.samples, args.interval)
    print(f"  SIGINT to exit {shutdown:.2f} s (exit status {status}); summary table printed: "
          f"{'yes' if 'oatf verdicts:' in log else 'NO'}; Traceback in the log: {log.count('Traceback')}")
    sound = (counted.duplicated == counted.missing == counted.false_negatives == counted.false_positives
             == counted.evicted == traffic.failed == 0 and len(counted.runs_per_session) == 1 and status == 0)
    print(f"  every exploit session reported exactly once, none evicted, none lost: {'yes' if sound else 'NO'}")


def proxy_under_test(workdir: Path, args: argparse.Namespace,
                     options: dict[str, str]) -> AbstractContextManager[OatfProxy | BareProxy]:
    if args.bare:
        return bare_mitmdump(workdir, options)
    return oatf_proxy(workdir, "load", [ATTACKS], grace=args.grace, record=False, options=options)


def report_resources(samples: list[Sample], interval: float) -> None:
    """The backlog's maximum, RSS at start, peak and end, and the CPU seconds of each process."""
    if any(s.backlog >= 0 for s in samples):
        print(f"  backlog max {max(s.backlog for s in samples):,} event(s) (sampled every {interval:g} s)")
    for name, values in (("proxy", [s.proxy_rss for s in samples]), ("monitor", [s.monitor_rss for s in samples])):
        values = [value for value in values if value]
        if values:  # no monitor process with --bare
            print(f"  {name} RSS: start {values[0] / 2**20:.1f} MiB, peak {max(values) / 2**20:.1f} MiB, "
                  f"end {values[-1] / 2**20:.1f} MiB")
    half = [s for s in samples if s.seconds >= samples[-1].seconds / 2]
    if len(half) >= 3:  # a soak: is memory flat once the runs' number has levelled off?
        minutes = [s.seconds / 60 for s in half]
        print(f"  over the second half ({len(half)} samples from {half[0].seconds:.0f} s): " + "; ".join(
            f"{name} RSS {min(values) / 2**20:.1f}–{max(values) / 2**20:.1f} MiB "
            f"(first {values[0] / 2**20:.1f}, last {values[-1] / 2**20:.1f}; "
            f"{statistics.linear_regression(minutes, values).slope / 2**20:+.2f} MiB/min, least squares)"
            for name, values in (("proxy", [s.proxy_rss for s in half]), ("monitor", [s.monitor_rss for s in half]))
            if all(values)) + "; live runs " + ", ".join(f"{s.counts.get('runs', 0):,}" for s in half))
    first, last = samples[0], samples[-1]
    print("  CPU seconds during the traffic: " + ", ".join(
        f"{name} {last.cpu[name] - first.cpu[name]:.0f} s" for name in PROCESSES)
          + f" (of {last.seconds - first.seconds:.0f} s on {os.cpu_count()} cores)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
