"""`oatf tap`'s cost (issue 18): an MCP `tools/call` loop over stdio against a server, through the tap and
directly, in the same run.

    .venv/bin/python benchmarks/bench_tap.py [--calls 1000] [--rounds 5] [--server fastmcp|minimal] [--baseline DIR]

Workload: one stdio session per configuration and round — `initialize`, `notifications/initialized`,
`tools/list`, then `--calls` `tools/call`s (`add`) one after the other, each written as one line and its answer
read back before the next (the round trip an agent waits for). Configurations, alternating within each round
(after a warm-up round) so that drift on this shared machine hits them alike:
- the server directly;
- `oatf tap` with no attack loaded: the relay, decoding and an idle monitor (what the tap costs before any
  attack is judged);
- `oatf tap --attacks attacks/ -- SERVER`: the whole library loaded, judging alone (reports and journal in a
  temporary directory): every MCP attack of the library opens a run on the session and sees every message.
- with `--baseline DIR` (another checkout of this project, e.g. `git archive main | tar -x -C DIR`), its tap with
  the whole library too (run with this interpreter, DIR first on the path): before and after a change, same run.
Servers: `fastmcp`, the official `mcp` SDK's FastMCP server (what agents run); `minimal`, a few lines of
Python answering each line at once (the tap's cost against the fastest server this machine runs, the strict
case).
Printed: calls/s per configuration (calls / the round's elapsed time; the median of the rounds), median and
p90 round-trip latency over all calls, the CPU time per call (median of the rounds) of the agent (this
process's call loop), the tap's process and the server's (from /proc, Linux: on a machine with few cores, the
tap's CPU is taken from the server and the agent; the direct CPU per call against the tapped one bounds the
throughput ratio when the machine has no CPU to spare), and the tap against direct: throughput (median of the per-round
ratios) and added median latency. Targets (issue 18): >= 90% of direct throughput, <= 0.5 ms added median
latency, with the whole library loaded. Then the tap's reports of the last round are counted, with the messages
their runs saw, to show it judged the traffic, and the taps' stderr is shown (`relayed but not evaluated`
would say the evaluation did not keep up).
"""

from __future__ import annotations

import argparse
import json
import os
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
DIRECT, EMPTY, TAPPED = "server directly", "oatf tap, no attacks", "oatf tap + library"
BASELINE = "baseline tap + library"

SERVERS = {
    "fastmcp": """
from mcp.server.fastmcp import FastMCP
server = FastMCP("bench", log_level="WARNING")
@server.tool(description="Adds two numbers.")
def add(a: int, b: int) -> int:
    return a + b
server.run(transport="stdio")
""",
    "minimal": """
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
""",
}


def _ask(stdin: IO[bytes], stdout: IO[bytes], message: dict[str, object]) -> dict[str, object]:
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()
    return json.loads(stdout.readline()) if "id" in message else {}


class Measured(NamedTuple):
    """One session's call loop."""

    elapsed: float
    latencies: list[float]
    cpu: tuple[float, float, float]
    """CPU seconds per call of the agent, the tap (0 for the server directly) and the server."""


def session(command: list[str], calls: int, stderr: IO[str], cwd: Path = ROOT) -> Measured:
    """One stdio session running `command` in `cwd` (the server, or a tap whose child is the server)."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=cwd)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    _ask(stdin, stdout, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    _ask(stdin, stdout, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _ask(stdin, stdout, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    latencies = []
    processes = _tree(process.pid)
    cpu_before = [_cpu(pid) for pid in processes]
    agent_cpu = time.process_time()
    started = time.perf_counter()
    for i in range(calls):
        sent = time.perf_counter()
        answer = _ask(stdin, stdout, {"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                                      "params": {"name": "add", "arguments": {"a": i, "b": 2}}})
        latencies.append(time.perf_counter() - sent)
        assert answer["id"] == i + 2, answer
    elapsed = time.perf_counter() - started
    agent_cpu = time.process_time() - agent_cpu
    used = [_cpu(pid) - before for pid, before in zip(processes, cpu_before, strict=True)]
    stdin.close()
    process.wait(timeout=300)
    tap, server = (used[0], sum(used[1:])) if len(used) > 1 else (0.0, used[0])
    return Measured(elapsed, latencies, (agent_cpu / calls, tap / calls, server / calls))


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (Linux `/proc`)."""
    children = [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()]
    return [pid, *(descendant for child in children for descendant in _tree(child))]


def _cpu(pid: int) -> float:
    """CPU seconds `pid` used so far, all its threads (Linux `/proc`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    """The 1, 5 and 15 minute load averages (this machine is shared)."""
    return " ".join(f"{load:.1f}" for load in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--server", choices=sorted(SERVERS), default="fastmcp")
    parser.add_argument("--baseline", type=Path, help="another checkout, whose tap is measured too")
    args = parser.parse_args()
    server = [sys.executable, "-c", SERVERS[args.server]]
    workdir = Path(tempfile.mkdtemp(prefix="bench-tap-"))
    names = (DIRECT, EMPTY, TAPPED, *((BASELINE,) if args.baseline else ()))
    measured: dict[str, list[Measured]] = {name: [] for name in names}
    stderr = workdir / "tap.stderr"
    print(f"{args.server} server over stdio, {args.calls} tools/call per session, {args.rounds} rounds "
          f"(+1 warm-up), {len(list(ATTACKS.glob('*.yaml')))} attack documents loaded in the tap"
          f"{f', baseline {args.baseline}' if args.baseline else ''}; load average {_load()}")
    for round_number in range(args.rounds + 1):
        reports = workdir / f"reports-{round_number}"
        commands = {DIRECT: server, TAPPED: [str(OATF), "tap", "--attacks", str(ATTACKS), "--report-dir", str(reports),
                                             "--", *server],
                    EMPTY: [str(OATF), "tap", "--report-dir", str(workdir / "empty"), "--", *server],
                    BASELINE: [sys.executable, "-c", "import sys; from oatf_cli.main import main; sys.exit(main())",
                               "tap", "--attacks", str(ATTACKS), "--report-dir", str(workdir / f"base-{round_number}"),
                               "--", *server]}
        for name in names if round_number % 2 else names[::-1]:
            with stderr.open("a") as errors:
                result = session(commands[name], args.calls, errors, args.baseline if name == BASELINE else ROOT)
            if round_number:  # round 0 warms up
                measured[name].append(result)
        if round_number:
            print(f"  round {round_number}: " + ", ".join(
                f"{name} {args.calls / measured[name][-1].elapsed:.0f} calls/s" for name in names), flush=True)
    medians = {}
    for name in names:
        ordered = sorted(latency for result in measured[name] for latency in result.latencies)
        medians[name] = statistics.median(ordered)
        agent, tap, served = (statistics.median(result.cpu[i] for result in measured[name]) * 1e6 for i in range(3))
        print(f"{name:>22}: {statistics.median(args.calls / r.elapsed for r in measured[name]):6.0f} calls/s, "
              f"median {medians[name] * 1000:.3f} ms, p90 {ordered[int(len(ordered) * 0.9)] * 1000:.3f} ms; CPU/call: "
              f"agent {agent:.0f} us, tap {tap:.0f} us, server {served:.0f} us")
    for name in names[1:]:
        ratio = statistics.median(direct.elapsed / result.elapsed
                                  for direct, result in zip(measured[DIRECT], measured[name], strict=True))
        added = (medians[name] - medians[DIRECT]) * 1000
        cpu = statistics.median(sum(direct.cpu) / sum(result.cpu)
                                for direct, result in zip(measured[DIRECT], measured[name], strict=True))
        print(f"{name} vs direct: {ratio:.1%} of its throughput (median of the rounds' ratios), median latency "
              f"{added:+.3f} ms{' (targets: >= 90%, <= 0.5 ms)' if name == TAPPED else ''}; CPU per call of "
              f"agent + server against agent + tap + server: {cpu:.1%} (the throughput's bound when CPU is scarce)")
    print(f"load average {_load()}")
    last = workdir / f"reports-{args.rounds}" / "verdicts.jsonl"
    judged = [json.loads(line) for line in last.read_text().splitlines()] if last.exists() else []
    seen = sum(r["execution_summary"]["messages_seen"] for r in judged)
    print(f"the last round's tap reported {len(judged)} run(s) ({seen} messages seen by them); the taps' stderr: "
          f"{stderr.read_text().strip() or 'nothing'}")


if __name__ == "__main__":
    main()
