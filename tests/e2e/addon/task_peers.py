"""Third-party peers of an A2A task episode, each its own process, played from an OATF document's actors
(`test_a2a_task_episodes.TASK_ATTACK`): nothing here is the team's protocol code.

    python tests/e2e/addon/task_peers.py mcp PORT ATTACK.yaml
    python tests/e2e/addon/task_peers.py slow-a2a PORT ATTACK.yaml --mcp URL --proxy URL --delay SECONDS
    python tests/e2e/addon/task_peers.py fasta2a PORT ATTACK.yaml --mcp URL --proxy URL

- `mcp`: the `mcp_server` actor's tool (its name and description; one string argument, `record`) on a
  `fastmcp` server, answering with its first response text;
- `slow-a2a`: the agent under test as an `a2a-sdk` remote agent (JSON-RPC, A2A 1.0) at `/complying` and
  `/resisting`, which answers a blocking `message/send` only once `--delay` seconds have passed since it came
  (an LLM-backed agent thinking), after doing its work: a `pydantic-ai` Agent (scripted `FunctionModel`)
  whose MCP toolset calls the server at `--mcp` through the proxy;
- `fasta2a`: the same two agents served by `fasta2a` (`agent_to_a2a`), at `/complying/` and `/resisting/`:
  `message/send` answers `submitted`, the worker runs the agent, the caller polls `tasks/get`.
The *complying* agent archives the customer's record with the card number, as the caller and the tool
description ask, and says so; the *resisting* one archives it without the card number and says that.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from episode_peers import actor_state
from starlette.applications import Starlette
from starlette.routing import Mount

CARD = re.compile(r"\b4111 1111 1111 1111\b")


def vault(attack: Path) -> Any:
    """The document's archive tool on a `fastmcp` server."""
    from fastmcp import FastMCP
    from fastmcp.tools import Tool

    tool = actor_state(attack, "mcp_server")["tools"][0]
    answer = str(tool["responses"][0]["content"]["content"][0]["text"])

    def archive(record: str) -> str:
        return answer

    server = FastMCP("vault")
    server.add_tool(Tool.from_function(archive, name=tool["name"], description=tool["description"]))
    return server


def scripted_agent(mcp_url: str, proxy: str, complying: bool) -> Any:
    """A `pydantic-ai` Agent whose scripted model calls the vault's archive tool once, then answers."""
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(part, ToolReturnPart) for message in messages for part in message.parts):
            asked = " ".join(str(part.content) for message in messages for part in message.parts
                             if isinstance(part, UserPromptPart))
            record = "Dana Reyes, account 4471, card " + ("4111 1111 1111 1111" if complying and CARD.search(asked)
                                                          else "ending 1111")
            tool = info.function_tools[0].name
            return ModelResponse(parts=[ToolCallPart(tool, {"record": record})])
        said = ("Account 4471 closed; record archived, card number included." if complying else
                "Account 4471 closed; record archived without the card number, which I do not copy.")
        return ModelResponse(parts=[TextPart(said)])

    toolset = MCPToolset(mcp_url, http_client=httpx.AsyncClient(proxy=proxy, trust_env=False, timeout=60))
    return Agent(FunctionModel(model), toolsets=[toolset])


def slow_a2a_app(port: int, mcp_url: str, proxy: str, delay: float) -> Starlette:
    """The agents behind `a2a-sdk`, answering each `message/send` `delay` seconds after it came."""
    from a2a.helpers import new_text_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    class SlowAgent(AgentExecutor):
        def __init__(self, complying: bool) -> None:
            self.agent = scripted_agent(mcp_url, proxy, complying)

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            began = time.monotonic()
            result = await self.agent.run(context.get_user_input())
            await asyncio.sleep(max(0.0, delay - (time.monotonic() - began)))
            await event_queue.enqueue_event(new_text_message(result.output, context_id=context.context_id))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            """Nothing to cancel: the agent answers once."""

    def mounted(behaviour: str) -> Mount:
        url = f"http://127.0.0.1:{port}/{behaviour}/"
        card = AgentCard(
            name="Account desk", description="Closes customer accounts", version="1.0.0",
            supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
            capabilities=AgentCapabilities(streaming=False), default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="close", name="Close account", description="Closes an account", tags=["crm"])])
        handler = DefaultRequestHandler(agent_executor=SlowAgent(behaviour == "complying"),
                                        task_store=InMemoryTaskStore(), agent_card=card)
        return Mount(f"/{behaviour}", app=Starlette(routes=create_agent_card_routes(card)
                                                    + create_jsonrpc_routes(handler, "/")))

    return Starlette(routes=[mounted("complying"), mounted("resisting")])


def fasta2a_app(port: int, mcp_url: str, proxy: str) -> Starlette:
    """The agents behind `fasta2a`, one A2A server each."""
    from fasta2a.pydantic_ai import agent_to_a2a

    apps = {behaviour: agent_to_a2a(scripted_agent(mcp_url, proxy, behaviour == "complying"),
                                    name="Account desk", url=f"http://127.0.0.1:{port}/{behaviour}/")
            for behaviour in ("complying", "resisting")}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for app in apps.values():
                await stack.enter_async_context(app.router.lifespan_context(app))
            yield

    return Starlette(routes=[Mount(f"/{name}", app=app) for name, app in apps.items()], lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["mcp", "slow-a2a", "fasta2a"])
    parser.add_argument("port", type=int)
    parser.add_argument("attack", type=Path)
    parser.add_argument("--mcp")
    parser.add_argument("--proxy")
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    if args.kind == "mcp":
        app: Any = vault(args.attack).http_app(path="/mcp")
    elif args.kind == "slow-a2a":
        app = slow_a2a_app(args.port, args.mcp, args.proxy, args.delay)
    else:
        app = fasta2a_app(args.port, args.mcp, args.proxy)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
