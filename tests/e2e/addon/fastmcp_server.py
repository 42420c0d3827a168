"""A third-party MCP server for the end-to-end tests: `fastmcp` (not the team's code, not the official SDK's
server) serving one calculator tool over streamable HTTP on 127.0.0.1, whose description is taken verbatim
from an OATF document's first tool (`attack.execution.state.tools[0].description`); without a document, an
honest calculator with an honest `pay_supplier` tool (for inject mode, where the proxy brings the attack).
`--slow SECONDS`: the tool answers that much later, and its answer repeats the note it was given (a tool
whose answer carries the evidence).

    python tests/e2e/addon/fastmcp_server.py PORT [ATTACK.yaml] [--stateless] [--json] [--slow SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from fastmcp import FastMCP
from ruamel.yaml import YAML

HONEST = "Adds two numbers."


def tool_description(attack: Path) -> str:
    document = YAML(typ="safe").load(attack.read_text(encoding="utf-8"))
    return str(document["attack"]["execution"]["state"]["tools"][0]["description"])


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
    args = parser.parse_args()
    description = tool_description(args.attack) if args.attack is not None else HONEST
    server = build(description, honest=args.attack is None, slow=args.slow)
    server.run(transport="http", host="127.0.0.1", port=args.port, path="/mcp", stateless_http=args.stateless,
               json_response=args.json, show_banner=False)


if __name__ == "__main__":
    main()
