"""`oatf serve --agent [ACTOR=]URL`, repeated (`oatf_serve.agents`): a document whose client actors speak different
protocols drives each against its own endpoint — an `ag_ui_client` (OW-037's forged system message) against a
`pydantic-ai` AG-UI agent and an `a2a_client` (OW-033's instruction echo) against an `a2a-sdk` agent, both with
complying scripted models: both exploited. Bad `--agent` values are usage errors said before anything is
served."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from oatf_serve.agents import AgentError, AgentUrls, parse_agents

from .harness import ATTACKS, FAST, GUARD, OATF, ROOT, agent, oatf_serve


def two_client_document(path: Path) -> Path:
    """OW-037's AG-UI actor (`frontend`) and OW-033's A2A actor (`helpdesk`) in one document."""
    ag_ui = yaml.safe_load((ATTACKS / "OW-037_forged-system-message-payee-swap.yaml").read_text(encoding="utf-8"))
    a2a = yaml.safe_load((ATTACKS / "OW-033_helpdesk-agent-instruction-echo.yaml").read_text(encoding="utf-8"))
    document: dict[str, Any] = {"oatf": "0.1", "attack": {
        "id": "SERVE-AGENTS-001", "name": "A frontend and a client agent, each against its own endpoint",
        "version": 1, "severity": "high",
        "execution": {"actors": [
            {"name": "frontend", "mode": "ag_ui_client", "phases": [{"state": ag_ui["attack"]["execution"]["state"]}]},
            {"name": "helpdesk", "mode": "a2a_client", "phases": [{"state": a2a["attack"]["execution"]["state"]}]},
        ]},
        "indicators": [{**indicator, "id": f"SERVE-AGENTS-001-{number:02d}", "protocol": protocol}
                       for number, (indicator, protocol) in enumerate(
                           [(ag_ui["attack"]["indicators"][0], "ag_ui"), (a2a["attack"]["indicators"][0], "a2a")],
                           start=1)],
    }}
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def test_each_client_actor_drives_its_own_endpoint(tmp_path: Path) -> None:
    document = two_client_document(tmp_path / "two-clients.yaml")
    with agent(tmp_path / "ag-ui.log", "-m", "tests.oatf_serve.ag_ui_agent", "PORT") as ag_ui, \
            agent(tmp_path / "a2a.log", "-m", "tests.oatf_serve.a2a_agent", "PORT", "complying") as a2a:
        flags = ("--agent", f"frontend={ag_ui}/complying", "--agent", f"a2a_client={a2a}/")
        with oatf_serve(tmp_path / "reports", [document], *flags, *FAST) as serving:
            serving.process.wait(timeout=GUARD)
            status = serving.stop()
    assert serving.actors == {("SERVE-AGENTS-001", "frontend"): ("ag_ui_client", f"{ag_ui}/complying"),
                              ("SERVE-AGENTS-001", "helpdesk"): ("a2a_client", f"{a2a}/")}
    assert "Traceback" not in serving.stderr and " stopped: " not in serving.stderr, serving.stderr
    runs = {report["execution_summary"]["session"].split(":")[0]: report for report in serving.reports()}
    assert sorted(runs) == ["a2a_context", "ag_ui_thread"], serving.stderr
    assert {session: (r["outcome"], r["execution_summary"]["delivered"]) for session, r in runs.items()} == {
        "a2a_context": ("exploited", True), "ag_ui_thread": ("exploited", True)}
    assert status == 1


def test_agent_values_parsed() -> None:
    agents = parse_agents(["http://127.0.0.1:9/any?x=1", "frontend=http://127.0.0.1:1/ag-ui",
                           "a2a_client=https://agent.example/a2a?k=v"])
    assert agents.url("frontend", "ag_ui_client") == "http://127.0.0.1:1/ag-ui"  # by name
    assert agents.url("helpdesk", "a2a_client") == "https://agent.example/a2a?k=v"  # by mode
    assert agents.url("other", "mcp_client") == "http://127.0.0.1:9/any?x=1"  # the bare URL
    assert AgentUrls().url("any", "mcp_client") is None


@pytest.mark.parametrize(("values", "message"), [
    (["127.0.0.1:9000"], "--agent 127.0.0.1:9000: not an http(s) URL (--agent URL, or --agent ACTOR=URL)"),
    (["frontend=ftp://x/"], "--agent frontend=ftp://x/: not an http(s) URL (--agent URL, or --agent ACTOR=URL)"),
    (["http://a:1/", "http://b:2/"], "--agent http://b:2/: a second URL for every client actor (the first: "
                                     "http://a:1/); name the actor or its mode: --agent ACTOR=URL"),
    (["x=http://a:1/", "x=http://b:2/"], "--agent x=http://b:2/: x is given twice (first: http://a:1/)"),
])
def test_bad_agent_values_are_named(values: list[str], message: str) -> None:
    with pytest.raises(AgentError) as raised:
        parse_agents(values)
    assert str(raised.value) == message


@pytest.mark.parametrize(("flags", "message"), [
    (("--agent", "http://a:1/", "--agent", "http://b:2/"), "oatf serve: --agent http://b:2/: a second URL"),
    (("--agent", "board=http://a:1/"), "oatf serve: --agent board=…: no client actor is named board (client "
                                       "actors: default; modes: ag_ui_client, mcp_client, a2a_client)"),
])
def test_bad_agent_flags_stop_the_start(tmp_path: Path, flags: tuple[str, ...], message: str) -> None:
    done = subprocess.run([OATF, "serve", str(ATTACKS / "OW-033_helpdesk-agent-instruction-echo.yaml"),
                           "--report-dir", str(tmp_path), *flags], capture_output=True, text=True, cwd=ROOT,
                          timeout=GUARD)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
