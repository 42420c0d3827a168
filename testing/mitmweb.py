"""mitmweb running the OATF addon, and its own HTTP API — what mitmweb's browser UI reads — for the end-to-end
tests and the screenshot script (`scripts/mitmweb_screenshot.py`): the flow list (marks, comments), a message
rendered by a content view, and commands run as the command bar runs them (`POST /commands/NAME`, with the
UI's XSRF cookie). Loopback only; the UI is protected by a random `web_password` the caller gets."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from testing.oatf_proxy import ADDON
from testing.processes import PYTHON, _start, free_port, stop, wait_for_port

MITMWEB = PYTHON.parent / "mitmweb"
XSRF_COOKIE = "_mitmproxy_xsrf"


@dataclass
class Mitmweb:
    """A running mitmweb with the addon: the proxy at `proxy_url`, the UI at `web_url` (`token` opens it)."""

    proxy_port: int
    web_port: int
    token: str
    report_dir: Path
    log: Path

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def ui(self, fragment: str = "") -> str:
        """The browser address of the UI (`#/flows/ID/response`…), the token in it."""
        return f"{self.web_url}/?token={self.token}{fragment}"

    @contextlib.contextmanager
    def _client(self) -> Iterator[httpx.Client]:
        """A client of the UI: the token as a bearer, and the XSRF cookie a POST echoes in a header (Tornado's
        double-submit check: any value the two agree on; the browser gets one from the UI's WebSocket)."""
        xsrf = secrets.token_hex(16)
        with httpx.Client(base_url=self.web_url, trust_env=False, timeout=30.0, cookies={XSRF_COOKIE: xsrf},
                          headers={"Authorization": f"Bearer {self.token}", "X-XSRFToken": xsrf}) as client:
            yield client

    def flows(self) -> list[dict[str, Any]]:
        """The flow list as the UI gets it (`GET /flows`): id, request, response, marked (the emoji), comment."""
        with self._client() as client:
            response = client.get("/flows")
            response.raise_for_status()
            flows: list[dict[str, Any]] = response.json()
            return flows

    def content(self, flow_id: str, message: str, view: str = "auto") -> dict[str, Any]:
        """A message (`request`/`response`) of a flow rendered by a content view (`auto`: the one mitmweb picks),
        as the UI shows it: {text, view_name, …}."""
        with self._client() as client:
            response = client.get(f"/flows/{flow_id}/{message}/content/{view}.json")
            response.raise_for_status()
            rendered: dict[str, Any] = response.json()
            return rendered

    def command(self, name: str, *arguments: str) -> Any:
        """A command run as mitmweb's command bar runs it; its value (an error raises)."""
        with self._client() as client:
            response = client.post(f"/commands/{name}", json={"arguments": list(arguments)})
            response.raise_for_status()
            answer: dict[str, Any] = response.json()
        if "error" in answer:
            raise RuntimeError(f"{name}: {answer['error']}")
        return answer["value"]


@contextlib.contextmanager
def mitmweb(workdir: Path, attacks: list[Path], *, grace: str = "1s", options: dict[str, str] | None = None,
            flows: Path | None = None, extra: tuple[str, ...] = ()) -> Iterator[Mitmweb]:
    """mitmweb + the addon on free loopback ports (recording to `flows` when given; `extra` arguments added),
    until the block ends (SIGINT: the addon concludes every run)."""
    proxy_port, web_port, token = free_port(), free_port(), secrets.token_hex(16)
    report_dir = workdir / "mitmweb-reports"
    settings = {"oatf_attacks": ",".join(map(str, attacks)), "oatf_report_dir": str(report_dir),
                "oatf_grace_period": grace, "oatf_watch": "false", "web_password": token,
                "connection_strategy": "lazy", **(options or {})}
    args = [str(MITMWEB), "--no-web-open-browser", "--web-host", "127.0.0.1", "--web-port", str(web_port),
            "--listen-host", "127.0.0.1", "--listen-port", str(proxy_port), "-s", str(ADDON)]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    if flows is not None:
        args += ["-w", str(flows)]
    args += extra
    log = workdir / "mitmweb.log"
    process = _start(args, log)
    try:
        wait_for_port(web_port, process)
        wait_for_port(proxy_port, process)
        yield Mitmweb(proxy_port, web_port, token, report_dir, log)
    finally:
        stop(process)
