"""Every `mcp_server` document of `attacks/` served by one `oatf serve` and explored by the official `mcp`
client until its phases have run: each run the engine reports is `delivered` (the payload reached the client).

The explorer is a curious agent, not a victim: each round it lists tools, resources, templates and prompts,
calls every tool with arguments shaped by its `inputSchema`, subscribes to and reads every resource and gets
every prompt; it answers elicitations by declining. Documents are served from copies whose `after` timers
are cut to one second (OW-014 waits 15 minutes to arm); nothing else is changed.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .harness import ATTACKS, Report, Serving, explore_library, first_run

DOCUMENTS = sorted(p for p in ATTACKS.glob("OW-*.yaml") if "mode: mcp_server" in p.read_text(encoding="utf-8"))
ROUNDS = 12
"""Rounds of exploration: OW-013's trigger wants ten calls."""
_AFTER = re.compile(r"(\bafter:\s*)\S+")


def sample(schema: Any) -> Any:
    """A value of a JSON Schema's type (the first of a union), for a tool's arguments."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: sample(sub) for name, sub in (schema.get("properties") or {}).items()}
    if isinstance(schema, dict) and schema.get("enum"):
        return schema["enum"][0]
    return {"integer": 1, "number": 1, "boolean": True, "array": []}.get(kind or "", "x")


async def _quietly(call: Any) -> Any:
    try:
        return await call
    except MCPError:
        return None


async def explore(url: str) -> None:
    async def decline(_context: Any, _params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with streamable_http_client(url) as (read, write), \
            ClientSession(read, write, elicitation_callback=decline) as session:
        await session.initialize()
        for _ in range(ROUNDS):
            tools = await _quietly(session.list_tools())
            resources = await _quietly(session.list_resources())
            await _quietly(session.list_resource_templates())
            prompts = await _quietly(session.list_prompts())
            for tool in tools.tools if tools else ():
                await _quietly(session.call_tool(tool.name, sample(tool.input_schema)))
            for resource in resources.resources if resources else ():
                await _quietly(session.subscribe_resource(resource.uri))
                await _quietly(session.read_resource(resource.uri))
            for prompt in prompts.prompts if prompts else ():
                await _quietly(session.get_prompt(prompt.name, {a.name: "x" for a in prompt.arguments or ()}))
            await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def explored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Serving, list[Report]]:
    """The library served, each document explored by its own session, then the server stopped."""
    copies = tmp_path_factory.mktemp("documents")
    for document in DOCUMENTS:
        (copies / document.name).write_text(_AFTER.sub(r"\g<1>1s", document.read_text(encoding="utf-8")),
                                            encoding="utf-8")
    return explore_library(tmp_path_factory.mktemp("reports"), sorted(copies.iterdir()), "mcp_server", explore,
                           "--grace-period", "5s")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name[:6])
def test_served_document_is_delivered(document: Path, explored: tuple[Serving, list[Report]]) -> None:
    run = first_run(*explored, document.name[:6], "mcp_server")
    assert run["execution_summary"]["delivered"] is True, run["execution_summary"]
