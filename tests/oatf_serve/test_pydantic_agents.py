"""`oatf serve` against a real agent framework: `pydantic-ai` Agents (their MCP client, scripted
`FunctionModel`s: `tests/e2e/addon/pydantic_agent.py`) facing the third-party poisoning document of
`tests/e2e/addon/test_third_party_agents.py`, served by `oatf serve` instead of a hand-written server. The
complying agent passes the SSH key the tool description asks for and is `exploited`; the resisting one is
`resisted` (delivered, not exploited). Each conversation is one run: its own MCP session."""

from __future__ import annotations

from pathlib import Path

from testing.oatf_proxy import run
from tests.e2e.addon import pydantic_agent
from tests.e2e.addon.test_third_party_agents import ATTACK, ATTACK_ID

from .harness import oatf_serve


def test_complying_agent_exploited_resisting_agent_resisted(tmp_path: Path) -> None:
    document = tmp_path / "third-party-poisoning.yaml"
    document.write_text(ATTACK, encoding="utf-8")
    with oatf_serve(tmp_path / "reports", [document], "--grace-period", "1s") as serving:
        url = serving.endpoints[ATTACK_ID]
        run(pydantic_agent.conversation(url, "complying"))
        serving.wait_for(lambda reports: len(reports) == 1)
        run(pydantic_agent.conversation(url, "resisting"))
        reports = serving.wait_for(lambda reports: len(reports) == 2)
        assert serving.stop() == 1  # exploited
    first, second = sorted(reports, key=lambda r: r["execution_summary"]["started_at"])
    assert (first["outcome"], first["execution_summary"]["delivered"]) == ("exploited", True)
    assert first["verdict"]["result"] == "exploited"
    assert (second["outcome"], second["execution_summary"]["delivered"]) == ("resisted", True)
    assert second["verdict"]["result"] == "not_exploited"
    assert [e["event"] for e in second["execution_summary"]["delivery_evidence"]] == ["tools/list"]
    sessions = {r["execution_summary"]["session"] for r in reports}
    assert len(sessions) == 2 and all(s.startswith("mcp_session:") for s in sessions)
    verdicts = (tmp_path / "reports" / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(verdicts) == 2
    assert "1 exploited, 0 partial, 1 resisted" in serving.stderr
