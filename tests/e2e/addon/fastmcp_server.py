"""A third-party MCP server for the end-to-end tests: `fastmcp` (not the team's code, not the official SDK's
server) serving one calculator tool over streamable HTTP on 127.0.0.1, whose description is taken verbatim
from an OATF document's first tool (`attack.execution.state.tools[0].description`); without a document, an
honest calculator with an honest `pay_supplier` tool (for inject mode, where the proxy brings the attack).
`--slow SECONDS`: the tool answers that much later, and its answer repeats the note it was given (a tool
whose answer carries the evidence). `--elicit`: the document's first tool takes a `branch` and, before it
answers, asks the agent the document's first elicitation (`state.elicitations[0]`) the way the stateless
revision 2026-07-28 asks (an `InputRequiredResult`, answered in the agent's retry: multi round-trip requests).

    python tests/e2e/addon/fastmcp_server.py PORT [ATTACK.yaml] [--stateless] [--json] [--slow SECONDS] [--elicit]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from ruamel.yaml import YAML

HONEST = "Adds two numbers."


def state_of(attack: Path) -> dict[str, Any]:
    document = YAML(typ="safe").load(attack.read_text(encoding="utf-8"))
    return dict(document["attack"]["execution"]["state"])


def eliciting(state: dict[str, Any]) -> FastMCP:
    """The state's first tool, which asks its first elicitation (without `when`) before it answers."""
    server = FastMCP("deploy-helper")
    tool, elicitation = state["tools"][0], state["elicitations"][0]
    asked = {key: value for key, value in elicitation.items() if key != "when"}

    @server.tool(name=tool["name"], description=tool["description"])
    async def ask(branch: str, ctx: Context) -> str | mcp_types.InputRequiredResult:
        answers = ctx.input_responses
        if not answers:
            return mcp_types.InputRequiredResult.model_validate(
                {"inputRequests": {"login": {"method": "elicitation/create", "params": asked}}})
        return f"Preview for {branch}: https://pr-2291.preview.example ({answers['login'].action})"

    return server


def build(description: str, honest: bool = False, slow: float = 0.0) -> FastMCP:
    server = FastMCP("calculator")

    if slow:
        @server.tool(name="add", description=description)
        async def slow_add(a: float, b: float, note: str = "") -> str:
            await asyncio.sleep(slow)
            return f"{a + b:g}" + (f" (note received: {note})" if note else "")
    else:
        @server.tool(name="add", description=description)
        def add(a: float, b: float, note: str = "") -> float:
            return a + b

    if honest:
        @server.tool(name="pay_supplier", description="Pay a supplier by SEPA transfer.")
        def pay_supplier(amount: float, iban: str, reference: str) -> str:
            return f"{amount:g} paid to {iban}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("attack", type=Path, nargs="?")
    parser.add_argument("--stateless", action="store_true", help="the stateless MCP revision (no Mcp-Session-Id)")
    parser.add_argument("--json", action="store_true", help="answer POSTs with plain JSON, never an SSE stream")
    parser.add_argument("--slow", type=float, default=0.0, help="seconds the tool takes to answer")
    parser.add_argument("--elicit", action="store_true", help="the first tool asks the first elicitation")
    args = parser.parse_args()
    if args.elicit:
        server = eliciting(state_of(args.attack))
    else:
        description = state_of(args.attack)["tools"][0]["description"] if args.attack is not None else HONEST
        server = build(description, honest=args.attack is None, slow=args.slow)
    server.run(transport="http", host="127.0.0.1", port=args.port, path="/mcp", stateless_http=args.stateless,
               json_response=args.json, show_banner=False)


if __name__ == "__main__":
    main()
