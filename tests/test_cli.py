"""The `oatf` command line, run as a user runs it (a subprocess of the installed console script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import oatf

ROOT = Path(__file__).resolve().parents[1]
VALID = """oatf: "0.1"
attack:
  id: ACME-001
  execution:
    mode: mcp_server
    state:
      tools: []
  indicators:
    - surface: tools/call
      target: arguments.command
      pattern:
        contains: rm
"""
INVALID = """oatf: "0.1"
attack:
  execution:
    mode: mcp_server
    phases:
      - state: {tools: []}
        trigger:
          event: tools/call
          match:
            args[*].cmd: ls
      - name: end
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    oatf_script = Path(sys.executable).parent / "oatf"
    return subprocess.run([str(oatf_script), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    (tmp_path / "good.yaml").write_text(VALID)
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "bad.yml").write_text(INVALID)
    (tmp_path / "notes.txt").write_text("not a document")
    return tmp_path


def test_valid_file_exits_zero(docs: Path) -> None:
    result = run("validate", str(docs / "good.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "1 document(s) checked, 0 invalid" in result.stderr


def test_invalid_file_prints_file_line_column_rule_path(docs: Path) -> None:
    result = run("validate", str(docs / "nested" / "bad.yml"))
    assert result.returncode == 1
    line = next(ln for ln in result.stdout.splitlines() if "V-027" in ln)
    assert line.startswith(f"{docs / 'nested' / 'bad.yml'}:10:13: V-027 attack.execution.phases[0].trigger.match")
    assert "simple dot-path" in line


def test_directory_is_searched_recursively_for_yaml(docs: Path) -> None:
    result = run("validate", str(docs))
    assert result.returncode == 1
    assert "2 document(s) checked, 1 invalid" in result.stderr


def test_unreadable_file_exits_two(docs: Path) -> None:
    result = run("validate", str(docs / "good.yaml"), str(docs / "missing.yaml"))
    assert result.returncode == 2
    assert "missing.yaml:" in result.stdout and "unreadable" in result.stdout


def test_parse_error_is_reported_not_raised(docs: Path) -> None:
    (docs / "junk.yaml").write_bytes(b"\xff\xfe garbage [")
    result = run("validate", str(docs / "junk.yaml"))
    assert result.returncode == 1
    assert "parse/syntax" in result.stdout and "Traceback" not in result.stderr


def test_json_format(docs: Path) -> None:
    result = run("validate", "--format", "json", str(docs))
    records = json.loads(result.stdout)
    assert [r["valid"] for r in records] == [True, False]
    bad = records[1]["diagnostics"]
    assert {"file", "severity", "rule", "path", "line", "column", "message"} <= set(bad[0])
    assert any(d["rule"] == "V-027" and d["line"] == 10 for d in bad)


def test_normalize_prints_canonical_yaml(docs: Path) -> None:
    result = run("normalize", str(docs / "good.yaml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("oatf: ")
    document = oatf.parse(result.stdout)
    assert document == oatf.normalize(oatf.parse(VALID))
    assert run("normalize", str(docs / "nested" / "bad.yml")).returncode == 1
