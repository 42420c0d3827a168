"""Locates and loads the official OATF conformance fixtures, read in place (never copied).

`$OATF_CONFORMANCE_DIR`, else `../shared/oatf-conformance` beside the checkout. With `CI=true` a missing
fixture directory is a failure, not a skip. Each case becomes its own pytest parameter whose id is the
fixture's `id` (for `parse/` corpus files: the file name).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from testing.paths import ROOT


def conformance_dir() -> Path | None:
    configured = os.environ.get("OATF_CONFORMANCE_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "oatf-conformance"
    return path if path.is_dir() else None


def _require_dir() -> Path | None:
    path = conformance_dir()
    if path is None and os.environ.get("CI", "").lower() == "true":
        raise RuntimeError("conformance fixtures not found: set OATF_CONFORMANCE_DIR (CI=true forbids skipping)")
    return path


def load_yaml_file(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def suite_cases(*relative_files: str) -> list[Any]:
    """pytest params, one per case of the given suite files (paths relative to the fixture root)."""
    base = _require_dir()
    if base is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason="conformance fixtures not found"))]
    params = []
    for rel in relative_files:
        for case in load_yaml_file(base / rel):
            params.append(pytest.param(case, id=f"{case['id']}"))
    return params


def suite_files(directory: str) -> list[str]:
    """The suite files of one fixture directory, relative to the fixture root, sorted."""
    base = _require_dir()
    if base is None:
        return []
    return sorted(str(p.relative_to(base)) for p in (base / directory).glob("*.yaml"))


def corpus_files(directory: str) -> list[Any]:
    """pytest params, one per document of a `parse/` corpus directory (sidecars excluded)."""
    base = _require_dir()
    if base is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason="conformance fixtures not found"))]
    files = sorted(p for p in (base / directory).glob("*.yaml") if not p.name.endswith(".meta.yaml"))
    return [pytest.param(p, id=p.name) for p in files]
