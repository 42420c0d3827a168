"""Memory of the sans-I/O monitor (`oatf_engine.monitor.Monitor`) with the `attacks/` library: per idle run, and
over a long stream of traffic.

    .venv/bin/python benchmarks/bench_monitor_memory.py [--runs 10000] [--per-attack 1000]
        [--messages 100000] [--sessions 50] [--interval 0.002] [--every 10000] [--max-run-lifetime 60]
        [--soak-minutes 20] [--soak-agents 50] [--soak-grace 30] [--soak-only]

1. Memory per idle run (target <= 50 KB): `--runs` runs of the library attack whose runs are the largest,
   each opened by one synthetic `ObservedEvent` in its own session (one per protocol the attack's actors
   speak: an MCP `tools/call`, an A2A `message/send`, an AG-UI `RunAgentInput` — not set-up traffic such as
   `tools/list`, which waits parked and opens no run); tracemalloc's traced memory after minus before, divided
   by the runs created (`Monitor.live_runs`: an idle run of an attack that may wait on paper is a bit of its
   session's cohort). An attack none of whose runs opened stops the benchmark. The same with
   `--per-attack` runs of every library attack (median and largest), and per idle session with the whole
   library loaded (every attack of the session's protocol opens a run).
2. Memory over traffic (target: flat): `--messages` messages from the library's recorded sessions
   (`testing/sessions.py`: the complying and resisting agent of every attack, as the decoders emit
   them) fed in a loop to one monitor with the whole library, spread over a bounded number (`--sessions`) of
   session ids and client addresses, one message every `--interval` seconds of event time, the clock moved
   (`Monitor.tick`) every `addon.watermark.TICK_SECONDS` of event time as the live addon moves it (without it
   a keyless request left unanswered holds the clock, and no run concludes), runs concluded
   `--max-run-lifetime` seconds after they start (and opened again by the slot's next message), so runs are
   created and concluded all along. Every `--every` messages: live runs, runs concluded so far, tracemalloc's
   traced memory and the process RSS. After one run lifetime (warm-up: the bounded set of runs is created, and
   the first runs conclude) both must stay flat. Also the average size of a run's report (JSON), what keeping
   every report costs.
3. The soak's traffic in memory (issue 14; `testing/soak.py`: the MCP sessions of `bench_live_load.py --minutes`,
   each with a session id of its own, closed by the agent): `--soak-agents` agents for `--soak-minutes` simulated
   minutes, grace period `--soak-grace`. Every simulated minute: live runs, their sessions, timers queued, the
   session rules' flow maps (`oatf_engine.monitor.recent`) and tracemalloc's traced memory; then the growth of
   traced memory per minute (least squares) over the second half (after the library's longest grace period,
   10 min: the live runs level off), and the largest tables (`testing.soak.sizes`). Target: flat.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import itertools
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import oatf  # noqa: E402
from addon.watermark import TICK_SECONDS  # noqa: E402
from oatf_engine.events import Endpoint, ObservedEvent  # noqa: E402
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded, load_library  # noqa: E402
from oatf_engine.monitor.library import LoadedAttack  # noqa: E402
from testing import sessions, soak  # noqa: E402

KEYS = {"mcp": "mcp_session", "a2a": "a2a_context", "ag_ui": "ag_ui_thread"}
OPENING = {  # a benign first message of each protocol, from the agent, that opens its session's runs at once
    "mcp": ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),  # not set-up: `tools/list` waits, parked
    "a2a": ("message/send", {"message": {"role": "user", "messageId": "m1", "parts": [{"kind": "text",
                                                                                          "text": "hello"}]}}),
    "ag_ui": ("run_agent_input", {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": []}),
}
_seq = itertools.count()


def rss() -> int:
    """Resident set size of this process, bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def opening(protocol: str, session: int, at: float) -> ObservedEvent:
    """One benign agent message of `protocol` in session number `session`."""
    event_type, content = OPENING[protocol]
    n = next(_seq)
    return ObservedEvent(protocol, event_type, "request", "client", content, f"flow-{n}", n, at,  # type: ignore[arg-type]
                         Endpoint("10.0.0.1", 8000, "/"), f"10.1.{session >> 8 & 255}.{session & 255}:40000",
                         {KEYS[protocol]: f"s{session}"})


def protocols(loaded: LoadedAttack) -> list[str]:
    return sorted({oatf.extract_protocol(a.mode or "") for a in loaded.attack.execution.actors or ()})


def idle_runs(attacks: list[LoadedAttack], sessions_count: int) -> tuple[float, int]:
    """Traced bytes per run after opening `sessions_count` sessions (one message per protocol), and the runs
    (0: none opened, and the bytes mean nothing)."""
    wanted = sorted({p for a in attacks for p in protocols(a)})
    options = MonitorOptions(max_runs=10**9)
    gc.collect()
    tracemalloc.start()
    monitor = Monitor(attacks, options)
    monitor.observe(opening(wanted[0], -1, 0.0))  # first-use allocations (caches, compiled conditions)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    base_runs = monitor.live_runs
    for session in range(sessions_count):
        for protocol in wanted:
            monitor.observe(opening(protocol, session, 1.0))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    runs = monitor.live_runs - base_runs
    return ((after - before) / runs if runs else 0.0), runs


def library_events() -> list[list[ObservedEvent]]:
    """The protocol events of every recorded library session (both variants), as the decoders emit them."""
    streams = []
    for attack_id in sessions.script_ids():
        script = sessions.load_script(attack_id)
        client = str(script.get("client", "10.20.0.15"))
        for variant in sessions.VARIANTS:
            streams.append(sessions.expected_events(sessions.play(script, variant), client))
    return streams


def traffic(streams: list[list[ObservedEvent]], slots: int, interval: float) -> Iterator[ObservedEvent]:
    """The recorded sessions again and again, session n in slot n % `slots` (its session ids and client
    address are the slot's), one message every `interval` seconds; each pass's flows have ids of their own (a
    request and its answer keep sharing theirs: an answer is what places a keyless request)."""
    n = 0
    for k in itertools.count():
        for i, stream in enumerate(streams):
            slot = (k * len(streams) + i) % slots
            for event in stream:
                keys = dict.fromkeys(event.session_keys, f"slot-{slot}")
                yield dataclasses.replace(event, flow_id=f"{event.flow_id}~{k}.{i}", seq=n,
                                          timestamp=1_000_000.0 + n * interval,
                                          client=f"10.2.{slot >> 8 & 255}.{slot & 255}:41000", session_keys=keys)
                n += 1


def flat_over_traffic(attacks: list[LoadedAttack], messages: int, slots: int, interval: float, every: int,
                      lifetime: float) -> None:
    streams = library_events()
    print(f"2. {messages:,} messages of the library's {len(streams)} recorded sessions over {slots} session slots, "
          f"one every {interval * 1000:g} ms of event time, whole library ({len(attacks)} attacks) loaded, runs "
          f"concluded after {lifetime:g} s (so runs are created and concluded all along):")
    monitor = Monitor(attacks, MonitorOptions(max_run_lifetime=lifetime))
    concluded = 0
    rows = []
    gc.collect()
    tracemalloc.start()
    start = time.process_time()
    print(f"  {'messages':>9} {'live runs':>9} {'concluded':>9} {'traced MB':>9} {'RSS MB':>8} {'CPU s':>7}")
    sample: list[dict] = []  # the first reports (kept from early on, so the figures after warm-up stay comparable)
    next_tick = 0.0
    for n, event in enumerate(traffic(streams, slots, interval), 1):
        outputs = monitor.observe(event)
        if event.timestamp >= next_tick:  # the clock moves as the live addon moves it (a held event stops it)
            outputs += monitor.tick(event.timestamp)
            next_tick = event.timestamp + TICK_SECONDS
        reports = [o.report for o in outputs if isinstance(o, RunConcluded)]
        concluded += len(reports)
        if reports and len(sample) < 200:
            sample += reports[:200 - len(sample)]
        if n % every == 0:
            gc.collect()
            traced, memory = tracemalloc.get_traced_memory()[0], rss()
            rows.append((n, traced, memory))
            print(f"  {n:>9,} {monitor.live_runs:>9,} {concluded:>9,} {traced / 1e6:>9.2f} {memory / 1e6:>8.1f} "
                  f"{time.process_time() - start:>7.1f}", flush=True)
        if n >= messages:
            break
    if sample:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        copies = copy.deepcopy(sample)
        in_memory = (tracemalloc.get_traced_memory()[0] - before) / len(copies)
    tracemalloc.stop()
    warm = [row for row in rows if row[0] * interval >= lifetime]  # after one run lifetime: runs conclude
    if len(warm) >= 2:
        (n1, traced1, rss1), (n2, traced2, rss2) = warm[0], warm[-1]
        per = (n2 - n1) / 1000
        print(f"  from {n1:,} to {n2:,} messages: traced {(traced2 - traced1) / 1e3:+,.0f} KB "
              f"({(traced2 - traced1) / per:+,.0f} B per 1,000 messages), RSS {(rss2 - rss1) / 1e6:+.1f} MB "
              "(target: flat)")
    if sample:
        as_json = statistics.mean(len(json.dumps(r, default=str)) for r in sample)
        print(f"  a concluded run's report: {in_memory / 1e3:.1f} KB in memory, {as_json / 1e3:.1f} KB as JSON "
              f"(mean of {len(sample)}): what keeping every report costs per run")


def soak_traffic(attacks: list[LoadedAttack], minutes: float, agents: int, grace: float) -> None:
    print(f"3. the soak's MCP sessions, {agents} agents for {minutes:g} simulated minutes, grace period {grace:g} s, "
          f"whole library ({len(attacks)} attacks) loaded:")
    monitor = Monitor(attacks, MonitorOptions(grace_period=grace))
    driver = soak.Driver(monitor)
    gc.collect()
    tracemalloc.start()
    start = time.process_time()
    print(f"  {'minute':>6} {'live runs':>9} {'sessions':>8} {'timers':>7} {'flows':>7} {'episode flows':>13} "
          f"{'traced MB':>9} {'CPU s':>6}")
    rows = []
    next_minute = soak.START + 60
    for item in soak.traffic(agents, minutes * 60):
        driver.feed(item)
        if item[0] >= next_minute:
            gc.collect()
            traced, sizes = tracemalloc.get_traced_memory()[0], soak.sizes(monitor)
            minute = round((next_minute - soak.START) / 60)
            rows.append((minute, traced))
            print(f"  {minute:>6} {monitor.live_runs:>9,} {monitor.open_sessions:>8,} {monitor.queued_timers:>7,} "
                  f"{sizes['resolver.flow_session']:>7,} {sizes.get('episodes.flows', 0):>13,} {traced / 1e6:>9.2f} "
                  f"{time.process_time() - start:>6.1f}", flush=True)
            next_minute += 60
    tracemalloc.stop()
    half = [row for row in rows if row[0] >= max(minutes / 2, 11)]
    if len(half) >= 2:  # a least-squares slope: the timer queue's compactions make traced memory a saw
        slope = statistics.linear_regression([m for m, _ in half], [t for _, t in half]).slope
        print(f"  minutes {half[0][0]} to {half[-1][0]}: traced {slope / 1e3:+,.0f} KB per minute (least squares; "
              "target: flat)")
    largest = sorted(soak.sizes(monitor).items(), key=lambda item: -item[1])[:8]
    print("  largest tables at the end: " + ", ".join(f"{name} {size:,}" for name, size in largest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000, help="idle runs of the largest-run attack")
    parser.add_argument("--per-attack", type=int, default=1_000, help="idle runs of each library attack")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=50, help="session slots the traffic is spread over")
    parser.add_argument("--interval", type=float, default=0.002, help="seconds of event time between messages")
    parser.add_argument("--every", type=int, default=10_000, help="print a line every this many messages")
    parser.add_argument("--max-run-lifetime", type=float, default=60.0, help="seconds of event time a run lives")
    parser.add_argument("--soak-minutes", type=float, default=20.0, help="simulated minutes of the soak's traffic")
    parser.add_argument("--soak-agents", type=int, default=50, help="agents at once in the soak's traffic")
    parser.add_argument("--soak-grace", type=float, default=30.0, help="grace period (s) in the soak's traffic")
    parser.add_argument("--soak-only", action="store_true", help="only part 3")
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    library = load_library([str(ROOT / "attacks")])
    attacks = list(library.attacks)
    if args.soak_only:
        soak_traffic(attacks, args.soak_minutes, args.soak_agents, args.soak_grace)
        return

    print(f"1. memory per idle run (traced by tracemalloc; target <= 50 KB), {len(attacks)} library attacks:")
    measured = {a.key: idle_runs([a], args.per_attack) for a in attacks}
    per_attack = {key: per_run for key, (per_run, runs) in measured.items() if runs}
    if len(per_attack) < len(measured):
        sys.exit(f"no run opened for {sorted(measured.keys() - per_attack.keys())}: the figures would mean nothing")
    largest = max(per_attack, key=per_attack.__getitem__)
    counts = sorted(runs for _, runs in measured.values())
    print(f"  {args.per_attack:,} sessions per attack ({counts[0]:,}-{counts[-1]:,} runs each): median "
          f"{statistics.median(per_attack.values()) / 1e3:.1f} KB/run, largest {per_attack[largest] / 1e3:.1f} KB/run "
          f"({largest})")
    worst = next(a for a in attacks if a.key == largest)
    per_run, runs = idle_runs([worst], -(-args.runs // len(protocols(worst))))  # one run per protocol session
    print(f"  {runs:,} runs of {largest}: {per_run / 1e3:.1f} KB/run")
    sessions_count = max(args.runs // 20, 1)
    per_run, runs = idle_runs(attacks, sessions_count)
    print(f"  whole library, {sessions_count:,} sessions of each protocol: {runs:,} runs, {per_run / 1e3:.1f} KB/run, "
          f"{per_run * runs / (3 * sessions_count) / 1e3:.0f} KB per protocol session")
    flat_over_traffic(attacks, args.messages, args.sessions, args.interval, args.every, args.max_run_lifetime)
    soak_traffic(attacks, args.soak_minutes, args.soak_agents, args.soak_grace)


if __name__ == "__main__":
    main()
