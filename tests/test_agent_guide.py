"""The README's "Testing your own agent" worked example, run as written: the demo's poisoned MCP server, mitmdump
with the addon in regular and reverse mode, the pydantic-ai agent through the proxy by `HTTP_PROXY` and over
HTTPS trusting mitmproxy's CA by `SSL_CERT_FILE`, Ctrl-C, and the verdicts read with `jq`. Only the ports (free
ones), the report directory and `HOME` (a fresh `~/.mitmproxy`) are substituted."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testing.paths import ROOT

PORTS = ("8000", "8080", "8443")
"""The ports the guide uses: the server's, the regular proxy's, the reverse proxy's."""


def guide_blocks() -> list[str]:
    """The shell blocks of the README's "Testing your own agent" section, in order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Testing your own agent\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def commands(block: str) -> list[str]:
    """A block's commands: comment lines dropped, `\\` continuations joined."""
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes],
               timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"{what} exited early"
        assert time.monotonic() < deadline, f"{what}: not ready after {timeout}s"
        time.sleep(0.1)


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def guide(tmp_path: Path) -> Iterator[tuple[list[str], dict[str, str], dict[str, int]]]:
    """The guide's blocks with free ports and a report directory under `tmp_path`, and the environment
    (the project's venv first on PATH, HOME in `tmp_path`)."""
    ports = {port: free_port() for port in PORTS}
    blocks = []
    for block in guide_blocks():
        for port, free in ports.items():
            block = re.sub(rf"\b{port}\b", str(free), block)
        blocks.append(block.replace("reports", str(tmp_path / "reports")))
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for proxy_variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                           "SSL_CERT_FILE", "NO_PROXY", "no_proxy"):
        env.pop(proxy_variable, None)
    yield blocks, env, ports


def start(command: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A command of its own terminal: a process group of its own, output to `log`."""
    return subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=ROOT, env=env, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_the_worked_example_runs_as_documented(guide: tuple[list[str], dict[str, str], dict[str, int]],
                                               tmp_path: Path) -> None:
    blocks, env, ports = guide
    assert len(blocks) == 4, "server, proxy, agent and verdict blocks"
    [server_command], [proxy_command], agent_commands, [verdicts_command] = map(commands, blocks)
    assert "python -m demo.server" in server_command and "mitmdump" in proxy_command
    assert any("HTTP_PROXY=" in c for c in agent_commands) and any("SSL_CERT_FILE=" in c for c in agent_commands)
    server = start(server_command, env, tmp_path / "server.log")
    proxy = start(proxy_command, env, tmp_path / "proxy.log")
    try:
        wait_until(lambda: listening(ports["8000"]), "the MCP server", server)
        wait_until(lambda: all(listening(ports[p]) for p in ("8080", "8443"))
                   and "attack(s) loaded" in (tmp_path / "proxy.log").read_text(errors="replace"), "mitmdump", proxy)
        for command in agent_commands:
            done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            assert done.stdout.strip() == "2 + 3 = 5.0"
        # Without trusting mitmproxy's CA, the HTTPS step fails: the CA is what the guide's HTTPS part is about.
        untrusted = next(c for c in agent_commands if "SSL_CERT_FILE=" in c).split(" ", 1)[1]
        refused = subprocess.run(["bash", "-c", untrusted], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=120)
        assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stdout + refused.stderr
        # As the guide says: Ctrl-C once the proxy has logged both runs' verdicts (a grace period after each agent's
        # last message; a run still open at Ctrl-C is reported `interrupted`, `inconclusive`).
        wait_until(lambda: (tmp_path / "proxy.log").read_text(errors="replace").count(" (completed) -> ") >= 2,
                   "both runs' verdicts in the proxy's log", proxy)
        stop(proxy, signal.SIGINT)  # Ctrl-C in its terminal
        assert proxy.returncode == 0, (tmp_path / "proxy.log").read_text(errors="replace")[-3000:]
    finally:
        stop(proxy)
        stop(server)
    done = subprocess.run(["bash", "-c", verdicts_command], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    rows = sorted(tuple(line.split("\t")[:2]) for line in done.stdout.splitlines())
    assert rows == [("DEMO-001", "exploited"), ("DEMO-001", "resisted")], (  # the proxy's log, to tell why not
        f"{done.stdout}\n{(tmp_path / 'proxy.log').read_text(errors='replace')[-6000:]}")
