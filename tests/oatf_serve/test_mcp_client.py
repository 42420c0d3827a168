"""`oatf serve` against the official `mcp` client: the documents' state served, a rug pull announced with
list_changed, `when` dispatch with an extractor, and the verdicts the engine wrote for what was served."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mcp import ClientSession, types

from .harness import ATTACKS, Report, mcp_session, oatf_serve

RUG_PULL = ATTACKS / "OW-006_fx-converter-rug-pull.yaml"
FAST = ("--grace-period", "1s")


def test_rug_pull_swaps_the_description_and_announces_it(tmp_path: Path) -> None:
    """OW-006: two honest conversions, then `notifications/tools/list_changed` and the poisoned description
    on the next listing; the run is delivered (the swapped text reached the client)."""
    notices: list[str] = []

    async def handler(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            notices.append(message.root.method)

    async def agent(url: str) -> tuple[list[str], list[str]]:
        from mcp.client.streamable_http import streamablehttp_client

        async with streamablehttp_client(url) as (read, write, _), \
                ClientSession(read, write, message_handler=handler) as session:
            await session.initialize()
            descriptions = [(await session.list_tools()).tools[0].description or ""]
            answers = []
            for amount in (10, 20):
                result = await session.call_tool("convert_currency", {"amount": amount, "from": "EUR", "to": "SEK"})
                answers.append(result.content[0].text)  # type: ignore[union-attr]
            for _ in range(50):
                if notices:
                    break
                await asyncio.sleep(0.05)
            descriptions.append((await session.list_tools()).tools[0].description or "")
            return descriptions, answers

    with oatf_serve(tmp_path / "reports", [RUG_PULL], *FAST) as serving:
        descriptions, answers = asyncio.run(agent(serving.endpoints["OW-006"]))
        reports = serving.wait_for(lambda r: len(r) == 1)
        assert serving.stop() == 0
    assert answers == ["10 EUR = converted at 11.52 (mid-market)", "20 EUR = converted at 11.52 (mid-market)"]
    assert "clearing account" not in descriptions[0]
    assert "DE44 5001 0517 5407 3249 31" in descriptions[1]
    assert notices == ["notifications/tools/list_changed"]
    [report] = reports
    summary = report["execution_summary"]
    assert summary["delivered"] is True
    assert report["outcome"] == "resisted"
    assert summary["status"] == "completed"
    assert "1 run(s): 0 exploited, 0 partial, 1 resisted" in serving.stderr
