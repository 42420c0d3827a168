"""`oatf serve`'s endpoints behind `mitmdump -s addon/oatf_addon.py` (issue 19: "the served endpoints also work
behind" the proxy): `pydantic-ai` agents (scripted `FunctionModel`s) reach the served MCP endpoint through the
proxy in reverse mode; `oatf serve` and the proxy judge the same sessions alike — the complying agent exploited,
the resisting one resisted — and the proxy's recording replays to its reports. The agents negotiate the
stateless revision 2026-07-28 (no session): each conversation is an agent episode of its own because a pause
longer than the idle gap separates them (`agent:<host>>…#1`, `#2`), for the proxy and `oatf serve` alike."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

from testing.oatf_proxy import assert_replay_agrees, oatf_proxy, run
from tests.e2e.addon import pydantic_agent
from tests.e2e.addon.test_third_party_agents import ATTACK, ATTACK_ID

from .harness import FAST, Report, oatf_serve

IDLE_GAP = 3.0


def outcomes(reports: list[Report]) -> list[tuple[str, str, bool]]:
    """(session, outcome, delivered) of each run, in the order the runs started."""
    return [(r["execution_summary"]["session"], r["outcome"], r["execution_summary"]["delivered"])
            for r in sorted(reports, key=lambda r: r["execution_summary"]["started_at"])]


def test_served_endpoint_judged_alike_behind_the_proxy(tmp_path: Path) -> None:
    document = tmp_path / "third-party-poisoning.yaml"
    document.write_text(ATTACK, encoding="utf-8")
    gap = f"{IDLE_GAP:g}s"
    with oatf_serve(tmp_path / "serve-reports", [document], *FAST, "--idle-gap", gap) as serving:
        served = urlsplit(serving.endpoints[ATTACK_ID])
        options = {"mode": f"reverse:http://{served.netloc}", "oatf_idle_gap": gap}
        with oatf_proxy(tmp_path, "behind", [document], options=options) as proxy:
            run(pydantic_agent.conversation(f"{proxy.url}{served.path}", "complying"))
            proxy.wait_until(lambda: len(proxy.reports()) == 1, timeout=20)
            time.sleep(IDLE_GAP + 1)  # a pause longer than the idle gap: the next conversation is a new episode
            run(pydantic_agent.conversation(f"{proxy.url}{served.path}", "resisting"))
            proxy.wait_until(lambda: len(proxy.reports()) == 2, timeout=20)
            proxy.interrupt()
            proxied = proxy.reports()
        served_reports = serving.wait_for(lambda reports: len(reports) == 2)
        assert serving.stop() == 1
    assert [outcome[1:] for outcome in outcomes(served_reports)] == [("exploited", True), ("resisted", True)]
    assert outcomes(proxied) == outcomes(served_reports)  # the same MCP sessions, judged alike
    assert [session.rsplit("#", 1)[1] for session, _, _ in outcomes(proxied)] == ["1", "2"]
    assert_replay_agrees(proxy, tmp_path, proxied, flags=("--idle-gap", gap))
