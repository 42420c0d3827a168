"""The end of a recording (`Monitor.end_of_traffic`, what `oatf evaluate` and a closed stdio session do) with
many runs still waiting on `after` timers, against the same number of runs that need no timer (baseline: each
concludes at the first move of the clock).

    .venv/bin/python benchmarks/bench_end_of_traffic.py [--runs 1000 4000 16000]

Each run is one MCP session whose single `tools/call` starts an attack; in the timed document the attacker
waits `after: 30s` (then a second `after: 1s` phase), so every run has its own pending deadlines past the
recording's end, all of which must fire in time order before the runs complete. Printed per size: seconds for
the timed runs, for the baseline runs, their ratio, and the outcome counts (every run `completed`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import oatf  # noqa: E402
from oatf_engine.events import Endpoint, ObservedEvent  # noqa: E402
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded  # noqa: E402
from oatf_engine.monitor.library import LoadedAttack  # noqa: E402

DOCUMENT = """
oatf: "0.1"
attack:
  id: BENCH-{number}
  execution:
    mode: mcp_server
    phases:
{phases}
  indicators:
    - surface: tools/call
      target: arguments
      pattern: {{contains: "PRIVATE KEY"}}
"""
TIMED = """      - name: wait
        state: {tools: []}
        trigger: {after: 30s}
      - name: still
        state: {tools: []}
        trigger: {after: 1s}
      - name: done"""
UNTIMED = """      - name: done
        state: {tools: []}"""


def attack(number: str, phases: str) -> LoadedAttack:
    loaded = oatf.load(DOCUMENT.format(number=number, phases=phases))
    return LoadedAttack(f"bench-{number}.yaml", loaded.document, tuple(loaded.warnings))


def end_of_traffic(loaded: LoadedAttack, runs: int) -> tuple[float, Counter[str]]:
    """Seconds `end_of_traffic` takes over `runs` open runs, and their statuses."""
    monitor = Monitor([loaded], MonitorOptions(grace_period=5))
    for n in range(runs):
        monitor.observe(ObservedEvent("mcp", "tools/call", "request", "client", {"name": "add", "arguments": {}},
                                      f"f{n}", n, n * 0.001, Endpoint("127.0.0.1", 8000, "/mcp"), "127.0.0.1:5000",
                                      {"mcp_session": f"s{n}"}))
    started = time.perf_counter()
    outputs = monitor.end_of_traffic(runs * 0.001)
    elapsed = time.perf_counter() - started
    return elapsed, Counter(o.report["execution_summary"]["status"] for o in outputs if isinstance(o, RunConcluded))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 4000, 16000])
    args = parser.parse_args()
    timed, untimed = attack("001", TIMED), attack("002", UNTIMED)
    print(f"{'runs':>7}  {'timed s':>8}  {'baseline s':>10}  {'ratio':>6}  statuses (timed)")
    for runs in args.runs:
        seconds, statuses = end_of_traffic(timed, runs)
        baseline, _ = end_of_traffic(untimed, runs)
        print(f"{runs:>7}  {seconds:>8.3f}  {baseline:>10.3f}  {seconds / baseline:>6.1f}  {dict(statuses)}")


if __name__ == "__main__":
    main()
