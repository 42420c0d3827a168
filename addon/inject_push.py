"""Pushing into a response stream while its server sends nothing (inject mode's notifications on MCP's standalone
GET stream, `addon.inject`).

mitmproxy runs a response's stream function only when the server sends a chunk. To send at once, inject mode
hands the flow's HTTP stream a response chunk of its own, the `PUSH` marker (`addon.sse_frames`), the way
mitmproxy's `inject.websocket` command hands a WebSocket flow a message: an event (`MessageInjected`) given
to the flow's connection handler (`proxyserver`), which mitmproxy's HTTP layer routes to the flow's stream;
being a `ResponseData` too, the stream passes its data to the response's stream function, whose output goes
to the client (and to the tap after it, which decodes it, and to the recording), as if the server had sent it.
The stream function (`sse_frames.EventRewriter`) turns the marker into the events waiting for the agent,
placed between the server's whole events.

mitmproxy's HTTP layer finds the stream of such an event through the server connection's HTTP/1 layer (as
for WebSocket): a flow over HTTP/2 or HTTP/3, or through an upstream proxy, is not pushed into (`pushable`),
and its notifications wait for the next SSE answer. Whether the stream still runs is checked when the event
is delivered, on the event loop, right before mitmproxy handles it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mitmproxy import ctx, http
from mitmproxy.proxy.events import MessageInjected
from mitmproxy.proxy.layers.http import ResponseData
from mitmproxy.utils import asyncio_utils

from .sse_frames import PUSH


@dataclass
class _Push(MessageInjected[None], ResponseData):
    """A response chunk handed to a flow's HTTP stream (see the module docstring)."""


def pushable(flow: http.HTTPFlow) -> bool:
    """Whether `flow`'s response is still streaming to the client over HTTP/1, straight from its server."""
    response = flow.response
    return (flow.live and flow.error is None and response is not None and response.timestamp_end is None
            and flow.server_conn.timestamp_end is None and flow.server_conn.via is None
            and flow.request.http_version.startswith("HTTP/1") and response.http_version.startswith("HTTP/1"))


def push(flow: http.HTTPFlow, ended: Callable[[], None]) -> bool:
    """Have mitmproxy run `flow`'s response stream function with the `PUSH` chunk, soon, on the event loop (see
    the module docstring); False when it cannot; `ended` is called if the stream has ended by then."""
    proxyserver = ctx.master.addons.get("proxyserver")
    handler = getattr(proxyserver, "connections", {}).get(flow.client_conn.id)
    if handler is None or not pushable(flow):
        return False
    event = _Push(stream_id=0, data=PUSH, flow=flow, message=None)

    async def deliver() -> None:
        if pushable(flow):
            await handler.server_event(event)
        else:
            ended()

    asyncio_utils.create_task(deliver(), name="oatf inject push", keep_ref=True)
    return True
