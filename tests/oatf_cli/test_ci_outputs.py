"""CI outputs of `oatf evaluate` (`oatf_cli/outputs.py`: SARIF, JUnit, HTML, text), the redaction of matched
values (`oatf_engine.reports.redact_report`), the `--fail-on` thresholds, and the command line that ties them
together, run as a user runs it over captures of the attack library's sessions (`testing/sessions.py`)."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import oatf
from oatf_cli import outputs
from oatf_engine.monitor.delivery import outcome
from oatf_engine.reports import ReportWriter, exit_status, redact, redact_evidence, redact_report
from testing.paths import WIRE_FIXTURES
from tests.oatf_cli.test_cli import ROOT, run

AWS_KEY = "AKIAQ7EXAMPLE4HJ2RTX"
"""The access key id the OW-001 complying session's agent sends (tests/attacks/sessions/OW-001.yaml)."""
OW_001 = ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml"
OW_010 = ROOT / "attacks" / "OW-010_sampling-token-drain.yaml"
HONEST = WIRE_FIXTURES / "mcp_http.mitm"


def report(result: str = "exploited", *, delivered: bool = True, attack_id: str = "ACME-001",
           session: str = "mcp_session:abc", severity: str | None = "high", tier: str | None = "boundary_breach",
           evidence: str = 'tools/call request (flow f-1): arguments.note: contains "KEY" matched "short"',
           status: str = "completed") -> dict[str, Any]:
    matched = result in ("exploited", "partial")
    return {
        "attack": {"id": attack_id, "name": f"{attack_id} name", "version": 1, "file": f"attacks/{attack_id}.yaml",
                   "severity": {"level": severity} if severity else None, "classification": None},
        "verdict": {"attack_id": attack_id, "result": result, "max_tier": tier if matched else None,
                    "indicator_verdicts": [{"indicator_id": f"{attack_id}-01", "result": {
                        "exploited": "matched", "partial": "matched", "error": "error"}.get(result, "not_matched"),
                        "timestamp": "2026-01-01T00:00:00.000Z", "evidence": evidence}],
                    "evaluation_summary": {"matched": int(matched), "not_matched": int(not matched), "error": 0,
                                           "skipped": 0}},
        "outcome": outcome(result, delivered) if status == "completed" or not delivered else "inconclusive",
        "execution_summary": {"status": status, "session": session, "ended_at": 1.0, "delivered": delivered,
                              "flows_cited": ["f-1"] if matched else [], "delivery_evidence": [],
                              "actors": [{"name": "default", "extractors": {"token": AWS_KEY, "n": "ab"}}]},
    }


def attack(attack_id: str = "ACME-001", level: str = "high") -> oatf.Attack:
    return oatf.Attack.from_dict({
        "id": attack_id, "name": f"{attack_id} name", "description": "What the attack does.",
        "severity": {"level": level, "confidence": 80},
        "classification": {"category": "capability_poisoning", "tags": ["injection"],
                           "mappings": [{"framework": "cwe", "id": "CWE-200"}]},
        "references": [{"url": "https://example.com/ref"}],
    })


# --- redaction ---------------------------------------------------------------------------------------------------


def test_redact_keeps_the_first_four_and_last_two_characters_of_long_values() -> None:
    assert redact(AWS_KEY) == "AKIA…TX (20 chars)"
    assert redact("12345678") == "12345678"
    assert redact(redact(AWS_KEY)) == redact(AWS_KEY), "already redacted: unchanged"


@pytest.mark.parametrize(("evidence", "expected"), [
    (f'x: regex "A" matched "[default]\\naws = {AWS_KEY}"', 'x: regex "A" matched "[def…TX (36 chars)"'),
    (f'x: contains "A" matched "{AWS_KEY[:-1]}…', 'x: contains "A" matched "AKIA…T… (20 chars)"'),
    (f'x: equals 1 matched {{"key":"{AWS_KEY}","n":1}}', 'x: equals 1 matched {"key":"AKIA…TX (20 chars)","n":1}'),
    ('x: highest score 0.9 ≥ threshold 0.7 for "send the AWS key"',
     'x: highest score 0.9 ≥ threshold 0.7 for "send…ey (16 chars)"'),
    (f"CEL expression is true: message.k == '{AWS_KEY}'", "CEL expression is true: message.k == 'AKIA…TX (20 chars)'"),
    ('x: contains "A" matched "short"', 'x: contains "A" matched "short"'),
    *[(text, text) for text in ['x: contains "-----BEGIN RSA PRIVATE KEY-----" matched "k"']],
    ("CEL: m == '-----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIBAAKCAQEA7\\n-----END RSA PRIVATE KEY-----' and more",
     "CEL: m == '----…-- (81 chars)' and more"),
])
def test_redact_evidence(evidence: str, expected: str) -> None:
    assert redact_evidence(evidence) == expected


def test_redact_report_redacts_evidence_and_extracted_values_in_a_copy() -> None:
    original = report(evidence=f'x: contains "A" matched "{AWS_KEY}"')
    redacted = redact_report(original)
    assert AWS_KEY not in json.dumps(redacted)
    assert redacted["execution_summary"]["actors"][0]["extractors"] == {"token": "AKIA…TX (20 chars)", "n": "ab"}
    assert AWS_KEY in json.dumps(original), "the report itself is left as it was"


def test_report_writer_redacts_unless_asked_and_creates_files_0600(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        secret = report(evidence=f'x: contains "A" matched "{AWS_KEY}"')
        ReportWriter(tmp_path / "redacted").write(secret)
        ReportWriter(tmp_path / "whole", show_secrets=True).write(secret)
    finally:
        os.umask(previous)
    for path in (tmp_path / "redacted").iterdir():
        assert AWS_KEY not in path.read_text() and stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    assert all(AWS_KEY in path.read_text() for path in (tmp_path / "whole").iterdir())


# --- thresholds --------------------------------------------------------------------------------------------------


def test_exit_status_thresholds() -> None:
    reports = [report("exploited", severity="medium", tier="local_action"), report("not_exploited")]
    assert exit_status(reports) == 1
    assert exit_status(reports, fail_on={"partial"}) == 0
    assert exit_status(reports, severity_threshold="medium") == 1
    assert exit_status(reports, severity_threshold="high") == 0
    assert exit_status(reports, min_tier="local_action") == 1
    assert exit_status(reports, min_tier="boundary_breach") == 0
    assert exit_status([report("partial", severity=None, tier=None)], severity_threshold="critical",
                       min_tier="boundary_breach") == 1, "unranked severity and tier count"
    assert exit_status([*reports, report("error")], severity_threshold="critical") == 2, "errors always count"


# --- SARIF -------------------------------------------------------------------------------------------------------

SARIF_REQUIRED = {
    "$defs": {
        "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
                    "properties": {"text": {"type": "string"}}},
        "rule": {"type": "object", "required": ["id"], "properties": {
            "id": {"type": "string"}, "shortDescription": {"$ref": "#/$defs/message"},
            "fullDescription": {"$ref": "#/$defs/message"},
            "defaultConfiguration": {"properties": {"level": {"enum": ["none", "note", "warning", "error"]}}}}},
        "location": {"type": "object", "properties": {
            "physicalLocation": {"type": "object", "anyOf": [{"required": ["artifactLocation"]}],
                                 "properties": {"artifactLocation": {"type": "object", "required": ["uri"],
                                                                     "properties": {"uri": {"type": "string"}}}}},
            "logicalLocations": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "fullyQualifiedName": {"type": "string"}, "kind": {"type": "string"}}}}}},
        "result": {"type": "object", "required": ["message"], "properties": {
            "message": {"$ref": "#/$defs/message"}, "ruleId": {"type": "string"},
            "ruleIndex": {"type": "integer", "minimum": -1},
            "level": {"enum": ["none", "note", "warning", "error"]},
            "kind": {"enum": ["notApplicable", "pass", "fail", "review", "open", "informational"]},
            "locations": {"type": "array", "items": {"$ref": "#/$defs/location"}}}},
    },
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {"type": "array", "items": {"type": "object", "required": ["tool"], "properties": {
            "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"},
                               "rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}}}}}},
            "results": {"type": "array", "items": {"$ref": "#/$defs/result"}}}}},
    },
}
"""The properties SARIF 2.1.0 requires (sarifLog version and runs, run tool, tool driver, driver name, result
message, message text or id, reportingDescriptor id) and the enums of what we write."""


def test_sarif_has_the_required_structure_rules_and_one_result_per_exploited_or_partial_run() -> None:
    reports = [report("exploited", session="s1"), report("partial", attack_id="ACME-002", session="s2",
                                                          severity="medium"),
               report("not_exploited", session="s3"), report("not_exploited", delivered=False, session="s4")]
    log = json.loads(outputs.to_sarif(reports, {"ACME-001": attack(), "ACME-002": attack("ACME-002", "medium")},
                                      {"f-1": "captures/run.mitm"}, ["captures/run.mitm"], "1.2.3"))
    jsonschema.validate(log, SARIF_REQUIRED)
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["version"] == "1.2.3"
    rule = driver["rules"][0]
    assert rule["defaultConfiguration"]["level"] == "error" and rule["properties"]["security-severity"] == "8.0"
    assert {"security", "capability_poisoning", "injection", "cwe/CWE-200"} <= set(rule["properties"]["tags"])
    assert rule["fullDescription"]["text"] == "What the attack does."
    results = log["runs"][0]["results"]
    assert [(r["ruleId"], r["level"], r["properties"]["outcome"]) for r in results] == [
        ("ACME-001", "error", "exploited"), ("ACME-002", "warning", "partial")]
    [location] = results[0]["locations"]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "captures/run.mitm"
    assert location["logicalLocations"][0]["fullyQualifiedName"] == "s1/f-1"
    assert "exploited" in results[0]["message"]["text"] and 'matched "short"' in results[0]["message"]["text"]
    assert results[0]["partialFingerprints"] != results[1]["partialFingerprints"]


@pytest.mark.parametrize(("level", "sarif", "score"), [("critical", "error", "9.5"), ("low", "note", "3.0"),
                                                        ("informational", "note", "0.0")])
def test_sarif_levels(level: str, sarif: str, score: str) -> None:
    log = json.loads(outputs.to_sarif([report(severity=level)], {"ACME-001": attack(level=level)}, {}, ["c.mitm"],
                                      "0"))
    assert log["runs"][0]["tool"]["driver"]["rules"][0]["properties"]["security-severity"] == score
    assert log["runs"][0]["results"][0]["level"] == sarif
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "c.mitm"


# --- JUnit -------------------------------------------------------------------------------------------------------


def test_junit_suites_cases_and_verdicts_parse_back() -> None:
    reports = [report("exploited", session="s1"), report("not_exploited", session="s2"),
               report("not_exploited", delivered=False, session="s3"), report("error", session="s4\x1b[31m"),
               report("not_exploited", session="s5", status="evicted"),
               report("exploited", attack_id="ACME-002", evidence='x: contains "<" matched "<script>&"')]
    root = ET.fromstring(outputs.to_junit(reports))
    assert root.tag == "testsuites" and root.get("tests") == "6" and root.get("failures") == "2"
    suites = {s.get("name"): s for s in root}
    assert set(suites) == {"ACME-001", "ACME-002"}
    first = suites["ACME-001"]
    assert [first.get(n) for n in ("tests", "failures", "errors", "skipped")] == ["5", "1", "1", "2"]
    cases = {c.get("name"): c for c in first}
    assert cases["s1"].find("failure").get("message").startswith("exploited: ACME-001-01: tools/call")
    assert list(cases["s2"]) == [], "resisted: passes"
    assert "not delivered" in cases["s3"].find("skipped").get("message")
    assert cases["s4\\x1b[31m"].find("error") is not None, "control characters escaped, the XML stays well-formed"
    assert "inconclusive" in cases["s5"].find("skipped").get("message")
    assert suites["ACME-002"][0].find("failure").text == 'ACME-002-01: x: contains "<" matched "<script>&"'


# --- HTML and text -----------------------------------------------------------------------------------------------


def test_html_is_static_and_escapes_traffic_text() -> None:
    page = outputs.to_html([report(evidence='x: contains "a" matched "<script>alert(1)</script>"',
                                   session="<img src=x onerror=alert(1)>"), report("not_exploited")])
    assert "<script" not in page.lower() and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x" in page
    assert "2 run(s): 1 exploited, 0 partial, 1 resisted" in page
    assert "http" not in page.replace("http-equiv", ""), "nothing is loaded from the network"


def test_text_quiet_and_verbose() -> None:
    reports = [report(), report("not_exploited", session="s2")]
    assert outputs.to_text(reports, quiet=True) == "2 run(s): 1 exploited, 0 partial, 1 resisted, 0 inconclusive, " \
        "0 not delivered, 0 error\n"
    plain, verbose = outputs.to_text(reports), outputs.to_text(reports, verbose=True)
    assert "ATTACK" in plain and 'matched "short"' not in plain
    assert verbose.startswith(plain.rstrip("\n")) and '  ACME-001-01: tools/call request (flow f-1)' in verbose


# --- the command line --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from testing import sessions

    out = tmp_path_factory.mktemp("ci-captures")
    for attack_id in ("OW-001", "OW-010"):
        sessions.write_session(attack_id, "complying", out)
    return out


def test_every_output_at_once_and_no_whole_secret_anywhere(captures: Path, tmp_path: Path) -> None:
    flows = str(captures / "OW-001.complying.mitm")
    files = {fmt: tmp_path / f"out.{fmt}" for fmt in ("sarif", "junit", "html", "json")}
    args = ["evaluate", "--attacks", str(OW_001), "--flows", str(HONEST), flows,
            "--report-dir", str(tmp_path / "reports"),
            *(arg for fmt, path in files.items() for arg in (f"--{fmt}", str(path)))]
    result = run(*args, "-v")
    assert result.returncode == 1, result.stdout + result.stderr
    texts = {fmt: path.read_text(encoding="utf-8") for fmt, path in files.items()}
    texts |= {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "reports").iterdir()}
    texts |= {"stdout": result.stdout, "stderr": result.stderr}
    for fmt in ("text", "json", "sarif", "junit", "html"):
        texts[f"--format {fmt}"] = run("evaluate", "--attacks", str(OW_001), "--flows", flows, "--format", fmt).stdout
    assert [name for name, text in texts.items() if AWS_KEY in text] == []
    assert "AKIA" in texts["--format json"] and "(114 chars)" in texts["--format json"]
    log = json.loads(texts["sarif"])
    jsonschema.validate(log, SARIF_REQUIRED)
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"OW-001"}
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]} \
        == {Path(flows).as_uri()}, "the capture the cited flow came from (not the first one given)"
    assert ET.fromstring(texts["junit"]).get("failures") == "2"
    assert texts["html"].startswith("<!DOCTYPE html>") and json.loads(texts["json"])[0]["attack"]["id"] == "OW-001"
    assert ET.fromstring(texts["--format junit"]).tag == "testsuites"

    shown = run(*args, "-v", "--show-secrets")
    assert AWS_KEY in shown.stdout and AWS_KEY in files["sarif"].read_text() and AWS_KEY in files["json"].read_text()


def test_thresholds_on_the_command_line(captures: Path) -> None:
    """OW-010 (severity medium) exploited at tier local_action."""
    base = ["evaluate", "--attacks", str(OW_010), "--flows", str(captures / "OW-010.complying.mitm"), "-q"]
    assert run(*base).returncode == 1
    assert run(*base, "--min-tier", "local_action", "--severity-threshold", "medium").returncode == 1
    assert run(*base, "--min-tier", "boundary_breach").returncode == 0
    assert run(*base, "--severity-threshold", "high").returncode == 0
    assert run(*base, "--fail-on", "partial").returncode == 0
    assert run(*base, "--fail-on", "partial", "--fail-on", "exploited").returncode == 1


def test_fail_on_not_delivered(captures: Path) -> None:
    base = ["evaluate", "--attacks", str(OW_010), "--flows", str(HONEST), "-q"]
    assert run(*base).returncode == 0
    result = run(*base, "--fail-on", "not-delivered")
    assert result.returncode == 3 and "OW-010: never delivered" in result.stderr
    assert run(*base, "--fail-on", "not-delivered", "--severity-threshold", "high").returncode == 0


def test_quiet_verbose_progress_and_version(captures: Path) -> None:
    base = ["evaluate", "--attacks", str(OW_001), "--flows", str(captures / "OW-001.complying.mitm")]
    quiet = run(*base, "-q")
    assert quiet.stdout == "2 run(s): 2 exploited, 0 partial, 0 resisted, 0 inconclusive, 0 not delivered, 0 error\n"
    assert "flow(s)" not in quiet.stderr
    verbose = run(*base, "-v").stdout
    assert "OW-001-01: tools/call request" in verbose and "delivered by" in verbose
    assert "read 8 flow(s)" not in run(*base).stderr, "no progress when stderr is not a terminal"
    progress = run(*base, "--progress").stderr
    for line in ("read 8 flow(s) from", "decoded 14 event(s) from 8 flow(s)", "2 run(s) concluded"):
        assert line in progress
    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"oatf {oatf_watch_version()}"


def oatf_watch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("oatf-watch")


def test_evaluate_help_documents_the_thresholds() -> None:
    text = run("evaluate", "--help").stdout.replace("\n", " ")
    for flag in ("--fail-on", "--severity-threshold", "--min-tier", "--show-secrets", "--sarif", "--junit"):
        assert flag in text
    assert "--fail-on not-delivered" in text



def test_progress_lines_while_one_process_evaluates(captures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from addon.recordings import replay
    from oatf_engine import replay as replay_module

    monkeypatch.setattr(replay_module, "PROGRESS_EVERY", 5)
    lines: list[str] = []
    result = replay([str(OW_001)], [str(captures / "OW-001.complying.mitm")], progress=lines.append)
    assert lines == [f"read 8 flow(s) from {captures / 'OW-001.complying.mitm'}", "decoded 14 event(s) from 8 flow(s)",
                     "evaluated 5/14 event(s): 0 run(s) concluded so far",
                     "evaluated 10/14 event(s): 0 run(s) concluded so far",
                     "evaluated 14 event(s): 2 run(s) concluded"]
    assert set(result.flow_files.values()) == {str(captures / "OW-001.complying.mitm")}
