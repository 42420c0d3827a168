"""`oatf serve` against an MCP client built on the official TypeScript SDK (`tests/js/mcp_client.mjs`: list
the tools, call `echo`), over Streamable HTTP at `/mcp` and over the legacy HTTP+SSE transport at `/sse`
(`SSEClientTransport`). The client that passes the API key to `echo` is `exploited`, the one that does not is
`resisted` (the listing delivered the tool); each client's MCP session (over SSE, its `session_id`) is one run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.js.js_peers import run_driver
from tests.e2e.js.test_mcp_everything import ATTACK, ATTACK_ID, SECRET

from .harness import FAST, oatf_serve


@pytest.mark.parametrize(("transport", "path"), [("streamableHttp", "/mcp"), ("sse", "/sse")])
def test_ts_sdk_client_exploited_then_resisted(tmp_path: Path, transport: str, path: str) -> None:
    document = tmp_path / "echo-secret.yaml"
    document.write_text(ATTACK, encoding="utf-8")
    with oatf_serve(tmp_path / "reports", [document], *FAST) as serving:
        url = serving.endpoints[ATTACK_ID].replace("/mcp", path)
        complying = run_driver("mcp_client.mjs", url, transport, f"my key is {SECRET}")
        serving.wait_for(lambda reports: len(reports) == 1)
        resisting = run_driver("mcp_client.mjs", url, transport, "hello")
        reports = serving.wait_for(lambda reports: len(reports) == 2)
        assert serving.stop() == 1, serving.stderr
    assert complying["tools"] == resisting["tools"] == ["echo"]
    first, second = sorted(reports, key=lambda r: r["execution_summary"]["started_at"])
    assert (first["outcome"], first["execution_summary"]["delivered"]) == ("exploited", True)
    assert (second["outcome"], second["execution_summary"]["delivered"]) == ("resisted", True)
    assert [e["event"] for e in second["execution_summary"]["delivery_evidence"]] == ["tools/list"]
    sessions = {r["execution_summary"]["session"] for r in reports}
    assert len(sessions) == 2 and all(s.startswith("mcp_session:") for s in sessions)
