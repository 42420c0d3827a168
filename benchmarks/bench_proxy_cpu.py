"""The addon's CPU in mitmproxy's process per MCP exchange, split between the event loop and the addon's threads.

    .venv/bin/python benchmarks/bench_proxy_cpu.py [--exchanges 3000] [--rate 300] [--rounds 3] [--library]
        [--against DIR] [--no-journal]

Why: issue 15's live target (>= 95% of bare mitmdump's throughput) is bounded by the Python work mitmproxy's
process does per exchange: every thread of it shares one interpreter lock with the event loop. Throughput on this
shared 2-CPU machine swings by tens of percent between rounds (`bench_addon.py`); this measures the work itself.

Each round runs, in a fresh process per configuration (alternately): the addon (`addon/oatf_addon.py` of this
checkout, and of `--against DIR`) under mitmproxy's test context, its worker thread and a real monitor process
started as in mitmdump (`running`), on an asyncio loop; `--exchanges` buffered JSON `tools/call` exchanges
(request and answer, one MCP session) go through its five hooks, one every 1/`--rate` s (an `asyncio.sleep`
between them, as a proxy's loop runs other work between hooks, so the hooks run with cold caches as they do
live), then it waits until every event is evaluated. Printed: the CPU per exchange of the event loop thread and of
the process's other threads (the worker, sender and receiver: `RUSAGE_SELF` minus the loop's `thread_time`), next
to the baseline: the same loop without calling the hooks (the asyncio sleeps alone). The monitor process's CPU is
not counted: it has an interpreter of its own. `--library` loads the whole `attacks/` library. `--no-journal` also
measures this checkout's addon with its evaluation journal closed once it runs (`oatf_engine.journal`: what the
journal costs the proxy per exchange; a proxy without one would lose its open runs in a crash).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _flow(i: int) -> object:
    from mitmproxy import http
    from mitmproxy.test import tflow
    flow = tflow.tflow(resp=False)
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"a": i, "b": 2}}}).encode()
    flow.request = http.Request.make("POST", "http://127.0.0.1:8000/mcp", body, {
        "content-type": "application/json", "mcp-session-id": "bench", "mcp-protocol-version": "2025-06-18",
        "accept": "application/json, text/event-stream", "content-length": str(len(body))})
    answer = json.dumps({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": str(i + 2)}],
                                                                "isError": False}}).encode()
    flow.response = http.Response.make(200, answer, {"content-type": "application/json", "mcp-session-id": "bench"})
    return flow


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _measure(code: Path, exchanges: int, rate: float, library: bool, hooks: bool,
                   journal: bool) -> tuple[float, float]:
    """(event loop CPU, other threads' CPU) per exchange, in µs."""
    sys.path.insert(0, str(code))
    from mitmproxy.test import taddons

    from addon.oatf_addon import OatfAddon
    addon = OatfAddon()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, oatf_report_dir=tempfile.mkdtemp(), oatf_attacks=str(code / "attacks") if library else "")
        addon.running()
        while not addon.library_ready.is_set():
            await asyncio.sleep(0.05)
        if not journal:
            with addon.lock:
                addon._close_journal()
        await asyncio.sleep(1.0)
        flows = [_flow(i) for i in range(exchanges)]
        loop_start, cpu_start = time.thread_time(), _cpu()
        for flow in flows:
            now = time.time()
            answer, flow.response = flow.response, None  # type: ignore[attr-defined]
            flow.request.timestamp_start = flow.request.timestamp_end = now  # type: ignore[attr-defined]
            if hooks:
                addon.requestheaders(flow)  # type: ignore[arg-type]
                addon.request(flow)  # type: ignore[arg-type]
            flow.response = answer  # type: ignore[attr-defined]
            answer.timestamp_start = answer.timestamp_end = now
            if hooks:
                addon.responseheaders(flow)  # type: ignore[arg-type]
                addon.response(flow)  # type: ignore[arg-type]
            await asyncio.sleep(1 / rate)
        while addon.waiting():
            await asyncio.sleep(0.01)
        loop_cpu, total = time.thread_time() - loop_start, _cpu() - cpu_start
        addon.done()
    return loop_cpu / exchanges * 1e6, (total - loop_cpu) / exchanges * 1e6


def _child(args: argparse.Namespace) -> None:
    loop, others = asyncio.run(_measure(Path(args.code), args.exchanges, args.rate, args.library,
                                        not args.no_hooks, not args.no_journal))
    print(json.dumps([loop, others]))


def _run(code: Path, args: argparse.Namespace, hooks: bool, journal: bool = True) -> tuple[float, float]:
    command = [sys.executable, __file__, "--child", str(code), "--exchanges", str(args.exchanges),
               "--rate", str(args.rate), *(["--library"] if args.library else []), *([] if hooks else ["--no-hooks"]),
               *([] if journal else ["--no-journal"])]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=code)
    loop, others = json.loads(done.stdout.strip().splitlines()[-1])
    return loop, others


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=300.0, help="exchanges per second")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--library", action="store_true", help="load the whole attacks/ library")
    parser.add_argument("--against", metavar="DIR", help="also measure the addon of the checkout at DIR")
    parser.add_argument("--no-journal", action="store_true",
                        help="also measure this checkout's addon without its evaluation journal")
    parser.add_argument("--child", metavar="CODE", help=argparse.SUPPRESS)
    parser.add_argument("--no-hooks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.code = args.child
        _child(args)
        return
    checkouts = {"this checkout": ROOT}
    if args.against:
        checkouts[Path(args.against).name] = Path(args.against).resolve()
    results: dict[str, list[tuple[float, float]]] = {"baseline (no hooks)": [], **{name: [] for name in checkouts}}
    if args.no_journal:
        results["no journal"] = []
    print(f"{args.exchanges} tools/call exchanges at {args.rate:g}/s, {args.rounds} round(s), "
          f"library: {'attacks/' if args.library else 'none'}")
    for _ in range(args.rounds):
        results["baseline (no hooks)"].append(_run(ROOT, args, hooks=False))
        for name, code in checkouts.items():
            results[name].append(_run(code, args, hooks=True))
        if args.no_journal:
            results["no journal"].append(_run(ROOT, args, hooks=True, journal=False))
    base_loop = statistics.median(loop for loop, _ in results["baseline (no hooks)"])
    for name, rounds in results.items():
        loop = statistics.median(loop for loop, _ in rounds)
        others = statistics.median(other for _, other in rounds)
        added = "" if name.startswith("baseline") else f"   added: {loop - base_loop + others:6.0f} us/exchange"
        print(f"  {name:22} event loop {loop:6.0f} us (rounds {', '.join(f'{r[0]:.0f}' for r in rounds)})   "
              f"other threads {others:6.0f} us{added}")


if __name__ == "__main__":
    main()
