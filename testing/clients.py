"""Client sessions for the wire end-to-end tests, each with the official SDK (or httpx for AG-UI), through an
explicit HTTP proxy when `proxy` is given. Each returns what the client saw, for assertions."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import GetTaskRequest, Role, SendMessageRequest
from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

TIMEOUT = httpx.Timeout(10.0)


def http_client(proxy: str | None, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client that ignores proxy environment variables and uses `proxy` when given."""
    return httpx.AsyncClient(proxy=proxy, trust_env=False, timeout=kwargs.pop("timeout", TIMEOUT), **kwargs)


def mcp_http_client(proxy: str | None, session_ids: list[str] | None = None, **kwargs: Any) -> httpx2.AsyncClient:
    """`http_client` for the `mcp` SDK's transports, which take `httpx2` clients (mcp 2); the `Mcp-Session-Id`
    the server assigns is appended to `session_ids` (the SDK's transport no longer reports it)."""

    async def assigned(response: httpx2.Response) -> None:
        session = response.headers.get("mcp-session-id")
        if session_ids is not None and session and session not in session_ids:
            session_ids.append(session)

    return httpx2.AsyncClient(proxy=proxy, trust_env=False, timeout=kwargs.pop("timeout", httpx2.Timeout(10.0)),
                              event_hooks={"response": [assigned]}, **kwargs)


class StreamedBodies(httpx2.AsyncBaseTransport):
    """Sends every request body as a client that streams it does: chunked (`Transfer-Encoding`, no
    `Content-Length`), a few bytes at a time, through `inner`."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        if not body:
            return await self.inner.handle_async_request(request)

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 64):
                yield body[start:start + 64]

        headers = [(name, value) for name, value in request.headers.raw if name.lower() != b"content-length"]
        streamed = httpx2.Request(request.method, request.url, headers=headers, content=chunks(),
                                  extensions=request.extensions)
        return await self.inner.handle_async_request(streamed)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _sampling(_context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", model="test-model",
                                     content=types.TextContent(type="text", text="forty-two"))


async def _mcp_session(session: ClientSession, announce: bool) -> list[str]:
    await session.initialize()
    tools = await session.list_tools()
    seen = [tool.name for tool in tools.tools]
    added = await session.call_tool("add", {"a": 2, "b": 3})
    seen.append(added.content[0].text)  # type: ignore[union-attr]
    asked = await session.call_tool("ask", {"question": "meaning of life?"})
    seen.append(asked.content[0].text)  # type: ignore[union-attr]
    if announce:
        announced = await session.call_tool("announce", {})
        seen.append(announced.content[0].text)  # type: ignore[union-attr]
    return seen


async def mcp_streamable(url: str, proxy: str | None, changed: list[str] | None = None,
                         stream_bodies: bool = False) -> list[str]:
    """initialize, tools/list, tools/call add, tools/call ask (sampling + log), tools/call announce
    (list_changed on the GET stream, recorded in `changed` when the client receives it); `stream_bodies`: every
    request body streamed (`StreamedBodies`)."""
    transport = {"transport": StreamedBodies(httpx2.AsyncHTTPTransport(proxy=proxy))} if stream_bodies else {}

    async def on_message(message: Any) -> None:
        if changed is not None and isinstance(message, types.ServerNotification):
            changed.append(message.method)

    async with mcp_http_client(None if stream_bodies else proxy, timeout=httpx2.Timeout(10.0, read=30.0),
                               **transport) as client, \
            streamable_http_client(url, http_client=client) as (read, write), \
            ClientSession(read, write, sampling_callback=_sampling, message_handler=on_message) as session:
        seen = await _mcp_session(session, announce=True)
        for _ in range(100):  # the GET stream's notification races the tools/call answer: wait for it
            if changed is None or "notifications/tools/list_changed" in changed:
                break
            await asyncio.sleep(0.05)
        return seen


async def mcp_legacy_sse(url: str, proxy: str | None) -> list[str]:
    """The same session (without announce) over the legacy HTTP+SSE transport."""

    def factory(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        return mcp_http_client(proxy, headers=headers, timeout=timeout or httpx2.Timeout(10.0), auth=auth)

    async with sse_client(url, httpx_client_factory=factory) as (read, write), \
            ClientSession(read, write, sampling_callback=_sampling) as session:
        return await _mcp_session(session, announce=False)


async def a2a_session(url: str, proxy: str | None, binding: str = "JSONRPC") -> list[str]:
    """Card fetch, then message/send ("msg …" → Message, "task …" → Task) blocking and streaming, then
    tasks/get of the streamed task, over `binding` (`JSONRPC` or `HTTP+JSON`). Returns the texts the client saw."""
    seen: list[str] = []
    task_id = ""
    async with http_client(proxy) as client:
        for streaming in (False, True):
            factory = ClientFactory(ClientConfig(httpx_client=client, streaming=streaming,
                                                 supported_protocol_bindings=[binding]))
            agent = await factory.create_from_url(url)
            for text in ("msg hello", "task hello"):
                request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))
                async for response in agent.send_message(request):
                    if response.HasField("task"):
                        task_id = response.task.id
                        seen.append(f"task:{response.task.status.state}")
                    elif response.HasField("message"):
                        seen.append(f"message:{response.message.parts[0].text}")
                    elif response.HasField("status_update"):
                        seen.append(f"status:{response.status_update.status.state}")
                    elif response.HasField("artifact_update"):
                        seen.append(f"artifact:{response.artifact_update.artifact.parts[0].text}")
        task = await agent.get_task(GetTaskRequest(id=task_id))
        seen.append(f"get:{task.status.state}")
    return seen


def run_agent_input(text: str = "Send 100 to Bob") -> dict[str, Any]:
    """A RunAgentInput body."""
    return {"threadId": "thread-1", "runId": f"run-{uuid.uuid4().hex[:8]}", "state": {},
            "messages": [{"id": "u1", "role": "user", "content": text}], "tools": [], "context": [],
            "forwardedProps": {}}


def tool_result_input(run: dict[str, Any], call_id: str = "call-1", result: str = "transferred") -> dict[str, Any]:
    """The next RunAgentInput of `run`'s thread, answering the agent's tool call `call_id` with `result`."""
    call = {"id": call_id, "type": "function", "function": {"name": "transfer_funds", "arguments": '{"amount": 100}'}}
    messages = [*run["messages"], {"id": "a1", "role": "assistant", "toolCalls": [call]},
                {"id": "t1", "role": "tool", "toolCallId": call_id, "content": result}]
    return {**run, "runId": f"{run['runId']}-2", "messages": messages}


async def ag_ui_run(url: str, proxy: str | None, body: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """POST a RunAgentInput and read the SSE answer (httpx decodes any content coding)."""
    events = []
    async with http_client(proxy) as client, \
            client.stream("POST", url, json=body or run_agent_input(),
                          headers={"accept": "text/event-stream"}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


async def ag_ui_tick_latencies(url: str, proxy: str | None) -> tuple[list[float], float]:
    """Receive CUSTOM tick events that carry their send time: (latency of each, seconds until the stream
    ended after the first tick arrived)."""
    latencies = []
    first = 0.0
    async with http_client(proxy) as client, \
            client.stream("POST", url, json=run_agent_input(), headers={"accept": "text/event-stream"}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                now = time.time()
                first = first or now
                latencies.append(now - json.loads(line[6:])["value"]["sent"])
    return latencies, time.time() - first


async def raw_exchange(method: str, url: str, proxy: str | None, body: bytes = b"",
                       headers: dict[str, str] | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request; the response's status, headers and raw (still content-encoded) body bytes."""
    async with http_client(proxy) as client, \
            client.stream(method, url, content=body, headers=headers or {}) as response:
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
        return response.status_code, list(response.headers.multi_items()), raw
