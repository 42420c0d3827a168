"""Offline replay throughput (`oatf evaluate`'s engine) with the whole `attacks/` library loaded.

    .venv/bin/python benchmarks/bench_replay.py [--workload both] [--repeats 20] [--sessions 20] [--calls 500]
        [--stagger 1.0] [--workers N] [--profile 0]

Two recordings, each written to one mitmproxy flow file:
- `library`: every attack's recorded sessions (`testing/sessions.py`: each document's complying and
  resisting agent, the traffic the library's own replay tests use) played `--repeats` times, each copy with
  its own session ids (Mcp-Session-Id, contextId, taskId, threadId, runId), client address and flow ids, the
  sessions starting `--stagger` seconds of recorded time apart (so they overlap and runs conclude as the
  recorded clock passes their grace period). Short sessions (about 10 messages), each of which opens a run of
  every library attack of its protocol: this measures the per-run cost (creation, verdict, report) as much
  as the per-message one.
- `mcp-loop`: `--sessions` MCP Streamable HTTP sessions (same generator) of `--calls` `tools/call` each: the
  per-message cost of the runs following a long session.

Figures (messages = decoded protocol events, the unit the monitor consumes), CPU seconds of this process
unless said otherwise:
- `addon.recordings.replay` end to end (load the library, read the flow file, decode, monitor, conclude), wall
  clock and CPU, in one process and with the sessions split over `--workers` forked processes (default: the
  CPUs available, as `oatf evaluate --jobs`); target >= 5,000 messages/s. The two must report the same;
- its stages separately: reading the flow file, decoding (`decode_flows`), and the monitor (the same loop as
  `replay`: `Monitor.observe` per event, a final tick past the grace period, `shutdown`), and the monitor
  with an empty library (the per-event floor);
- for `library`, the verdicts per copy, which must be the same for every copy (the copies did not merge).
`--against DIR` (e.g. `/work/main`) also measures another checkout's engine over the same recordings (the same
library: this checkout's `attacks/`): each checkout in a fresh process, alternately, `--rounds` times; it prints
the CPU per message of each stage (end to end, reading, decoding, the monitor) as ranges with the ratios of the
medians, the peak RSS of `replay()` end to end, and whether both give identical reports.
Also the start-up: the CPU a fresh interpreter spends importing `addon.recordings` (next to one importing nothing).
`--jobs-rounds N` replays with one process and with `--workers` (as `oatf evaluate --jobs`), each in a fresh
process, alternately, N times (instead of the figures above): messages/s, CPU per message of every process, the
peak RSS of the main process and of each worker, and whether the reports are identical in the same order.
`--profile N` prints the N most expensive functions of the monitor stage (cProfile, by own time).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import hashlib
import io
import itertools
import json
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _code_checkout() -> Path:
    """The checkout whose engine this process measures: its own, or `--code DIR`'s (a child of `--against`)."""
    if "--code" in sys.argv:
        return Path(sys.argv[sys.argv.index("--code") + 1]).resolve()
    return ROOT


sys.path.insert(0, str(_code_checkout()))

from addon.recordings import (  # noqa: E402
    decode_flows,
    read_flows,
    replay,
)
from oatf_engine.events import ObservedEvent  # noqa: E402
from oatf_engine.monitor import load_library  # noqa: E402
from oatf_engine.replay import available_cpus, collector_paused, evaluate_events  # noqa: E402
from oatf_engine.wire import WireDecoder  # noqa: E402
from testing import sessions  # noqa: E402

ATTACKS = str(ROOT / "attacks")


def _session_values(exchanges: list[sessions.Exchange]) -> list[str]:
    """Every session-key value the exchanges carry, longest first (so no value is replaced inside another)."""
    values = {v for ex in exchanges for m in ex.messages for v in m.session_keys.values() if v}
    return sorted(values, key=len, reverse=True)


def _renamed(ex: sessions.Exchange, values: list[str], suffix: str, shift: float) -> sessions.Exchange:
    """`ex` with every session-key value suffixed (headers and bodies) and its times shifted."""

    def text(value: str) -> str:
        for old in values:
            value = value.replace(old, old + suffix)
        return value

    def data(value: bytes) -> bytes:
        for old in values:
            value = value.replace(old.encode(), (old + suffix).encode())
        return value

    return dataclasses.replace(
        ex, request_headers={k: text(v) for k, v in ex.request_headers.items()},
        response_headers={k: text(v) for k, v in ex.response_headers.items()},
        request_body=data(ex.request_body), response_body=data(ex.response_body),
        request_at=ex.request_at + shift, response_start=ex.response_start + shift,
        response_end=ex.response_end + shift, messages=[])


def library_flows(repeats: int, stagger: float) -> tuple[list, int]:
    """The library's recorded sessions, `repeats` copies (see the module docstring): flows and sessions."""
    played = []
    for attack_id in sessions.script_ids():
        script = sessions.load_script(attack_id)
        for variant in sessions.VARIANTS:
            exchanges = sessions.play(script, variant)
            played.append((f"{attack_id}/{variant}", exchanges, _session_values(exchanges)))
    flows = []
    copy = 0
    for k in range(repeats):
        for name, exchanges, values in played:
            renamed = [_renamed(ex, values, f"~{k}", copy * stagger) for ex in exchanges]
            flows += sessions.to_flows(renamed, _client(copy), f"bench/{name}/{k}")
            copy += 1
    return flows, copy


def mcp_loop_flows(count: int, calls: int, stagger: float) -> tuple[list, int]:
    """`count` MCP sessions (Streamable HTTP, JSON answers), each initialize, tools/list and `calls`
    tools/call 50 ms apart, starting `stagger` seconds apart: flows and sessions."""
    flows = []
    for n in range(count):
        script = {"steps": [
            {"mcp_init": {"session": f"loop-{n:05d}"}},
            {"mcp": {"method": "tools/list", "result": {"tools": [{
                "name": "add", "description": "Adds two numbers.",
                "inputSchema": {"type": "object",
                                "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]}}},
            {"repeat": {"times": calls, "steps": [{"wait": 0.05, "mcp": {
                "method": "tools/call", "params": {"name": "add", "arguments": {"a": "$n", "b": 1}},
                "result": {"content": [{"type": "text", "text": "sum computed"}], "isError": False}}}]}},
        ]}
        exchanges = [_renamed(ex, [], "", n * stagger) for ex in sessions.play(script, "complying")]
        flows += sessions.to_flows(exchanges, _client(n), f"bench/loop/{n}")
    return flows, count


def _client(n: int) -> str:
    return f"10.{100 + (n >> 16) % 100}.{(n >> 8) & 255}.{n & 255}"


def timed[T](function: Callable[..., T], *args: Any) -> tuple[T, float, float]:
    """`function(*args)`, its wall-clock seconds and this process's CPU seconds, with the cyclic garbage
    collector paused as `replay` pauses it."""
    with collector_paused():
        wall, cpu = time.perf_counter(), time.process_time()
        result = function(*args)
        return result, time.perf_counter() - wall, time.process_time() - cpu


def read_and_decode(path: Path) -> tuple[list[ObservedEvent], float, float]:
    """The events of the recording at `path` in time order, and the CPU seconds reading and decoding took."""
    flows, _, read_cpu = timed(read_flows, str(path))

    def decode() -> list[ObservedEvent]:
        events = decode_flows(WireDecoder(), flows)
        events.sort(key=lambda e: (e.timestamp, e.seq))
        return events

    events, _, decode_cpu = timed(decode)
    return events, read_cpu, decode_cpu


def measure(label: str, path: Path, library_size: int, repeats: int, workers: int, profile: int) -> None:
    """replay() end to end (one process, then `workers`), then its stages one by one, over the recording at
    `path`."""
    runs: dict[int, list] = {}
    for count in sorted({1, workers}):
        result, wall, cpu = timed(replay, [ATTACKS], [str(path)], None, count)
        messages = result.events
        runs[count] = sorted((r["attack"]["id"], r["execution_summary"]["session"], r["verdict"]["result"],
                              r["execution_summary"]["status"]) for r in result.reports)
        if count == 1:
            print(f"  replay() end to end: {messages:,} messages, {len(result.reports):,} runs reported "
                  f"({len(result.reports) / messages:.2f} per message)")
        print(f"    {result.workers} process(es): {messages / wall:>9,.0f} messages/s wall ({wall:.1f} s)   "
              f"{messages / cpu:>9,.0f} messages/s CPU of the main process ({cpu:.1f} s)   (target >= 5,000)")
    if len(runs) > 1:
        print(f"    same runs, verdicts and statuses with {workers} processes as with one: "
              f"{runs[1] == runs[workers]}")
    events, read_cpu, decode_cpu = read_and_decode(path)
    library, _, load_cpu = timed(load_library, [ATTACKS])
    _, _, empty_cpu = timed(evaluate_events, [], events)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    reports, _, monitor_cpu = timed(evaluate_events, list(library.attacks), events)
    if profiler is not None:
        profiler.disable()
    print("  stages (CPU seconds of this process):")
    print(f"    load library     {load_cpu:6.2f} s   ({library_size} documents, once per replay)")
    print(f"    read flow file   {read_cpu:6.2f} s   {messages / read_cpu:>10,.0f} messages/s")
    print(f"    decode           {decode_cpu:6.2f} s   {messages / decode_cpu:>10,.0f} messages/s")
    print(f"    monitor, library {monitor_cpu:6.2f} s   {messages / monitor_cpu:>10,.0f} messages/s "
          f"({monitor_cpu / messages * 1e6:.0f} us/message, "
          f"{monitor_cpu / max(len(reports), 1) * 1e6:.0f} us per run reported)"
          + ("  [under cProfile]" if profiler is not None else ""))
    print(f"    monitor, empty   {empty_cpu:6.2f} s   {messages / empty_cpu:>10,.0f} messages/s (no attacks)")
    per_copy = Counter((r["attack"]["id"], r["verdict"]["result"]) for r in reports)
    results = Counter(r["verdict"]["result"] for r in reports)
    uneven = {key: n for key, n in per_copy.items() if n % repeats}
    print(f"  verdicts: {dict(results)}"
          + ("" if repeats <= 1 else "; every (attack, result) pair occurs a multiple of --repeats times (the "
             "copies did not merge)" if not uneven else f"; {len(uneven)} (attack, result) pairs differ between "
             f"copies: {uneven}"))
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(profile)
        print(out.getvalue())


def peak_rss() -> float:
    """This process's peak resident memory in MB since it started its program (`VmHWM`: `ru_maxrss` would count
    the peak of the process it was forked from)."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def stage_figures(path: Path) -> dict[str, Any]:
    """In a fresh process (a child of `--against`): `replay` end to end over the recording at `path` (its CPU and
    the process's peak RSS after it, before anything else runs), then the stages: reading, decoding and the
    monitor's CPU, and a digest of the reports (sorted, as JSON)."""
    result, _, cpu = timed(replay, [ATTACKS], [str(path)], None, 1)
    rss = peak_rss()
    digest = hashlib.sha256(json.dumps(sorted(json.dumps(r, sort_keys=True) for r in result.reports)).encode())
    del result
    events, read_cpu, decode_cpu = read_and_decode(path)
    library = load_library([ATTACKS])
    _, _, monitor_cpu = timed(evaluate_events, list(library.attacks), events)
    return {"messages": len(events), "end to end": cpu, "read": read_cpu, "decode": decode_cpu,
            "monitor": monitor_cpu, "rss": rss, "reports": digest.hexdigest()}


def replay_figures(path: Path, workers: int) -> dict[str, Any]:
    """In a fresh process (a child of `processes`): `replay` end to end with `workers`, its wall clock, the CPU of
    this process and of its workers, this process's peak RSS, and a digest of the reports in their order."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result, wall, cpu = timed(replay, [ATTACKS], [str(path)], None, workers)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    digest = hashlib.sha256(json.dumps(result.reports, sort_keys=True).encode()).hexdigest()
    return {"messages": result.events, "processes": result.workers, "wall": wall, "cpu": cpu,
            "workers cpu": workers_cpu, "rss": peak_rss(), "reports": digest}


def _descendants(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                kids = [int(k) for k in task.read_text().split()]
                found += kids
                pending += kids
    return found


def _peak_of(pid: int) -> float | None:
    """`pid`'s peak RSS in MB so far (`VmHWM`), None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return int(status.split("VmHWM:")[1].split()[0]) / 1024 if "VmHWM:" in status else None


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _proportional(pid: int) -> float:
    """`pid`'s proportional set size in MB now (`Pss`: a page shared by n processes counts 1/n in each), 0 once
    it is gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0
    return int(rollup.split("\nPss:")[1].split()[0]) / 1024 if "\nPss:" in rollup else 0.0


def processes(path: Path, workers: int, rounds: int) -> None:
    """`replay` with one process and with `workers`, each in a fresh process, alternately, `rounds` times: messages
    per second (wall), CPU per message of every process (library loading included), the peak RSS of the main
    process and of each worker (`VmHWM`, read every 20 ms while they run: a worker's pages shared with the main
    process, forked before the recording is read, count in both; so the largest sum of their proportional set
    sizes, sampled every 0.5 s), and whether the reports are identical, in the same order."""
    figures: dict[int, list[dict[str, Any]]] = {1: [], workers: []}
    for _ in range(rounds):
        for count in figures:
            child = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--replay-of", str(path),
                                      "--workers", str(count)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
            peaks: dict[int, float] = {}
            proportional = 0.0
            for sample in itertools.count():
                if child.poll() is not None:
                    break
                pids = _descendants(child.pid)
                for pid in pids:
                    peak = _peak_of(pid)
                    if peak is not None:
                        peaks[pid] = max(peak, peaks.get(pid, 0.0))
                if sample % 25 == 0:  # walking page tables costs: PSS every 0.5 s
                    proportional = max(proportional, sum(_proportional(pid) for pid in [child.pid, *pids]))
                time.sleep(0.02)
            out, _ = child.communicate()
            if child.returncode:
                raise SystemExit(f"replay with {count} process(es) failed ({child.returncode})")
            figure = json.loads(out.splitlines()[-1])
            figure["worker rss"] = sorted(peaks.values(), reverse=True)
            figure["pss"] = proportional
            figures[count].append(figure)
    messages = figures[1][0]["messages"]
    print(f"  oatf evaluate --jobs 1 and --jobs {workers}: replay() each in a fresh process, alternately, {rounds} "
          f"round(s), {messages:,} messages (medians):")
    for count, runs in figures.items():
        wall = median([f["wall"] for f in runs])
        cpu = median([(f["cpu"] + f["workers cpu"]) / messages * 1e6 for f in runs])
        main_cpu = median([f["cpu"] / messages * 1e6 for f in runs])
        split = (f" (main {main_cpu:.1f}, workers {cpu - main_cpu:.1f} together: on idle cores the wall clock is "
                 f"bound by the larger of main's and one worker's)") if count > 1 else ""
        main = median([f["rss"] for f in runs])
        worker = max((max(f["worker rss"], default=0.0) for f in runs), default=0.0)
        total = median([f["rss"] + sum(f["worker rss"]) for f in runs])
        pss = median([f["pss"] for f in runs])
        print(f"    --jobs {count}: {runs[0]['processes']} evaluation process(es)   {messages / wall:>8,.0f} "
              f"messages/s wall ({wall:.1f} s)   {cpu:6.1f} us CPU per message (all processes){split}   "
              f"peak RSS: main {main:,.0f} MB"
              + (f", largest worker {worker:,.0f} MB, sum {total:,.0f} MB" if count > 1 else "")
              + f"; largest sum of every process's PSS sampled {pss:,.0f} MB")
    one, many = figures[1][0], figures[workers][0]
    print(f"    wall ratio --jobs 1 / --jobs {workers}: "
          f"{median([f['wall'] for f in figures[1]]) / median([f['wall'] for f in figures[workers]]):.2f}; identical "
          f"reports in the same order (every round): "
          f"{len({f['reports'] for f in figures[1] + figures[workers]}) == 1 and one['messages'] == many['messages']}")


def compare(path: Path, against: Path, rounds: int) -> None:
    """This checkout's engine and `against`'s over the recording at `path`, each in a fresh process
    (`stage_figures`), alternately `rounds` times: CPU per message of each stage (ranges), the ratios of the
    medians, peak RSS, and whether the reports are identical."""
    figures: dict[Path, list[dict[str, Any]]] = {ROOT: [], against: []}
    for _ in range(rounds):
        for code in figures:
            child = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--code", str(code),
                                    "--stages-of", str(path)], check=True, capture_output=True, text=True,
                                   cwd=code)
            figures[code].append(json.loads(child.stdout.splitlines()[-1]))
    ours, theirs = figures[ROOT], figures[against]
    messages = ours[0]["messages"]
    print(f"  this checkout against {against}, each in a fresh process, alternately, {rounds} round(s) "
          f"({messages:,} messages; CPU us per message, min-max; ratio of the medians, > 1: this checkout faster):")
    for stage in ("end to end", "read", "decode", "monitor"):
        mine = sorted(f[stage] / messages * 1e6 for f in ours)
        other = sorted(f[stage] / messages * 1e6 for f in theirs)
        ratio = other[len(other) // 2] / mine[len(mine) // 2]
        print(f"    {stage:<11} {mine[0]:6.1f}-{mine[-1]:6.1f} us (= {1e6 / mine[len(mine) // 2]:>7,.0f} messages/s)"
              f"   against {other[0]:6.1f}-{other[-1]:6.1f} us (= {1e6 / other[len(other) // 2]:>7,.0f}/s)"
              f"   ratio {ratio:.2f}")
    print(f"    peak RSS of replay() end to end: {min(f['rss'] for f in ours):,.0f} MB   against "
          f"{min(f['rss'] for f in theirs):,.0f} MB")
    same = {f["reports"] for f in ours} == {f["reports"] for f in theirs} and len({f["reports"] for f in ours}) == 1
    print(f"    identical reports (every round, both checkouts): {same}; same messages: "
          f"{ {f['messages'] for f in ours + theirs} == {messages} }")


def start_up() -> None:
    """CPU seconds a fresh interpreter spends importing the replay reader (`addon.recordings`, what `oatf
    evaluate` imports before it reads anything), next to an interpreter that imports nothing (least of three)."""

    def child_cpu(code: str) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    reader, empty = (min(child_cpu(code) for _ in range(3)) for code in ("import addon.recordings", "pass"))
    print(f"start-up: importing addon.recordings in a fresh interpreter {reader:.2f} s of CPU (an empty "
          f"interpreter: {empty:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("library", "mcp-loop", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=20, help="library: copies of the library's recorded sessions")
    parser.add_argument("--stagger", type=float, default=1.0, help="seconds between the starts of two sessions")
    parser.add_argument("--sessions", type=int, default=20, help="mcp-loop: MCP sessions")
    parser.add_argument("--calls", type=int, default=500, help="mcp-loop: tools/call per session")
    parser.add_argument("--workers", type=int, default=available_cpus(),
                        help="processes for the parallel end-to-end replay (default: the CPUs available)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the N costliest functions "
                        "of the monitor stage")
    parser.add_argument("--against", type=Path, metavar="DIR", help="also measure the checkout at DIR (e.g. "
                        "/work/main) over the same recordings, alternately with this one, each in a fresh process")
    parser.add_argument("--rounds", type=int, default=3, help="--against: measurements of each checkout")
    parser.add_argument("--code", type=Path, help=argparse.SUPPRESS)  # the checkout measured (`_code_checkout`)
    parser.add_argument("--stages-of", type=Path, help=argparse.SUPPRESS)  # a child of --against
    parser.add_argument("--jobs-rounds", type=int, default=0, metavar="N",
                        help="also replay with one process and with --workers, each in a fresh process, N times: "
                        "wall, CPU and peak RSS of every process")
    parser.add_argument("--replay-of", type=Path, help=argparse.SUPPRESS)  # a child of --jobs-rounds
    args = parser.parse_args()
    if args.stages_of is not None:
        print(json.dumps(stage_figures(args.stages_of)))
        return
    if args.replay_of is not None:
        print(json.dumps(replay_figures(args.replay_of, args.workers)))
        return
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    library = load_library([ATTACKS])
    print(f"library: {len(library.attacks)} attacks, {len(library.problems)} problem(s)")
    start_up()
    workloads = {
        "library": (lambda: library_flows(args.repeats, args.stagger), args.repeats,
                    f"{args.repeats} copies of the library's recorded sessions (complying and resisting agent of "
                    "every attack; short sessions, each opening a run of every attack of its protocols)"),
        "mcp-loop": (lambda: mcp_loop_flows(args.sessions, args.calls, args.stagger), 1,
                     f"{args.sessions} MCP sessions of {args.calls} tools/call (long sessions: the same runs "
                     "follow many messages)"),
    }
    for name, (build, repeats, what) in workloads.items():
        if args.workload not in (name, "both"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "recording.mitm"
            (flows, count), build_wall, _ = timed(build)
            sessions.write_flows(path, flows)
            del flows
            print(f"{name}: {what}: {count:,} sessions, {path.stat().st_size / 1e6:.1f} MB flow file "
                  f"(built in {build_wall:.1f} s)")
            if args.jobs_rounds:
                processes(path, args.workers, args.jobs_rounds)
            else:
                measure(name, path, len(library.attacks), repeats, args.workers, args.profile)
            if args.against is not None:
                compare(path, args.against.resolve(), args.rounds)
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB "
          "(it holds the flows it built and every event of a recording for the stages; --against prints the peak "
          "of replay() alone)")


if __name__ == "__main__":
    main()
