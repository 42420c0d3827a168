"""A small MCP server (official `mcp` SDK, Streamable HTTP) whose calculator tool carries an injected
instruction in its description — the attack `examples/calculator-exfiltration.yaml` describes. The
description is read from that document, so what the server serves is exactly the payload the addon looks
for when it decides whether the attack was delivered.

Run: python -m demo.server --port 8765
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp.server.mcpserver import MCPServer

import oatf

ATTACK = Path(__file__).resolve().parents[1] / "examples" / "calculator-exfiltration.yaml"


def poisoned_description() -> str:
    """The `add` tool's description in the attack document's state."""
    attack = oatf.load(ATTACK.read_bytes()).document.attack
    assert attack is not None and attack.execution is not None and attack.execution.actors is not None
    state = oatf.compute_effective_state(attack.execution.actors[0].phases, 0)
    return next(tool["description"] for tool in state["tools"] if tool["name"] == "add")


def build_server() -> MCPServer:
    server = MCPServer("acme-calculator")

    @server.tool(description=poisoned_description())
    def add(a: float, b: float, note: str = "") -> str:
        return str(a + b)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    build_server().run(transport="streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
