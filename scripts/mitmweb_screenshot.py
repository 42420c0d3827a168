"""Regenerates the README's mitmweb screenshot (`docs/mitmweb.png`): the demo attack session (demo/: the poisoned
calculator server, a naive and a careful scripted agent) through a real mitmweb running the OATF addon, then
headless Chromium (Debian's `chromium`, and `fonts-noto-color-emoji` for the marks: `apt-get install -y
chromium fonts-noto-color-emoji`) photographing mitmweb with the naive
agent's poisoned `tools/list` answer open in the MCP content view, the flow list showing each flow's OATF mark
and comment (the comment column on); and (`…-match.png`) its matched `tools/call`, whose MCP view starts with the
indicator that matched.

Run: .venv/bin/python scripts/mitmweb_screenshot.py [--out docs/mitmweb.png]
Not part of the test command; loopback only."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.mitmweb import Mitmweb, mitmweb  # noqa: E402
from testing.processes import PYTHON, _start, free_port, stop, wait_for_port  # noqa: E402

ATTACK = ROOT / "examples" / "calculator-exfiltration.yaml"
COLUMNS = ("icon", "path", "method", "status", "comment")
"""mitmweb's flow list columns in the picture (`web_columns`): the comment column shows the verdicts."""
SIZE = (1900, 1000)


def agent(url: str, proxy: str, behaviour: str) -> None:
    subprocess.run([str(PYTHON), "-m", "demo.agent", "--url", url, "--proxy", proxy, "--behaviour", behaviour],
                   cwd=ROOT, check=True, timeout=60)


def exploited(web: Mitmweb, method: str, timeout: float = 30.0) -> str:
    """The id of the naive session's flow of `method`, once its run concluded exploited (marked 🔴)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for flow in web.flows():
            if flow["marked"] == "🔴" and f'"{method}"' in web.content(flow["id"], "request", "raw")["text"]:
                return str(flow["id"])
        time.sleep(0.2)
    raise SystemExit(f"no exploited {method} flow in mitmweb (see its log)")


def screenshot(url: str, out: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium not found: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="oatf-chromium-") as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={SIZE[0]},{SIZE[1]}",
                        "--virtual-time-budget=8000", f"--screenshot={out}", url],
                       check=True, timeout=120, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "mitmweb.png")
    out = parser.parse_args().out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="oatf-screenshot-") as work:
        workdir = Path(work)
        port = free_port()
        server = _start([str(PYTHON), "-m", "demo.server", "--port", str(port)], workdir / "server.log")
        try:
            wait_for_port(port, server)
            columns = tuple(arg for column in COLUMNS for arg in ("--set", f"web_columns={column}"))
            with mitmweb(workdir, [ATTACK], extra=columns) as web:
                for behaviour in ("naive", "careful"):
                    agent(f"http://127.0.0.1:{port}/mcp", web.proxy_url, behaviour)
                listing, call = exploited(web, "tools/list"), exploited(web, "tools/call")
                time.sleep(2.0)  # the careful agent's run concludes too
                screenshot(web.ui(f"#/flows/{listing}/response"), out)
                screenshot(web.ui(f"#/flows/{call}/request"), out.with_name(f"{out.stem}-match{out.suffix}"))
        finally:
            stop(server)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
