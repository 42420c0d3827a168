"""`oatf tap`'s cost (issue 18): an MCP `tools/call` loop over stdio against a server, through the tap and
directly, in the same run.

    .venv/bin/python benchmarks/bench_tap.py [--calls 1000] [--rounds 5] [--servers fastmcp,everything,minimal]
                                             [--baseline DIR]

Workload: one stdio session per server, configuration and round — `initialize`, `notifications/initialized`,
`tools/list`, then `--calls` `tools/call`s one after the other, each written as one line and its answer read
back before the next (the round trip an agent waits for). Configurations, alternating within each round (after a
warm-up round; every server's every configuration in one order, then the reverse) so that drift on this shared
machine hits them alike:
- the server directly;
- a bare Python relay (`BARE_RELAY`: two threads doing only `os.read`/`os.write`, no evaluation at all): the
  floor of any relay written in Python, two extra pipe hops per round trip — what the tap costs beyond it is
  ours;
- `oatf tap` with no attack loaded: the relay, decoding and an idle monitor (what the tap costs before any
  attack is judged);
- `oatf tap --attacks attacks/ -- SERVER`: the whole library loaded, judging alone (reports and journal in a
  temporary directory): every MCP attack of the library opens a run on the session and sees every message.
- with `--baseline DIR` (another checkout of this project, e.g. `git archive main | tar -x -C DIR`), its tap with
  the whole library too (run with this interpreter, DIR first on the path): before and after a change, same run.
Servers: `fastmcp`, the official `mcp` SDK's server (`MCPServer`, FastMCP before mcp 2; what agents run; tool
`add`); `everything`,
`@modelcontextprotocol/server-everything` in stdio mode under node (`tests/js`, `scripts/npm_peers.sh`; tool
`get-sum`); `minimal`, a few lines of Python answering each line at once (the tap's cost against the fastest
server this machine runs, the strict case).
Printed, per server: calls/s per configuration (calls / the round's elapsed time; the median of the rounds),
median and p90 round-trip latency over all calls, the CPU time per call (median of the rounds, from /proc,
Linux) of the agent (this process's call loop), the tap's relay (the tap's process: its relay threads), the
tap's evaluation (its evaluation process; a baseline evaluating in its own process counts it as relay) and the
server; then each relay against direct: throughput (median of the per-round ratios) and added median latency,
and the CPU per call of agent + server against all of them (on a machine with few cores the tap's CPU is taken
from the server and the agent: this bounds the throughput ratio when no CPU is spare). The load average is
printed with every round and every figure (this machine is shared). Targets (issue 18): >= 90% of direct
throughput, <= 0.5 ms added median latency, with the whole library loaded. Then the tap's reports of the last
round are counted, with the messages their runs saw, to show it judged the traffic, and the taps' stderr is
shown (`relayed but not evaluated` would say the evaluation did not keep up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
ATTACKS = ROOT / "attacks"
OATF = Path(sys.executable).parent / "oatf"
EVERYTHING = ROOT / "tests/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
DIRECT, BARE, EMPTY, TAPPED = "server directly", "bare Python relay", "oatf tap, no attacks", "oatf tap + library"
BASELINE = "baseline tap + library"

FASTMCP = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench", log_level="WARNING")
@server.tool(description="Adds two numbers.")
def add(a: int, b: int) -> int:
    return a + b
server.run(transport="stdio")
"""
MINIMAL = """
import json, sys
tools = {"tools": [{"name": "add", "description": "Adds two numbers.", "inputSchema": {"type": "object"}}]}
init = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "b", "version": "1"}}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "tools/call":
        arguments = message["params"]["arguments"]
        result = {"content": [{"type": "text", "text": str(arguments["a"] + arguments["b"])}], "isError": False}
    else:
        result = init if method == "initialize" else tools
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""
BARE_RELAY = """
import os, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
def relay(source, target, end):
    while data := os.read(source, 1 << 16):
        view = memoryview(data)
        while view:
            view = view[os.write(target, view):]
    end()
threading.Thread(target=relay, args=(0, child.stdin.fileno(), child.stdin.close), daemon=True).start()
relay(child.stdout.fileno(), 1, lambda: None)
sys.exit(child.wait())
"""


class Server(NamedTuple):
    command: list[str]
    tool: str
    """The tool called: it adds `a` and `b`."""


SERVERS = {
    "fastmcp": Server([sys.executable, "-c", FASTMCP], "add"),
    "everything": Server([shutil.which("node") or "node", str(EVERYTHING), "stdio"], "get-sum"),
    "minimal": Server([sys.executable, "-c", MINIMAL], "add"),
}


def _ask(stdin: IO[bytes], stdout: IO[bytes], message: dict[str, object]) -> dict[str, object]:
    """Send `message`; its answer (what the server sends meanwhile, e.g. server-everything's notifications,
    is read past)."""
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()
    while "id" in message:
        answer = json.loads(stdout.readline())
        if answer.get("id") == message["id"] and "method" not in answer:
            return answer  # type: ignore[no-any-return]
    return {}


class Measured(NamedTuple):
    """One session's call loop."""

    elapsed: float
    latencies: list[float]
    cpu: tuple[float, float, float, float]
    """CPU seconds per call of the agent, the tap's relay (its process; 0 for the server directly), the tap's
    evaluation (its evaluation process) and the server."""
    switches: float
    """Context switches per call of the relay's process, all its threads (0 for the server directly): its
    wake-ups, and its threads' waits for one another's interpreter lock."""


def session(command: list[str], tool: str, calls: int, stderr: IO[str], cwd: Path = ROOT) -> Measured:
    """One stdio session running `command` in `cwd` (the server, or a relay whose child is the server)."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=cwd)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    _ask(stdin, stdout, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    _ask(stdin, stdout, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _ask(stdin, stdout, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    latencies = []
    processes = _tree(process.pid)
    evaluations = _evaluation_processes(processes)
    cpu_before = [_cpu(pid) for pid in processes]
    switches = _switches(process.pid)
    agent_cpu = time.process_time()
    started = time.perf_counter()
    for i in range(calls):
        sent = time.perf_counter()
        answer = _ask(stdin, stdout, {"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                                      "params": {"name": tool, "arguments": {"a": i, "b": 2}}})
        latencies.append(time.perf_counter() - sent)
        assert answer["id"] == i + 2 and "result" in answer, answer
    elapsed = time.perf_counter() - started
    agent_cpu = time.process_time() - agent_cpu
    used = {pid: _cpu(pid) - before for pid, before in zip(processes, cpu_before, strict=True)}
    switches = (_switches(process.pid) - switches) / calls
    stdin.close()
    process.wait(timeout=300)
    if len(processes) == 1:
        return Measured(elapsed, latencies, (agent_cpu / calls, 0.0, 0.0, used[process.pid] / calls), 0.0)
    evaluation = sum(cpu for pid, cpu in used.items() if pid in evaluations)
    served = sum(used.values()) - used[process.pid] - evaluation
    return Measured(elapsed, latencies, (agent_cpu / calls, used[process.pid] / calls, evaluation / calls,
                                         served / calls), switches)


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (Linux `/proc`)."""
    children = [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()]
    return [pid, *(descendant for child in children for descendant in _tree(child))]


def _evaluation_processes(pids: list[int]) -> set[int]:
    return {pid for pid in pids if b"oatf_cli.tap_evaluation" in Path(f"/proc/{pid}/cmdline").read_bytes()}


def _cpu(pid: int) -> float:
    """CPU seconds `pid` used so far, all its threads (Linux `/proc/PID/task/TID/schedstat`: nanoseconds, where
    `stat`'s clock ticks are 10 ms, coarser than a call)."""
    return sum(int((task / "schedstat").read_text().split()[0]) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


def _switches(pid: int) -> int:
    """Context switches of `pid` so far, all its threads (Linux `/proc/PID/task/TID/status`)."""
    return sum(int(line.split()[1]) for task in Path(f"/proc/{pid}/task").iterdir()
               for line in (task / "status").read_text().splitlines() if "ctxt_switches:" in line)


def _load() -> str:
    """The 1, 5 and 15 minute load averages (this machine is shared)."""
    return " ".join(f"{load:.1f}" for load in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--servers", default=",".join(SERVERS), help="a comma-separated list of " + ", ".join(SERVERS))
    parser.add_argument("--baseline", type=Path, help="another checkout, whose tap is measured too")
    args = parser.parse_args()
    servers = args.servers.split(",")
    if unknown := set(servers) - set(SERVERS):
        parser.error(f"unknown server(s): {', '.join(sorted(unknown))}")
    workdir = Path(tempfile.mkdtemp(prefix="bench-tap-"))
    names = (DIRECT, BARE, EMPTY, TAPPED, *((BASELINE,) if args.baseline else ()))
    pairs = [(server, name) for server in servers for name in names]
    measured: dict[tuple[str, str], list[Measured]] = {pair: [] for pair in pairs}
    loads: list[str] = []
    stderr = workdir / "tap.stderr"
    print(f"{', '.join(servers)} server(s) over stdio, {args.calls} tools/call per session, {args.rounds} rounds "
          f"(+1 warm-up), {len(list(ATTACKS.glob('*.yaml')))} attack documents loaded in the tap"
          f"{f', baseline {args.baseline}' if args.baseline else ''}; load average {_load()}")
    for round_number in range(args.rounds + 1):
        for server, name in pairs if round_number % 2 else pairs[::-1]:
            command = SERVERS[server].command
            reports = workdir / f"{server}-reports-{round_number}"
            commands = {DIRECT: command, BARE: [sys.executable, "-c", BARE_RELAY, *command],
                        TAPPED: [str(OATF), "tap", "--attacks", str(ATTACKS), "--report-dir", str(reports), "--",
                                 *command],
                        EMPTY: [str(OATF), "tap", "--report-dir", str(workdir / "empty"), "--", *command],
                        BASELINE: [sys.executable, "-c", "import sys; from oatf_cli.main import main; sys.exit(main())",
                                   "tap", "--attacks", str(ATTACKS), "--report-dir",
                                   str(workdir / f"{server}-base-{round_number}"), "--", *command]}
            with stderr.open("a") as errors:
                result = session(commands[name], SERVERS[server].tool, args.calls, errors,
                                 args.baseline if name == BASELINE else ROOT)
            if round_number:  # round 0 warms up
                measured[server, name].append(result)
        if round_number:
            loads.append(_load())
            print(f"  round {round_number} (load average {loads[-1]}): " + "; ".join(
                f"{server} " + ", ".join(f"{args.calls / measured[server, name][-1].elapsed:.0f}" for name in names)
                for server in servers) + f" calls/s ({', '.join(names)})", flush=True)
    for server in servers:
        _summary(server, names, {name: measured[server, name] for name in names}, args.calls)
    print(f"load average over the rounds: {', '.join(loads)}; now {_load()}")
    for server in servers:
        last = workdir / f"{server}-reports-{args.rounds}" / "verdicts.jsonl"
        judged = [json.loads(line) for line in last.read_text().splitlines()] if last.exists() else []
        seen = sum(r["execution_summary"]["messages_seen"] for r in judged)
        print(f"{server}: the last round's tap reported {len(judged)} run(s) ({seen} messages seen by them)")
    said = [line for line in stderr.read_text().splitlines() if line.startswith("oatf tap")]
    print(f"the taps' stderr: {chr(10).join(said) or 'nothing'}")


def _summary(server: str, names: tuple[str, ...], measured: dict[str, list[Measured]], calls: int) -> None:
    """One server's figures (see the module docstring)."""
    print(f"{server} (load average {_load()}):")
    medians = {}
    for name in names:
        ordered = sorted(latency for result in measured[name] for latency in result.latencies)
        medians[name] = statistics.median(ordered)
        agent, relay, evaluation, served = (statistics.median(result.cpu[i] for result in measured[name]) * 1e6
                                            for i in range(4))
        print(f"  {name:>22}: {statistics.median(calls / r.elapsed for r in measured[name]):6.0f} calls/s, "
              f"median {medians[name] * 1000:.3f} ms, p90 {ordered[int(len(ordered) * 0.9)] * 1000:.3f} ms; CPU/call: "
              f"agent {agent:.0f} us, relay {relay:.0f} us, evaluation {evaluation:.0f} us, server {served:.0f} us; "
              f"relay context switches/call "
              f"{statistics.median(result.switches for result in measured[name]):.1f}")
    for name in names[1:]:
        ratio = statistics.median(direct.elapsed / result.elapsed
                                  for direct, result in zip(measured[DIRECT], measured[name], strict=True))
        added = (medians[name] - medians[DIRECT]) * 1000
        cpu = statistics.median((direct.cpu[0] + direct.cpu[3]) / sum(result.cpu)
                                for direct, result in zip(measured[DIRECT], measured[name], strict=True))
        print(f"  {name} vs direct: {ratio:.1%} of its throughput (median of the rounds' ratios), median latency "
              f"{added:+.3f} ms{' (targets: >= 90%, <= 0.5 ms)' if name == TAPPED else ''}; CPU per call of "
              f"agent + server against all: {cpu:.1%} (the throughput's bound when CPU is scarce)")
    for name in names[2:]:
        ratio = statistics.median(bare.elapsed / result.elapsed
                                  for bare, result in zip(measured[BARE], measured[name], strict=True))
        print(f"  {name} vs the bare relay: {ratio:.1%} of its throughput, median latency "
              f"{(medians[name] - medians[BARE]) * 1000:+.3f} ms")


if __name__ == "__main__":
    main()
