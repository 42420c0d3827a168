"""Wire decoding figures: the decoders alone, and mitmdump with the tap against bare mitmdump, side by side.

    .venv/bin/python benchmarks/bench_wire.py [--calls 300] [--rounds 3] [--sse-events 20000] [--skip-proxy]

1. Decoder alone, one core: JSON-RPC messages and SSE events per CPU second of this process (so a busy
   machine does not skew them): MCP `tools/call` POSTs answered with JSON (request and response each one
   message), and one AG-UI stream fed in 16 KiB chunks.
   Targets: ≥ 50,000 messages/s and ≥ 100,000 events/s.
2. The same real MCP workload (official `mcp` client calling `tools/call` in a loop, MCPServer Streamable HTTP
   server) directly, through bare mitmdump, through mitmdump that only streams SSE responses, and through
   mitmdump + tap (decoding only, no attacks), in alternating rounds: requests/s and median latency per call;
   then the events/s a client receives from one long AG-UI SSE stream on each path.
   Targets: ≥ 90% of bare mitmdump's throughput, ≤ 1 ms added median latency. Streaming SSE is not optional
   (bare mitmdump holds an SSE response until it ends, which deadlocks MCP sampling inside a tools/call and
   starves the GET stream), so "stream only" shows which part of the difference is mitmproxy's streaming.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from oatf_engine.wire import WireDecoder  # noqa: E402


def bench_jsonrpc(exchanges: int = 50_000) -> float:
    """Decoded JSON-RPC messages per second (two per exchange)."""
    decoder = WireDecoder()
    headers = {"content-type": "application/json", "mcp-session-id": "s1"}
    requests = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                            "params": {"name": "add", "arguments": {"a": i, "b": 2}}}).encode()
                for i in range(exchanges)]
    responses = [json.dumps({"jsonrpc": "2.0", "id": i, "result": {
        "content": [{"type": "text", "text": str(i + 2)}], "isError": False}}).encode() for i in range(exchanges)]
    count = 0
    start = time.process_time()
    for i in range(exchanges):
        fid = str(i)
        decoder.request_headers(fid, "POST", "http://127.0.0.1:8000/mcp", headers, "127.0.0.1:5000", 0.0)
        decoder.request_data(fid, requests[i], 0.0)
        count += len(decoder.request_end(fid, 0.0))
        decoder.response_headers(fid, 200, {"content-type": "application/json"}, 0.0)
        decoder.response_data(fid, responses[i], 0.0)
        count += len(decoder.response_end(fid, 0.0))
    elapsed = time.process_time() - start
    assert count == 2 * exchanges
    return count / elapsed


def bench_sse(events: int = 200_000, chunk: int = 16 << 10) -> float:
    """Decoded SSE events per second on one AG-UI stream."""
    decoder = WireDecoder()
    body = b"".join(b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"token %d"}\n\n' % i
                    for i in range(events))
    decoder.request_headers("s", "POST", "http://127.0.0.1:8000/agent", {"content-type": "application/json"}, "c", 0.0)
    decoder.request_data("s", b'{"threadId": "t", "runId": "r", "messages": []}', 0.0)
    decoder.request_end("s", 0.0)
    decoder.response_headers("s", 200, {"content-type": "text/event-stream"}, 0.0)
    count = 0
    start = time.process_time()
    for offset in range(0, len(body), chunk):
        count += len(decoder.response_data("s", body[offset:offset + chunk], 0.0))
    elapsed = time.process_time() - start
    assert count == events
    return count / elapsed


async def _calls(url: str, proxy: str | None, calls: int) -> list[float]:
    """Latency of each of `calls` sequential tools/call over one MCP session."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from testing.clients import mcp_http_client

    latencies = []
    async with mcp_http_client(proxy) as client, streamable_http_client(url, http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        for i in range(calls):
            start = time.perf_counter()
            await session.call_tool("add", {"a": i, "b": 1})
            latencies.append(time.perf_counter() - start)
    return latencies


STREAM_ONLY = """class StreamOnly:
    def responseheaders(self, flow):
        if "event-stream" in flow.response.headers.get("content-type", ""):
            flow.response.stream = True
addons = [StreamOnly()]
"""
"""A mitmdump script that only streams SSE responses: what streaming itself costs, without decoding."""


async def _sse_rate(url: str, proxy: str | None) -> float:
    """Events per second a client receives from one long AG-UI stream."""
    from testing.clients import http_client, run_agent_input

    count = 0
    start = time.perf_counter()
    async with http_client(proxy) as client, client.stream("POST", url, json=run_agent_input()) as response:
        async for line in response.aiter_lines():
            count += line.startswith("data: ")
    return count / (time.perf_counter() - start)


def bench_proxies(calls: int, rounds: int, sse_events: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per-call tools/call latencies and SSE events/s, direct and through each mitmdump, alternating rounds."""
    from testing.processes import mitmdump, peers

    quiet = ("--set", "termlog_verbosity=warn")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        script = workdir / "stream_only.py"
        script.write_text(STREAM_ONLY)
        with peers(workdir, kinds=("mcp_http", "ag_ui")) as running, \
                mitmdump(workdir, tap=False, name="bare", extra=quiet) as bare, \
                mitmdump(workdir, tap=False, name="stream", extra=(*quiet, "-s", str(script))) as streaming, \
                mitmdump(workdir, name="tap", extra=quiet, record_events=False) as tapped:
            url = running.url("mcp_http", "/mcp")
            targets = {"direct": None, "bare mitmdump": bare.url, "mitmdump + stream only": streaming.url,
                       "mitmdump + tap": tapped.url}
            latencies: dict[str, list[float]] = {name: [] for name in targets}
            for proxy in targets.values():  # warm-up
                asyncio.run(_calls(url, proxy, 20))
            for _ in range(rounds):
                for name, proxy in targets.items():
                    latencies[name] += asyncio.run(_calls(url, proxy, calls))
            sse_url = running.url("ag_ui", f"/ticks?count={sse_events}&interval=0&hold=0")
            sse = {name: statistics.median(asyncio.run(_sse_rate(sse_url, proxy)) for _ in range(rounds))
                   for name, proxy in targets.items()}
    return latencies, sse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="tools/call per round and target")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sse-events", type=int, default=20_000, help="events in the proxied AG-UI stream")
    parser.add_argument("--skip-proxy", action="store_true", help="decoder figures only")
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print("decoder alone (one core, per CPU second):")
    print(f"  JSON-RPC: {bench_jsonrpc():>10,.0f} messages/s   (target >= 50,000)")
    print(f"  SSE:      {bench_sse():>10,.0f} events/s     (target >= 100,000)")
    if args.skip_proxy:
        return
    print(f"MCP tools/call loop ({args.rounds} alternating rounds of {args.calls} calls per target) and an "
          f"AG-UI stream of {args.sse_events} events:")
    results, sse = bench_proxies(args.calls, args.rounds, args.sse_events)
    medians = {name: statistics.median(latencies) for name, latencies in results.items()}
    rates = {name: len(latencies) / sum(latencies) for name, latencies in results.items()}
    for name, latencies in results.items():
        print(f"  {name:22} {rates[name]:7.1f} req/s   median {medians[name] * 1000:6.2f} ms   "
              f"p90 {statistics.quantiles(latencies, n=10)[-1] * 1000:6.2f} ms   SSE {sse[name]:9,.0f} events/s")
    for base, target in (("bare mitmdump", "(targets: >= 90%, <= 1 ms)"), ("mitmdump + stream only", "")):
        ratio = rates["mitmdump + tap"] / rates[base]
        added = (medians["mitmdump + tap"] - medians[base]) * 1000
        print(f"  tap vs {base}: {ratio:.1%} of its throughput, median latency {added:+.2f} ms {target}")


if __name__ == "__main__":
    main()
