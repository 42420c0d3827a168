"""Real protocol servers for the wire end-to-end tests, all in one process (one asyncio loop, one uvicorn
server per port), built with the official SDKs:

- `--mcp-http PORT`: MCPServer over Streamable HTTP (stateful, SSE answers), tools `add`, `ask` (asks the client
  for a sampling/createMessage and logs with notifications/message) and `announce` (sends
  notifications/tools/list_changed, which travels on the GET stream);
- `--mcp-sse PORT`: the same MCPServer over the legacy HTTP+SSE transport;
- `--mcp-resumable PORT`: the same server over Streamable HTTP with an event store, so every SSE stream opens
  with an MCP 2025-11-25 priming event (an event ID and empty data);
- `--a2a-v1 PORT` / `--a2a-v03 PORT`: a2a-sdk agents whose card advertises JSON-RPC 1.0 / 0.3 (the 0.3 one
  also serves the legacy card path `/.well-known/agent.json`); text starting with `msg` is answered with a
  Message, anything else with a Task (working → artifact → completed);
- `--a2a-rest-v1 PORT` / `--a2a-rest-v03 PORT`: the same agents over the HTTP+JSON/REST binding (1.0 routes
  at the root, 0.3 routes under `/v1`);
- `--ag-ui PORT`: an AG-UI agent encoding `ag_ui.core` events with `EventEncoder` over SSE: POST `/agent`
  (one run with text and a tool call; `?encoding=gzip|br|zstd|deflate` compresses the stream, flushing after
  each event), POST `/ticks?count=N&interval=S&hold=S` (CUSTOM events carrying the send time, then the stream
  stays open `hold` seconds), GET/POST `/big?size=N` (a JSON body of about N bytes);
- `--replay PORT FILE…`: serves the responses of recorded mitmproxy flow files, byte for byte, to requests
  with the same method, path and body (body chunks sent separately), for the pass-through tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import brotli
import uvicorn
import zstandard
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventStore, StreamId
from mcp.types import JSONRPCMessage, SamplingMessage, TextContent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route


class PrimingEventStore(EventStore):
    """Event IDs for the SDK to send priming events with (MCP 2025-11-25 resumability); replays nothing."""

    def __init__(self) -> None:
        self.stored = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        self.stored += 1
        return f"{stream_id}-{self.stored}"

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        return None


def mcp_server() -> MCPServer:
    server = MCPServer("wire-test")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        """Ask the client's model (sampling) and report what it said."""
        await ctx.info(f"asking: {question}")
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
            max_tokens=16, related_request_id=ctx.request_id,
        )
        return f"model said: {result.content.text}"

    @server.tool()
    async def announce(ctx: Context) -> str:
        """Tell the client the tool list changed (on the standalone GET stream)."""
        await ctx.session.send_tool_list_changed()
        return "announced"

    return server


def a2a_app(port: int, version: str, binding: str = "JSONRPC") -> Starlette:
    from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            text = context.get_user_input()
            if text.startswith("msg"):
                await event_queue.enqueue_event(new_text_message(f"echo: {text}", context_id=context.context_id))
                return
            task = context.current_task or new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            await updater.add_artifact([new_text_part(f"artifact for {text}")], name="answer")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            """Nothing runs long enough to cancel."""

    card = AgentCard(
        name=f"wire-test-{version}", description="Echo agent for wire tests", version="1.0",
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding=binding,
                                             protocol_version=version)],
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes what it is told", tags=["test"])],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card)
    serve = create_rest_routes(handler, enable_v0_3_compat=True) if binding == "HTTP+JSON" else \
        create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
    routes = create_agent_card_routes(card) + serve
    if version == "0.3":
        routes += create_agent_card_routes(card, card_url="/.well-known/agent.json")
    return Starlette(routes=routes)


def _compressor(encoding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    """(compress one chunk so that the receiver can decode it at once, finish the stream)."""
    if encoding in ("gzip", "deflate"):
        zobj = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
        return lambda data: zobj.compress(data) + zobj.flush(zlib.Z_SYNC_FLUSH), zobj.flush
    if encoding == "br":
        bobj = brotli.Compressor()
        return lambda data: bobj.process(data) + bobj.flush(), bobj.finish
    if encoding == "zstd":
        zstd = zstandard.ZstdCompressor().compressobj()
        return (lambda data: zstd.compress(data) + zstd.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK),
                lambda: zstd.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
    return lambda data: data, lambda: b""


def ag_ui_app() -> Starlette:
    from ag_ui.core import (
        CustomEvent,
        EventType,
        RunAgentInput,
        RunFinishedEvent,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallStartEvent,
    )
    from ag_ui.encoder import EventEncoder

    encoder = EventEncoder()

    async def agent(request: Request) -> Response:
        run = RunAgentInput.model_validate(await request.json())
        encoding = request.query_params.get("encoding", "identity")
        compress, finish = _compressor(encoding)
        events = [
            RunStartedEvent(type=EventType.RUN_STARTED, thread_id=run.thread_id, run_id=run.run_id),
            TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, message_id="m1", role="assistant"),
            TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id="m1", delta="Hello"),
            TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id="m1", delta=" world"),
            TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id="m1"),
            ToolCallStartEvent(type=EventType.TOOL_CALL_START, tool_call_id="call-1", tool_call_name="transfer_funds"),
            ToolCallArgsEvent(type=EventType.TOOL_CALL_ARGS, tool_call_id="call-1", delta='{"amount": 100}'),
            ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id="call-1"),
            RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id=run.thread_id, run_id=run.run_id),
        ]

        async def stream() -> AsyncIterator[bytes]:
            for event in events:
                yield compress(encoder.encode(event).encode())
            yield finish()

        headers = {} if encoding == "identity" else {"content-encoding": encoding}
        return StreamingResponse(stream(), media_type=encoder.get_content_type(), headers=headers)

    async def ticks(request: Request) -> Response:
        count = int(request.query_params.get("count", "3"))
        interval = float(request.query_params.get("interval", "0.3"))
        hold = float(request.query_params.get("hold", "1"))

        async def stream() -> AsyncIterator[bytes]:
            for index in range(count):
                event = CustomEvent(type=EventType.CUSTOM, name="tick", value={"index": index, "sent": time.time()})
                yield encoder.encode(event).encode()
                await asyncio.sleep(interval)
            await asyncio.sleep(hold)

        return StreamingResponse(stream(), media_type=encoder.get_content_type())

    async def big(request: Request) -> Response:
        size = int(request.query_params.get("size", "1000"))
        return Response(b'{"pad": "' + b"x" * size + b'"}', media_type="application/json")

    return Starlette(routes=[Route("/agent", agent, methods=["POST"]), Route("/ticks", ticks, methods=["POST"]),
                             Route("/big", big, methods=["GET", "POST"])])


def replay_app(files: list[str]) -> Starlette:
    from mitmproxy import io

    recorded: dict[tuple[str, str, bytes], tuple[int, list[tuple[bytes, bytes]], bytes]] = {}
    for name in files:
        with open(name, "rb") as handle:
            for flow in io.FlowReader(handle).stream():
                if flow.response is None:
                    continue
                key = (flow.request.method, flow.request.path, flow.request.raw_content or b"")
                headers = [(k, v) for k, v in flow.response.headers.fields
                           if k.lower() not in (b"content-length", b"transfer-encoding", b"date", b"server")]
                recorded[key] = (flow.response.status_code, headers, flow.response.raw_content or b"")

    async def serve(scope: dict[str, Any], receive: Any, send: Any) -> None:  # raw ASGI: every header byte as recorded
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"] + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
        found = recorded.get((scope["method"], path, body))
        if found is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": json.dumps({"missing": path}).encode()})
            return
        status, headers, content = found
        await send({"type": "http.response.start", "status": status, "headers": headers})
        step = max(1, len(content) // 5)
        for start in range(0, len(content), step):  # several chunks, each flushed
            await send({"type": "http.response.body", "body": content[start:start + step], "more_body": True})
            await asyncio.sleep(0.005)
        await send({"type": "http.response.body", "body": b""})

    return serve  # type: ignore[return-value]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mcp-http", type=int)
    parser.add_argument("--mcp-sse", type=int)
    parser.add_argument("--mcp-resumable", type=int)
    parser.add_argument("--a2a-v1", type=int)
    parser.add_argument("--a2a-v03", type=int)
    parser.add_argument("--a2a-rest-v1", type=int)
    parser.add_argument("--a2a-rest-v03", type=int)
    parser.add_argument("--ag-ui", type=int)
    parser.add_argument("--replay", type=int)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    apps = []
    if args.mcp_http:
        apps.append((args.mcp_http, mcp_server().streamable_http_app()))
    if args.mcp_sse:
        apps.append((args.mcp_sse, mcp_server().sse_app()))
    if args.mcp_resumable:
        apps.append((args.mcp_resumable, mcp_server().streamable_http_app(event_store=PrimingEventStore())))
    if args.a2a_v1:
        apps.append((args.a2a_v1, a2a_app(args.a2a_v1, "1.0")))
    if args.a2a_v03:
        apps.append((args.a2a_v03, a2a_app(args.a2a_v03, "0.3")))
    if args.a2a_rest_v1:
        apps.append((args.a2a_rest_v1, a2a_app(args.a2a_rest_v1, "1.0", "HTTP+JSON")))
    if args.a2a_rest_v03:
        apps.append((args.a2a_rest_v03, a2a_app(args.a2a_rest_v03, "0.3", "HTTP+JSON")))
    if args.ag_ui:
        apps.append((args.ag_ui, ag_ui_app()))
    if args.replay:
        apps.append((args.replay, replay_app(args.files)))
    servers = [uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                             lifespan="on" if hasattr(app, "router") else "off"))
               for port, app in apps]
    await asyncio.gather(*(server.serve() for server in servers))


if __name__ == "__main__":
    asyncio.run(main())
