"""The main job: a poisoned MCP server, mitmdump with the OATF addon in front of it, and two scripted agents
(one naive, one careful) using the server through the proxy; then the verdict table and the report paths.

Everything runs on 127.0.0.1 with free ports; no network, no API keys. Run: scripts/demo.sh
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oatf_engine.reports import summary_table

ROOT = Path(__file__).resolve().parents[1]
ATTACK = ROOT / "examples" / "calculator-exfiltration.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"demo: {what} exited early (status {process.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"demo: {what} did not start listening on port {port} within {timeout:.0f}s")


def main() -> int:
    bin_dir = Path(sys.executable).parent
    server_port, proxy_port = free_port(), free_port()
    reports = Path(tempfile.mkdtemp(prefix="oatf-demo-reports-"))
    print(f"== demo MCP server with a poisoned `add` tool on 127.0.0.1:{server_port}")
    server = subprocess.Popen([sys.executable, "-m", "demo.server", "--port", str(server_port)], cwd=ROOT)
    print(f"== mitmdump + OATF addon on 127.0.0.1:{proxy_port}, attack {ATTACK.relative_to(ROOT)}")
    proxy_log = reports / "mitmdump.log"
    proxy = subprocess.Popen(
        [str(bin_dir / "mitmdump"), "--listen-host", "127.0.0.1", "-p", str(proxy_port), "-q",
         "-s", str(ROOT / "addon" / "oatf_addon.py"), "--set", f"oatf_attacks={ATTACK}",
         "--set", f"oatf_report_dir={reports}", "--set", "oatf_grace_period=1s",
         "--set", "oatf_session_key=auto"],
        cwd=ROOT, stdout=proxy_log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_for_port(server_port, server, "the demo server")
        wait_for_port(proxy_port, proxy, "mitmdump")
        for behaviour in ("naive", "careful"):
            print(f"== agent ({behaviour}) asks for 2 + 3 through the proxy")
            subprocess.run([sys.executable, "-m", "demo.agent", "--url", f"http://127.0.0.1:{server_port}/mcp",
                            "--proxy", f"http://127.0.0.1:{proxy_port}", "--behaviour", behaviour],
                           cwd=ROOT, check=True, timeout=60)
        print("== waiting for the grace period, then stopping the proxy (SIGINT)")
        time.sleep(2.5)
    finally:
        proxy.send_signal(signal.SIGINT)
        try:
            proxy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proxy.kill()
        server.terminate()
        server.wait(timeout=10)
    lines = (reports / "verdicts.jsonl").read_text().splitlines() if (reports / "verdicts.jsonl").exists() else []
    results = [json.loads(line) for line in lines]
    print()
    print(summary_table(results) if results else "no verdict was produced (see the proxy log)")
    print()
    for path in sorted(reports.glob("*.json")):
        print(f"report: {path}")
    print(f"proxy log: {proxy_log}")
    exploited = any(r["verdict"]["result"] == "exploited" for r in results)
    resisted = any(r["verdict"]["result"] == "not_exploited" for r in results)
    return 0 if exploited and resisted else 1


if __name__ == "__main__":

    sys.exit(main())
