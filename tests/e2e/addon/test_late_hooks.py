"""A run is never concluded before an event inside its grace period is evaluated, however late the addon's hook
for that event runs (`addon.watermark`), through a real mitmdump: the agent's `tools/call` comes 3 s after
the poisoned `tools/list` (grace period 6 s), and a script before the addon holds its `request` hook 4 s (the
answer then comes within the grace period that the call started). Before the watermark, the wall clock
concluded the run `resisted` meanwhile and the credentials opened a second run, `exploited`: one exploit
reported as a resisted half and an exploited half, which the replay of the recording (evaluated in time order)
did not give."""

from __future__ import annotations

import asyncio
from pathlib import Path

from testing.clients import http_client
from testing.load import EXPLOITED_ATTACK, Traffic, agent_session
from testing.oatf_proxy import ADDON_PEERS, OatfProxy, Report, assert_replay_agrees, oatf_proxy
from testing.paths import ROOT
from testing.processes import peer_process

OW_001 = next((ROOT / "attacks").glob(f"{EXPLOITED_ATTACK}_*.yaml"))
SLOW_HOOK = Path(__file__).with_name("slow_request_hook.py")
GRACE = "6s"
PAUSE = 3.0


async def session(proxy: str, url: str) -> str:
    async with http_client(proxy) as client:
        done = await agent_session(client, url, True, PAUSE, Traffic())
    return done.key


def test_a_late_hook_does_not_conclude_the_run_before_its_event(tmp_path: Path) -> None:
    with peer_process(ADDON_PEERS / "peers.py", ("mcp_invoice",), tmp_path / "peers.log") as server, \
            oatf_proxy(tmp_path, "late", [OW_001], grace=GRACE, scripts=(SLOW_HOOK,)) as proxy:
        key = asyncio.run(session(proxy.url, server.url("mcp_invoice", "/mcp")))
        proxy.wait_until(lambda: any(r["outcome"] == "exploited" for r in runs(proxy, key)), timeout=60)
        proxy.interrupt()
    assert [(r["outcome"], r["execution_summary"]["status"]) for r in runs(proxy, key)] \
        == [("exploited", "completed")], runs(proxy, key)
    assert_replay_agrees(proxy, tmp_path, proxy.reports(), grace=GRACE)


def runs(proxy: OatfProxy, session: str) -> list[Report]:
    return [r for r in proxy.jsonl() if r["execution_summary"]["session"] == session]
