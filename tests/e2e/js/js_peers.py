"""Node processes for the JavaScript e2e tests: servers from the pinned npm packages of `tests/js` (started on
a free loopback port, stopped with their process group) and the client driver scripts there (run to completion,
their one JSON line of output parsed)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from testing.processes import ROOT, _start, free_port, stop, wait_for_port

JS = ROOT / "tests" / "js"
NODE_MODULES = JS / "node_modules"


def node() -> str:
    """The `node` executable; a clear failure when it or the npm peers are missing."""
    found = shutil.which("node")
    assert found is not None, "node (Node.js >= 20) is not on PATH: the JavaScript e2e tests need it"
    assert NODE_MODULES.is_dir(), f"{NODE_MODULES} is missing: run scripts/test.sh (or scripts/npm_peers.sh)"
    return found


@contextlib.contextmanager
def node_server(args: list[str], log: Path, port: int | None = None,
                env: dict[str, str] | None = None) -> Iterator[int]:
    """`node ARGS` (relative paths are under `tests/js`) with `PORT` set to a free loopback port (or `port`),
    until it accepts connections there; yields the port."""
    port = port if port is not None else free_port()
    process = _start([node(), *[str(JS / a) if not a.startswith("-") and (JS / a).exists() else a for a in args]],
                     log, {"PORT": str(port), **(env or {})})
    try:
        wait_for_port(port, process)
        yield port
    finally:
        stop(process)


def run_driver(script: str, *args: str, timeout: float = 30.0, env: dict[str, str] | None = None,
               node_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run the driver `tests/js/SCRIPT ARGS…` to completion (`node NODE_ARGS SCRIPT …`, `env` added to the
    environment); the JSON object of its last line of output."""
    done = subprocess.run([node(), *node_args, str(JS / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=JS, env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{script} {args} exited {done.returncode}:\n{done.stderr[-3000:]}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing:\n{done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    return result
