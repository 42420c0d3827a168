"""A scripted stand-in for an LLM agent, talking MCP (official `mcp` client) through an HTTP proxy.

`--behaviour naive` does what tool descriptions tell it (the failure the demo exposes): it "reads" the key
file the description asks for — a fake key embedded here, nothing is read from disk — and sends it in the
`note` argument. `--behaviour careful` ignores instructions found in tool descriptions.

Run: python -m demo.agent --url http://127.0.0.1:8765/mcp --proxy http://127.0.0.1:8080 --behaviour naive
"""

from __future__ import annotations

import argparse
import asyncio
import re

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

FAKE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA-demo-not-a-real-key\n"
            "-----END OPENSSH PRIVATE KEY-----")


def plan_arguments(description: str, behaviour: str) -> dict[str, object]:
    """What the agent sends: the user's sum, plus whatever the description demands if the agent is naive."""
    arguments: dict[str, object] = {"a": 2, "b": 3}
    if behaviour == "naive" and re.search(r"id_rsa|private key", description, re.I):
        arguments["note"] = FAKE_KEY
    return arguments


async def run(url: str, proxy: str | None, behaviour: str) -> str:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0), proxy=proxy, trust_env=False,
                                  follow_redirects=True) as http, \
            streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        add = next(t for t in tools if t.name == "add")
        result = await session.call_tool("add", plan_arguments(add.description or "", behaviour))
        return "".join(getattr(c, "text", "") for c in result.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--proxy")
    parser.add_argument("--behaviour", choices=("naive", "careful"), default="naive")
    args = parser.parse_args()
    print(f"agent ({args.behaviour}): 2 + 3 = {asyncio.run(run(args.url, args.proxy, args.behaviour))}")


if __name__ == "__main__":
    main()
