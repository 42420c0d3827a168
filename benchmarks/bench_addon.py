"""The live addon's cost: mitmdump + `addon/oatf_addon.py` against bare mitmdump on the same MCP workload.

    .venv/bin/python benchmarks/bench_addon.py [--calls 300] [--rounds 5]

The workload is `bench_wire`'s: the official `mcp` client calling `tools/call` (`add`) in a loop over one MCP
session (Streamable HTTP) against a FastMCP server, through each proxy in turn. Configurations:
- bare mitmdump;
- mitmdump + the addon with no attacks loaded (decoding, queueing, an idle monitor);
- mitmdump + the addon with the whole `attacks/` library (`--set oatf_attacks=attacks/`): every MCP attack
  of the library opens a run on the session and evaluates every message.
The configurations alternate within each round (warm-up first) so that drift on this shared machine hits them
alike. Printed: requests/s (calls / summed call latency, per round; the median of the rounds), median, p90
and p99 latency over all calls, the proxy's CPU time per call (from /proc, so a busy machine does not inflate it; split
into mitmproxy's event loop thread, its other threads — the addon's queue, sender and receiver threads — and
its child processes — the addon's monitor process, where evaluation runs), and the addon configurations
against bare mitmdump: throughput ratio (median of the per-round ratios) and added median latency.
Targets with the library loaded: >= 85% of bare throughput, <= 2 ms added median latency.
Afterwards the library proxy is stopped (the addon then reports every open run) and its reports are counted,
to show the monitor really followed the traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_wire import ROOT, _calls

ADDON = ROOT / "addon" / "oatf_addon.py"
ATTACKS = ROOT / "attacks"
BARE, EMPTY, LIBRARY = "bare mitmdump", "addon, no attacks", "addon + library"


def _stat(path: Path) -> list[str] | None:
    """The fields of a /proc `stat` file after the command name (field 3 onwards), None if it is gone."""
    try:
        return path.read_text().rpartition(")")[2].split()
    except OSError:
        return None


def cpu_seconds(pid: int) -> tuple[float, float, float]:
    """User + system CPU time so far of process `pid`'s main thread (mitmproxy's event loop), of its other
    threads together, and of its child processes (the addon's monitor process)."""
    tick = os.sysconf("SC_CLK_TCK")
    main = others = children = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = _stat(task / "stat")
        if fields is None:  # the thread ended meanwhile
            continue
        seconds = (int(fields[11]) + int(fields[12])) / tick
        if task.name == str(pid):
            main += seconds
        else:
            others += seconds
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and (fields := _stat(proc / "stat")) is not None and fields[1] == str(pid):
            children += (int(fields[11]) + int(fields[12])) / tick
    return main, others, children


def configurations(workdir: Path) -> dict[str, tuple[str, ...]]:
    """mitmdump arguments (beyond the harness's listen address, flow_detail and connection_strategy)."""
    quiet = ("--set", "termlog_verbosity=warn")
    return {
        BARE: quiet,
        EMPTY: (*quiet, "-s", str(ADDON), "--set", f"oatf_report_dir={workdir / 'reports-empty'}"),
        LIBRARY: (*quiet, "-s", str(ADDON), "--set", f"oatf_attacks={ATTACKS}",
                  "--set", f"oatf_report_dir={workdir / 'reports-library'}"),
    }


def bench(calls: int, rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]],
                                            dict[str, tuple[float, ...]], dict[str, int]]:
    """Per-call latencies, per-round requests/s and CPU seconds per call (event loop thread, other threads)
    of each configuration; what the library proxy reported at shutdown."""
    from contextlib import ExitStack

    from testing.processes import mitmdump, peers

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        configs = configurations(workdir)
        for name, extra in configs.items():
            print(f"  {name:18} mitmdump {' '.join(extra)}")
        latencies: dict[str, list[float]] = {name: [] for name in configs}
        rates: dict[str, list[float]] = {name: [] for name in configs}
        cpu: dict[str, tuple[float, ...]] = dict.fromkeys(configs, (0.0, 0.0, 0.0))
        with peers(workdir, kinds=("mcp_http",)) as running, ExitStack() as stack:
            proxies = {name: stack.enter_context(mitmdump(workdir, tap=False, name=f"proxy{i}", extra=extra))
                       for i, (name, extra) in enumerate(configs.items())}
            url = running.url("mcp_http", "/mcp")
            for proxy in proxies.values():  # warm-up (the library proxy loads and compiles its documents)
                asyncio.run(_calls(url, proxy.url, 30))
            for _ in range(rounds):
                for name, proxy in proxies.items():
                    before = cpu_seconds(proxy.process.pid)
                    measured = asyncio.run(_calls(url, proxy.url, calls))
                    after = cpu_seconds(proxy.process.pid)
                    cpu[name] = tuple(
                        total + end - start for total, start, end in zip(cpu[name], before, after, strict=True))
                    latencies[name] += measured
                    rates[name].append(len(measured) / sum(measured))
        # The proxies stopped (SIGINT): the addon concluded and reported every open run.
        reports = [json.loads(line) for line in (workdir / "reports-library" / "verdicts.jsonl").read_text()
                   .splitlines()] if (workdir / "reports-library" / "verdicts.jsonl").exists() else []
        stats = {"runs": len(reports), "attacks": len({r["attack"]["id"] for r in reports}),
                 "messages": sum(r["execution_summary"]["messages_seen"] for r in reports)}
    per_call = {name: tuple(seconds / (rounds * calls) for seconds in cpu[name]) for name in configs}
    return latencies, rates, per_call, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="tools/call per round and configuration")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"MCP tools/call loop, {args.rounds} alternating rounds of {args.calls} calls per configuration "
          f"(one MCP session per round); mitmdump configurations:")
    latencies, rates, cpu, stats = bench(args.calls, args.rounds)
    medians = {name: statistics.median(values) for name, values in latencies.items()}
    for name, values in latencies.items():
        print(f"  {name:18} {statistics.median(rates[name]):7.1f} req/s   median {medians[name] * 1000:6.2f} ms   "
              f"p90 {statistics.quantiles(values, n=10)[-1] * 1000:6.2f} ms   "
              f"p99 {statistics.quantiles(values, n=100)[-1] * 1000:6.2f} ms   "
              f"proxy CPU/call {sum(cpu[name]) * 1000:5.2f} ms (event loop {cpu[name][0] * 1000:5.2f}, "
              f"other threads {cpu[name][1] * 1000:5.2f}, monitor process {cpu[name][2] * 1000:5.2f})")
    for name, target in ((EMPTY, ""), (LIBRARY, "   (targets: >= 85%, <= 2 ms)")):
        ratios = [mine / bare for mine, bare in zip(rates[name], rates[BARE], strict=True)]
        added = (medians[name] - medians[BARE]) * 1000
        print(f"  {name} vs {BARE}: {statistics.median(ratios):.1%} of its throughput (rounds: "
              f"{', '.join(f'{r:.0%}' for r in ratios)}), median latency {added:+.2f} ms, proxy CPU "
              f"{(sum(cpu[name]) - sum(cpu[BARE])) * 1000:+.2f} ms/call (event loop "
              f"{(cpu[name][0] - cpu[BARE][0]) * 1000:+.2f}){target}")
    print(f"  library proxy at shutdown: {stats['runs']} runs of {stats['attacks']} attacks reported, "
          f"{stats['messages']:,} messages evaluated in them")


if __name__ == "__main__":
    main()
