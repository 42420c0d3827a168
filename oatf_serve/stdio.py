"""`oatf serve --stdio DOC`: one document's `mcp_server` actor over MCP's stdio transport (the `mcp` SDK's
`stdio_server`), so that a desktop agent can start the attacker as it starts any local MCP server
(`"command": "oatf", "args": ["serve", "--stdio", "DOC"]`). stdout carries MCP only: the endpoint line and
every note go to stderr.

The messages pass between the SDK's stdio streams and the server through `_tapped`, which hands each one (as
JSON text, the sender named) to the `Judge` on the decoder's message-stream API (`open_stream` /
`stream_message`, as `oatf tap` does): the session is one run, `mcp_session:stdio-<pid>`. The session ends
with stdin (the agent closed it) or with SIGINT/SIGTERM; then the runs are concluded and summarized as
`oatf serve` does over HTTP.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from oatf_engine.events import Endpoint, ObservedEvent
from oatf_engine.wire import WireDecoder

from .judge import Judge
from .mcp_server import ActorServer

TICK_SECONDS = 0.5
KEY = 0
"""The judge's key for the one document served."""


def _opened(decoder: WireDecoder, session: str) -> list[ObservedEvent]:
    decoder.open_stream(session, Endpoint("stdio", 0, "/"), session, {"mcp_session": session})
    return []


async def _tapped(source: ObjectReceiveStream[Any], sink: ObjectSendStream[Any], judge: Judge, session: str,
                  sender: str) -> None:
    """Forward `source` to `sink`, handing each message to the judge as `sender`'s."""
    async with sink:
        async for item in source:
            if isinstance(item, SessionMessage):
                text = item.message.model_dump_json(by_alias=True, exclude_none=True)
                judge.put(KEY, judge.decoder.stream_message, session, text, sender, time.time())
            await sink.send(item)


async def serve_stdio(server: ActorServer, judge: Judge, say: Callable[[str], None]) -> None:
    """Serve one MCP session on stdin/stdout until stdin ends (see the module docstring)."""
    session = f"stdio-{os.getpid()}"
    judge.put(KEY, _opened, judge.decoder, session)
    to_server, server_reads = anyio.create_memory_object_stream[Any](0)
    server_writes, from_server = anyio.create_memory_object_stream[Any](0)
    async with stdio_server() as (agent_reads, agent_writes), anyio.create_task_group() as tasks:
        tasks.start_soon(_tapped, agent_reads, to_server, judge, session, "client")
        tasks.start_soon(_tapped, from_server, agent_writes, judge, session, "server")
        tasks.start_soon(_tick, server)
        await server.run(server_reads, server_writes, server.create_initialization_options())
        say("the agent closed stdin: the session is over")
        tasks.cancel_scope.cancel()


async def _tick(server: ActorServer) -> None:
    while True:
        await anyio.sleep(TICK_SECONDS)
        await server.tick()
