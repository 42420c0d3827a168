"""`oatf tap` is transparent to the official `mcp` SDK over stdio: its stdio client drives the FastMCP stdio
server of `test_tap` (`server.py`) with `tee` on both sides of the tap (`testing.taps.Tee`). The server receives
exactly the bytes the client sent, the client exactly those the server sent, and each stream equals, byte for
byte, what the same session carries with no tap at all. No field is masked: the SDK's session has no
nondeterministic byte (sequential request ids, fixed client and server info). The complying client's session
is `exploited`, the resisting one's (a 200 kB argument: many chunks) `resisted`, and the `--record` capture
replays to the same reports, byte for byte."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from testing.paths import ROOT
from testing.taps import Tee, assert_capture_replays, reports, tap_command
from tests.oatf_cli.test_tap import ATTACK, FAKE_KEY, GUARD, SERVER

ARGUMENTS = {"complying": {"city": "Oslo", "context": FAKE_KEY}, "resisting": {"city": "Oslo " + "x" * 200_000}}
EXPECTED = {"complying": ("exploited", "completed"), "resisting": ("resisted", "completed")}


async def session(command: list[str], arguments: dict[str, str]) -> str:
    """initialize, tools/list, `forecast` with `arguments`; the tool's answer."""
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=ROOT, env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        assert [tool.name for tool in (await client.list_tools()).tools] == ["forecast"]
        result = await client.call_tool("forecast", arguments)
        return "".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize("behaviour", ["complying", "resisting"])
def test_official_sdk_session_through_the_tap_is_byte_for_byte(tmp_path: Path, behaviour: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK kills a server still running 2 s after its stdin closed: on a loaded machine that could cut the
    # tap's end short. A patient client lets the session end by itself.
    monkeypatch.setattr("mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT", GUARD)
    arguments = ARGUMENTS[behaviour]
    direct = Tee(tmp_path / "direct")
    client, server = Tee(tmp_path / "client"), Tee(tmp_path / "server")
    capture, report_dir = tmp_path / "capture.ndjson", tmp_path / "reports"
    tapped = client.wrap(tap_command([Path(ATTACK)], report_dir, server.wrap(SERVER), record=capture))
    for command in (direct.wrap(SERVER), tapped):
        answer = asyncio.run(asyncio.wait_for(session(command, arguments), GUARD))
        assert answer == f"Sunny in {arguments['city']}"

    sent, received = client.streams()
    assert server.streams() == (sent, received)
    assert (sent, received) == direct.streams()
    assert len(sent) > 200_000 if behaviour == "resisting" else b"PRIVATE KEY" in sent

    [report] = reports(report_dir)
    assert (report["outcome"], report["execution_summary"]["status"]) == EXPECTED[behaviour]
    offline = assert_capture_replays([Path(ATTACK)], [capture], report_dir, tmp_path)
    assert [r["outcome"] for r in offline.reports] == [EXPECTED[behaviour][0]]
