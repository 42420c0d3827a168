"""Every document of `attacks/` with an `a2a_server` actor served by one `oatf serve` and explored by the
official `a2a-sdk` client (A2A 0.3 on the wire, as the documents' cards declare it): each document's first
A2A run is `delivered`.

The explorer is a curious orchestrator, not a victim: each round it resolves the Agent Card, sends a message
(streamed when the card offers streaming), fetches the authenticated extended card when the card offers one,
and reads back the task it was given, all in one conversation (one context id: one run).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, GetTaskRequest, Role, SendMessageRequest

from .harness import ATTACKS, Report, Serving, explore_library, first_run

DOCUMENTS = sorted(p for p in ATTACKS.glob("OW-*.yaml") if "mode: a2a_server" in p.read_text(encoding="utf-8"))
ROUNDS = 4
"""Rounds of exploration: OW-030's trigger wants three messages, then the extended card."""


async def explore(url: str) -> None:
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        for number in range(ROUNDS):
            card = await A2ACardResolver(http, url).get_agent_card()
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=card.capabilities.streaming)).create(card)
            request = SendMessageRequest(message=new_text_message(
                f"Hello, round {number}: what can you do?", context_id="explore", role=Role.ROLE_USER))
            task_id = ""
            async for response in client.send_message(request):
                task_id = task_id or (response.task.id if response.HasField("task") else "")
            if card.capabilities.extended_agent_card:
                await client.get_extended_agent_card(GetExtendedAgentCardRequest())
            if task_id:
                await client.get_task(GetTaskRequest(id=task_id))
            await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def explored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Serving, list[Report]]:
    return explore_library(tmp_path_factory.mktemp("reports"), DOCUMENTS, "a2a_server", explore,
                           "--grace-period", "3s")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name[:6])
def test_served_a2a_document_is_delivered(document: Path, explored: tuple[Serving, list[Report]]) -> None:
    run = first_run(*explored, document.name[:6], "a2a_server")
    assert run["execution_summary"]["delivered"] is True, run["execution_summary"]
