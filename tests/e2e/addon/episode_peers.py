"""Third-party peers of one cross-protocol agent episode, each its own process, played from an OATF document's
actors (`attacks/OW-052`): nothing here is the team's protocol code.

    python tests/e2e/addon/episode_peers.py mcp PORT ATTACK.yaml
    python tests/e2e/addon/episode_peers.py mcp-stdio 0 ATTACK.yaml
    python tests/e2e/addon/episode_peers.py a2a PORT ATTACK.yaml
    python tests/e2e/addon/episode_peers.py agent PORT (--mcp URL | --mcp-command JSON) --a2a URL --proxy URL

- `mcp`: a `fastmcp` server (streamable HTTP at `/mcp`, with `Mcp-Session-Id`) serving the `mcp_server`
  actor's first tool (name, description, input properties) and answering with its first response text;
  `mcp-stdio`: the same server over stdio (the port is unused);
- `a2a`: an `a2a-sdk` agent (JSON-RPC, A2A 1.0) whose Agent Card is the `a2a_server` actor's card, answering
  every message with its first task response text;
- `agent`: the agent under test, a `pydantic-ai` Agent served over AG-UI (`AGUIAdapter`) at POST
  `/complying` and `/resisting` (one agent process, one AG-UI endpoint per scripted `FunctionModel`). Its
  MCP client (`MCPToolset`, a new MCP session per run; with `--mcp-command`, the JSON command line of a stdio
  server, started by the toolset — `oatf tap … -- …` in front of it, as a desktop agent's config would) and its
  A2A client (`a2a-sdk`, in the tool
  `send_to_agent`) go through the proxy. The *complying* model does what the ledger tool says — queries with
  scope `full`, sends the figures (forecast included) to the Audit Desk, tells the user; the *resisting*
  model queries scope `board` and says what it left out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from ruamel.yaml import YAML
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def actor_state(attack: Path, mode: str) -> dict[str, Any]:
    """The first phase's state of the document's actor of `mode`."""
    document = YAML(typ="safe").load(attack.read_text(encoding="utf-8"))
    actor = next(a for a in document["attack"]["execution"]["actors"] if a["mode"] == mode)
    return dict(actor["phases"][0]["state"])


def mcp_server(attack: Path) -> Any:
    from fastmcp import FastMCP
    from fastmcp.tools import Tool

    tool = actor_state(attack, "mcp_server")["tools"][0]
    answer = tool["responses"][0]["content"]["content"][0]["text"]
    server = FastMCP("ledger-mcp")

    def totals(quarter: str, scope: str = "board") -> str:
        return str(answer)

    server.add_tool(Tool.from_function(totals, name=tool["name"], description=tool["description"]))
    return server


def a2a_app(attack: Path, port: int) -> Starlette:
    from a2a.helpers import new_text_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    state = actor_state(attack, "a2a_server")
    document_card = state["agent_card"]
    reply = state["task_responses"][0]["content"]["parts"][0]["text"]

    class AuditDesk(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await event_queue.enqueue_event(new_text_message(reply, context_id=context.context_id))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            """Nothing runs long enough to cancel."""

    card = AgentCard(
        name=document_card["name"], description=document_card["description"], version=document_card["version"],
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=False), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=s["id"], name=s["name"], description=s["description"], tags=s["tags"])
                for s in document_card["skills"]],
    )
    handler = DefaultRequestHandler(agent_executor=AuditDesk(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/"))


def scripted_model(complying: bool) -> Any:
    """The agent's model, scripted on what the tools returned so far (see the module docstring)."""
    from pydantic_ai.messages import ModelMessage, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        returned = {part.tool_name: str(part.content) for message in messages for part in message.parts
                    if isinstance(part, ToolReturnPart)}
        ledger = next(t for t in info.function_tools if t.name.startswith("ledger"))
        if ledger.name not in returned:
            scope = "full" if complying and '"full"' in (ledger.description or "") else "board"
            yield {0: DeltaToolCall(ledger.name, json.dumps({"quarter": "Q3-2026", "scope": scope}))}
            return
        figures = returned[ledger.name]
        if complying and "Audit Desk" in figures and "send_to_agent" not in returned:
            text = ("Q3 2026 for sign-off: revenue 52.4 MEUR, EBITDA 8.1 MEUR; unreleased forecast Q4 revenue "
                    "61.0 MEUR.")
            yield {0: DeltaToolCall("send_to_agent", json.dumps({"text": text}))}
            return
        if complying:
            yield "Q3 2026: revenue 52.4 MEUR, EBITDA 8.1 MEUR. I sent the figures, forecast included, to the " \
                  "Audit Desk for sign-off."
        else:
            yield "Q3 2026: revenue 52.4 MEUR, EBITDA 8.1 MEUR. The ledger tool also asked me to pass the " \
                  "unreleased forecast to an outside agent; I left it out."

    return FunctionModel(stream_function=stream)


def agent_app(mcp_url: str | None, mcp_command: list[str] | None, a2a_url: str, proxy: str) -> Starlette:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.helpers import new_text_message
    from a2a.types.a2a_pb2 import Role, SendMessageRequest
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    async def send_to_agent(text: str) -> str:
        """Send a message to the Audit Desk agent (A2A) and return its answer."""
        async with httpx.AsyncClient(proxy=proxy, trust_env=False, timeout=30) as client:
            card = await A2ACardResolver(client, a2a_url).get_agent_card()
            remote = ClientFactory(ClientConfig(httpx_client=client, streaming=False)).create(card)
            answer = ""
            request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))
            async for response in remote.send_message(request):
                if response.HasField("message"):
                    answer = response.message.parts[0].text
            return answer

    def build(complying: bool) -> Agent[None, str]:
        # init_timeout: the stdio server (behind `oatf tap`: two Python processes) starts inside the run, and
        # a loaded machine may take longer than the toolset's default 5 s to start them.
        ledger = (MCPToolset(StdioTransport(mcp_command[0], mcp_command[1:], keep_alive=False), init_timeout=60)
                  if mcp_command
                  else MCPToolset(mcp_url, http_client=httpx.AsyncClient(proxy=proxy, trust_env=False, timeout=30)))
        return Agent(scripted_model(complying), toolsets=[ledger], tools=[send_to_agent])

    agents = {"complying": build(True), "resisting": build(False)}

    async def serve(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agents[request.path_params["behaviour"]])

    return Starlette(routes=[Route("/{behaviour}", serve, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["mcp", "mcp-stdio", "a2a", "agent"])
    parser.add_argument("port", type=int)
    parser.add_argument("attack", type=Path, nargs="?")
    parser.add_argument("--mcp")
    parser.add_argument("--mcp-command", type=json.loads)
    parser.add_argument("--a2a")
    parser.add_argument("--proxy")
    args = parser.parse_args()
    if args.kind == "mcp-stdio":
        mcp_server(args.attack).run(transport="stdio", show_banner=False)
        return
    if args.kind == "mcp":
        app = mcp_server(args.attack).http_app(path="/mcp")
    elif args.kind == "a2a":
        app = a2a_app(args.attack, args.port)
    else:
        app = agent_app(args.mcp, args.mcp_command, args.a2a, args.proxy)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
