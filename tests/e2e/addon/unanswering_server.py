"""An MCP server (Streamable HTTP, JSON-RPC over POST) that leaves tool calls unanswered, for the end-to-end tests
of exchanges that end without their answer (`tests/e2e/addon/test_unanswered_exchanges.py`):

    python tests/e2e/addon/unanswering_server.py PORT

`initialize` (a session id per client), `notifications/initialized` and `tools/list` are answered as MCP says;
`tools/call` by the tool's name:
- `drop`: an SSE stream with a progress notification, then closed without the JSON-RPC response;
- `fail`: `502 Bad Gateway`, a text body, no JSON-RPC;
- `reset`: an SSE stream with a progress notification, then the connection is broken mid-stream;
- anything else: its result.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

_SESSIONS = itertools.count(1)
TOOLS = [{"name": name, "description": "Reads a file", "inputSchema": {"type": "object"}}
         for name in ("drop", "fail", "reset", "read")]


def _progress(message: dict[str, Any]) -> bytes:
    note = {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": message["id"], "progress": 1}}
    return f"event: message\ndata: {json.dumps(note)}\n\n".encode()


async def mcp(request: Request) -> Response:
    message = await request.json()
    method, session = message.get("method"), request.headers.get("mcp-session-id", "")
    if method == "initialize":
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "unanswering", "version": "1"}}},
            headers={"mcp-session-id": f"s-{next(_SESSIONS)}"})
    if "id" not in message:
        return Response(status_code=202)
    if method == "tools/list":
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS}},
                            headers={"mcp-session-id": session})
    tool = message.get("params", {}).get("name")
    if tool == "fail":
        return PlainTextResponse("Bad Gateway", status_code=502)
    if tool in ("drop", "reset"):
        async def stream() -> AsyncIterator[bytes]:
            yield _progress(message)
            if tool == "reset":
                raise ConnectionResetError("the tool's backend went away")  # uvicorn breaks the connection

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"mcp-session-id": session})
    return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": {
        "content": [{"type": "text", "text": "read"}]}}, headers={"mcp-session-id": session})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
