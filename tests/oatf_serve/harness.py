"""`oatf serve` as its own process for the tests: started on free ports with a report directory, its endpoint
lines read from stdout, stopped with SIGINT (its summary then on stderr); and the official `mcp` client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from testing.processes import _start, free_port, stop, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
OATF = str(Path(sys.executable).parent / "oatf")
ATTACKS = ROOT / "attacks"
GUARD = 60.0
"""Seconds before a hung process fails a test instead of hanging it (never asserted on)."""
FAST = ("--grace-period", "1s")

Report = dict[str, Any]


@dataclass
class Serving:
    """A running `oatf serve`: its endpoints by attack id, and its report directory."""

    process: subprocess.Popen[str]
    endpoints: dict[str, str]
    """The first endpoint of each document, by attack id."""
    report_dir: Path
    actors: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(attack id, actor) → (mode, URL) of every actor played."""
    stderr: str = ""

    def reports(self) -> list[Report]:
        return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(self.report_dir.glob("*.json"))]

    def wait_for(self, done: Callable[[list[Report]], bool], timeout: float = 20.0) -> list[Report]:
        """The reports once `done` holds of them (a wait, not an assertion: the caller asserts)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not done(self.reports()):
            time.sleep(0.1)
        return self.reports()

    def stop(self) -> int:
        """SIGINT, as a user's Ctrl-C; its exit status (stderr kept in `stderr`)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        _, self.stderr = self.process.communicate(timeout=GUARD)
        return self.process.returncode


@contextlib.contextmanager
def oatf_serve(report_dir: Path, documents: list[Path | str], *flags: str) -> Iterator[Serving]:
    """`oatf serve DOCUMENTS --report-dir REPORT_DIR FLAGS` until the block ends; waits for its endpoint list
    (ended by an empty line)."""
    process = subprocess.Popen([OATF, "serve", *map(str, documents), "--report-dir", str(report_dir), *flags],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    serving = Serving(process, {}, report_dir)
    try:
        assert process.stdout is not None
        while line := process.stdout.readline().strip():
            attack, actor, mode, url = line.split()
            serving.endpoints.setdefault(attack, url)
            serving.actors[attack, actor] = (mode, url)
        if process.poll() is not None or not serving.endpoints:
            serving.stop()
            raise RuntimeError(f"oatf serve exited with {process.returncode}: {serving.stderr}")
        yield serving
    finally:
        if process.poll() is None:
            serving.stop()


def explore_library(report_dir: Path, documents: list[Path], mode: str,
                    explore: Callable[[str], Awaitable[None]], *flags: str) -> tuple[Serving, list[Report]]:
    """`documents` served by one `oatf serve`, each actor of `mode` explored at once by `explore(url)`, then the
    server stopped: the reports."""
    with oatf_serve(report_dir, documents, *flags) as serving:
        async def all_documents() -> None:
            await asyncio.gather(*(explore(url) for played, url in serving.actors.values() if played == mode))

        asyncio.run(asyncio.wait_for(all_documents(), 120))
        serving.stop()
        return serving, serving.reports()


def first_run(serving: Serving, reports: list[Report], attack_id: str, mode: str) -> Report:
    """The first run reported for `attack_id`, once its actor of `mode` was served (asserted)."""
    assert any(key[0] == attack_id and played == mode for key, (played, _) in serving.actors.items()), \
        serving.stderr
    runs = sorted((r for r in reports if r["attack"]["id"] == attack_id),
                  key=lambda r: r["execution_summary"]["started_at"])
    assert runs, serving.stderr
    return runs[0]


@contextlib.asynccontextmanager
async def mcp_session(url: str, transport: str = "streamable_http", **options: Any) -> AsyncIterator[ClientSession]:
    """An initialized session of the official `mcp` client at `url` (`options`: `ClientSession`'s), over
    Streamable HTTP or, with `transport="sse"`, the legacy HTTP+SSE transport (`url` then names the `/sse`
    stream)."""
    async with contextlib.AsyncExitStack() as stack:
        if transport == "sse":
            read, write = await stack.enter_async_context(sse_client(url))
        else:
            read, write = await stack.enter_async_context(streamable_http_client(url))
        session = await stack.enter_async_context(ClientSession(read, write, **options))
        await session.initialize()
        yield session


@contextlib.contextmanager
def agent(log: Path, *args: str) -> Iterator[str]:
    """An agent process (`python ARGS…`, `PORT` in them replaced by a free port); yields its base URL."""
    port = free_port()
    process = _start([sys.executable, *args[:1], *(a.replace("PORT", str(port)) for a in args[1:])], log)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


def drive(tmp_path: Path, documents: Path | list[Path], url: str, *flags: str) -> tuple[int, list[Report], str]:
    """`oatf serve DOCUMENTS --agent URL` until it stops by itself: (exit status, reports, stderr)."""
    listed = documents if isinstance(documents, list) else [documents]
    with oatf_serve(tmp_path, listed, "--agent", url, *FAST, *flags) as serving:
        serving.process.wait(timeout=GUARD)
        status = serving.stop()
    return status, serving.reports(), serving.stderr


def matched(report: Report) -> set[str]:
    """The indicators a report's verdict matched."""
    return {v["indicator_id"] for v in report["verdict"]["indicator_verdicts"] if v["result"] == "matched"}
