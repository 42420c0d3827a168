"""Load end to end: 100 MCP agent sessions at once through a real mitmdump with the whole `attacks/` library, one
in five exploited (`load.py`), in two waves: the first wave's runs conclude after their grace period, the second
wave's are still open when mitmdump gets SIGINT, with the traffic just sent. Every (attack, session) is
reported exactly once, every exploit session as exploited, none evicted, none lost; the summary counts them all.
Counting only: the figures (1,000 sessions at once, RSS, shutdown time) come from
`benchmarks/bench_live_load.py`."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.load import EXPLOITED_ATTACK, SERVER_KEEP_ALIVE, Session, agents, count
from testing.oatf_proxy import ADDON_PEERS, OatfProxy, oatf_proxy
from testing.paths import ROOT
from testing.processes import Peers, peer_process, tracebacks

LIBRARY = ROOT / "attacks"
AGENTS = 100
GRACE = "15s"
"""Well above the time between two messages of one session on a loaded machine (seconds at 100 agents on two
shared cores): a run goes quiet for a grace period only once its session is over."""


@pytest.fixture(scope="module")
def invoice_server(addon_workdir: Path) -> Iterator[Peers]:
    with peer_process(ADDON_PEERS / "peers.py", ("mcp_invoice",), addon_workdir / "invoice-peer.log",
                      extra=("--keep-alive", str(SERVER_KEEP_ALIVE))) as running:
        yield running


def own_runs(proxy: OatfProxy) -> dict[str, dict[str, object]]:
    """Session → the execution summary of its OW-001 run, from `verdicts.jsonl`."""
    return {r["execution_summary"]["session"]: r["execution_summary"] for r in proxy.jsonl()
            if r["attack"]["id"] == EXPLOITED_ATTACK}


def wave(proxy: OatfProxy, url: str, seed: int) -> list[Session]:
    traffic = asyncio.run(agents(proxy.url, url, AGENTS, sessions=AGENTS, pause=(0.1, 0.5), seed=seed))
    assert traffic.failed == 0, (traffic.errors, traffic.resent)
    return traffic.sessions


def test_every_session_of_a_loaded_proxy_is_reported_exactly_once(invoice_server: Peers, tmp_path: Path) -> None:
    url = invoice_server.url("mcp_invoice", "/mcp")
    with oatf_proxy(tmp_path, "load", [LIBRARY], grace=GRACE, record=False) as proxy:
        first = wave(proxy, url, seed=1)
        proxy.wait_until(lambda: {s.key for s in first} <= set(own_runs(proxy)), timeout=120)
        second = wave(proxy, url, seed=2)
        assert proxy.interrupt(timeout=300) == 0  # at once: the second wave is in its grace period
        log = proxy.log()
    counted = count(proxy.jsonl(), first + second)
    assert counted.sessions == 2 * AGENTS and counted.exploit_sessions == 2 * AGENTS // 5
    assert counted.exploited == counted.exploit_sessions, counted.lines()
    assert counted.false_negatives == counted.false_positives == 0, counted.lines()
    assert counted.duplicated == counted.missing == counted.unknown == 0, counted.lines()
    [runs] = counted.runs_per_session  # every session followed by the same attacks
    assert runs > 20 and counted.reports == runs * 2 * AGENTS, counted.lines()
    # Every agent closed its session (DELETE): runs of attacks still waiting for traffic conclude a grace period
    # after it (session_closed), the others completed — at the shutdown too, as the clock would — never evicted
    # or interrupted.
    assert counted.evicted == 0 and "completed" in counted.statuses \
        and set(counted.statuses) <= {"completed", "session_closed"}, counted.lines()
    statuses = {session: summary["status"] for session, summary in own_runs(proxy).items()}
    assert {statuses[s.key] for s in first} == {"completed"}
    # The second wave's agents closed their sessions, still in their grace period at the stop: no later message
    # can belong to them, so their runs conclude as the clock would have (README, "When the proxy dies"), not cut
    # short — the sessions left open are, and say so: tests/e2e/addon/test_live_verdicts.py.
    assert {statuses[s.key] for s in second} == {"completed"}
    assert set(counted.resisting) == {("completed", "resisted")}
    assert len(proxy.reports()) == counted.reports, "one report file per run"
    summary = re.search(r"(\d+) run\(s\): (\d+) exploited", log)
    assert summary is not None and summary.groups() == (str(counted.reports), str(counted.exploit_sessions)), \
        "the summary counts every run of the proxy's life"
    assert not tracebacks(log)
