"""Start-up with a library of 2,000 documents (issue 15: loaded without blocking traffic), through a real mitmdump:
the documents load on a thread of their own, cold (no cache of loaded documents: `OATF_CACHE_DIR=off`), so for
seconds; an agent's MCP session sent meanwhile is forwarded at once — answered before the library is loaded — and
evaluated once it is: the run of OW-001 and of each of its copies is reported `exploited` for that session (traffic
seen while loading is never missed: a run that never saw it would be a false `not_exploited`). A shutdown while
the documents load waits for them, then evaluates what came meanwhile."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from oatf_engine.monitor.document_cache import CACHE_ENV
from oatf_engine.monitor.library import document_files
from testing.clients import http_client
from testing.library_copies import ATTACKS, write_library
from testing.load import EXPLOITED_ATTACK, Session, Traffic, agent_session
from testing.oatf_proxy import ADDON_PEERS, OatfProxy, oatf_proxy
from testing.processes import Peers, peer_process

SIZE = 2000
LOADING = "loading the attack documents"
LOADED = f"{SIZE} attack(s) loaded"


@pytest.fixture(scope="module")
def invoice_server(addon_workdir: Path) -> Iterator[Peers]:
    with peer_process(ADDON_PEERS / "peers.py", ("mcp_invoice",), addon_workdir / "start-up-peer.log") as running:
        yield running


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("library")
    write_library(SIZE, directory)
    return directory


def copies_of_exploited(library: Path) -> set[str]:
    """The ids of OW-001 and its copies in `library` (`write_library`: document n, named `<n>-<original's
    name>`, is of copy n // (documents in `attacks/`), and copy k of OW-001 is OW-001<k>)."""
    originals = len(document_files([str(ATTACKS)])[0])
    return {f"{EXPLOITED_ATTACK}{int(p.name[:5]) // originals or ''}" for p in library.iterdir()
            if p.name[6:].startswith(f"{EXPLOITED_ATTACK}_")}


def complying_session(proxy: OatfProxy, url: str) -> Session:
    async def run() -> Session:
        async with http_client(proxy.url) as client:
            return await agent_session(client, url, complying=True, pause=0.0, traffic=Traffic())

    return asyncio.run(run())


def exploited_runs(proxy: OatfProxy, session: Session) -> dict[str, str]:
    """Attack id → verdict of the runs of OW-001 and its copies in `session`."""
    return {r["attack"]["id"]: r["verdict"]["result"] for r in proxy.reports()
            if re.fullmatch(rf"{EXPLOITED_ATTACK}\d*", r["attack"]["id"])
            and r["execution_summary"]["session"].endswith(session.id)}


def test_a_session_during_loading_is_forwarded_at_once_and_evaluated_once_loaded(
        invoice_server: Peers, library: Path, tmp_path: Path) -> None:
    url = invoice_server.url("mcp_invoice", "/mcp")
    expected = copies_of_exploited(library)
    assert len(expected) > 1
    with oatf_proxy(tmp_path, "start-up", [library], loaded=False, record=False,
                    environment={CACHE_ENV: "off"}) as proxy:
        session = complying_session(proxy, url)
        answered = proxy.log()
        assert LOADING in answered and LOADED not in answered  # every answer came while the documents loaded
        proxy.wait_for_log(lambda text: LOADED in text, timeout=300)
        proxy.wait_until(lambda: set(exploited_runs(proxy, session)) == expected, timeout=120)
        assert set(exploited_runs(proxy, session).values()) == {"exploited"}
        assert proxy.interrupt(timeout=300) == 0  # bounded (a stop on a loaded CI machine once took over 120 s)


def test_a_shutdown_during_loading_evaluates_what_came_meanwhile(
        invoice_server: Peers, library: Path, tmp_path: Path) -> None:
    url = invoice_server.url("mcp_invoice", "/mcp")
    with oatf_proxy(tmp_path, "start-up-stop", [library], loaded=False, record=False,
                    environment={CACHE_ENV: "off"}) as proxy:
        session = complying_session(proxy, url)
        assert LOADED not in proxy.log()
        assert proxy.interrupt(timeout=300) == 0  # while the documents load
        assert LOADED in proxy.log()
    assert set(exploited_runs(proxy, session)) == copies_of_exploited(library)
    assert set(exploited_runs(proxy, session).values()) == {"exploited"}
