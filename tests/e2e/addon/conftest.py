"""End-to-end tests of the addon: real mitmdump running `addon/oatf_addon.py` between official-SDK agents and
attacker peers on loopback; the assertions read the report files. Every test here is marked `e2e`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.oatf_proxy import Peers, attacker_peers


@pytest.fixture(scope="session")
def addon_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e_addon")


@pytest.fixture(scope="session")
def attackers(addon_workdir: Path) -> Iterator[Peers]:
    """Every attacker peer of `peers.py`, started once for the session."""
    with attacker_peers(addon_workdir) as running:
        yield running
