"""Every document of `attacks/` whose actors are all client actors (`ag_ui_client`, `mcp_client`, `a2a_client`)
driven by one `oatf serve` against real agents, one endpoint per client mode (`--agent MODE=URL`): the
`pydantic-ai` AG-UI agent (`ag_ui_agent.py`, resisting), the `fastmcp` agent (`mcp_agent.py`) and the `a2a-sdk`
agent (`a2a_agent.py`); each document's first run is `delivered` (issue 19: "every document in `attacks/` is
served in a test and reaches `delivered: true`"). Copies of the documents have their `after` timers cut to one
second (OW-046 waits five minutes); nothing else is changed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .harness import ATTACKS, GUARD, Report, agent, oatf_serve

CLIENT_MODES = {"ag_ui_client", "mcp_client", "a2a_client"}


def _modes(path: Path) -> set[str]:
    execution = yaml.safe_load(path.read_text(encoding="utf-8"))["attack"]["execution"]
    return {actor["mode"] for actor in execution.get("actors") or [execution]}


DOCUMENTS = sorted(p for p in ATTACKS.glob("OW-*.yaml") if _modes(p) <= CLIENT_MODES)
OPEN_UNTIL_STOP = {"OW-024", "OW-046"}
"""Documents whose first run stays open while the agents run, reported when `oatf serve` stops: OW-024's last
phase waits for a `roots/list` the agent never sends; OW-046 observes for three minutes (`grace_period`) after its
last phase starts."""
_AFTER = re.compile(r"(\bafter:\s*)\S+")


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Report]]:
    """Every client-only document driven at once until each but those `OPEN_UNTIL_STOP` has a run reported (or
    for a minute), then `oatf serve` stopped, which reports the runs still open: (stderr, reports)."""
    copies = tmp_path_factory.mktemp("documents")
    for document in DOCUMENTS:
        (copies / document.name).write_text(_AFTER.sub(r"\g<1>1s", document.read_text(encoding="utf-8")),
                                            encoding="utf-8")
    logs = tmp_path_factory.mktemp("agents")
    with agent(logs / "ag-ui.log", "-m", "tests.oatf_serve.ag_ui_agent", "PORT") as ag_ui, \
            agent(logs / "mcp.log", "-m", "tests.oatf_serve.mcp_agent", "PORT", "resisting") as mcp, \
            agent(logs / "a2a.log", "-m", "tests.oatf_serve.a2a_agent", "PORT", "resisting") as a2a:
        flags = ("--agent", f"ag_ui_client={ag_ui}/resisting", "--agent", f"mcp_client={mcp}/mcp",
                 "--agent", f"a2a_client={a2a}/", "--grace-period", "1s")
        with oatf_serve(tmp_path_factory.mktemp("reports"), sorted(copies.iterdir()), *flags) as serving:
            attacks = {document.name[:6] for document in DOCUMENTS} - OPEN_UNTIL_STOP
            serving.wait_for(lambda reports: attacks <= {r["attack"]["id"] for r in reports}, timeout=GUARD)
            serving.stop()
    return serving.stderr, serving.reports()


def test_every_client_mode_is_in_the_library() -> None:
    assert set().union(*map(_modes, DOCUMENTS)) == CLIENT_MODES and len(DOCUMENTS) >= 10


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name[:6])
def test_driven_document_is_delivered(document: Path, driven: tuple[str, list[Report]]) -> None:
    stderr, reports = driven
    runs = sorted((r for r in reports if r["attack"]["id"] == document.name[:6]),
                  key=lambda r: r["execution_summary"]["started_at"])
    assert runs, stderr
    assert runs[0]["execution_summary"]["delivered"] is True, runs[0]["execution_summary"]
