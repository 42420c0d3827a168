"""End-to-end suites with real processes on loopback: `wire` (the decoders through mitmdump against the official
SDK peers), `addon` (verdicts from the addon in mitmdump, third-party agents, crashes, bad input), `js`
(JavaScript peers nobody here wrote, `tests/js`). Every test under this folder is marked `e2e`, so
`pytest -m "not e2e"` runs the fast tests only. Shared process harness: `testing/processes.py`."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", "ignore:.*deprecated.*:DeprecationWarning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(__file__).parent in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
