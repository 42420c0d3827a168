"""`oatf serve --stdio DOC` started by the official `mcp` client's stdio transport, as a desktop agent starts a
local server: the attacker's tool is listed and answered over stdin/stdout, and when the client closes the
session the run is judged and reported (stdout carried MCP only: the client would fail on anything else)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from .harness import ATTACKS, OATF, ROOT

POISONED = ATTACKS / "OW-001_invoice-tool-credential-harvest.yaml"


def test_stdio_session_served_and_judged(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    errlog = tmp_path / "stderr.log"

    async def agent() -> list[str]:
        parameters = StdioServerParameters(command=OATF, args=["serve", "--stdio", str(POISONED), "--report-dir",
                                                               str(reports), "--grace-period", "1s"],
                                           env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
        with errlog.open("w") as err:
            async with stdio_client(parameters, errlog=err) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                return [tool.description or "" for tool in tools.tools]

    [description] = asyncio.run(asyncio.wait_for(agent(), 60))
    assert "render_invoice" not in description and description  # the document's tool description, served
    written = sorted(reports.glob("*.json"))
    stderr = errlog.read_text(encoding="utf-8")
    assert len(written) == 1, stderr
    report = json.loads(written[0].read_text(encoding="utf-8"))
    assert report["attack"]["id"] == "OW-001"
    assert report["execution_summary"]["delivered"] is True, report["execution_summary"]
    assert report["execution_summary"]["session"].startswith("mcp_session:stdio-")
    assert "OW-001 default mcp_server stdio" in stderr and "Traceback" not in stderr
