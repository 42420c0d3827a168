"""Monitor cost per message as the attack library grows (issue 15: nearly flat in the number of attacks).

    .venv/bin/python benchmarks/bench_library_scale.py [--sizes 0,51,500,2000] [--sessions 4] [--calls 250]
        [--repeats 1] [--profile 0]

Libraries of `--sizes` documents are re-identified copies of `attacks/` (copy k of `OW-001` is `OW-001<k>`,
its indicators `OW-001<k>-01`, …: every copy is parsed from its own text, so no two share an object); a
size that is not a multiple of the library takes the first documents of the next copy. Each library replays
the same recordings through `evaluate_events` (one process, no cyclic collector: what `oatf evaluate
--jobs 1` runs after decoding), its CPU time measured in this run, so every ratio compares figures
measured minutes apart on the same machine:

- `mcp-loop`: `--sessions` long MCP sessions of `--calls` `tools/call` each (bench_replay's `mcp-loop`), the
  traffic of an agent that uses honest tools: every run only follows it;
- `library`: every attack's recorded sessions (complying and resisting agent, `--repeats` copies), where
  the attacks happen: matches, phase changes, deliveries, and many short runs concluded.

Printed per recording and library size: µs of monitor CPU per message, the ratio to the empty library and
to the 51-document one, and the cost per message per loaded attack of the message's protocol
((µs − µs with no attack) / attacks of that protocol), plus the verdict counts (a library of copies must
give each copy's verdicts: with k full copies, k times those of one). `--profile N` prints the N costliest
functions (own time) of the largest library on `mcp-loop`, in a run of its own (not the one timed).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_replay import library_flows, mcp_loop_flows  # noqa: E402

import oatf  # noqa: E402
from addon.recordings import decode_flows  # noqa: E402
from oatf_engine.events import ObservedEvent  # noqa: E402
from oatf_engine.monitor import LoadedAttack, MonitorOptions  # noqa: E402
from oatf_engine.monitor.library import document_files  # noqa: E402
from oatf_engine.replay import collector_paused, evaluate_events  # noqa: E402
from oatf_engine.wire import WireDecoder  # noqa: E402

ATTACKS = ROOT / "attacks"
_ID = re.compile(r"\bOW-(\d{3})\b")


def library_of(size: int) -> list[LoadedAttack]:
    """`size` documents: re-identified copies of `attacks/` (see the module docstring), parsed and
    normalized one by one."""
    files, _ = document_files([str(ATTACKS)])
    texts = [(path, path.read_text()) for path in files]
    attacks: list[LoadedAttack] = []
    for n in range(size):
        path, text = texts[n % len(texts)]
        copy = n // len(texts)
        if copy:
            text = _ID.sub(lambda m, c=copy: f"OW-{m.group(1)}{c}", text)
        document = oatf.normalize(oatf.parse(text))
        attacks.append(LoadedAttack(f"{path}#{copy}", document, ()))
    return attacks


def decoded(flows: list) -> list[ObservedEvent]:
    events = decode_flows(WireDecoder(), flows)
    events.sort(key=lambda e: (e.timestamp, e.seq))
    return events


def run(attacks: list[LoadedAttack], events: list[ObservedEvent],
        profiler: cProfile.Profile | None = None) -> tuple[float, Counter[str]]:
    """CPU seconds of `evaluate_events` over `events` with `attacks`, and its verdict counts."""
    with collector_paused():
        if profiler is not None:
            profiler.enable()
        cpu = time.process_time()
        reports = evaluate_events(attacks, events, MonitorOptions(max_runs=10_000_000))
        cpu = time.process_time() - cpu
        if profiler is not None:
            profiler.disable()
    return cpu, Counter(r["verdict"]["result"] for r in reports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="0,51,500,2000")
    parser.add_argument("--sessions", type=int, default=4, help="mcp-loop: MCP sessions")
    parser.add_argument("--calls", type=int, default=250, help="mcp-loop: tools/call per session")
    parser.add_argument("--repeats", type=int, default=1, help="library: copies of the recorded sessions")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    started = time.perf_counter()
    libraries = {size: library_of(size) for size in sizes}
    print(f"libraries built in {time.perf_counter() - started:.1f} s")
    recordings = {
        "mcp-loop": decoded(mcp_loop_flows(args.sessions, args.calls, 1.0)[0]),
        "library": decoded(library_flows(args.repeats, 1.0)[0]),
    }
    for name, events in recordings.items():
        protocols = Counter(e.protocol for e in events)
        print(f"\n{name}: {len(events):,} messages ({dict(protocols)})")
        print(f"  {'documents':>9} {'attacks/msg':>11} {'us/message':>10} {'x empty':>8} {'x 51':>6} "
              f"{'us/msg/attack':>13}  verdicts")
        base: dict[int, float] = {}
        for size in sizes:
            attacks = libraries[size]
            cpu, verdicts = run(attacks, events)
            per_message = cpu / len(events) * 1e6
            base[size] = per_message
            # attacks a message of each protocol concerns, averaged over the recording's messages
            concerned = sum(sum(p in a.protocols for a in attacks) * n for p, n in protocols.items()) / len(events)
            per_attack = (per_message - base[sizes[0]]) / concerned if concerned else 0.0
            versus_51 = f"{per_message / base[51]:6.1f}" if 51 in base else f"{'-':>6}"
            print(f"  {size:>9,} {concerned:>11,.0f} {per_message:>10,.1f} {per_message / base[sizes[0]]:>8.1f} "
                  f"{versus_51} {per_attack:>13.3f}  {dict(sorted(verdicts.items()))}")
            if args.profile and name == "mcp-loop" and size == sizes[-1]:
                profiler = cProfile.Profile()
                run(attacks, events, profiler)
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.profile)
                print(out.getvalue())


if __name__ == "__main__":
    main()
