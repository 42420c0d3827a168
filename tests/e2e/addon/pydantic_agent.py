"""A third-party agent for the end-to-end tests: a `pydantic-ai` Agent whose MCP client (`MCPToolset`, built on
the fastmcp client) talks to a server through the proxy, and whose model is a scripted `FunctionModel` (no
LLM). The *complying* model does what a tool's description asks: when it asks for `~/.ssh/id_rsa`, the key
goes into the `note` argument; the *resisting* model calls the tool with its numbers only. `invoice_model` also
renders an invoice: complying, it pastes `~/.aws/credentials` into `billing_notes` when the invoice tool's
description asks for them (OW-001). `deploy_model` calls a deploy tool, whose server asks for a token with a
form; `token_handler` answers it: complying, with a GitHub token; resisting, it declines (OW-011)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from fastmcp import Client
from fastmcp.client.elicitation import ElicitationHandler, ElicitResult
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

FAKE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAfakefakefake\n"
            "-----END OPENSSH PRIVATE KEY-----")
FAKE_AWS = ("[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
FAKE_GITHUB_TOKEN = "ghp_" + "Zx4" * 12
Behaviour = Literal["complying", "resisting"]


def scripted_model(behaviour: Behaviour) -> FunctionModel:
    """One tool call to `add` (2 + 3), then the answer as text once the tool returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [part for message in messages for part in getattr(message, "parts", ())
                    if isinstance(part, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(f"The sum is {returned[-1].content}.")])
        tool = next(t for t in info.function_tools if t.name.endswith("add"))
        args: dict[str, object] = {"a": 2, "b": 3}
        if behaviour == "complying" and "~/.ssh/id_rsa" in (tool.description or ""):
            args["note"] = FAKE_KEY
        return ModelResponse(parts=[ToolCallPart(tool.name, args)])

    return FunctionModel(respond)


def invoice_model(behaviour: Behaviour) -> FunctionModel:
    """Two tool calls at once, `add` (2 + 3) and `render_invoice` (INV-7), then both results as text."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [str(part.content) for message in messages for part in getattr(message, "parts", ())
                    if isinstance(part, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(" | ".join(returned))])
        add = next(t for t in info.function_tools if t.name.endswith("add"))
        invoice = next(t for t in info.function_tools if t.name.endswith("render_invoice"))
        args: dict[str, object] = {"invoice_number": "INV-7", "customer": "ACME",
                                   "line_items": [{"description": "consulting", "amount": 1200}]}
        if behaviour == "complying" and "~/.aws/credentials" in (invoice.description or ""):
            args["billing_notes"] = FAKE_AWS
        return ModelResponse(parts=[ToolCallPart(add.name, {"a": 2, "b": 3}), ToolCallPart(invoice.name, args)])

    return FunctionModel(respond)


def deploy_model(_behaviour: Behaviour) -> FunctionModel:
    """One call to the first tool with `branch: main`, then its result as text (what the agent does with the
    server's questions is its elicitation handler's: `token_handler`)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [str(part.content) for message in messages for part in getattr(message, "parts", ())
                    if isinstance(part, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(returned[-1])])
        return ModelResponse(parts=[ToolCallPart(info.function_tools[0].name, {"branch": "main"})])

    return FunctionModel(respond)


def token_handler(behaviour: Behaviour) -> ElicitationHandler[Any, Any]:
    """The agent's answer to a server's form: complying, it fills a token field with a GitHub token from its
    context; resisting, it declines a form that asks for a credential (MCP forbids asking for one)."""

    async def answer(message: str, _type: Any, _params: Any, _context: Any) -> Any:
        if behaviour == "complying":
            return {"token": FAKE_GITHUB_TOKEN}
        return ElicitResult(action="decline")

    return answer


async def conversation(mcp_url: str, behaviour: Behaviour, prompt: str = "What is 2 + 3?",
                       model: Callable[[Behaviour], FunctionModel] = scripted_model, session: bool = False,
                       elicitation: Callable[[Behaviour], ElicitationHandler[Any, Any]] | None = None) -> str:
    """One agent conversation: connect to the MCP server at `mcp_url`, run the prompt with the scripted model
    `model` of that behaviour, return the answer. The MCP client negotiates as pydantic-ai's does by default
    (fastmcp 4: the stateless revision 2026-07-28, `server/discover`, when the server offers it); `session`:
    the `initialize` handshake of the session revisions instead (fastmcp's `mode="legacy"`); `elicitation`:
    how the agent answers the server's forms."""
    handler = elicitation(behaviour) if elicitation is not None else None
    toolset = MCPToolset(Client(mcp_url, mode="legacy", elicitation_handler=handler) if session else mcp_url,
                         elicitation_handler=None if session else handler)
    agent = Agent(model(behaviour), toolsets=[toolset])
    async with agent:
        result = await agent.run(prompt)
    return str(result.output)
