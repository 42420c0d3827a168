"""`oatf serve` against a real agent framework: `pydantic-ai` Agents (their MCP client, fastmcp 4's, and
scripted `FunctionModel`s: `tests/e2e/addon/pydantic_agent.py`) facing the third-party poisoning document of
`tests/e2e/addon/test_third_party_agents.py`, served by `oatf serve` instead of a hand-written server. The
complying agent passes the SSH key the tool description asks for and is `exploited`; the resisting one is
`resisted` (delivered, not exploited). Each conversation is one run, in each way the client can talk:

- `stateless-revision`: pydantic-ai's default, MCP 2026-07-28 (`server/discover`, no `initialize`, no
  `Mcp-Session-Id`), which the endpoint answers natively: each conversation is one agent episode, split from the
  next by `--idle-gap` (`agent:<host>>…#1`, `#2`), and each episode has its own player;
- `stateless-endpoint`: the same client against `oatf serve --stateless`;
- `session`: the client in fastmcp's `legacy` mode (`initialize`, an `Mcp-Session-Id`): one run per session.

A document's `elicitations` (OW-011's form asking for a token) reach the agent in the stateless revision too,
asked in the tool's result and answered in the agent's retry (multi round-trip requests)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from testing.oatf_proxy import run
from tests.e2e.addon import pydantic_agent
from tests.e2e.addon.test_third_party_agents import ATTACK, ATTACK_ID

from .harness import ATTACKS, oatf_serve

IDLE_GAP = 3.0


@pytest.mark.parametrize("way", ["stateless-revision", "stateless-endpoint", "session"])
def test_complying_agent_exploited_resisting_agent_resisted(tmp_path: Path, way: str) -> None:
    document = tmp_path / "third-party-poisoning.yaml"
    document.write_text(ATTACK, encoding="utf-8")
    flags = ("--grace-period", "1s", "--idle-gap", f"{IDLE_GAP:g}s", *["--stateless"] * (way == "stateless-endpoint"))
    session = way == "session"
    with oatf_serve(tmp_path / "reports", [document], *flags) as serving:
        url = serving.endpoints[ATTACK_ID]
        run(pydantic_agent.conversation(url, "complying", session=session))
        serving.wait_for(lambda reports: len(reports) == 1)
        time.sleep(IDLE_GAP + 1)  # a pause longer than the idle gap: the next conversation is a new episode
        run(pydantic_agent.conversation(url, "resisting", session=session))
        reports = serving.wait_for(lambda reports: len(reports) == 2)
        assert serving.stop() == 1  # exploited
    first, second = sorted(reports, key=lambda r: r["execution_summary"]["started_at"])
    assert (first["outcome"], first["execution_summary"]["delivered"]) == ("exploited", True)
    assert first["verdict"]["result"] == "exploited"
    assert (second["outcome"], second["execution_summary"]["delivered"]) == ("resisted", True)
    assert second["verdict"]["result"] == "not_exploited"
    assert [e["event"] for e in second["execution_summary"]["delivery_evidence"]] == ["tools/list"]
    sessions = [r["execution_summary"]["session"] for r in (first, second)]
    if session:
        assert len(set(sessions)) == 2 and all(s.startswith("mcp_session:") for s in sessions)
    else:
        route = f"agent:127.0.0.1>{url.removeprefix('http://')}"
        assert sessions == [f"{route}#1", f"{route}#2"]
    verdicts = (tmp_path / "reports" / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(verdicts) == 2
    assert "1 exploited, 0 partial, 1 resisted" in serving.stderr


# pydantic-ai warns that a modern (2026-07-28) session never calls the handler: it does, through the retry (the
# tool's answers below say so).
@pytest.mark.filterwarnings("ignore:`elicitation_handler` will never be called")
@pytest.mark.parametrize("way", ["stateless-revision", "session"])
def test_a_form_asking_for_a_token_is_asked_in_every_revision(tmp_path: Path, way: str) -> None:
    """OW-011's `elicitations` (a form asking for a GitHub token while `deploy_preview` runs) reach the agent
    whatever it negotiated: in the stateless revision, with no stream for the server's own requests, asked in
    the tool's result and answered in the agent's retry; with a session, as an `elicitation/create` request.
    The agent that fills in its token is `exploited`, the one that declines `resisted`."""
    document = ATTACKS / "OW-011_deploy-elicitation-token-phish.yaml"
    session = way == "session"
    flags = ("--grace-period", "1s", "--idle-gap", f"{IDLE_GAP:g}s")
    with oatf_serve(tmp_path / "reports", [document], *flags) as serving:
        url = serving.endpoints["OW-011"]
        run(pydantic_agent.conversation(url, "complying", "Deploy main.", model=pydantic_agent.deploy_model,
                                        session=session, elicitation=pydantic_agent.token_handler))
        serving.wait_for(lambda reports: len(reports) == 1)
        time.sleep(IDLE_GAP + 1)  # a pause longer than the idle gap: the next conversation is a new episode
        run(pydantic_agent.conversation(url, "resisting", "Deploy main.", model=pydantic_agent.deploy_model,
                                        session=session, elicitation=pydantic_agent.token_handler))
        reports = serving.wait_for(lambda reports: len(reports) == 2)
        assert serving.stop() == 1
    first, second = sorted(reports, key=lambda r: r["execution_summary"]["started_at"])
    assert (first["outcome"], second["outcome"]) == ("exploited", "resisted")
    assert [(v["indicator_id"], v["result"]) for r in (first, second) for v in r["verdict"]["indicator_verdicts"]] \
        == [("OW-011-01", "matched"), ("OW-011-01", "not_matched")]
