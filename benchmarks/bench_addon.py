"""The live addon's cost: mitmdump + `addon/oatf_addon.py` against bare mitmdump on the same MCP workload.

    .venv/bin/python benchmarks/bench_addon.py [--calls 300] [--rounds 5] [--client mcp|light]
        [--server fastmcp|minimal] [--library-size 2000] [--against DIR] [--profile]

The workload: `tools/call` (`add`) in a loop over one MCP session (Streamable HTTP) per round, through each proxy
in turn, by one of two clients against one of two servers:
- `--client mcp` (default): `bench_wire`'s official `mcp` client (what agents run; ~1-2 ms of its own CPU a call);
- `--client light`: `light_mcp.light_calls`, requests built beforehand sent over one keep-alive connection (a few
  µs a call), so that the proxy, not the client, is what a call waits for (issue 15's "light client");
- `--server fastmcp` (default): the official SDK's server of the wire suite (`tests/e2e/wire/peers.py`: stateful,
  each answer an SSE stream, which the addon streams and decodes chunk by chunk);
- `--server minimal`: `light_mcp.py`'s server, JSON answers at once (buffered by the proxy): with the light client,
  the proxy is nearly all of a call's time.
Configurations:
- bare mitmdump;
- mitmdump + the addon with no attacks loaded (decoding, queueing, an idle monitor);
- mitmdump + the addon with the whole `attacks/` library (`--set oatf_attacks=attacks/`): every MCP attack
  of the library opens a run on the session and evaluates every message;
- mitmdump + the addon with a library of `--library-size` documents (re-identified copies of `attacks/`,
  `testing.library_copies`; 0: left out). Measuring starts once each library is loaded (the addon's
  "attack(s) loaded" log line, caught by a logging handler a tiny script adds: the proxies log at warn);
- with `--against DIR` (another checkout of this project, e.g. `git archive main | tar -x -C DIR`), its addon
  with the whole library, and with the large one: before and after a change, in the same run.
The configurations alternate within each round (warm-up first) so that drift on this shared machine hits them
alike. Printed: requests/s (calls / summed call latency, per round; the median of the rounds), median, p90
and p99 latency over all calls, the proxy's CPU time per call (from /proc, so a busy machine does not inflate it;
split into mitmproxy's event loop thread — what bounds the proxy's throughput when it is the bottleneck — its other
threads — the addon's queue, sender and receiver threads — and its child processes — the addon's monitor
process, where evaluation runs), and the addon configurations against bare mitmdump: throughput ratio (median of
the per-round ratios), added median and p99 latency, added CPU per call. On a loaded machine the wall-clock
ratios swing by tens of percent between rounds; the event loop's CPU per call does not.
Targets with a library loaded (issue 15, light client, whole library and 2,000 documents): >= 95% of bare
throughput, <= 1 ms added median latency.
`--profile`: every proxy (bare included) also runs a script that profiles its event loop thread from `running` to
`done` with cProfile, timed by that thread's CPU clock (so the other threads' work and waits for the interpreter
lock are left out); printed afterwards, per configuration: the event loop's CPU per call in the addon's own code
(`addon/`, `oatf_engine/`) and in mitmproxy's hook dispatch, and the addon's functions costing the most per call.
The profiler slows the loop severalfold: compare configurations within such a run, not with a run without it.
Afterwards the library proxies are stopped (the addon then reports every open run) and their reports are
counted, to show the monitor really followed the traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_wire import ROOT, _calls
from light_mcp import light_calls

ADDON = ROOT / "addon" / "oatf_addon.py"
ATTACKS = ROOT / "attacks"
BARE, EMPTY = "bare mitmdump", "addon, no attacks"
LOADED_ENV = "BENCH_ADDON_LOADED"
LOADED = f"""import logging, os
class Loaded(logging.Handler):
    def emit(self, record):
        if "attack(s) loaded" in record.getMessage():
            open(os.environ["{LOADED_ENV}"], "w").close()
logging.getLogger("oatf").addHandler(Loaded(logging.INFO))
"""
"""A mitmdump script with no hook: a file appears once the addon has loaded its library (it logs at info)."""
PROFILE_ENV = "BENCH_ADDON_PROFILE"
PROFILE = f"""import cProfile, os, time
class LoopProfile:
    def __init__(self):
        self.profile = cProfile.Profile(time.thread_time)
    def running(self):
        self.profile.enable()
    def done(self):
        self.profile.disable()
        self.profile.dump_stats(os.environ["{PROFILE_ENV}"])
addons = [LoopProfile()]
"""
"""A mitmdump script profiling the event loop thread (see `--profile`); loaded first, so that its `done` runs
before the addon's shutdown."""
CLIENTS: dict[str, Callable[[str, str | None, int], object]] = {"mcp": _calls, "light": light_calls}
SHUTDOWN_SECONDS = 300.0
"""How long a proxy is given to stop (it reports every open run first: thousands with 2,000 documents)."""


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


def configurations(workdir: Path, library_size: int, profiled: bool, against: Path | None
                   ) -> dict[str, tuple[str, ...]]:
    """mitmdump arguments (beyond the harness's listen address, flow_detail and connection_strategy)."""
    quiet: tuple[str, ...] = ("--set", "termlog_verbosity=warn")
    if profiled:
        (workdir / "loop_profile.py").write_text(PROFILE)
        quiet += ("-s", str(workdir / "loop_profile.py"))
    loaded = workdir / "loaded.py"
    loaded.write_text(LOADED)
    libraries = {"library": ATTACKS}
    if library_size:
        from testing.library_copies import write_library

        libraries[f"{library_size:,} docs"] = workdir / f"library-{library_size}"
        libraries[f"{library_size:,} docs"].mkdir()
        write_library(library_size, libraries[f"{library_size:,} docs"])
    addons = {"addon": ADDON, **({f"{against.name}'s addon": against / "addon" / "oatf_addon.py"} if against else {})}
    configs = {BARE: quiet, EMPTY: (*quiet, "-s", str(ADDON), "--set", f"oatf_report_dir={workdir / 'reports-empty'}")}
    for label, library in libraries.items():
        for name, addon in addons.items():
            configs[f"{name} + {label}"] = (
                *quiet, "-s", str(addon), "-s", str(loaded), "--set", f"oatf_attacks={library}",
                "--set", f"oatf_report_dir={workdir / f'reports-{len(configs)}'}")
    return configs


def wait_loaded(marker: Path, log: Path, timeout: float = 600.0) -> float:
    """Seconds until `marker` exists (the library is loaded); SystemExit with the proxy's log after `timeout`."""
    started = time.monotonic()
    while not marker.exists():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"the library was not loaded after {timeout:g} s:\n{log.read_text()[-2000:]}")
        time.sleep(0.2)
    return time.monotonic() - started


def run_calls(client: str, url: str, proxy: str, calls: int) -> list[float]:
    latencies = asyncio.run(CLIENTS[client](url, proxy, calls))  # type: ignore[arg-type]
    assert isinstance(latencies, list)
    return latencies


@contextmanager
def server(kind: str, workdir: Path) -> Iterator[str]:
    """The MCP server's URL: the wire suite's FastMCP peer or `light_mcp.py`'s minimal server."""
    from testing.oatf_proxy import script_peer
    from testing.processes import peers

    if kind == "minimal":
        with script_peer(workdir, "minimal", Path(__file__).resolve().parent / "light_mcp.py") as port:
            yield f"http://127.0.0.1:{port}/mcp"
    else:
        with peers(workdir, kinds=("mcp_http",)) as running:
            yield running.url("mcp_http", "/mcp")


def bench(args: argparse.Namespace) -> tuple[
        dict[str, list[float]], dict[str, list[float]], dict[str, tuple[float, ...]], dict[str, dict[str, int]]]:
    """Per-call latencies, per-round requests/s and CPU seconds per call (event loop thread, other threads,
    monitor process) of each configuration; what each library proxy reported at shutdown."""
    from testing.processes import mitmdump

    calls, rounds = args.calls, args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        configs = configurations(workdir, args.library_size, args.profile,
                                 Path(args.against).resolve() if args.against else None)
        for name, extra in configs.items():
            print(f"  {name:28} mitmdump {' '.join(extra)}", flush=True)
        latencies: dict[str, list[float]] = {name: [] for name in configs}
        rates: dict[str, list[float]] = {name: [] for name in configs}
        cpu: dict[str, tuple[float, ...]] = dict.fromkeys(configs, (0.0, 0.0, 0.0))
        with server(args.server, workdir) as url, ExitStack() as stack:
            proxies = {name: stack.enter_context(mitmdump(
                workdir, tap=False, name=f"proxy{i}", extra=extra, stop_timeout=SHUTDOWN_SECONDS,
                environment={LOADED_ENV: str(workdir / f"proxy{i}.loaded"),
                             PROFILE_ENV: str(workdir / f"proxy{i}.pstats")}))
                for i, (name, extra) in enumerate(configs.items())}
            for i, (name, proxy) in enumerate(proxies.items()):
                if str(workdir / "loaded.py") in configs[name]:
                    print(f"  {name}: library loaded {wait_loaded(workdir / f'proxy{i}.loaded', proxy.log):.1f} s "
                          f"after the proxy listened", flush=True)
            for proxy in proxies.values():  # warm-up
                run_calls(args.client, url, proxy.url, 30)
            for _ in range(rounds):
                for name, proxy in proxies.items():
                    before = cpu_seconds(proxy.process.pid)
                    measured = run_calls(args.client, url, proxy.url, calls)
                    after = cpu_seconds(proxy.process.pid)
                    cpu[name] = tuple(
                        total + end - start for total, start, end in zip(cpu[name], before, after, strict=True))
                    latencies[name] += measured
                    rates[name].append(len(measured) / sum(measured))
        # The proxies stopped (SIGINT): the addon concluded and reported every open run.
        if args.profile:
            for i, name in enumerate(configs):
                print_profile(name, workdir / f"proxy{i}.pstats", (rounds * calls + 30))
        stats = {}
        for name, extra in configs.items():
            if str(workdir / "loaded.py") in extra:  # a library proxy
                verdicts = Path(next(a for a in extra if a.startswith("oatf_report_dir=")).partition("=")[2]) \
                    / "verdicts.jsonl"
                reports = [json.loads(line) for line in verdicts.read_text().splitlines()] if verdicts.exists() else []
                stats[name] = {"runs": len(reports), "attacks": len({r["attack"]["id"] for r in reports}),
                               "messages": sum(r["execution_summary"]["messages_seen"] for r in reports)}
    per_call = {name: tuple(seconds / (rounds * calls) for seconds in cpu[name]) for name in configs}
    return latencies, rates, per_call, stats


def print_profile(name: str, path: Path, calls: int) -> None:
    """The event loop's CPU per call (see `--profile`): in total, in the addon's code, in mitmproxy's hook
    dispatch (less the hooks themselves), and the addon's functions costing the most (own time)."""
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    ours = {key: value for key, value in stats.items() if "/addon/" in key[0] or "/oatf_engine/" in key[0]}
    total = sum(value[2] for value in stats.values())
    dispatch = sum(value[2] for key, value in stats.items() if key[0].endswith("mitmproxy/addonmanager.py"))
    per_call = 1e6 / calls
    print(f"  {name}: event loop {total * per_call:.0f} µs/call under the profiler, of which the addon's code "
          f"{sum(value[2] for value in ours.values()) * per_call:.0f} µs, mitmproxy's hook dispatch "
          f"{dispatch * per_call:.0f} µs (own time)")
    for (file, line, function), value in sorted(ours.items(), key=lambda item: -item[1][2])[:12]:
        print(f"      {value[2] * per_call:6.1f} µs own, {value[3] * per_call:6.1f} µs with callees, "
              f"{value[1] / calls:5.2f} calls/call  {Path(file).parent.name}/{Path(file).name}:{line} {function}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="tools/call per round and configuration")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--client", choices=sorted(CLIENTS), default="mcp")
    parser.add_argument("--server", choices=("fastmcp", "minimal"), default="fastmcp")
    parser.add_argument("--library-size", type=int, default=2000, help="documents of the large library (0: none)")
    parser.add_argument("--against", metavar="DIR", help="also measure the addon of the checkout at DIR")
    parser.add_argument("--profile", action="store_true", help="profile each proxy's event loop (cProfile)")
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"MCP tools/call loop, {args.client} client, {args.server} server, {args.rounds} alternating rounds of "
          f"{args.calls} calls per configuration (one MCP session per round); load average "
          f"{' '.join(f'{load:.1f}' for load in os.getloadavg())}; mitmdump configurations:", flush=True)
    latencies, rates, cpu, stats = bench(args)
    medians = {name: statistics.median(values) for name, values in latencies.items()}
    p99 = {name: statistics.quantiles(values, n=100)[-1] for name, values in latencies.items()}
    for name, values in latencies.items():
        print(f"  {name:28} {statistics.median(rates[name]):7.1f} req/s   median {_ms(medians[name])}   "
              f"p90 {_ms(statistics.quantiles(values, n=10)[-1])}   p99 {_ms(p99[name])}   "
              f"proxy CPU/call {sum(cpu[name]) * 1000:5.2f} ms (event loop {cpu[name][0] * 1000:5.2f}, "
              f"other threads {cpu[name][1] * 1000:5.2f}, monitor process {cpu[name][2] * 1000:5.2f})")
    for name in latencies:
        if name == BARE:
            continue
        ratios = [mine / bare for mine, bare in zip(rates[name], rates[BARE], strict=True)]
        print(f"  {name} vs {BARE}: {statistics.median(ratios):.1%} of its throughput (rounds: "
              f"{', '.join(f'{r:.0%}' for r in ratios)}), latency median {(medians[name] - medians[BARE]) * 1000:+.2f} "
              f"ms, p99 {(p99[name] - p99[BARE]) * 1000:+.2f} ms; proxy CPU "
              f"{(sum(cpu[name]) - sum(cpu[BARE])) * 1000:+.2f} ms/call, event loop "
              f"{(cpu[name][0] - cpu[BARE][0]) * 1000:+.2f} ms/call ({cpu[name][0] / cpu[BARE][0]:.0%} of bare's)"
              + ("   (targets: >= 95%, <= 1 ms)" if name in stats else ""))
    for name, counted in stats.items():
        print(f"  {name} at shutdown: {counted['runs']:,} runs of {counted['attacks']:,} attacks reported, "
              f"{counted['messages']:,} messages evaluated in them")


if __name__ == "__main__":
    main()
