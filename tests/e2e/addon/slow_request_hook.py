"""A mitmproxy script, loaded before the OATF addon, whose `request` hook holds every MCP `tools/call` for
`DELAY_SECONDS`: mitmproxy has stamped the request when it read it, and the addon's own `request` hook (which
decodes and queues it) runs that much later — as behind an interception, a slow script or a busy event loop."""

from __future__ import annotations

import asyncio

from mitmproxy import http

DELAY_SECONDS = 4.0


async def request(flow: http.HTTPFlow) -> None:
    if b'"tools/call"' in (flow.request.raw_content or b""):
        await asyncio.sleep(DELAY_SECONDS)
