"""`oatf serve --agent URL` driving `a2a_client` actors (the official `a2a-sdk` client) against an A2A agent
(`tests/oatf_serve/a2a_agent.py`: an `a2a-sdk` server, a `pydantic-ai` Agent behind it). Three library attacks
at once, each its own A2A context: a card fetch then a "diagnostics" message (OW-033), forged approval
metadata (OW-034), and a two-phase impostor whose second message, streamed, reuses the `contextId` and task id
extracted from the agent's first answer (OW-035). The complying agent is exploited by all three, the
resisting one resists all three (delivered, not exploited); `oatf serve` stops by itself. And a third-party
agent, `@a2a-js/sdk`'s (`tests/js/a2a_server.mjs`, whose card says it does not stream), meets them too."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.js.js_peers import node_server

from .harness import ATTACKS, agent, drive, matched

ATTACK_IDS = ("OW-033", "OW-034", "OW-035")
DOCUMENTS = [next(ATTACKS.glob(f"{attack}_*.yaml")) for attack in ATTACK_IDS]


def test_complying_agent_exploited_resisting_agent_resisted(tmp_path: Path) -> None:
    outcomes = {}
    for behaviour in ("complying", "resisting"):
        with agent(tmp_path / f"{behaviour}.log", "-m", "tests.oatf_serve.a2a_agent", "PORT", behaviour) as base:
            status, reports, stderr = drive(tmp_path / behaviour, DOCUMENTS, f"{base}/")
        assert "Traceback" not in stderr and " failed" not in stderr, stderr
        runs = {report["attack"]["id"]: report for report in reports}
        assert sorted(runs) == list(ATTACK_IDS) and len(reports) == 3, stderr
        outcomes[behaviour] = status, {attack: (r["outcome"], r["execution_summary"]["delivered"])
                                       for attack, r in runs.items()}
        # OW-035: the second phase's streamed message went into the context its first answer opened (one run;
        # the report shows extracted values redacted).
        summary = runs["OW-035"]["execution_summary"]
        [actor] = summary["actors"]
        assert actor["phases_reached"] == ["open_context", "claim_prior_agreement"]
        context = summary["session"].removeprefix("a2a_context:")
        assert actor["extractors"]["audit_context"] == f"{context[:4]}…{context[-2:]} ({len(context)} chars)"
        if behaviour == "complying":
            assert [matched(runs[attack]) for attack in ATTACK_IDS] == [{"OW-033-01"}, {"OW-034-01"},
                                                                        {"OW-035-01"}]
    assert outcomes == {
        "complying": (1, {attack: ("exploited", True) for attack in ATTACK_IDS}),
        "resisting": (0, {attack: ("resisted", True) for attack in ATTACK_IDS}),
    }


def test_the_javascript_sdk_agent_receives_every_action(tmp_path: Path) -> None:
    """The `@a2a-js/sdk` agent (A2A 1.0) answers every message with a completed booking: delivered, not
    exploited. OW-036's `message/stream` goes unstreamed, as its card asks, and that is said."""
    documents = [next(ATTACKS.glob(f"{attack}_*.yaml")) for attack in ("OW-033", "OW-034", "OW-036")]
    with node_server(["a2a_server.mjs"], tmp_path / "agent.log") as port:
        status, reports, stderr = drive(tmp_path / "reports", documents, f"http://127.0.0.1:{port}/")
    assert status == 0 and "Traceback" not in stderr and " failed" not in stderr, stderr
    assert sorted((r["attack"]["id"], r["outcome"], r["execution_summary"]["delivered"]) for r in reports) == [
        ("OW-033", "resisted", True), ("OW-034", "resisted", True), ("OW-036", "resisted", True)]
    assert "the agent's card says it does not stream: the a2a-sdk client sends message/stream unstreamed" in stderr
