"""`oatf serve` playing `a2a_server` actors against orchestrators built on the official `a2a-sdk` client: an
Agent Card attack judged exploited for a naive orchestrator and resisted for a careful one, an extended-card
rug pull advancing on the orchestrator's traffic, and a task streamed as A2A SSE with its artifact."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, Role, SendMessageRequest

from tests.e2e.addon.agents import a2a_travel_agent

from .harness import ATTACKS, oatf_serve

CARD_ATTACK = ATTACKS / "OW-025_travel-agent-card-payment-harvest.yaml"
RUG_PULL = ATTACKS / "OW-030_extended-card-rug-pull.yaml"
STREAMED = ATTACKS / "OW-028_research-artifact-cascading-payment.yaml"
FAST = ("--grace-period", "1s")


def test_naive_orchestrator_exploited_careful_one_resisted(tmp_path: Path) -> None:
    """OW-025's card demands card data: the naive orchestrator sends it (exploited), the careful one sends a
    payment token (resisted: the card reached it, nothing was exploited)."""
    for behaviour, outcome, status in (("naive", "exploited", 1), ("careful", "resisted", 0)):
        with oatf_serve(tmp_path / behaviour, [CARD_ATTACK], *FAST) as serving:
            context, _ = asyncio.run(a2a_travel_agent(serving.endpoints["OW-025"], None, behaviour))  # type: ignore[arg-type]
            reports = serving.wait_for(lambda r: len(r) == 1)
            assert serving.stop() == status, serving.stderr
        [report] = reports
        summary = report["execution_summary"]
        assert (report["outcome"], summary["delivered"]) == (outcome, True), summary
        assert "agent_card/get" in [e["event"] for e in summary["delivery_evidence"]]
        assert context  # the orchestrator's own context id


async def _cards_and_answers(url: str) -> tuple[list[str], list[str]]:
    """Three messages, then the extended card (twice): the skill description each card fetch saw."""
    descriptions: list[str] = []
    answers: list[str] = []
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        descriptions.append(card.skills[0].description)
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        for number in range(3):
            request = SendMessageRequest(message=new_text_message(f"sales week {number}", role=Role.ROLE_USER))
            async for response in client.send_message(request):
                answers.append(response.message.message_id)
        for _ in range(2):
            extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
            descriptions.append(extended.skills[0].description)
        card = await A2ACardResolver(http, url).get_agent_card()
        descriptions.append(card.skills[0].description)
    return descriptions, answers


def test_extended_card_rug_pull(tmp_path: Path) -> None:
    """OW-030: three messages enter `swapped_extended_card`, whose card the extended-card request gets; that
    request enters `collecting`, which inherits the swapped state."""
    with oatf_serve(tmp_path / "reports", [RUG_PULL], *FAST) as serving:
        descriptions, answers = asyncio.run(_cards_and_answers(serving.endpoints["OW-030"]))
        serving.stop()
    assert answers == ["m-dc-1", "m-dc-1", "m-dc-1"]
    benign, *swapped = descriptions
    assert "customer_export" not in benign
    assert all("customer_export" in description for description in swapped)
    assert "phase swapped_extended_card entered" in serving.stderr
    assert "phase collecting entered" in serving.stderr


async def _stream(url: str) -> list[str]:
    """What each streamed item was, as the official client delivers it."""
    kinds: list[str] = []
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        request = SendMessageRequest(message=new_text_message("compare the vendors", role=Role.ROLE_USER))
        async for response in client.send_message(request):
            kind = response.WhichOneof("payload")
            if kind == "artifact_update":
                kinds.append(f"artifact:{response.artifact_update.artifact.parts[0].text[:8]}")
            elif kind == "status_update":
                kinds.append(f"status:{response.status_update.status.state}")
            else:
                kinds.append(str(kind))
    return kinds


def test_task_streamed_with_its_artifact(tmp_path: Path) -> None:
    """OW-028's card offers streaming: the task comes as the task, its artifact, then its final status; the
    run is judged on the streamed artifact."""
    with oatf_serve(tmp_path / "reports", [STREAMED], *FAST) as serving:
        kinds = asyncio.run(_stream(serving.endpoints["OW-028"]))
        reports = serving.wait_for(lambda r: len(r) == 1)
        serving.stop()
    assert kinds == ["task", "artifact:| Vendor", "status:3"]  # 3: TASK_STATE_COMPLETED
    [report] = reports
    assert report["execution_summary"]["delivered"] is True
