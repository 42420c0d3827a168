"""A real `mitmdump -s addon/oatf_addon.py` registers the content views and picks them automatically: with
`flow_detail=3` mitmdump prints each body through the automatically chosen view, so an MCP request sent through
it reads as the MCP view renders it (answered locally by the remote control, nothing is forwarded)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from testing.clients import http_client
from testing.command_script import CONTROL_HOST
from testing.oatf_proxy import oatf_proxy


def test_mitmdump_renders_mcp_with_the_mcp_view(addon_workdir: Path) -> None:
    with oatf_proxy(addon_workdir, "views", [], record=False) as proxy:
        proxy.command("set flow_detail 3")
        async def post() -> None:
            async with http_client(proxy.url) as client:
                await client.post(f"http://{CONTROL_HOST}/mcp",
                                  json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"})

        asyncio.run(post())
        log = proxy.wait_for_log(lambda text: "request tools/list · id 7 (client → server)" in text)
    assert "# MCP request (client → server) · POST /mcp" in log
