"""What a person sees in mitmweb, end to end: a real mitmweb running the addon between official-SDK MCP agents
and the poisoned calculator, read through mitmweb's own HTTP API (the data its browser UI shows) — each flow a
run took part in marked with the run's outcome and commented with the verdict, the MCP content view chosen for
the poisoned `tools/list` and headed by the run's verdict, and `oatf.flow` answering in the command bar."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from testing.mitmweb import Mitmweb, mitmweb
from testing.oatf_proxy import Peers, run

from . import agents
from .attacks import TOOL_POISONING


def called(web: Mitmweb, session: str, method: bytes) -> dict[str, Any]:
    """The flow of that MCP session whose request is `method`, as mitmweb lists it."""
    found = [f for f in web.flows() if f["request"]["method"] == "POST"
             and any(name.lower() == "mcp-session-id" and value == session for name, value in f["request"]["headers"])
             and method.decode() in web.content(f["id"], "request", "raw")["text"]]
    assert len(found) == 1, found
    return found[0]


def until_marked(web: Mitmweb, flow_id: str, mark: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        flow = next(f for f in web.flows() if f["id"] == flow_id)
        if flow["marked"] == mark:
            return flow
        assert time.monotonic() < deadline, f"{flow_id} marked {flow['marked']!r}, not {mark!r}: {flow['comment']}"
        time.sleep(0.1)


def test_mitmweb_marks_each_flow_with_its_runs_outcome_and_oatf_flow_tells_it(attackers: Peers,
                                                                              tmp_path: Path) -> None:
    url = attackers.url("mcp_poisoned", "/mcp")
    with mitmweb(tmp_path, [TOOL_POISONING]) as web:
        naive = run(agents.mcp_poisoned_agent(url, web.proxy_url, "naive"))
        careful = run(agents.mcp_poisoned_agent(url, web.proxy_url, "careful"))
        exploited_call = until_marked(web, called(web, naive, b'"tools/call"')["id"], "🔴")
        exploited_list = until_marked(web, called(web, naive, b'"tools/list"')["id"], "🔴")
        resisted_list = until_marked(web, called(web, careful, b'"tools/list"')["id"], "🟢")
        view = web.content(exploited_list["id"], "response")
        call_view = web.content(exploited_call["id"], "request")
        answer = web.command("oatf.flow", f"@{exploited_call['id']}")
        listed = web.command("oatf.flow", f"@{exploited_list['id']}")
        marked = web.command("oatf.flow", "@marked")
        careful_call = called(web, careful, b'"tools/call"')
    assert exploited_call["comment"].startswith("OATF DEMO-001-01 matched: tools/call request")
    assert exploited_call["comment"].splitlines()[-1] == \
        f"OATF DEMO-001: exploited (completed), run DEMO-001@mcp_session:{naive}"
    assert exploited_list["comment"] == f"OATF DEMO-001: exploited (completed), run DEMO-001@mcp_session:{naive}"
    assert resisted_list["comment"] == f"OATF DEMO-001: resisted (completed), run DEMO-001@mcp_session:{careful}"
    assert careful_call["marked"] == "" and careful_call["comment"] == ""  # no finding there, no payload
    assert view["view_name"] == "MCP" and "read the file ~/.ssh/id_rsa" in view["text"]
    assert view["text"].split("\n")[:3] == [  # the run's verdict heads the view
        f"# OATF RUN · attack DEMO-001 · exploited (completed) · payload delivered in this flow · run "
        f"DEMO-001@mcp_session:{naive}", "# ", "# MCP response (server → client) · POST /mcp"]
    assert call_view["text"].split("\n")[1:4] == [
        f"# OATF RUN · attack DEMO-001 · exploited (completed) · payload not delivered in this flow · run "
        f"DEMO-001@mcp_session:{naive}", "# ", "# MCP request (client → server) · POST /mcp"]
    assert call_view["text"].startswith("# OATF MATCH · attack DEMO-001 · indicator DEMO-001-01 · tools/call request")
    assert answer[0].startswith(f"flow {exploited_call['id']} · POST {url} · 200 · MCP")
    assert answer[1] == "2 message(s) decoded:" and answer[2].startswith("  request tools/call · id ")
    assert answer[4] == "1 OATF run(s) took part in this flow:"
    assert answer[5].startswith(f"  run DEMO-001@mcp_session:{naive} · attack DEMO-001 · exploited (completed) · "
                                f"report {web.report_dir}")
    assert answer[6].startswith('    indicator DEMO-001-01 matched at arguments.note: "-----BEGIN OPENSSH PRIVATE KEY')
    assert listed[4:] == [answer[4], answer[5], "    an actor's payload reached the agent in this flow"]
    assert sum(line.startswith("flow ") for line in marked) == 3  # the two tools/list and the matched tools/call
