"""Where things are, for every test and benchmark: the repository and the recorded wire fixtures."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root."""

WIRE_FIXTURES = ROOT / "tests" / "oatf_engine" / "wire" / "fixtures"
"""Sessions with the real SDK peers recorded through mitmdump (`python -m tests.e2e.wire.record_fixtures`)."""
