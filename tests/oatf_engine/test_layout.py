"""The layout is the process picture (README "Architecture: what runs where"): the engine (`oatf_engine/`) is
shared by both front doors, so it must never import mitmproxy or either front door (`addon/`, `oatf_cli/`), and
the SDK (`oatf/`) imports none of them either; the shared test tooling (`testing/`) and the benchmarks never import
`tests/`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from testing.paths import ROOT

FORBIDDEN = {"oatf_engine": ("mitmproxy", "addon", "oatf_cli"),
             "oatf": ("mitmproxy", "addon", "oatf_cli", "oatf_engine"),
             "testing": ("tests",), "benchmarks": ("tests",)}
"""What each folder never imports. `testing/` (traffic simulators, process harness) serves both the tests and the
benchmarks, so neither it nor a benchmark reaches into `tests/`."""


def imported_modules(path: Path) -> set[str]:
    """Every module a source file imports (absolute names; relative imports stay inside its package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_source_file_imports_a_front_door(package: str) -> None:
    offending = [f"{path.relative_to(ROOT)} imports {name}"
                 for path in sorted((ROOT / package).rglob("*.py"))
                 for name in sorted(imported_modules(path))
                 if name.split(".")[0] in FORBIDDEN[package]]
    assert offending == []


def test_importing_every_engine_module_loads_no_mitmproxy() -> None:
    """Transitively too: importing the whole engine (as the monitor process and `oatf tap` do) pulls in neither
    mitmproxy nor a front door."""
    modules = sorted(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                     for path in (ROOT / "oatf_engine").rglob("*.py"))
    script = ("import importlib, sys\n"
              f"for name in {modules!r}: importlib.import_module(name)\n"
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'mitmproxy', 'addon', 'oatf_cli'}))")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
