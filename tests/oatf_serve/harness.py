"""`oatf serve` as its own process for the tests: started on free ports with a report directory, its endpoint
lines read from stdout, stopped with SIGINT (its summary then on stderr); and the official `mcp` client."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
OATF = str(Path(sys.executable).parent / "oatf")
ATTACKS = ROOT / "attacks"
GUARD = 60.0
"""Seconds before a hung process fails a test instead of hanging it (never asserted on)."""

Report = dict[str, Any]


@dataclass
class Serving:
    """A running `oatf serve`: its endpoints by attack id, and its report directory."""

    process: subprocess.Popen[str]
    endpoints: dict[str, str]
    report_dir: Path
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
    """`oatf serve DOCUMENTS --report-dir REPORT_DIR FLAGS` until the block ends; waits for its endpoints."""
    process = subprocess.Popen([OATF, "serve", *map(str, documents), "--report-dir", str(report_dir), *flags],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    serving = Serving(process, {}, report_dir)
    try:
        assert process.stdout is not None
        while len(serving.endpoints) < len(documents):
            line = process.stdout.readline()
            if not line:
                serving.stop()
                raise RuntimeError(f"oatf serve exited with {process.returncode}: {serving.stderr}")
            attack, _actor, _mode, url = line.split()
            serving.endpoints[attack] = url
        yield serving
    finally:
        if process.poll() is None:
            serving.stop()


@contextlib.asynccontextmanager
async def mcp_session(url: str, **options: Any) -> AsyncIterator[ClientSession]:
    """An initialized session of the official `mcp` client at `url` (`options`: `ClientSession`'s)."""
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write, **options) as session:
        await session.initialize()
        yield session
