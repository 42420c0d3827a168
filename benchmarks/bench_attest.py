"""Attest engine figures: layers 1–4 throughput, 10 MB trace validation, 64 concurrent batches.

Run: .venv/bin/python benchmarks/bench_attest.py [--seconds 3]

Everything runs pinned to one CPU (sched_setaffinity), the engine subprocess included:
1. assertions/s for layers 1–4 (a mix of all 22 checks and operators) on a 50-step trace, in process
   (`Engine`, no pipe) and end to end over the real stdin/stdout pipe of `python -m attest_engine`;
2. seconds to validate a 10 MB trace (§7), alone and with the JSON-RPC parse of its request line;
3. 64 evaluate_batch requests written at once to one engine process: wall time, and every response
   matched to its request by id.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attest_engine.config import EngineConfig  # noqa: E402
from attest_engine.jsonrpc import parse_message  # noqa: E402
from attest_engine.logs import JsonLogger  # noqa: E402
from attest_engine.server import Engine  # noqa: E402
from attest_engine.trace_validation import validate_trace  # noqa: E402

INITIALIZE = {
    "sdk_name": "bench",
    "sdk_version": "0",
    "protocol_version": 1,
    "required_capabilities": ["layers_1_4"],
    "preferred_encoding": "json",
}


def pin_to_one_cpu() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def trace_with_steps(count: int, result_bytes: int = 200) -> dict[str, Any]:
    names = ["search_kb", "lookup_order", "check_policy", "process_refund", "notify_customer"]
    steps = []
    for i in range(count):
        kind = ("llm_call", "tool_call", "tool_call", "retrieval")[i % 4]
        steps.append(
            {
                "type": kind,
                "name": names[i % len(names)] if kind == "tool_call" else f"{kind}_{i}",
                "args": {"query": f"order ORD-{i}", "top_k": 3},
                "result": {"status": "ok", "text": ("refund policy allows 30 days " * 100)[:result_bytes], "n": i},
                "metadata": {"duration_ms": 40 + i % 50, "cost_usd": 0.0001},
            }
        )
    return {
        "schema_version": 1,
        "trace_id": "trc_bench",
        "input": {"user_message": "I want a refund for order ORD-123"},
        "steps": steps,
        "output": {
            "message": "Your refund of $89.99 has been processed. You'll see it in 3 business days. "
            "Refund ID: RFD-001.",
            "structured": {"refund_id": "RFD-001", "confidence": 0.95},
        },
        "metadata": {"total_tokens": 1350, "cost_usd": 0.0067, "latency_ms": 4200, "timestamp": "2026-02-18T10:30:00Z"},
    }


def assertion_mix() -> list[dict[str, Any]]:
    """One of each layer 1–4 check and operator (22 assertions)."""
    specs: list[tuple[str, dict[str, Any]]] = [
        (
            "schema",
            {
                "target": "output.structured",
                "schema": {
                    "type": "object",
                    "required": ["refund_id"],
                    "properties": {
                        "refund_id": {"type": "string", "pattern": "^RFD-\\d+$"},
                        "confidence": {"maximum": 1},
                    },
                },
            },
        ),
        (
            "schema",
            {"target": "steps[?name=='lookup_order'].result", "schema": {"type": "object", "required": ["status"]}},
        ),
        ("constraint", {"field": "metadata.cost_usd", "operator": "lte", "value": 0.01}),
        ("constraint", {"field": "metadata.latency_ms", "operator": "lt", "value": 5000}),
        ("constraint", {"field": "metadata.total_tokens", "operator": "between", "min": 100, "max": 2000}),
        ("constraint", {"field": "steps.length", "operator": "eq", "value": 50}),
        ("constraint", {"field": "steps[?type=='tool_call'].length", "operator": "gte", "value": 1}),
        ("constraint", {"field": "metadata.cost_usd", "operator": "gt", "value": 0}),
        ("trace", {"check": "contains_in_order", "tools": ["lookup_order", "process_refund"]}),
        ("trace", {"check": "exact_order", "tools": ["lookup_order", "check_policy"]}),
        ("trace", {"check": "loop_detection", "tool": "lookup_order", "max_repetitions": 20}),
        ("trace", {"check": "no_duplicates", "soft": True}),
        ("trace", {"check": "required_tools", "tools": ["process_refund"]}),
        ("trace", {"check": "forbidden_tools", "tools": ["delete_account"]}),
        ("content", {"target": "output.message", "check": "contains", "value": "refund"}),
        ("content", {"target": "output.message", "check": "not_contains", "value": "cannot process"}),
        ("content", {"target": "output.message", "check": "regex_match", "value": "RFD-\\d{3,}"}),
        ("content", {"target": "output.message", "check": "keyword_all", "values": ["refund", "business days"]}),
        ("content", {"target": "output.message", "check": "keyword_any", "values": ["refund", "credit"]}),
        ("content", {"target": "output.message", "check": "forbidden", "values": ["kill", "harm", "bomb"]}),
        ("content", {"target": "output.structured.refund_id", "check": "regex_match", "value": "^RFD-"}),
        ("content", {"target": "steps[?name=='lookup_order'].result.status", "check": "contains", "value": "ok"}),
    ]
    return [{"assertion_id": f"a{i}", "type": kind, "spec": spec} for i, (kind, spec) in enumerate(specs)]


def batch_line(request_id: int, trace: dict[str, Any], assertions: list[dict[str, Any]]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "evaluate_batch",
        "params": {"trace": trace, "assertions": assertions},
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def in_process_throughput(seconds: float) -> float:
    trace = trace_with_steps(50)
    assertions = [{**item, "assertion_id": f"a{i}"} for i, item in enumerate(assertion_mix() * 5)]  # 110

    async def run() -> float:
        answered = asyncio.Event()
        emitted: list[bytes] = []

        def emit(line: bytes) -> None:
            emitted.append(line)
            answered.set()

        engine = Engine(EngineConfig(), JsonLogger("error"), emit)
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}
        await engine.admit(parse_message(json.dumps(initialize).encode()))
        evaluated = 0
        started = time.perf_counter()
        request_id = 0
        while time.perf_counter() - started < seconds:
            request_id += 1
            answered.clear()
            await engine.admit(parse_message(batch_line(request_id, trace, assertions)))
            await answered.wait()
            assert b'"results"' in emitted[-1]
            evaluated += len(assertions)
        elapsed = time.perf_counter() - started
        await engine.end_of_input()
        return evaluated / elapsed

    return asyncio.run(run())


def spawn_engine() -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "attest_engine", "--log-level=warn"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )


def call(engine: subprocess.Popen[bytes], line: bytes) -> dict[str, Any]:
    assert engine.stdin is not None and engine.stdout is not None
    engine.stdin.write(line)
    engine.stdin.flush()
    return json.loads(engine.stdout.readline())


def pipe_throughput(seconds: float) -> float:
    trace = trace_with_steps(50)
    assertions = [{**item, "assertion_id": f"a{i}"} for i, item in enumerate(assertion_mix() * 5)]
    engine = spawn_engine()
    call(engine, json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}).encode() + b"\n")
    evaluated, request_id = 0, 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        request_id += 1
        response = call(engine, batch_line(request_id, trace, assertions))
        assert response["id"] == request_id and len(response["result"]["results"]) == len(assertions)
        evaluated += len(assertions)
    elapsed = time.perf_counter() - started
    call(engine, b'{"jsonrpc":"2.0","id":"end","method":"shutdown"}\n')
    engine.wait()
    return evaluated / elapsed


def ten_mb_validation() -> tuple[int, float, float]:
    trace = trace_with_steps(4900, result_bytes=1900)
    line = batch_line(1, trace, [])
    assert 10_000_000 < len(line) < 10_485_760  # just under the §7 limit
    best_validate, best_total = float("inf"), float("inf")
    for _ in range(3):
        started = time.perf_counter()
        message = parse_message(line[:-1])
        parsed = time.perf_counter()
        error = validate_trace(message.params["trace"], size_bytes=message.trace_size_bytes)  # type: ignore[union-attr]
        done = time.perf_counter()
        assert error is None, error
        best_validate = min(best_validate, done - parsed)
        best_total = min(best_total, done - started)
    return message.trace_size_bytes or 0, best_validate, best_total  # type: ignore[union-attr]


def concurrent_batches(count: int = 64) -> tuple[float, int]:
    trace = trace_with_steps(50)
    assertions = assertion_mix()
    engine = spawn_engine()
    call(engine, json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}).encode() + b"\n")
    assert engine.stdin is not None and engine.stdout is not None
    payload = b"".join(batch_line(i, trace, assertions) for i in range(1, count + 1))
    started = time.perf_counter()
    writer = threading.Thread(target=lambda: (engine.stdin.write(payload), engine.stdin.flush()))  # type: ignore[union-attr]
    writer.start()
    matched = set()
    for _ in range(count):
        response = json.loads(engine.stdout.readline())
        assert len(response["result"]["results"]) == len(assertions)
        matched.add(response["id"])
    elapsed = time.perf_counter() - started
    writer.join()
    assert matched == set(range(1, count + 1))
    call(engine, b'{"jsonrpc":"2.0","id":"end","method":"shutdown"}\n')
    engine.wait()
    return elapsed, len(matched)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput run")
    args = parser.parse_args()
    pin_to_one_cpu()
    print(f"layers 1-4, 50-step trace, in process:   {in_process_throughput(args.seconds):8.0f} assertions/s")
    print(f"layers 1-4, 50-step trace, over the pipe: {pipe_throughput(args.seconds):8.0f} assertions/s")
    size, validate_s, total_s = ten_mb_validation()
    print(f"{size:,}-byte trace: validate {validate_s:.3f} s; parse + validate {total_s:.3f} s")
    elapsed, matched = concurrent_batches()
    print(f"64 concurrent batches (22 assertions each): {elapsed:.3f} s, {matched}/64 responses matched by id")


if __name__ == "__main__":
    main()
