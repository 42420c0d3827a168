"""Agent episodes across protocols with peers nobody on the team wrote (`episode_peers.py`): a `pydantic-ai`
agent served over AG-UI whose runs call a `fastmcp` server and an `a2a-sdk` agent, all through real mitmdump
with the addon (forward proxy), judged by `attacks/OW-052` (`correlation.logic: all` over AG-UI, MCP and A2A).
Each AG-UI run with the calls its agent made during it is one episode: one run per attack, with the verdict
its behaviour deserves, live and when the recording is replayed (`oatf evaluate`); two threads of the agent
at once are two runs. And the same chain brought by inject mode in front of honest peers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from testing.clients import ag_ui_run
from testing.oatf_proxy import ADDON_PEERS, OATF, OatfProxy, Report, addon_peer, assert_replay_agrees, oatf_proxy, run
from testing.paths import ROOT
from testing.processes import PYTHON, _start, free_port, stop, wait_for_port
from tests.e2e.js.js_peers import run_driver

pytestmark = pytest.mark.e2e

ATTACK = ROOT / "attacks" / "OW-052_board-pack-ledger-to-audit-desk.yaml"
ATTACK_ID = "OW-052"


def peer(workdir: Path, kind: str, *args: str) -> contextlib.AbstractContextManager[int]:
    """One `episode_peers.py` process on a free loopback port; yields the port."""
    return addon_peer(workdir, "episode_peers.py", kind, *args)


@contextlib.contextmanager
def episode(workdir: Path, name: str, tap: list[str] | None = None, grace: str = "1s",
            reverse_port: int | None = None) -> Iterator[tuple[OatfProxy, str]]:
    """The proxy (with `oatf_agents` naming the AG-UI agent) and the agent's AG-UI base URL. With `tap` (the
    start of an `oatf tap` command line), the MCP server is a stdio process the agent starts through it, and
    the proxy listens for the tap's events (`oatf_listen` at `--monitor`). With `reverse_port`, the proxy also
    listens there as a reverse proxy to the agent (for a client that cannot use a forward proxy)."""
    with contextlib.ExitStack() as stack:
        if tap is None:
            mcp = ["--mcp", f"http://127.0.0.1:{stack.enter_context(peer(workdir, 'mcp', str(ATTACK)))}/mcp"]
        else:
            server = [str(PYTHON), str(ADDON_PEERS / "episode_peers.py"), "mcp-stdio", "0", str(ATTACK)]
            mcp = ["--mcp-command", json.dumps([*tap, "--", *server])]
        a2a = stack.enter_context(peer(workdir, "a2a", str(ATTACK)))
        agent_port = free_port()
        options = {"oatf_agents": named(f"http://127.0.0.1:{agent_port}")}
        if tap is not None:
            options["oatf_listen"] = tap[tap.index("--monitor") + 1]
        modes = ("regular", f"reverse:http://127.0.0.1:{agent_port}@127.0.0.1:{reverse_port}") if reverse_port else ()
        proxy = stack.enter_context(oatf_proxy(workdir, name, [ATTACK], grace=grace, options=options, modes=modes))
        process = _start([str(PYTHON), str(ADDON_PEERS / "episode_peers.py"), "agent", str(agent_port), *mcp,
                          "--a2a", f"http://127.0.0.1:{a2a}/", "--proxy", proxy.url],
                         workdir / f"agent-{agent_port}.log")
        stack.callback(stop, process)
        wait_for_port(agent_port, process)
        yield proxy, f"http://127.0.0.1:{agent_port}"


EXPECTED = {
    "t-complying": ("exploited", "exploited", dict.fromkeys(("OW-052-01", "OW-052-02", "OW-052-03"), "matched")),
    "t-resisting": ("not_exploited", "resisted", dict.fromkeys(("OW-052-01", "OW-052-02", "OW-052-03"), "not_matched")),
}
"""OW-052's runs, one per thread, after a complying and a resisting conversation."""


def run_agent_input(thread: str) -> dict[str, Any]:
    """The `board` actor's RunAgentInput (its user message: the payload it delivers), in thread `thread`."""
    document = YAML(typ="safe").load(ATTACK.read_text(encoding="utf-8"))
    board = next(a for a in document["attack"]["execution"]["actors"] if a["name"] == "board")
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    return {**board["phases"][0]["state"]["run_agent_input"], "threadId": thread, "runId": run_id}


def named(agent: str) -> str:
    """The `--agents` value naming the agent at `agent` (its AG-UI base URL), as the live proxy was told."""
    return f"assistant={agent.removeprefix('http://')}"


def two_conversations(proxy: OatfProxy, agent: str) -> list[Report]:
    """A complying conversation (thread `t-complying`), then a resisting one; the reports once both runs are
    concluded and the proxy stopped."""
    complying = run(ag_ui_run(f"{agent}/complying", proxy.url, run_agent_input("t-complying")), 60)
    assert "Audit Desk" in said(complying)
    resisting = run(ag_ui_run(f"{agent}/resisting", proxy.url, run_agent_input("t-resisting")), 60)
    assert "left it out" in said(resisting)
    proxy.wait_until(lambda: len(results(proxy.reports())) == 2, timeout=30)
    proxy.interrupt()
    return proxy.reports()


def said(events: list[dict[str, Any]]) -> str:
    return "".join(e.get("delta", "") for e in events if e.get("type") == "TEXT_MESSAGE_CONTENT")


def results(reports: list[Report]) -> dict[str, tuple[str, str, dict[str, str]]]:
    """thread → (result, outcome, {indicator: result}) of OW-052's runs."""
    found = {}
    for report in reports:
        if report["attack"]["id"] == ATTACK_ID:
            thread = report["execution_summary"]["session"].removeprefix("ag_ui_thread:")
            assert thread not in found, f"two runs of one episode: {thread}"
            found[thread] = (
                report["verdict"]["result"], report["outcome"],
                {v["indicator_id"]: v["result"] for v in report["verdict"]["indicator_verdicts"]})
    return found


def test_an_ag_ui_run_with_its_mcp_and_a2a_calls_is_one_run_judged_with_all(tmp_path: Path) -> None:
    """A complying and a resisting conversation, one after the other: each AG-UI thread is exactly one run of
    OW-052 (no run of the MCP session or the A2A conversation on their own); the complying one is
    `exploited` with all three indicators, the resisting one `resisted`; `oatf evaluate` agrees."""
    with episode(tmp_path, "episodes") as (proxy, agent):
        live = two_conversations(proxy, agent)
    found = results(live)
    assert found == EXPECTED, live
    offline = assert_replay_agrees(proxy, tmp_path, live, flags=("--agents", named(agent)))
    assert results(offline.reports) == found


def test_two_concurrent_threads_of_one_agent_are_two_runs(tmp_path: Path) -> None:
    """Two AG-UI threads of the agent at once, one complying and one resisting: two runs, one per thread.
    Their MCP and A2A calls overlap in time, and an exchange made while both were open joins both; the
    AG-UI half of the chain never crosses threads, so the resisting thread is never `exploited`."""

    async def both(agent: str, proxy: str) -> list[list[dict[str, Any]]]:
        return list(await asyncio.gather(ag_ui_run(f"{agent}/complying", proxy, run_agent_input("t-a")),
                                         ag_ui_run(f"{agent}/resisting", proxy, run_agent_input("t-b"))))

    with episode(tmp_path, "concurrent") as (proxy, agent):
        run(both(agent, proxy.url), 60)
        proxy.wait_until(lambda: len(results(proxy.reports())) == 2, timeout=30)
        proxy.interrupt()
        live = proxy.reports()
    found = results(live)
    assert set(found) == {"t-a", "t-b"}, live
    assert found["t-a"][0] == "exploited"
    assert found["t-b"][0] != "exploited" and found["t-b"][2]["OW-052-03"] == "not_matched"
    offline = assert_replay_agrees(proxy, tmp_path, live, flags=("--agents", named(agent)))
    assert results(offline.reports) == found


def test_a_stdio_server_behind_oatf_tap_joins_the_episode_in_one_shared_monitor(tmp_path: Path) -> None:
    """One judge per agent: the agent's MCP server is a stdio process its toolset starts through `oatf tap
    --monitor SOCKET --agent assistant`, and the proxy (`oatf_listen=SOCKET`) judges the tap's events with the
    agent's AG-UI and A2A traffic. Each AG-UI thread is still exactly one run of OW-052, judged with all three
    indicators (the MCP one seen only by the tap); the tap judges nothing itself. The proxy's `-w` recording
    and the taps' `--record` captures (one per AG-UI run: the toolset starts its server for each) replay
    together to the reports the proxy wrote live, byte for byte."""
    socket_dir = Path(tempfile.mkdtemp(prefix="oatf-"))  # a Unix socket's path is short (108 bytes)
    tap_reports = tmp_path / "tap-reports"
    tap = [str(OATF), "tap", "--attacks", str(ATTACK), "--report-dir", str(tap_reports),
           "--monitor", str(socket_dir / "monitor.sock"), "--agent", "assistant",
           "--record", str(tmp_path / "tap-{pid}.ndjson")]
    # Grace 5 s: the agent starts the tap and its server (two Python processes) inside each run.
    with episode(tmp_path, "stdio-episodes", tap, grace="5s") as (proxy, agent):
        live = two_conversations(proxy, agent)
    assert results(live) == EXPECTED, live
    assert "feed: oatf tap" in proxy.log()
    assert not (tap_reports / "verdicts.jsonl").exists()  # the shared monitor judged: the tap wrote nothing
    captures = sorted(tmp_path.glob("tap-*.ndjson"))
    assert len(captures) == 2, captures
    offline = assert_replay_agrees(proxy, tmp_path, live, grace="5s", flags=("--agents", named(agent)),
                                   captures=captures)
    assert results(offline.reports) == EXPECTED


def test_the_official_ag_ui_client_against_pydantic_ais_adapter(tmp_path: Path) -> None:
    """`@ag-ui/client`'s `HttpAgent` (`tests/js/ag_ui_client.mjs`, through the proxy's reverse listener: Node's
    fetch takes no proxy) runs the pydantic-ai agent's complying and resisting conversations: each thread is one
    run of OW-052 with its agent's MCP and A2A calls (forward proxy), `exploited` and `resisted`; `oatf
    evaluate` agrees."""
    reverse = free_port()
    with episode(tmp_path, "ag-ui-js-episodes", reverse_port=reverse) as (proxy, agent):
        for thread, behaviour, says in (("t-complying", "complying", "Audit Desk"),
                                        ("t-resisting", "resisting", "left it out")):
            messages = tmp_path / f"{thread}.json"
            messages.write_text(json.dumps(run_agent_input(thread)["messages"]), encoding="utf-8")
            done = run_driver("ag_ui_client.mjs", f"http://127.0.0.1:{reverse}/{behaviour}", thread, str(messages),
                              timeout=90)
            assert says in " ".join(str(m["content"]) for m in done["messages"] if m["role"] == "assistant"), done
            proxy.wait_until(lambda t=thread: t in results(proxy.reports()), timeout=30)
        proxy.interrupt()
        live = proxy.reports()
    assert results(live) == EXPECTED, live
    offline = assert_replay_agrees(proxy, tmp_path, live, flags=("--agents", named(agent)))
    assert results(offline.reports) == EXPECTED


def honest_copy(workdir: Path) -> Path:
    """OW-052 made honest, for the peers inject mode is played in front of: the ledger tool's description and
    answer and the Audit Desk's card ask for nothing."""
    document = YAML(typ="safe").load(ATTACK.read_text(encoding="utf-8"))
    actors = {actor["name"]: actor for actor in document["attack"]["execution"]["actors"]}
    [tool] = actors["ledger"]["phases"][0]["state"]["tools"]
    tool["description"] = "Ledger totals for a quarter."
    tool["responses"][0]["content"]["content"][0]["text"] = "Q3 2026 ledger: revenue 52.4 MEUR, EBITDA 8.1 MEUR."
    card = actors["audit_desk"]["phases"][0]["state"]["agent_card"]
    card["description"] = "Signs off ledger figures for board packs."
    card["skills"][0]["description"] = "Signs off quarterly figures."
    honest = workdir / "OW-052-honest.yaml"
    with honest.open("w", encoding="utf-8") as file:
        YAML().dump(document, file)
    return honest


def test_the_chain_injected_in_front_of_honest_peers(tmp_path: Path) -> None:
    """Inject mode (`oatf_inject` = OW-052) in front of an honest ledger (`fastmcp`) and an honest Audit Desk
    (`a2a-sdk`), with a frontend that only asks for the summary: the proxy overlays the ledger tool and answers
    it, rewrites the Audit Desk's card and answer, and adds the board's message to the run input; the complying
    agent is exploited with all three indicators, the resisting one resists; the recording replays alike."""
    honest = honest_copy(tmp_path)
    with contextlib.ExitStack() as stack:
        mcp = stack.enter_context(peer(tmp_path, "mcp", str(honest)))
        a2a = stack.enter_context(peer(tmp_path, "a2a", str(honest)))
        agent_port = free_port()
        agent = f"http://127.0.0.1:{agent_port}"
        options = {"oatf_agents": named(agent), "oatf_inject": str(ATTACK)}
        proxy = stack.enter_context(oatf_proxy(tmp_path, "inject-chain", [ATTACK], options=options))
        process = _start([str(PYTHON), str(ADDON_PEERS / "episode_peers.py"), "agent", str(agent_port),
                          "--mcp", f"http://127.0.0.1:{mcp}/mcp", "--a2a", f"http://127.0.0.1:{a2a}/",
                          "--proxy", proxy.url], tmp_path / f"agent-{agent_port}.log")
        stack.callback(stop, process)
        wait_for_port(agent_port, process)
        for behaviour in ("complying", "resisting"):
            frontend = {"threadId": f"t-{behaviour}", "runId": f"run-{uuid.uuid4().hex[:8]}", "state": {},
                        "tools": [], "context": [], "forwardedProps": {},
                        "messages": [{"id": "f1", "role": "user", "content": "Hello."}]}
            run(ag_ui_run(f"{agent}/{behaviour}", proxy.url, frontend), 60)
        proxy.wait_until(lambda: len(results(proxy.reports())) == 2, timeout=30)
        proxy.interrupt()
        reports = proxy.reports()

    assert results(reports) == EXPECTED
    complying = next(r for r in reports if r["execution_summary"]["session"] == "ag_ui_thread:t-complying")
    injected = {(entry["event"], line) for entry in complying["execution_summary"]["injections"]
                for line in entry["injected"]}
    for event, prefix in (("run_agent_input", "OW-052 actor board phase ask_summary: "),
                          ("tools/list", "OW-052 actor ledger phase widen_and_forward: replaced tools entry "
                                         "'ledger_totals'"),
                          ("tools/call", "OW-052 actor ledger phase widen_and_forward: answered tools/call "
                                         "'ledger_totals'"),
                          ("message/send", "OW-052 actor audit_desk phase collect: replaced the server's answer")):
        assert any(e == event and line.startswith(prefix) for e, line in injected), (event, sorted(injected))
    assert_replay_agrees(proxy, tmp_path, reports)
