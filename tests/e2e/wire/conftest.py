"""End-to-end wire tests: real peers and mitmdump on loopback, started once per test session.

Marker `e2e` (registered here): `pytest -m "not e2e"` runs the fast tests only."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testing.processes import Peers, Proxy, mitmdump, peers

from .sessions import SESSIONS


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e_wire")


@pytest.fixture(scope="session")
def running_peers(workdir: Path) -> Iterator[Peers]:
    with peers(workdir) as running:
        yield running


@pytest.fixture(scope="session")
def proxy(workdir: Path) -> Iterator[Proxy]:
    with mitmdump(workdir, flows=workdir / "capture.mitm") as running:
        yield running


class Run:
    """One session run directly and through the tapped proxy: what the client saw both times, and the events
    the tap decoded from the proxied run."""

    def __init__(self, direct: Any, proxied: Any, events: list[dict[str, Any]]) -> None:
        self.direct, self.proxied, self.events = direct, proxied, events


@pytest.fixture(scope="session")
def runs(running_peers: Peers, proxy: Proxy) -> dict[str, Run]:
    """Every session of `sessions.SESSIONS`, in order, each direct then proxied."""
    results = {}
    for name, session in SESSIONS.items():
        direct = asyncio.run(asyncio.wait_for(session(running_peers, None), 30))
        before = len(proxy.events())
        proxied = asyncio.run(asyncio.wait_for(session(running_peers, proxy.url), 30))
        results[name] = Run(direct, proxied, proxy.settled_events()[before:])
    return results
