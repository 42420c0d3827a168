"""The live addon's cost: mitmdump + `addon/oatf_addon.py` against bare mitmdump on the same MCP workload.

    .venv/bin/python benchmarks/bench_addon.py [--calls 300] [--rounds 5] [--client mcp|light]
        [--server fastmcp|minimal] [--library-size 2000] [--against DIR]

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
- mitmdump + a do-nothing addon with the OATF addon's five flow hooks (`DO_NOTHING`): mitmproxy's dispatch of them,
  the floor of any addon that sees every flow;
- mitmdump + the addon with no attacks loaded (decoding, queueing, an idle monitor);
- mitmdump + the addon with the whole `attacks/` library (`--set oatf_attacks=attacks/`): every MCP attack
  of the library opens a run on the session and evaluates every message;
- mitmdump + the addon with a library of `--library-size` documents (re-identified copies of `attacks/`,
  `testing.library_copies`; 0: left out). Measuring starts once each library is loaded (the addon's
  "attack(s) loaded" log line, caught by a logging handler a tiny script adds: the proxies log at warn; the same
  script counts the proxy's cyclic garbage collections from then on, printed at the end);
- with `--against DIR` (another checkout of this project, e.g. `git archive main | tar -x -C DIR`), its addon
  with the whole library, and with the large one: before and after a change, in the same run.
The configurations alternate within each round (warm-up first) so that drift on this shared machine hits them
alike. Printed: requests/s (calls / summed call latency, per round; the median of the rounds), median, p90
and p99 latency over all calls, the proxy's CPU time per call (the threads' time on a CPU, `/proc/…/schedstat`,
so a busy machine does not inflate it; split into mitmproxy's event loop thread — what bounds the proxy's
throughput when it is the bottleneck — its other threads — the addon's worker, sender and receiver threads — and
its child processes — the addon's monitor process, where evaluation runs), and the addon configurations against
bare mitmdump: throughput ratio (median of the per-round ratios), added median and p99 latency, added CPU per
call, and the event loop's CPU against bare's (median of the per-round ratios). On a loaded machine the
wall-clock ratios swing by tens of percent between rounds; the CPU figures much less.
Targets with a library loaded (issue 15, light client, whole library and 2,000 documents): >= 95% of bare
throughput, <= 1 ms added median latency.
Where the time goes: py-spy can sample the proxies only as their ancestor here (attaching is refused), so run the
benchmark under it: `py-spy record --subprocesses --threads --format raw -o stacks.txt -- .venv/bin/python
benchmarks/bench_addon.py …` (wall-clock samples: a thread waiting for the interpreter lock counts too).
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
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_wire import ROOT, _calls
from light_mcp import light_calls

ADDON = ROOT / "addon" / "oatf_addon.py"
ATTACKS = ROOT / "attacks"
BARE, HOOKS, EMPTY = "bare mitmdump", "do-nothing addon", "addon, no attacks"
DO_NOTHING = """class DoNothing:
    def requestheaders(self, flow): pass
    def request(self, flow): pass
    def responseheaders(self, flow): pass
    def response(self, flow): pass
    def error(self, flow): pass
addons = [DoNothing()]
"""
"""A mitmdump script with the OATF addon's five flow hooks, each doing nothing: what mitmproxy's dispatch of them
costs, the floor of any addon that sees every flow."""
LOADED_ENV = "BENCH_ADDON_LOADED"
LOADED = f"""import gc, json, logging, os, time
collections = {{"loaded": False, "started": 0.0, "count": [0, 0, 0], "seconds": [0.0, 0.0, 0.0], "worst": 0.0}}
class Loaded(logging.Handler):
    def emit(self, record):
        if "attack(s) loaded" in record.getMessage():
            collections["loaded"] = True
            open(os.environ["{LOADED_ENV}"], "w").close()
logging.getLogger("oatf").addHandler(Loaded(logging.INFO))
def collected(phase, info):
    if phase == "start":
        collections["started"] = time.perf_counter()
    elif collections["loaded"]:
        took = time.perf_counter() - collections["started"]
        collections["count"][info["generation"]] += 1
        collections["seconds"][info["generation"]] += took
        collections["worst"] = max(collections["worst"], took)
gc.callbacks.append(collected)
def done():
    with open(os.environ["{LOADED_ENV}"] + ".gc", "w") as out:
        json.dump(collections, out)
"""
"""A mitmdump script: a file appears once the addon has loaded its library (it logs at info); at the end, the
proxy's cyclic garbage collections since then (per generation: how many, their time; the longest) in another."""
CLIENTS: dict[str, Callable[[str, str | None, int], object]] = {"mcp": _calls, "light": light_calls}
SHUTDOWN_SECONDS = 300.0
"""How long a proxy is given to stop (it reports every open run first: thousands with 2,000 documents)."""


def _on_cpu(task: Path) -> float:
    """Seconds thread `task` (a /proc/PID/task/TID directory) has run on a CPU (its `schedstat`, in ns: finer than
    `stat`'s clock ticks), 0 if it is gone."""
    try:
        return int((task / "schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def cpu_seconds(pid: int) -> tuple[float, float, float]:
    """CPU time so far of process `pid`'s main thread (mitmproxy's event loop), of its other threads together,
    and of its child processes (the addon's monitor process); threads that ended are not counted."""
    main = others = children = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name == str(pid):
            main += _on_cpu(task)
        else:
            others += _on_cpu(task)
    for proc in Path("/proc").iterdir():
        try:
            parent = (proc / "stat").read_text().rpartition(")")[2].split()[1] if proc.name.isdigit() else ""
        except (OSError, IndexError):
            continue
        if parent == str(pid):
            children += sum(_on_cpu(task) for task in (proc / "task").iterdir())
    return main, others, children


def configurations(workdir: Path, library_size: int, against: Path | None) -> dict[str, tuple[str, ...]]:
    """mitmdump arguments (beyond the harness's listen address, flow_detail and connection_strategy)."""
    quiet = ("--set", "termlog_verbosity=warn")
    loaded = workdir / "loaded.py"
    loaded.write_text(LOADED)
    libraries = {"library": ATTACKS}
    if library_size:
        from testing.library_copies import write_library

        libraries[f"{library_size:,} docs"] = workdir / f"library-{library_size}"
        libraries[f"{library_size:,} docs"].mkdir()
        write_library(library_size, libraries[f"{library_size:,} docs"])
    addons = {"addon": ADDON, **({f"{against.name}'s addon": against / "addon" / "oatf_addon.py"} if against else {})}
    hooks = workdir / "do_nothing.py"
    hooks.write_text(DO_NOTHING)
    configs = {BARE: quiet, HOOKS: (*quiet, "-s", str(hooks)),
               EMPTY: (*quiet, "-s", str(ADDON), "--set", f"oatf_report_dir={workdir / 'reports-empty'}")}
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


class Results(NamedTuple):
    """Per configuration: what was measured."""

    latencies: dict[str, list[float]]
    """Each call's latency."""
    rates: dict[str, list[float]]
    """Requests/s per round."""
    cpu: dict[str, tuple[float, float, float]]
    """CPU seconds per call: event loop thread, other threads, monitor process."""
    loops: dict[str, list[float]]
    """The event loop thread's CPU seconds per round."""
    stats: dict[str, dict[str, Any]]
    """What each library proxy reported at shutdown: runs, attacks, messages; its cyclic garbage collections
    once the library was loaded (`LOADED`)."""


def bench(args: argparse.Namespace) -> Results:
    """Every configuration measured, alternating within each round."""
    from testing.processes import mitmdump

    calls, rounds = args.calls, args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        configs = configurations(workdir, args.library_size,
                                 Path(args.against).resolve() if args.against else None)
        for name, extra in configs.items():
            print(f"  {name:28} mitmdump {' '.join(extra)}", flush=True)
        latencies: dict[str, list[float]] = {name: [] for name in configs}
        rates: dict[str, list[float]] = {name: [] for name in configs}
        cpu: dict[str, tuple[float, ...]] = dict.fromkeys(configs, (0.0, 0.0, 0.0))  # summed over the rounds
        loops: dict[str, list[float]] = {name: [] for name in configs}
        with server(args.server, workdir) as url, ExitStack() as stack:
            proxies = {name: stack.enter_context(mitmdump(
                workdir, tap=False, name=f"proxy{i}", extra=extra, stop_timeout=SHUTDOWN_SECONDS,
                environment={LOADED_ENV: str(workdir / f"proxy{i}.loaded")}))
                for i, (name, extra) in enumerate(configs.items())}
            for i, (name, proxy) in enumerate(proxies.items()):
                if str(workdir / "loaded.py") in configs[name]:
                    waited = wait_loaded(workdir / f"proxy{i}.loaded", proxy.log)  # the proxies load at once
                    print(f"  {name}: library loaded (waited {waited:.1f} s more)", flush=True)
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
                    loops[name].append(after[0] - before[0])
        # The proxies stopped (SIGINT): the addon concluded and reported every open run.
        stats = {}
        for name, extra in configs.items():
            if str(workdir / "loaded.py") in extra:  # a library proxy
                verdicts = Path(next(a for a in extra if a.startswith("oatf_report_dir=")).partition("=")[2]) \
                    / "verdicts.jsonl"
                reports = [json.loads(line) for line in verdicts.read_text().splitlines()] if verdicts.exists() else []
                stats[name] = {"runs": len(reports), "attacks": len({r["attack"]["id"] for r in reports}),
                               "messages": sum(r["execution_summary"]["messages_seen"] for r in reports)}
                collected = workdir / f"proxy{list(configs).index(name)}.loaded.gc"
                if collected.exists():
                    stats[name]["collections"] = json.loads(collected.read_text())
    n = rounds * calls
    per_call = {name: (cpu[name][0] / n, cpu[name][1] / n, cpu[name][2] / n) for name in configs}
    return Results(latencies, rates, per_call, loops, stats)


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
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"MCP tools/call loop, {args.client} client, {args.server} server, {args.rounds} alternating rounds of "
          f"{args.calls} calls per configuration (one MCP session per round); load average "
          f"{' '.join(f'{load:.1f}' for load in os.getloadavg())}; mitmdump configurations:", flush=True)
    latencies, rates, cpu, loops, stats = bench(args)
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
        loop_ratios = [mine / bare for mine, bare in zip(loops[name], loops[BARE], strict=True)]
        print(f"  {name} vs {BARE}: {statistics.median(ratios):.1%} of its throughput (rounds: "
              f"{', '.join(f'{r:.0%}' for r in ratios)}), latency median {(medians[name] - medians[BARE]) * 1000:+.2f} "
              f"ms, p99 {(p99[name] - p99[BARE]) * 1000:+.2f} ms; proxy CPU "
              f"{(sum(cpu[name]) - sum(cpu[BARE])) * 1000:+.2f} ms/call, event loop "
              f"{(cpu[name][0] - cpu[BARE][0]) * 1000:+.2f} ms/call: {statistics.median(loop_ratios):.1%} of bare's "
              f"(median of the rounds: {', '.join(f'{r:.0%}' for r in loop_ratios)})"
              + ("   (targets: >= 95%, <= 1 ms)" if name in stats else ""))
    for name, counted in stats.items():
        print(f"  {name} at shutdown: {counted['runs']:,} runs of {counted['attacks']:,} attacks reported, "
              f"{counted['messages']:,} messages evaluated in them")
        if "collections" in counted:
            gc = counted["collections"]
            print(f"  {name}: the proxy's cyclic garbage collections once the library was loaded (the rounds, the "
                  f"stop): {sum(gc['count'])} taking {sum(gc['seconds']) * 1000:.0f} ms (generation 0/1/2: "
                  f"{'/'.join(str(c) for c in gc['count'])}, {'/'.join(f'{t * 1000:.0f}' for t in gc['seconds'])} "
                  f"ms), the longest {gc['worst'] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
