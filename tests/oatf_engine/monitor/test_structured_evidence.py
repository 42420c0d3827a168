"""Reports for triage: each matched indicator's evidence as fields beside the OATF verdict (flow, event, path,
excerpt, the indicator's description and false positives), every time ISO 8601 on the event clock, and the
README's way to find the HAR entry a report cites."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.addons.savehar import SaveHar
from mitmproxy.io import FlowReader

import oatf
from oatf.evaluation import evidence_parts
from oatf_cli.main import main
from testing.paths import ROOT

OW_001 = ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml"
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
VERDICT_FIELDS = {"attack_id", "result", "indicator_verdicts", "evaluation_summary", "timestamp", "source",
                  "max_tier"}
"""The OATF AttackVerdict's fields (SDK spec §2.19, format spec §9.3): the report's `verdict`, unchanged."""


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from testing import sessions

    return sessions.write_session("OW-001", "complying", tmp_path_factory.mktemp("evidence"))


def evaluate(capsys: pytest.CaptureFixture[str], flows: Path, *flags: str) -> list[dict[str, Any]]:
    """The reports of `oatf evaluate` (OW-001 over `flows`)."""
    status = main(["evaluate", "--attacks", str(OW_001), "--flows", str(flows), "--format", "json", *flags])
    out, err = capsys.readouterr()
    assert status == 1, err
    return json.loads(out)


def breach(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of the session with the invoice server, where the credentials left (OW-001-01 matched; the
    other session, with the files server, saw the credentials file read: OW-001-02)."""
    [report] = [r for r in reports if any(e["indicator_id"] == "OW-001-01" for e in r["evidence"])]
    return report


def test_each_matched_indicator_has_its_evidence_as_fields_beside_the_verdict(
        capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = evaluate(capsys, capture, "--show-secrets")
    document = oatf.load(OW_001.read_text(encoding="utf-8")).document
    assert document.attack is not None and document.attack.indicators is not None
    indicators = {i.id: i for i in document.attack.indicators}
    assert {e["indicator_id"] for r in reports for e in r["evidence"]} == set(indicators)
    for report in reports:
        assert set(report["verdict"]) == VERDICT_FIELDS
        assert list(report) == ["attack", "verdict", "evidence", "outcome", "execution_summary"]
        matched = [v for v in report["verdict"]["indicator_verdicts"] if v["result"] == "matched"]
        assert [e["indicator_id"] for e in report["evidence"]] == [v["indicator_id"] for v in matched]
        for found, verdict in zip(report["evidence"], matched, strict=True):
            indicator = indicators[found["indicator_id"]]
            assert found["indicator_description"] == indicator.description
            assert found["false_positives"] == list(indicator.false_positives or ())
            assert found["flow"] in report["execution_summary"]["flows_cited"]
            assert f"(flow {found['flow']})" in verdict["evidence"]  # the readable string cites the same message
            assert (found["event"], found["direction"]) == ("tools/call", "request")
            assert ISO.match(found["at"]) and found["at"] == verdict["timestamp"]
            assert found["endpoint"].endswith("/mcp")
    [found] = breach(reports)["evidence"]
    assert found["path"] == "arguments.billing_notes"
    assert re.search(r"AKIA[0-9A-Z]{16}", found["excerpt"])  # the traffic's text, unquoted


def test_the_excerpt_is_redacted_unless_secrets_are_asked_for(capture: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    report = breach(evaluate(capsys, capture))
    excerpt = next(e["excerpt"] for e in report["evidence"] if e["indicator_id"] == "OW-001-01")
    assert re.fullmatch(r".{0,4}….{0,2} \(\d+ chars\)", excerpt, re.S) and "AKIA" not in excerpt[4:]


def test_every_report_time_is_iso_8601_on_the_event_clock(capture: Path, capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    first = evaluate(capsys, capture, "--report-dir", str(tmp_path / "a"))
    second = evaluate(capsys, capture, "--report-dir", str(tmp_path / "b"))
    assert first == second  # replaying twice gives the same report, times included
    summary = first[0]["execution_summary"]
    times = [summary["started_at"], summary["ended_at"], *(d["at"] for d in summary["delivery_evidence"]),
             *(c["at"] for c in summary["phase_changes"]), first[0]["verdict"]["timestamp"]]
    assert all(isinstance(t, str) and ISO.match(t) for t in times), times
    assert summary["started_at"].startswith("2026-03-02T09:")  # the recording's clock, not today's
    assert summary["started_at"] <= summary["ended_at"] == first[0]["verdict"]["timestamp"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(p.name for p in (tmp_path / "b").iterdir())


@pytest.mark.parametrize(("evidence", "parts"), [
    ('arguments.note: contains "KEY" matched "a KEY b"', ("arguments.note", "a KEY b")),
    ('content[*].text (value 2 of 3): regex "x" matched "line\\nx"', ("content[*].text (value 2 of 3)", "line\nx")),
    ('arguments: contains "k" matched {"k": 1}', ("arguments", '{"k": 1}')),
    ('arguments.note: contains "a" matched "cut short \\u00', ("arguments.note", "cut short \\u00")),
    ('text: highest score 0.9 ≥ threshold 0.7 for "ignore the user"', ("text", "ignore the user")),
    ("CEL expression is true: message.x == 1", (None, None)),
])
def test_evidence_parts(evidence: str, parts: tuple[str | None, str | None]) -> None:
    assert evidence_parts(evidence) == parts


def test_the_readme_finds_the_har_entry_a_report_cites(capture: Path, capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """HAR entries have no ids (mitmproxy gives each flow a new one when it reads a HAR): the README's `jq`
    command finds the entry from the evidence's endpoint and time."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.search(r"^(jq --arg at .*? capture\.har)$", readme, re.M | re.S)
    assert command, "the README shows how to find a HAR entry from a report"
    with capture.open("rb") as handle:
        flows = list(FlowReader(handle).stream())
    har = tmp_path / "capture.har"
    har.write_text(json.dumps(SaveHar().make_har(flows)), encoding="utf-8")
    report = breach(evaluate(capsys, har, "--show-secrets"))
    found = next(e for e in report["evidence"] if e["indicator_id"] == "OW-001-01")
    script = command.group(1).replace("\\\n", " ")
    for name, value in (("at", found["at"]), ("endpoint", found["endpoint"])):
        script = re.sub(rf"--arg {name} \S+", f"--arg {name} '{value}'", script)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)
    body = json.loads(entry["request"]["postData"]["text"])
    assert body["method"] == "tools/call" and found["excerpt"] in body["params"]["arguments"]["billing_notes"]
