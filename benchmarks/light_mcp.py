"""A light MCP client and a minimal MCP server over Streamable HTTP, for benchmarks where the proxy, not the peers,
should be the bottleneck (issue 15: "light client").

- `light_calls(url, proxy, calls)`: one MCP session over one keep-alive HTTP/1.1 connection, through an HTTP proxy
  (absolute-form request targets, as any client configured with a proxy sends them) or directly: `initialize`,
  `notifications/initialized`, `calls` `tools/call`s (`add`) one after the other from requests built beforehand,
  then the session's `DELETE`. No SDK, no validation: a few microseconds per call of client CPU. Answers may be
  JSON or SSE (FastMCP answers a POST with a chunked SSE stream), read until the end of their body.
- `python benchmarks/light_mcp.py PORT`: a minimal stateful MCP server (Streamable HTTP, JSON answers with a
  `Content-Length`, an `Mcp-Session-Id` from `initialize`), answering each request at once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2025-06-18"

Message = tuple[bytes, dict[bytes, bytes], bytes]
"""An HTTP/1.1 message read: its start line, its headers (lower-case names) and its body (de-chunked)."""


async def read_message(reader: asyncio.StreamReader) -> Message:
    """One HTTP/1.1 message: its body by `Content-Length` or chunked transfer coding (a request without
    either has none)."""
    head = await reader.readuntil(b"\r\n\r\n")
    start, *lines = head[:-4].split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
    elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append((await reader.readexactly(size + 2))[:-2])
        await reader.readuntil(b"\r\n")  # the last chunk's CRLF (no trailers are sent here)
        body = b"".join(parts)
    else:
        body = b""
    return start, headers, body


def _request(method: str, target: str, host: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers.items()),
             f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _jsonrpc(message: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode()


async def light_calls(url: str, proxy: str | None, calls: int) -> list[float]:
    """Latency of each of `calls` sequential `tools/call`s over one MCP session and one connection."""
    parts = urlsplit(url)
    via = urlsplit(proxy) if proxy else parts
    target = url if proxy else parts.path
    reader, writer = await asyncio.open_connection(via.hostname, via.port)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    async def exchange(request: bytes) -> Message:
        writer.write(request)
        status, answer_headers, body = await read_message(reader)
        if not status.split(b" ")[1].startswith(b"2"):
            raise RuntimeError(f"{status.decode()}: {body[:300]!r}")
        return status, answer_headers, body

    try:
        _, answer, _ = await exchange(_request("POST", target, parts.netloc, headers, _jsonrpc(
            {"id": 0, "method": "initialize", "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                                          "clientInfo": {"name": "light", "version": "1"}}})))
        headers |= {"Mcp-Session-Id": answer[b"mcp-session-id"].decode(), "Mcp-Protocol-Version": PROTOCOL_VERSION}
        await exchange(_request("POST", target, parts.netloc, headers,
                                _jsonrpc({"method": "notifications/initialized"})))
        requests = [_request("POST", target, parts.netloc, headers, _jsonrpc(
            {"id": i + 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": i, "b": 1}}}))
            for i in range(calls)]
        latencies = []
        for i, request in enumerate(requests):
            start = time.perf_counter()
            _, _, body = await exchange(request)
            latencies.append(time.perf_counter() - start)
            if f'"id":{i + 1},'.encode() not in body.replace(b" ", b""):
                raise RuntimeError(f"not the answer to tools/call {i + 1}: {body[:300]!r}")
        await exchange(_request("DELETE", target, parts.netloc, headers))
        return latencies
    finally:
        writer.close()


async def serve(port: int) -> None:
    """The minimal MCP server (see the module docstring) on 127.0.0.1:`port`, until killed."""
    sessions = itertools.count(1)
    init = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {}},
            "serverInfo": {"name": "minimal", "version": "1"}}

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                start, _, body = await read_message(reader)
                extra = b""
                if start.startswith(b"DELETE"):
                    status, payload = b"200 OK", b""
                elif "id" not in (message := json.loads(body)):
                    status, payload = b"202 Accepted", b""
                else:
                    if message["method"] == "initialize":
                        result: object = init
                        extra = b"Mcp-Session-Id: %d\r\n" % next(sessions)
                    elif message["method"] == "tools/call":
                        arguments = message["params"]["arguments"]
                        result = {"content": [{"type": "text", "text": str(arguments["a"] + arguments["b"])}],
                                  "isError": False}
                    else:
                        result = {}
                    status, payload = b"200 OK", _jsonrpc({"id": message["id"], "result": result})
                writer.write(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
                             % (status, extra, len(payload), payload))
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
