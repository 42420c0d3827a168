"""Processes on loopback for the wire end-to-end tests, the fixture recorder and the benchmark: free ports,
the peers process (`peers.py`), mitmdump with or without the tap script, readiness waits, clean shutdown."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testing.paths import ROOT

WIRE_PEERS = ROOT / "tests" / "e2e" / "wire"
"""The wire suite's peers and the tap's mitmdump script, run by path."""
PYTHON = Path(sys.executable)
MITMDUMP = PYTHON.parent / "mitmdump"
PEER_KINDS = ("mcp_http", "mcp_sse", "a2a_v1", "a2a_v03", "a2a_rest_v1", "a2a_rest_v03", "ag_ui")


TRACEBACK = "Traceback (most recent call last):"


def tracebacks(log: str) -> list[str]:
    """The tracebacks a process wrote to `log` (each from its first line up to the next log record), but for the
    one CPython 3.12.1 itself writes when a server stops while a client's connection is open: asyncio's callback
    for the connection's task asks the cancelled task for its exception and raises `CancelledError`
    (`asyncio/streams.py`; fixed in 3.12.2). mitmdump stopped with a kept-alive connection open writes it; no code
    of this project runs there."""
    found = []
    for part in log.split(TRACEBACK)[1:]:
        frames, _, _ = part.partition("\n[")  # the next log record, if any
        if not ("asyncio/streams.py\", line" in frames and ", in callback" in frames
                and frames.rstrip().endswith("asyncio.exceptions.CancelledError")):
            found.append(TRACEBACK + frames)
    return found


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Block until something accepts connections on 127.0.0.1:port; raise if the process died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def _start(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def stop(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGINT (mitmdump then runs its `done` hooks), then SIGKILL after `timeout` s; only this process group."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


@dataclass
class Peers:
    """The peers process and the port of each server in it."""

    process: subprocess.Popen[bytes]
    ports: dict[str, int]

    def url(self, kind: str, path: str = "") -> str:
        """`http://127.0.0.1:PORT` of a peer, plus `path`."""
        return f"http://127.0.0.1:{self.ports[kind]}{path}"


@contextlib.contextmanager
def peer_process(script: Path, kinds: tuple[str, ...], log: Path,
                 replay: list[Path] | None = None, extra: tuple[str, ...] = ()) -> Iterator[Peers]:
    """Run the peers script `script` serving `kinds` (`--kind-name PORT` each, on free ports; and the replay
    server of `replay` flow files; `extra`: further arguments) in one process, until every port accepts
    connections."""
    ports = {kind: free_port() for kind in kinds}
    args = [str(PYTHON), str(script), *extra]
    for kind, port in ports.items():
        args += [f"--{kind.replace('_', '-')}", str(port)]
    if replay:
        ports["replay"] = free_port()
        args += ["--replay", str(ports["replay"]), *map(str, replay)]
    process = _start(args, log)
    try:
        for port in ports.values():
            wait_for_port(port, process)
        yield Peers(process, ports)
    finally:
        stop(process)


@contextlib.contextmanager
def peers(workdir: Path, kinds: tuple[str, ...] = PEER_KINDS, replay: list[Path] | None = None) -> Iterator[Peers]:
    """Start the given peers (and the replay server of `replay` flow files) in one process."""
    with peer_process(WIRE_PEERS / "peers.py", kinds, workdir / "peers.log", replay) as running:
        yield running


@dataclass
class Proxy:
    """A running mitmdump: its proxy URL and, with the tap, the JSONL file its events go to."""

    process: subprocess.Popen[bytes]
    port: int
    events_file: Path | None
    log: Path
    _read: int = field(default=0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        """Every event the tap has written so far."""
        if self.events_file is None or not self.events_file.exists():
            return []
        return [json.loads(line) for line in self.events_file.read_text(encoding="utf-8").splitlines() if line]

    def settled_events(self, settle: float = 0.1, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Every event, once none has been added for `settle` seconds."""
        deadline = time.monotonic() + timeout
        previous = self.events()
        while True:
            time.sleep(settle)
            current = self.events()
            if len(current) == len(previous) or time.monotonic() > deadline:
                return current
            previous = current


@contextlib.contextmanager
def mitmdump(workdir: Path, tap: bool = True, flows: Path | None = None, name: str = "proxy",
             extra: tuple[str, ...] = (), record_events: bool = True,
             environment: dict[str, str] | None = None, stop_timeout: float = 5.0) -> Iterator[Proxy]:
    """mitmdump on a free loopback port; with `tap`, running `tap_script.py` (events to a JSONL file unless
    not `record_events`, and the flows, streamed bodies included, to `flows` when given); `environment`: more
    environment variables; stopped with `stop` (SIGKILL after `stop_timeout` s)."""
    port = free_port()
    args = [str(MITMDUMP), "--listen-host", "127.0.0.1", "--listen-port", str(port),
            "--set", "flow_detail=0", "--set", "connection_strategy=lazy", *extra]
    env: dict[str, str] = dict(environment or {})
    events_file = None
    if tap:
        args += ["-s", str(WIRE_PEERS / "tap_script.py")]
        if record_events:
            events_file = workdir / f"{name}-events.jsonl"
            env["WIRE_EVENTS"] = str(events_file)
        if flows is not None:
            env["WIRE_FLOWS"] = str(flows)
    log = workdir / f"{name}.log"
    process = _start(args, log, env)
    try:
        wait_for_port(port, process)
        yield Proxy(process, port, events_file, log)
    finally:
        stop(process, stop_timeout)
