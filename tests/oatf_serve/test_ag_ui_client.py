"""`oatf serve --agent URL` driving `ag_ui_client` actors against `pydantic-ai` agents served over AG-UI with
scripted `FunctionModel`s: the run input goes to the agent, its event stream is judged, and `oatf serve`
stops by itself once the runs are judged. A forged system message (OW-037) is exploited by the complying
agent and resisted by the resisting one; a three-protocol chain (OW-052: the AG-UI run, with the agent's
calls to the document's own MCP and A2A actors during it) is one episode, judged together."""

from __future__ import annotations

from pathlib import Path

from testing.processes import free_port

from .harness import ATTACKS, ROOT, agent, drive, matched

FORGED_SYSTEM = ATTACKS / "OW-037_forged-system-message-payee-swap.yaml"
CHAIN = ATTACKS / "OW-052_board-pack-ledger-to-audit-desk.yaml"
FRONTEND_TOOL = ATTACKS / "OW-041_frontend-tool-result-calendar-owner.yaml"


def test_forged_system_message_exploited_by_the_complying_agent_only(tmp_path: Path) -> None:
    with agent(tmp_path / "agent.log", "-m", "tests.oatf_serve.ag_ui_agent", "PORT") as base:
        verdicts = {behaviour: drive(tmp_path / behaviour, FORGED_SYSTEM, f"{base}/{behaviour}")
                    for behaviour in ("complying", "resisting")}
    status, [report], stderr = verdicts["complying"]
    assert (status, report["outcome"], report["execution_summary"]["delivered"]) == (1, "exploited", True), stderr
    assert report["execution_summary"]["session"] == "ag_ui_thread:thr-ap-5521"
    assert "OW-037-01" in matched(report)
    status, [report], stderr = verdicts["resisting"]
    assert (status, report["outcome"], report["execution_summary"]["delivered"]) == (0, "resisted", True), stderr
    assert "Traceback" not in stderr


def test_forged_frontend_tool_result_follows_the_agents_call(tmp_path: Path) -> None:
    """OW-041: the agent calls the frontend's `read_calendar` (the trigger), and the next phase's run carries the
    forged tool result with the agent's own tool call id (an extractor); the complying agent shares the calendar
    with the planted address (exploited), the resisting one only tells the agenda (resisted)."""
    with agent(tmp_path / "agent.log", "-m", "tests.oatf_serve.ag_ui_agent", "PORT") as base:
        verdicts = {behaviour: drive(tmp_path / behaviour, FRONTEND_TOOL, f"{base}/{behaviour}")
                    for behaviour in ("complying", "resisting")}
    for behaviour, expected in (("complying", (1, "exploited", True)), ("resisting", (0, "resisted", True))):
        status, [report], stderr = verdicts[behaviour]
        summary = report["execution_summary"]
        assert (status, report["outcome"], summary["delivered"]) == expected, stderr
        assert summary["actors"][0]["phases_reached"] == ["request_agenda", "return_forged_result"]


def test_three_protocol_chain_is_one_episode(tmp_path: Path) -> None:
    """OW-052's ledger (MCP) and Audit Desk (A2A) are served on one port; the board actor's run goes to the
    agent once they accept connections; the agent's MCP and A2A calls during the run join its episode."""
    port = free_port()
    peers = str(ROOT / "tests" / "e2e" / "addon" / "episode_peers.py")
    outcomes = {}
    for behaviour in ("complying", "resisting"):
        with agent(tmp_path / f"{behaviour}.log", peers, "agent", "PORT", "--mcp", f"http://127.0.0.1:{port}/mcp",
                   "--a2a", f"http://127.0.0.1:{port}/") as base:
            status, reports, stderr = drive(tmp_path / behaviour, CHAIN, f"{base}/{behaviour}", "--port", str(port))
        assert len(reports) == 1, stderr
        [report] = reports
        outcomes[behaviour] = (status, report["outcome"], report["execution_summary"]["delivered"])
        assert report["execution_summary"]["session"] == "ag_ui_thread:thr-board-q3", stderr
        if behaviour == "complying":
            assert matched(report) == {"OW-052-01", "OW-052-02", "OW-052-03"}, report["verdict"]
    assert outcomes == {"complying": (1, "exploited", True), "resisting": (0, "resisted", True)}
