"""Monitor cost per message, memory per session and load time as the attack library grows (issue 15: nearly
flat in the number of attacks).

    .venv/bin/python benchmarks/bench_library_scale.py [--sizes 0,51,110,500,2000] [--sessions 4] [--calls 250]
        [--repeats 1] [--timings 2] [--memory-sessions 40] [--against DIR] [--profile 0]

Libraries of `--sizes` documents are re-identified copies of `attacks/` (copy k of `OW-001` is `OW-001<k>`,
its indicators `OW-001<k>-01`, …: every copy is parsed from its own text, so no two share an object); a
size that is not a multiple of the library takes the first documents of the next copy. Copies keep their
originals' texts, so they share prefilter requirements and judge alike: the monitor looks each requirement
up, and judges each indicator, once per message whatever the number of copies (`Monitor`); a library of
as many different documents would pay a judgement per different indicator. Each library replays the same
recordings through the monitor (what `evaluate_events` does in one process, no cyclic collector: `oatf
evaluate --jobs 1` after decoding; building the monitor is counted in the load time, not per message)
twice: with the prefilter and runs on paper (the default), and on the exact path (`prefilter=False`: every
run materialised, fed every event of its traffic, counting its own messages), each the least CPU time of
`--timings` runs in this process after an untimed one (which fills the process's caches: compiled regexes,
paths and expressions, each attack's blank run), so every ratio compares figures measured minutes apart on
the same machine. The two must give the same verdicts.

- `mcp-loop`: `--sessions` long MCP sessions of `--calls` `tools/call` each (bench_replay's `mcp-loop`), the
  traffic of an agent that uses honest tools;
- `library`: every attack's recorded sessions (complying and resisting agent, `--repeats` copies), where
  the attacks happen: matches, phase changes, deliveries, and short sessions (about 10 messages) that each
  conclude a run of every attack of their protocol — one report per attack and session, so its cost per
  message grows with the library whatever the prefilter does.

Printed per recording and library size: µs of monitor CPU per message with the prefilter, on the exact path
and their ratio, the ratio to the 51-document library, and the verdict counts. `--against DIR` also runs the
engine of another checkout (e.g. `/work/main`) on the same libraries and recordings in a child process
started right after, and prints its µs per message and the ratio.

Then, per library size: the memory of a session (tracemalloc: the monitor's growth over `--memory-sessions`
concurrent honest MCP sessions, each after initialize, tools/list and one tools/call, divided by their
number) with the prefilter and on the exact path, and the load time (CPU, no cyclic collector, as `oatf evaluate`
loads): the documents written to a directory and loaded as `oatf evaluate` and the addon load them (`load_library`:
read, parsed, validated, strictly checked, normalized, each `AttackPlan`), then building the monitor (the
prefilter's RE2 filters).
`--profile N` prints the N costliest functions (own time) of the largest library on `mcp-loop`, in a run of
its own (not the one timed). `--plot PATH` also draws these figures against the library size (`svg_chart`: SVG,
or PNG through headless Chromium when PATH ends in `.png`; the README shows `docs/library-scale.png`).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

os.environ["OATF_CACHE_DIR"] = "off"  # the load column is a load without the cache (`bench_library_load`: with it)
ROOT = Path(os.environ.get("OATF_ENGINE_ROOT") or Path(__file__).resolve().parents[1])
"""The checkout whose engine is measured (`--against` sets it for its child process)."""
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.append(str(Path(__file__).resolve().parents[1] / "testing"))  # its `library_copies`, whatever the engine

from bench_replay import library_flows, mcp_loop_flows  # noqa: E402
from library_copies import write_library  # noqa: E402
from svg_chart import ChartError, Panel, write  # noqa: E402

from addon.recordings import decode_flows  # noqa: E402
from oatf_engine.events import ObservedEvent  # noqa: E402
from oatf_engine.monitor import LoadedAttack, Monitor, MonitorOptions, RunConcluded, load_library  # noqa: E402
from oatf_engine.replay import collector_paused, place_events  # noqa: E402
from oatf_engine.wire import WireDecoder  # noqa: E402


def library_of(size: int) -> tuple[list[LoadedAttack], float]:
    """`size` documents (`write_library`) loaded as `oatf evaluate` and the addon load them (`load_library`:
    read, parsed, validated, strictly checked, normalized and planned), and the CPU seconds that took."""
    if not size:
        return [], 0.0  # a directory without documents is a load problem
    with tempfile.TemporaryDirectory() as directory:
        write_library(size, Path(directory))
        with collector_paused():
            started = time.process_time()
            library = load_library([directory])
            loaded = time.process_time() - started
    if library.problems:
        raise SystemExit(f"the library of {size} documents does not load: {library.problems[0]}")
    return list(library.attacks), loaded


def decoded(flows: list[Any]) -> list[ObservedEvent]:
    events = decode_flows(WireDecoder(), flows)
    events.sort(key=lambda e: (e.timestamp, e.seq))
    return events


def recordings(args: argparse.Namespace) -> dict[str, list[ObservedEvent]]:
    return {
        "mcp-loop": decoded(mcp_loop_flows(args.sessions, args.calls, 1.0)[0]),
        "library": decoded(library_flows(args.repeats, 1.0)[0]),
    }


def run(attacks: list[LoadedAttack], events: list[ObservedEvent], prefilter: bool | None,
        profiler: cProfile.Profile | None = None) -> tuple[float, Counter[str]]:
    """CPU seconds the monitor spends on `events` with `attacks` — what `evaluate_events` does in one process:
    placing the events in sessions, observing them, the end of the traffic; building the monitor is the
    library's load (`measure`) — and its verdict counts (`prefilter`: None for an engine without it)."""
    options = MonitorOptions(max_runs=10_000_000)
    monitor = Monitor(attacks, options, **({} if prefilter is None else {"prefilter": prefilter}))
    with collector_paused():
        if profiler is not None:
            profiler.enable()
        cpu = time.process_time()
        outputs = [o for event, session, clock in place_events(events, options)
                   for o in monitor.observe(event, session, clock)]
        outputs += monitor.end_of_traffic(max(e.timestamp for e in events))
        cpu = time.process_time() - cpu
        if profiler is not None:
            profiler.disable()
    return cpu, Counter(o.report["verdict"]["result"] for o in outputs if isinstance(o, RunConcluded))


def least(timings: int, attacks: list[LoadedAttack], events: list[ObservedEvent],
          prefilter: bool | None) -> tuple[float, Counter[str]]:
    """µs of monitor CPU per message, the least of `timings` runs after one untimed (which fills the caches
    of compiled regexes, paths and expressions), and the verdict counts."""
    _, verdicts = run(attacks, events, prefilter)
    return min(run(attacks, events, prefilter)[0] for _ in range(timings)) / len(events) * 1e6, verdicts


def session_memory(attacks: list[LoadedAttack], sessions: list[list[ObservedEvent]], prefilter: bool | None) -> float:
    """Bytes the monitor grows by per session while `sessions` are open (each fed its events), by tracemalloc
    (after one session fed to another monitor, which fills the process's caches: CEL's parser, compiled paths)."""
    extra = {} if prefilter is None else {"prefilter": prefilter}
    warm = Monitor(attacks, MonitorOptions(), **extra)
    for event in sessions[0]:
        warm.observe(event)
    monitor = Monitor(attacks, MonitorOptions(max_runs=10_000_000), **extra)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for events in sessions:
        for event in events:
            monitor.observe(event)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return grown / len(sessions)


def memory_sessions(count: int) -> list[list[ObservedEvent]]:
    """`count` honest MCP sessions (bench_replay's `mcp-loop`), each cut after its first tools/call answer."""
    everything = decoded(mcp_loop_flows(count, 1, 0.001)[0])
    by_client: dict[str, list[ObservedEvent]] = {}
    for event in everything:
        by_client.setdefault(event.client.rpartition(":")[0], []).append(event)
    return list(by_client.values())


def measure(args: argparse.Namespace, sizes: list[int], exact: bool) -> dict[str, Any]:
    """Every figure of this checkout's engine (`exact`: also on the exact path, with runs on paper)."""
    prefilter: bool | None = True if exact else None
    results: dict[str, Any] = {"load": {}, "memory": {}, "cost": {}}
    libraries = {}
    for size in sizes:
        libraries[size], loaded = library_of(size)
        with collector_paused():
            started = time.process_time()
            Monitor(libraries[size])
            results["load"][size] = (loaded, time.process_time() - started)
    for name, events in recordings(args).items():
        results["cost"][name] = {"messages": len(events), "protocols": Counter(e.protocol for e in events)}
        for size in sizes:
            figures = {"prefilter": least(args.timings, libraries[size], events, prefilter)}
            if exact:
                figures["exact"] = least(args.timings, libraries[size], events, False)
            results["cost"][name][size] = figures
    sessions = memory_sessions(args.memory_sessions)
    for size in sizes:
        results["memory"][size] = {"prefilter": session_memory(libraries[size], sessions, prefilter)}
        if exact:
            results["memory"][size]["exact"] = session_memory(libraries[size], sessions, False)
    if args.profile and exact:
        profiler = cProfile.Profile()
        run(libraries[sizes[-1]], recordings(args)["mcp-loop"], True, profiler)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.profile)
        results["profile"] = out.getvalue()
    return results


def against(directory: str, argv: list[str]) -> dict[str, Any]:
    """The figures of the engine of the checkout at `directory`, measured by this script in a child process."""
    child = subprocess.run([sys.executable, __file__, *argv, "--json", "--profile", "0"], check=True,
                           capture_output=True, text=True, env={**os.environ, "OATF_ENGINE_ROOT": directory})
    figures: dict[str, Any] = json.loads(child.stdout, object_hook=lambda d: {
        int(k) if k.isdigit() else k: v for k, v in d.items()})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="0,51,110,500,2000")
    parser.add_argument("--sessions", type=int, default=4, help="mcp-loop: MCP sessions")
    parser.add_argument("--calls", type=int, default=250, help="mcp-loop: tools/call per session")
    parser.add_argument("--repeats", type=int, default=1, help="library: copies of the recorded sessions")
    parser.add_argument("--timings", type=int, default=2, help="timed runs per figure (the least CPU time counts)")
    parser.add_argument("--memory-sessions", type=int, default=40)
    parser.add_argument("--against", metavar="DIR", help="also measure the engine of the checkout at DIR")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--plot", metavar="PATH", type=Path, help="draw the figures (.svg, or .png via chromium)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # --against's child
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    if args.json:
        print(json.dumps(measure(args, sizes, exact=False)))
        return
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    mine = measure(args, sizes, exact=True)
    other = None if args.against is None else against(args.against, [a for a in sys.argv[1:]
                                                                      if not a.startswith("--against")
                                                                      and a != args.against])
    label = "" if other is None else f" ({Path(args.against).name}: its engine, measured right after)"
    for name, cost in mine["cost"].items():
        print(f"\n{name}: {cost['messages']:,} messages ({dict(cost['protocols'])}); µs of monitor CPU per message"
              f"{label}")
        header = f"  {'documents':>9} {'prefilter':>9} {'exact':>8} {'exact/pf':>8} {'pf x 51':>7}"
        if other is not None:
            header += f" {Path(args.against).name:>9} {'it/pf':>6}"
        print(f"{header}  verdicts")
        for size in sizes:
            (fast, verdicts), (slow, exact_verdicts) = cost[size]["prefilter"], cost[size]["exact"]
            versus_51 = f"{fast / cost[51]['prefilter'][0]:7.1f}" if 51 in cost else f"{'-':>7}"
            line = f"  {size:>9,} {fast:>9,.1f} {slow:>8,.1f} {slow / fast:>8.2f} {versus_51}"
            if other is not None:
                theirs = other["cost"][name][size]["prefilter"][0]
                line += f" {theirs:>9,.1f} {theirs / fast:>6.2f}"
            same = "" if verdicts == exact_verdicts else f"  DIFFERENT on the exact path: {dict(exact_verdicts)}"
            print(f"{line}  {dict(sorted(verdicts.items()))}{same}")
    print(f"\nper session (tracemalloc, {args.memory_sessions} concurrent honest MCP sessions) and load time (CPU s)")
    header = f"  {'documents':>9} {'KB/session':>10} {'exact':>8} {'load':>10} {'monitor':>8}"
    if other is not None:
        header += f" {Path(args.against).name + ' KB':>10} {'its load':>8}"
    print(header)
    for size in sizes:
        memory, (parse, build) = mine["memory"][size], mine["load"][size]
        line = (f"  {size:>9,} {memory['prefilter'] / 1e3:>10,.1f} {memory['exact'] / 1e3:>8,.1f} {parse:>10.2f}"
                f" {build:>8.2f}")
        if other is not None:
            theirs = other["memory"][size]["prefilter"] / 1e3
            line += f" {theirs:>10,.1f} {sum(other['load'][size]):>8.2f}"
        print(line)
    if "profile" in mine:
        print(mine["profile"])
    if args.plot is not None:
        try:
            write(args.plot, panels(mine, sizes), f"{' '.join(['bench_library_scale.py', *sys.argv[1:]])}; "
                                                  f"{time.strftime('%Y-%m-%d')}")
        except ChartError as exc:
            sys.exit(f"bench_library_scale.py: {exc}")
        print(f"\nplot: {args.plot}")


def panels(figures: dict[str, Any], sizes: list[int]) -> list[Panel]:
    """The chart of `--plot`: monitor CPU per message (each recording, with the prefilter and on the exact path),
    memory per session, and load time, against the library size."""
    cost = Panel("Monitor CPU per message", "documents in the library", "µs per message (log)", [*sizes], log_y=True)
    names = {"mcp-loop": "long MCP sessions", "library": "the library's attack sessions"}
    for name, by_size in figures["cost"].items():
        for path, label in (("prefilter", "prefilter"), ("exact", "exact path")):
            cost.series[f"{names.get(name, name)}, {label}"] = [(size, by_size[size][path][0]) for size in sizes]
    memory = Panel("Memory per MCP session", "documents in the library", "KB per session (log)", [*sizes],
                   log_y=True)
    for path, label in (("prefilter", "prefilter, runs on paper"), ("exact", "exact path")):
        memory.series[label] = [(size, figures["memory"][size][path] / 1e3) for size in sizes]
    load = Panel("Loading the library", "documents in the library", "CPU seconds", [*sizes])
    load.series["read, validate, plan"] = [(size, figures["load"][size][0]) for size in sizes]
    load.series["build the monitor"] = [(size, figures["load"][size][1]) for size in sizes]
    return [cost, memory, load]


if __name__ == "__main__":
    main()
