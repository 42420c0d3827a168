"""The `oatf` command line, run as a user runs it (a subprocess of the installed console script)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import oatf
from testing.paths import ROOT

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
    records = json.loads(result.stdout)["files"]
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


# --- strict checks: `validate --strict`, `evaluate` refusing what can never fire, `--lenient` -----------------


@pytest.fixture
def mistyped(tmp_path: Path) -> tuple[Path, Path]:
    """OW-001 with its surfaces mistyped (`tools/call` → `tool/call`), and a recording in which the agent sends
    the credentials the attack asks for (judged `exploited` with the correct document)."""
    from testing import sessions

    text = (ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml").read_text(encoding="utf-8")
    document = tmp_path / "mistyped.yaml"
    document.write_text(text.replace("surface: tools/call", "surface: tool/call"), encoding="utf-8")
    sessions.write_session("OW-001", "complying", tmp_path)
    return document, tmp_path / "OW-001.complying.mitm"


def test_validate_strict_reports_strict_errors(mistyped: tuple[Path, Path]) -> None:
    document, _ = mistyped
    conformant = run("validate", str(document))
    assert conformant.returncode == 0 and "warning V-018" in conformant.stdout  # the spec's rule: a warning
    result = run("validate", "--strict", str(document))
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(ln for ln in result.stdout.splitlines() if "S-001" in ln)
    assert line.startswith(f"{document}:69:16: S-001 attack.indicators[0].surface: surface 'tool/call'")
    assert line.endswith("did you mean 'tools/call'?")


def test_evaluate_refuses_a_document_that_can_never_fire(mistyped: tuple[Path, Path]) -> None:
    document, flows = mistyped
    result = run("evaluate", "--attacks", str(document), "--flows", str(flows))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"not loaded: {document}:69:16: S-001 attack.indicators[0].surface" in result.stderr
    assert "did you mean 'tools/call'?" in result.stderr and "--lenient" in result.stderr
    assert "1 document(s) not loaded" in result.stderr and "not_exploited" not in result.stdout


def test_evaluate_lenient_loads_it_with_a_warning(mistyped: tuple[Path, Path]) -> None:
    document, flows = mistyped
    result = run("evaluate", "--lenient", "--attacks", str(document), "--flows", str(flows))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"warning: loaded anyway (--lenient): {document}:69:16: S-001" in result.stderr
    assert "not loaded" not in result.stderr and "OW-001" in result.stdout


def test_evaluate_exits_two_when_any_document_fails_to_load(mistyped: tuple[Path, Path], docs: Path) -> None:
    """One broken document beside a good one that produced runs (and found the exploit): still exit 2."""
    _, flows = mistyped
    good = ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml"
    result = run("evaluate", "--attacks", f"{good},{docs / 'nested' / 'bad.yml'}", "--flows", str(flows))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "exploited" in result.stdout
    assert f"not loaded: {docs / 'nested' / 'bad.yml'}:10:13: V-027" in result.stderr
    assert "1 document(s) not loaded" in result.stderr


def test_evaluate_exits_two_when_the_decoder_failed_on_the_traffic(mistyped: tuple[Path, Path],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A step of the recording that makes the wire decoder raise (a bug) cuts its exchange off, as live: here the
    `tools/call` that carries the credentials, so no run sees the exploit. The gate must not pass on traffic it
    did not read through: exit 2 and the reason, not 0 with `not_exploited` (before, only a log line said it); and
    the decoder marks the exchange cut off, so that run reads `inconclusive`, not `resisted`."""
    from unittest import mock

    from oatf_cli.main import main
    from oatf_engine.wire import WireDecoder

    _, flows = mistyped
    good = ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml"
    original = WireDecoder.request_data

    def request_data(self: WireDecoder, exchange_id: str, data: bytes, timestamp: float) -> object:
        if b"AKIA" in data:
            raise RuntimeError("a decoder bug")
        return original(self, exchange_id, data, timestamp)

    def outcomes() -> tuple[int, list[str], str]:
        status = main(["evaluate", "--attacks", str(good), "--flows", str(flows), "--format", "json"])
        out, err = capsys.readouterr()
        return status, sorted(report["outcome"] for report in json.loads(out)), err

    assert outcomes()[:2] == (1, ["exploited", "exploited"])  # both sessions: the credentials left in one
    with mock.patch.object(WireDecoder, "request_data", request_data):
        status, cut, err = outcomes()
    assert cut == ["exploited", "inconclusive"], "the session whose exfiltrating call was cut off: not `resisted`"
    assert status == 2, err
    assert "oatf evaluate: 1 step(s) of the traffic made the wire decoder raise" in err


def test_evaluate_exits_two_when_traffic_was_not_inspected(mistyped: tuple[Path, Path]) -> None:
    """Bodies over `--wire-max-body` pass uninspected (`oversize_body`): the poisoned listing and the exfiltrating
    call are never seen, so no run reads `exploited`. The gate must not pass on traffic it did not inspect: exit 2
    and the count per code, not 0 (before, nothing said it); and no run of those sessions reads `resisted` (the
    decoder's marks: `UNINSPECTED_EVENT`), in the reports and the JUnit output alike."""
    _, flows = mistyped
    good = ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml"
    whole = run("evaluate", "--attacks", str(good), "--flows", str(flows))
    assert whole.returncode == 1 and "not inspected" not in whole.stderr, whole.stderr
    cut = run("evaluate", "--attacks", str(good), "--flows", str(flows), "--wire-max-body", "100", "--format", "json",
              "--junit", str(flows.with_suffix(".xml")))
    reports = json.loads(cut.stdout)
    assert reports and {report["outcome"] for report in reports} == {"inconclusive"}, "never resisted: it was unseen"
    assert all(report["execution_summary"]["uninspected_messages"] > 0 for report in reports)
    assert "message(s) of its session were not inspected" in flows.with_suffix(".xml").read_text(encoding="utf-8")
    assert cut.returncode == 2, cut.stderr
    assert re.search(r"oatf evaluate: traffic not inspected \(oversize_body \d+\)", cut.stderr), cut.stderr


def test_evaluate_help_names_the_exit_statuses() -> None:
    result = run("evaluate", "--help")
    assert "--lenient" in result.stdout and "any document not loaded" in result.stdout.replace("\n", " ")


def test_nul_byte_is_located_at_its_line_and_column(docs: Path) -> None:
    (docs / "nul.yaml").write_bytes(b'oatf: "0.1"\nattack:\n  id: "AB\x00C"\n')
    result = run("validate", str(docs / "nul.yaml"))
    assert result.returncode == 1
    assert result.stdout.startswith(f"{docs / 'nul.yaml'}:3:10: parse/syntax: ")
    assert "NUL" in result.stdout and "None" not in result.stdout


@pytest.mark.parametrize("number", ["1" * 100_000, "-" + "9" * 4301, "0x" + "f" * 4000])
def test_huge_integer_is_a_located_parse_error(docs: Path, number: str) -> None:
    (docs / "big.yaml").write_text(f'oatf: "0.1"\nattack:\n  id: ACME-001\n  x-size: {number}\n')
    result = run("validate", str(docs / "big.yaml"))
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{docs / 'big.yaml'}:4:11: parse/syntax: "), first
    assert "integer" in first and "4300" in first and "sys.set_int_max_str_digits" not in first
    assert len(first) < 300  # the number itself is not echoed


def test_integers_up_to_the_limit_parse() -> None:
    document = oatf.parse(f'oatf: "0.1"\nattack:\n  id: ACME-001\n  x-size: {"9" * 4300}\n')
    assert document.to_dict()["attack"]["x-size"] == 10**4300 - 1


def test_every_command_lists_its_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from oatf_cli.main import build_parser

    parser = build_parser()
    [commands] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    assert len(commands.choices) >= 8
    for name, command in commands.choices.items():
        text = command.format_help()
        statuses = text[text.index("\nexit status"):] if "\nexit status" in text else ""
        assert re.match(r"\nexit status[^\n]*:\n  ", statuses), name
        assert "\n  0  " in statuses or name == "tap", name  # tap exits as its server did
        assert "\n  2  " in statuses or "\n  2    " in statuses, name
    assert "exit statuses" in parser.format_help()
