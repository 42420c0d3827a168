"""End-to-end tests against JavaScript peers nobody on the team wrote (the pinned npm packages of `tests/js`,
installed by `scripts/test.sh`): real mitmdump running the addon in reverse mode in front of them. Every test
here is marked `e2e`."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(__file__).parent in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
