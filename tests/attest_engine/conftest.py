"""Shared helpers for the attest-engine tests: a subprocess driver, an in-process driver, a stub provider."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import math
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from attest_engine.assertions import Providers
from attest_engine.config import EngineConfig, ProviderConfig
from attest_engine.logs import JsonLogger
from attest_engine.ndjson import LineSplitter
from attest_engine.server import Engine, parse_item
from testing.paths import ROOT

INITIALIZE = {
    "sdk_name": "attest-python",
    "sdk_version": "0.1.0",
    "protocol_version": 1,
    "required_capabilities": ["layers_1_4"],
    "preferred_encoding": "json",
}


def refund_trace() -> dict[str, Any]:
    """The §2.2 example trace (customer-service refund)."""
    return copy.deepcopy(
        {
            "schema_version": 1,
            "trace_id": "trc_abc123",
            "agent_id": "customer-service-agent",
            "input": {"user_message": "I want a refund for order ORD-123", "context": {}},
            "steps": [
                {
                    "type": "llm_call",
                    "name": "reasoning",
                    "args": {"model": "gpt-4.1", "prompt": "You are a customer service agent."},
                    "result": {"completion": "I need to look up the order to verify eligibility."},
                    "metadata": {"duration_ms": 1200, "cost_usd": 0.003},
                },
                {
                    "type": "tool_call",
                    "name": "lookup_order",
                    "args": {"order_id": "ORD-123"},
                    "result": {"status": "delivered", "amount": 89.99, "eligible_for_refund": True},
                    "metadata": {"duration_ms": 45},
                },
                {
                    "type": "tool_call",
                    "name": "process_refund",
                    "args": {"order_id": "ORD-123", "amount": 89.99},
                    "result": {"refund_id": "RFD-001", "estimated_days": 3},
                    "metadata": {"duration_ms": 120},
                },
            ],
            "output": {
                "message": "Your refund of $89.99 has been processed. You'll see it in 3 business days. "
                "Refund ID: RFD-001.",
                "structured": {"refund_id": "RFD-001", "confidence": 0.95},
            },
            "metadata": {
                "total_tokens": 1350,
                "cost_usd": 0.0067,
                "latency_ms": 4200,
                "model": "gpt-4.1",
                "timestamp": "2026-02-18T10:30:00Z",
            },
            "parent_trace_id": None,
        }
    )


def request(request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def batch(request_id: Any, trace: Any, *assertions: dict[str, Any]) -> dict[str, Any]:
    return request(request_id, "evaluate_batch", {"trace": trace, "assertions": list(assertions)})


def assertion(assertion_id: str, kind: str, **spec: Any) -> dict[str, Any]:
    return {"assertion_id": assertion_id, "type": kind, "spec": spec}


def engine_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class EngineProcess:
    """`python -m attest_engine` over real pipes; stdout lines are collected by a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "attest_engine", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=engine_env(),
            cwd=ROOT,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw_stdout: list[bytes] = []
        self.stderr = b""
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw_stdout.append(line)
            self.lines.put(line)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def read(self, timeout: float = 20.0) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line.endswith(b"\n") and b"\n" not in line[:-1]
        message = json.loads(line)
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0"
        return message

    def call(self, message: dict[str, Any], timeout: float = 20.0) -> dict[str, Any]:
        self.send(message)
        response = self.read(timeout)
        assert response["id"] == message["id"]
        return response

    def initialize(self, **overrides: Any) -> dict[str, Any]:
        return self.call(request(0, "initialize", {**INITIALIZE, **overrides}))

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def no_more_output(self, wait_s: float = 0.3) -> bool:
        try:
            self.lines.get(timeout=wait_s)
        except queue.Empty:
            return True
        return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def engine() -> Iterator[EngineProcess]:
    process = EngineProcess("--log-level=warn")
    yield process
    process.kill()


@pytest.fixture
def spawn() -> Iterator[Any]:
    """Start engines with given arguments; all are killed at teardown."""
    started: list[EngineProcess] = []

    def start(*args: str) -> EngineProcess:
        process = EngineProcess(*args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def error_of(response: dict[str, Any], code: int) -> dict[str, Any]:
    """The error of `response`, checked to have `code` and the §5 `data` fields."""
    assert "result" not in response, response
    error = response["error"]
    assert error["code"] == code, error
    data = error["data"]
    assert set(data) == {"error_type", "retryable", "detail"}
    assert isinstance(data["detail"], str) and data["detail"]
    return error


# ---------------------------------------------------------------------------------------------- in-process


def run_engine(
    messages: list[Any],
    config: EngineConfig | None = None,
    providers: Providers | None = None,
    sequential: bool = False,
) -> list[dict[str, Any]]:
    """Feed messages (dicts, or raw bytes lines) to an in-process `Engine`; its responses, in emit order.

    With `sequential`, each request's answer is awaited before the next is sent (requests only)."""

    async def drive() -> list[bytes]:
        emitted: list[bytes] = []
        engine = Engine(config or EngineConfig(), JsonLogger("error"), emitted.append, providers)
        splitter = LineSplitter((config or EngineConfig()).max_message_bytes)
        for sent, message in enumerate(messages, start=1):
            raw = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
            for item in splitter.feed(raw):
                if not await engine.admit(parse_item(item)):
                    return emitted
            while sequential and len(emitted) < sent:
                await asyncio.sleep(0.001)
        for item in splitter.finish():
            if not await engine.admit(parse_item(item)):
                return emitted
        await engine.end_of_input()
        return emitted

    lines = asyncio.run(drive())
    responses = []
    for line in lines:
        assert line.endswith(b"\n") and b"\n" not in line[:-1]
        responses.append(json.loads(line))
    return responses


def evaluate(trace: Any, *assertions: dict[str, Any], **config: Any) -> dict[str, Any]:
    """One evaluate_batch through an in-process engine: the response (result or error)."""
    responses = run_engine([request(0, "initialize", INITIALIZE), batch(1, trace, *assertions)], EngineConfig(**config))
    assert responses[0]["result"]["compatible"]
    return responses[1]


def results(trace: Any, *assertions: dict[str, Any], **config: Any) -> dict[str, dict[str, Any]]:
    """Results of one evaluate_batch by assertion_id (the batch must succeed)."""
    response = evaluate(trace, *assertions, **config)
    assert "result" in response, response
    return {item["assertion_id"]: item for item in response["result"]["results"]}


# --------------------------------------------------------------------------------------- stub provider


def bag_of_words_vector(text: str, dimensions: int = 64) -> list[float]:
    """A deterministic embedding: hashed word counts (texts sharing words are similar)."""
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dimensions] += 1.0
    return vector if any(vector) else [1.0] + [0.0] * (dimensions - 1)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


class StubProvider:
    """An OpenAI-compatible HTTP server on 127.0.0.1 (embeddings and chat completions) for tests.

    `failures` is a list of HTTP statuses to answer first (one per request); `judge_reply` is the chat
    completion content (default: a JSON score of `judge_score`); `delay_s` delays every answer.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.failures: list[int] = []
        self.judge_score = 0.9
        self.judge_reply: str | None = None
        self.delay_s = 0.0
        self.delays: dict[str, float] = {}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stub.requests.append((self.path, body))
                delay = stub.delay_s
                for marker, seconds in stub.delays.items():
                    if marker in json.dumps(body):
                        delay = seconds
                time.sleep(delay)
                if stub.failures:
                    status = stub.failures.pop(0)
                    self._send(status, {"error": {"message": "stub failure"}})
                elif self.path.endswith("/embeddings"):
                    data = [
                        {"index": i, "embedding": bag_of_words_vector(text)} for i, text in enumerate(body["input"])
                    ]
                    self._send(200, {"data": data, "usage": {"prompt_tokens": 10, "total_tokens": 10}})
                else:
                    content = stub.judge_reply or json.dumps({"score": stub.judge_score, "reason": "Stub judge."})
                    self._send(
                        200,
                        {
                            "choices": [{"message": {"role": "assistant", "content": content}}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                        },
                    )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (timeout tests) closes its socket mid-answer

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def provider_config(self, **overrides: Any) -> ProviderConfig:
        values = {"base_url": self.base_url, "model": "stub-model", "backoff_s": 0.01, "timeout_s": 5.0}
        return ProviderConfig(**{**values, **overrides})

    def config_file(self, path: Path, **extra: Any) -> Path:
        providers = {
            "embedding": {"base_url": self.base_url, "model": "stub-embed", "backoff_s": 0.01},
            "llm_judge": {"base_url": self.base_url, "model": "stub-judge", "backoff_s": 0.01},
        }
        path.write_text(json.dumps({"providers": providers, **extra}))
        return path

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    server = StubProvider()
    yield server
    server.close()
