"""The `mitmproxy` console with the addon, run for real under a pseudo-terminal: its log is its own event log,
gone with its UI, so the summary table must reach the terminal after the console has given it back."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import struct
import termios
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from testing.processes import PYTHON, ROOT, free_port

from .attacks import TOOL_POISONING

SESSION = "console-session-" + "0123456789" * 8
LEAVE_ALTERNATE_SCREEN = "\x1b[?1049l"
COLUMNS = 100


class McpServer(BaseHTTPRequestHandler):
    """Answers every POST with a JSON-RPC result, in the MCP session `SESSION`."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        body = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("mcp-session-id", SESSION)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def mcp_server() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), McpServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


class Terminal:
    """A process on a pseudo-terminal of `COLUMNS` columns; everything it wrote is in `output`."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the console
            os.chdir(cwd)
            os.environ["TERM"] = "xterm"
            os.execv(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))
        self.output = bytearray()

    def read(self, seconds: float) -> bool:
        """Read for `seconds`; False once the terminal is closed (the process ended)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return False
                if not data:
                    return False
                self.output.extend(data)
        return True

    def read_until(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.output:
            assert time.monotonic() < deadline and self.read(0.2), self.output.decode(errors="replace")[-2000:]

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.read(0.2):
            assert time.monotonic() < deadline, "the console did not exit"
        return os.waitpid(self.pid, 0)[1]


def console_with_a_match(tmp_path: Path) -> Terminal:
    """The console with the addon (reports in `tmp_path/reports`), once a `tools/call` carrying the key has
    passed through it (answered in the MCP session `SESSION`)."""
    port = free_port()
    console = Terminal([str(PYTHON.parent / "mitmproxy"), "-p", str(port), "-s", str(ROOT / "addon" / "oatf_addon.py"),
                        "--set", f"oatf_attacks={TOOL_POISONING}", "--set", f"oatf_report_dir={tmp_path / 'reports'}",
                        "--set", "oatf_grace_period=60s", "--set", f"confdir={tmp_path / 'confdir'}"], tmp_path)
    try:
        console.read_until("Flows", timeout=30)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "add", "arguments": {"a": 1, "b": 2, "note": "-----BEGIN OPENSSH PRIVATE KEY-----"}}}
        proxy = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{port}"}))
        with mcp_server() as server:
            request = urllib.request.Request(f"http://127.0.0.1:{server}/mcp", json.dumps(call).encode(),
                                             {"content-type": "application/json", "mcp-session-id": SESSION})
            with proxy.open(request, timeout=10) as answer:
                assert answer.status == 200
    except BaseException:
        kill(console)
        raise
    return console


def kill(console: Terminal) -> None:
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        os.kill(console.pid, 9)
        os.waitpid(console.pid, 0)


def test_the_summary_table_reaches_the_terminal_after_the_console_exits(tmp_path: Path) -> None:
    """An exploited run still open when the user quits (q, y): once the console has left its alternate screen,
    the terminal gets the summary table — its session key whole, wrapped to the terminal's width — the totals
    line and where the reports are."""
    reports = tmp_path / "reports"
    console = console_with_a_match(tmp_path)
    try:
        console.read(1.0)
        console.type("q")
        console.read(0.5)
        console.type("y")
        assert console.wait(timeout=30) == 0
    finally:
        kill(console)
    output = console.output.decode(errors="replace")
    assert LEAVE_ALTERNATE_SCREEN in output
    after = output[output.rindex(LEAVE_ALTERNATE_SCREEN):].replace("\r", "").split("\n")
    start = next(n for n, line in enumerate(after) if line.endswith("oatf verdicts:"))
    header, row, *rest = after[start + 1:]
    assert header.split()[:3] == ["ATTACK", "SESSION", "OUTCOME"]
    assert row.split()[0] == "DEMO-001" and "exploited" in row.split()
    assert max(len(line) for line in after[start + 1:]) <= COLUMNS
    column = header.index("SESSION")
    pieces = [row[column:].split()[0], *(line.strip() for line in rest if line.startswith(" " * column))]
    assert "".join(pieces) == f"mcp_session:{SESSION}"
    assert f"oatf reports in {reports.resolve()}" in after
    assert "1 run(s): 1 exploited, 0 partial, 0 resisted, 0 inconclusive, 0 not delivered, 0 error" in after


def test_oatf_flow_at_focus_shows_the_flows_runs_in_the_console(tmp_path: Path) -> None:
    """In the console, `:oatf.flow @focus` on the matched flow: its data viewer lists the decoded messages and
    the run with the indicator that matched, one a row."""
    console = console_with_a_match(tmp_path)
    try:
        console.read(1.5)  # the match is marked on the flow
        console.type(":")
        console.read(0.3)
        console.type("oatf.flow @focus\r")
        console.read_until("1 OATF run(s) took part in this flow:", timeout=10)
        console.read_until("indicator DEMO-001-01 matched at arguments.note", timeout=5)
        console.read_until("request tools/call · id 1 (client → server)", timeout=5)
    finally:
        kill(console)
