"""`oatf tap`'s cost (issue 18): an MCP `tools/call` loop over stdio against a server, through the tap and
directly, in the same run.

    .venv/bin/python benchmarks/bench_tap.py [--calls 1000] [--rounds 5] [--server fastmcp|minimal]

Workload: one stdio session per configuration and round — `initialize`, `notifications/initialized`,
`tools/list`, then `--calls` `tools/call`s (`add`) one after the other, each written as one line and its answer
read back before the next (the round trip an agent waits for). Configurations, alternating within each round
(after a warm-up round) so that drift on this shared machine hits them alike:
- the server directly;
- `oatf tap` with no attack loaded: the relay, decoding and an idle monitor (what the tap costs before any
  attack is judged);
- `oatf tap --attacks attacks/ -- SERVER`: the whole library loaded, judging alone (reports and journal in a
  temporary directory): every MCP attack of the library opens a run on the session and sees every message.
Servers: `fastmcp`, the official `mcp` SDK's FastMCP server (what agents run); `minimal`, a few lines of
Python answering each line at once (the tap's cost against the fastest server this machine runs, the strict
case).
Printed: calls/s per configuration (calls / the round's elapsed time; the median of the rounds), median and
p90 round-trip latency over all calls, and the tap against direct: throughput (median of the per-round
ratios) and added median latency. Targets (issue 18): >= 90% of direct throughput, <= 0.5 ms added median
latency, with the whole library loaded. Then the tap's reports of the last round are counted, with the messages
their runs saw, to show it judged the traffic, and the taps' stderr is shown (`relayed but not evaluated`
would say the evaluation did not keep up).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
ATTACKS = ROOT / "attacks"
OATF = Path(sys.executable).parent / "oatf"
DIRECT, EMPTY, TAPPED = "server directly", "oatf tap, no attacks", "oatf tap + library"

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


def session(command: list[str], calls: int, stderr: IO[str]) -> tuple[float, list[float]]:
    """One stdio session running `command`: (elapsed seconds of the call loop, each call's round trip)."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    _ask(stdin, stdout, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    _ask(stdin, stdout, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _ask(stdin, stdout, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    latencies = []
    started = time.perf_counter()
    for i in range(calls):
        sent = time.perf_counter()
        answer = _ask(stdin, stdout, {"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                                      "params": {"name": "add", "arguments": {"a": i, "b": 2}}})
        latencies.append(time.perf_counter() - sent)
        assert answer["id"] == i + 2, answer
    elapsed = time.perf_counter() - started
    stdin.close()
    process.wait(timeout=300)
    return elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--server", choices=sorted(SERVERS), default="fastmcp")
    args = parser.parse_args()
    server = [sys.executable, "-c", SERVERS[args.server]]
    workdir = Path(tempfile.mkdtemp(prefix="bench-tap-"))
    names = (DIRECT, EMPTY, TAPPED)
    rates: dict[str, list[float]] = {name: [] for name in names}
    latencies: dict[str, list[float]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {EMPTY: [], TAPPED: []}
    stderr = workdir / "tap.stderr"
    print(f"{args.server} server over stdio, {args.calls} tools/call per session, {args.rounds} rounds "
          f"(+1 warm-up), {len(list(ATTACKS.glob('*.yaml')))} attack documents loaded in the tap")
    for round_number in range(args.rounds + 1):
        reports = workdir / f"reports-{round_number}"
        commands = {DIRECT: server, TAPPED: [str(OATF), "tap", "--attacks", str(ATTACKS), "--report-dir", str(reports),
                                             "--", *server],
                    EMPTY: [str(OATF), "tap", "--report-dir", str(workdir / "empty"), "--", *server]}
        measured = {}
        for name in names if round_number % 2 else names[::-1]:
            command = commands[name]
            with stderr.open("a") as errors:
                measured[name] = session(command, args.calls, errors)
        if round_number == 0:
            continue  # warm-up
        for name, (elapsed, round_latencies) in measured.items():
            rates[name].append(args.calls / elapsed)
            latencies[name] += round_latencies
        for name in ratios:
            ratios[name].append(rates[name][-1] / rates[DIRECT][-1])
        print(f"  round {round_number}: " + ", ".join(f"{name} {rates[name][-1]:.0f} calls/s" for name in names),
              flush=True)
    medians = {}
    for name in names:
        ordered = sorted(latencies[name])
        medians[name] = statistics.median(ordered)
        print(f"{name:>20}: {statistics.median(rates[name]):8.0f} calls/s, median {medians[name] * 1000:.3f} ms, "
              f"p90 {ordered[int(len(ordered) * 0.9)] * 1000:.3f} ms")
    for name in ratios:
        added = (medians[name] - medians[DIRECT]) * 1000
        print(f"{name} vs direct: {statistics.median(ratios[name]):.1%} of its throughput, median latency "
              f"{added:+.3f} ms{' (targets: >= 90%, <= 0.5 ms)' if name == TAPPED else ''}")
    last = workdir / f"reports-{args.rounds}" / "verdicts.jsonl"
    judged = [json.loads(line) for line in last.read_text().splitlines()] if last.exists() else []
    seen = sum(r["execution_summary"]["messages_seen"] for r in judged)
    print(f"the last round's tap reported {len(judged)} run(s) ({seen} messages seen by them); the taps' stderr: "
          f"{stderr.read_text().strip() or 'nothing'}")


if __name__ == "__main__":
    main()
