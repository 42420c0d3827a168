"""1,000 agent episodes at once through the sans-I/O engine with the whole `attacks/` library: one report per
(attack, episode), evictions, memory and time, against the same traffic with no attack loaded (baseline).

    .venv/bin/python benchmarks/bench_episodes.py [--sessions 1000] [--attack OW-001] [--max-runs N]

Traffic: the recorded complying and resisting sessions of `--attack` (`testing/sessions.py`, the
events the decoders emit), copied `--sessions` times (alternating complying and resisting), each copy with its
own MCP session id, client port, flow ids and a start offset so that every episode is open at once (copies
interleaved in time). Every event goes through `SessionResolver.place` and `Monitor.observe` (as live and
replay do), then the clock moves past every grace period.

Printed: runs reported, the largest number of reports for one (attack, session) (1 unless runs were
evicted), runs `evicted`, the outcomes of `--attack`'s own runs per copied variant (each copy holds one run
per MCP session it opens), peak live runs, RSS growth and time, each beside the no-attack baseline.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from oatf_engine.events import ObservedEvent  # noqa: E402
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded, load_library  # noqa: E402
from oatf_engine.monitor.library import LoadedAttack  # noqa: E402
from testing import sessions  # noqa: E402


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def episodes(attack_id: str, count: int) -> list[ObservedEvent]:
    """`count` interleaved copies of the attack's recorded sessions (see the module docstring)."""
    script = sessions.load_script(attack_id)
    variants = {v: sessions.expected_events(sessions.play(script, v), "10.9.0.1") for v in sessions.VARIANTS}
    events: list[ObservedEvent] = []
    for n in range(count):
        variant = sessions.VARIANTS[n % 2]
        for event in variants[variant]:
            keys = {k: f"{v}-{n}" for k, v in event.session_keys.items()}
            events.append(dataclasses.replace(
                event, session_keys=keys, flow_id=f"{event.flow_id}-{n}", client=f"10.9.{n // 250}.{n % 250}:4000",
                timestamp=event.timestamp + n * 0.001))
    events.sort(key=lambda e: e.timestamp)
    return [dataclasses.replace(e, seq=i) for i, e in enumerate(events)]


def run(attacks: list[LoadedAttack], events: list[ObservedEvent], options: MonitorOptions) -> dict[str, object]:
    start_rss, start = rss(), time.perf_counter()
    monitor = Monitor(attacks, options)
    outputs = []
    peak = 0
    for event in events:
        outputs.extend(monitor.observe(event))
        peak = max(peak, monitor.live_runs)
    outputs.extend(monitor.tick(events[-1].timestamp + 60))  # past every grace period, as replay ends
    outputs.extend(monitor.shutdown())
    reports = [o.report for o in outputs if isinstance(o, RunConcluded)]
    return {"reports": reports, "peak": peak, "seconds": time.perf_counter() - start, "rss": rss() - start_rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--attack", default="OW-001")
    parser.add_argument("--max-runs", type=int, default=MonitorOptions().max_runs)
    args = parser.parse_args()
    library = list(load_library([str(ROOT / "attacks")]).attacks)
    events = episodes(args.attack, args.sessions)
    options = MonitorOptions(max_runs=args.max_runs)
    print(f"{args.sessions:,} concurrent episodes of {args.attack} ({len(events):,} events); "
          f"{len(library)} attacks loaded; oatf_max_runs {args.max_runs:,}")
    baseline = run([], events, options)
    measured = run(library, events, options)
    reports = measured["reports"]
    assert isinstance(reports, list)
    per_run = Counter((r["attack"]["id"], r["execution_summary"]["session"]) for r in reports)
    own = Counter((sessions.VARIANTS[int(r["execution_summary"]["session"].rsplit("-", 1)[1]) % 2], r["outcome"])
                  for r in reports if r["attack"]["id"] == args.attack)
    statuses = Counter(r["execution_summary"]["status"] for r in reports)
    print(f"  runs reported: {len(reports):,}; largest number of reports for one (attack, session): "
          f"{max(per_run.values(), default=0)}")
    print(f"  evicted: {statuses['evicted']:,}; statuses {dict(statuses)}")
    print(f"  {args.attack}'s runs by copied variant and outcome (one run per MCP session of the copy): "
          f"{dict(sorted(own.items()))}")
    print(f"  peak live runs: {measured['peak']:,}")
    print(f"  time: {measured['seconds']:.1f} s ({len(events) / measured['seconds']:,.0f} events/s); "
          f"no attack loaded: {baseline['seconds']:.2f} s")
    print(f"  RSS growth: {measured['rss'] / 2**20:,.1f} MiB; no attack loaded: {baseline['rss'] / 2**20:,.1f} MiB")


if __name__ == "__main__":
    main()
