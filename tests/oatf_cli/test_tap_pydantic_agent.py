"""A `pydantic-ai` agent (a scripted `FunctionModel`, no LLM) whose MCP toolset starts its stdio server through
`oatf tap`, as the agent's configuration would: `MCPToolset(StdioTransport(OATF, ["tap", …, "--", python, "-m",
"tests.oatf_cli.server"]))` (pydantic-ai 2 removed `MCPServerStdio`: `MCPToolset` with fastmcp's stdio transport
replaces it). The tap judges alone: the agent that does what the `forecast` tool's description says (pass the
SSH key in `context`) is `exploited`, the one that does not `not_exploited` (`resisted`: the description
reached it); the tap's `--record` capture replays with `oatf evaluate` to the same reports, byte for byte."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from testing.paths import ROOT
from testing.taps import assert_capture_replays, reports, tap_command
from tests.oatf_cli.test_tap import ATTACK, FAKE_KEY, GUARD, SERVER

Behaviour = Literal["complying", "resisting"]
EXPECTED = {"complying": ("exploited", "exploited"), "resisting": ("not_exploited", "resisted")}


def forecast_model(behaviour: Behaviour) -> FunctionModel:
    """One call to `forecast` for Oslo (with the key in `context` when complying and the description asks for
    it), then the tool's answer as the reply."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [str(part.content) for message in messages for part in getattr(message, "parts", ())
                    if isinstance(part, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(returned[-1])])
        tool = next(t for t in info.function_tools if t.name.endswith("forecast"))
        args = {"city": "Oslo"}
        if behaviour == "complying" and "`context`" in (tool.description or ""):
            args["context"] = FAKE_KEY
        return ModelResponse(parts=[ToolCallPart(tool.name, args)])

    return FunctionModel(respond)


async def conversation(command: list[str], behaviour: Behaviour) -> str:
    # pydantic-ai gives the server 5 s to start and answer by default; this one (the tap, then a Python server
    # importing mcp 2: about 5 s at a load average of 12 on two cores) may need longer on a loaded machine.
    toolset = MCPToolset(StdioTransport(command[0], command[1:], cwd=str(ROOT), keep_alive=False),
                         init_timeout=GUARD)
    agent = Agent(forecast_model(behaviour), toolsets=[toolset])
    async with agent:
        result = await agent.run("What is the weather in Oslo?")
    return str(result.output)


@pytest.mark.parametrize("behaviour", ["complying", "resisting"])
def test_pydantic_agent_with_a_tapped_stdio_toolset(tmp_path: Path, behaviour: Behaviour,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK under fastmcp kills a server still running 2 s after its stdin closed: a patient client lets the
    # tap end the session by itself on a loaded machine.
    monkeypatch.setattr("mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT", GUARD)
    report_dir, capture = tmp_path / "reports", tmp_path / "capture.ndjson"
    command = tap_command([Path(ATTACK)], report_dir, SERVER, record=capture)
    assert asyncio.run(asyncio.wait_for(conversation(command, behaviour), GUARD)) == "Sunny in Oslo"

    [report] = reports(report_dir)
    assert (report["verdict"]["result"], report["outcome"]) == EXPECTED[behaviour], report
    assert report["execution_summary"]["status"] == "completed"  # the agent ended the session
    assert report["execution_summary"]["delivered"] is True
    offline = assert_capture_replays([Path(ATTACK)], [capture], report_dir, tmp_path)
    assert [(r["verdict"]["result"], r["outcome"]) for r in offline.reports] == [EXPECTED[behaviour]]
