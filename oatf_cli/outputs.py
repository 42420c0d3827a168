"""`oatf evaluate`'s output formats for CI, one function per format, each returning the document as text:
`to_json`, `to_text` (the console table), `to_sarif` (SARIF 2.1.0, for code scanning) and `to_junit` (JUnit XML,
for test reports); `oatf_cli.html_report` writes the HTML page. Files only; no mitmproxy.

Every format shows the reports it is given as they are: redaction (`oatf_engine.reports.redact_report`) happens
before, once, for all of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import oatf
from oatf_engine.reports import outcome_summary, summary_table
from oatf_engine.text import printable

Report = dict[str, Any]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_NAME = "oatf-watch"
SARIF_OUTCOMES = ("exploited", "partial")
"""The outcomes that are SARIF results (findings): the agent complied with the attack, fully or in part."""
SARIF_LEVELS = {"critical": "error", "high": "error", "medium": "warning", "low": "note", "informational": "note"}
SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0", "informational": "0.0"}
"""GitHub code scanning's `security-severity` (a CVSS-like score) for each OATF severity level."""

NOT_DELIVERED_REASON = "not delivered: the attack never reached the agent (no message carried its payload)"
INCONCLUSIVE_REASON = "inconclusive: delivered, but the run was cut short by the tool before the agent was done"
UNINSPECTED_REASON = ("inconclusive: {} message(s) of its session were not inspected (over the size limit, not "
                      "content-decodable, or cut): what they held was never seen")


def _attack_key(report: Report) -> str:
    return str(report["attack"]["id"] or report["attack"]["file"])


def _severity(report: Report) -> str | None:
    severity = report["attack"].get("severity") or {}
    return severity.get("level")


def _evidence(report: Report, results: Iterable[str] = ("matched",)) -> list[str]:
    """`INDICATOR: evidence` for each indicator verdict of the run whose result is in `results`."""
    wanted = set(results)
    return [f"{v['indicator_id']}: {v.get('evidence') or ''}"
            for v in report["verdict"].get("indicator_verdicts") or () if v["result"] in wanted]


def _flow(report: Report) -> str | None:
    """The flow the run's evidence cites first."""
    cited = report["execution_summary"].get("flows_cited") or ()
    return cited[0] if cited else None


# --- JSON and text ------------------------------------------------------------------------------------------


def to_json(reports: Sequence[Report]) -> str:
    return json.dumps(list(reports), indent=2, default=str) + "\n"


def to_text(reports: Sequence[Report], quiet: bool = False, verbose: bool = False) -> str:
    """The console table and the outcome counts; `quiet`: the counts only; `verbose`: each run's evidence
    (matched and error indicators, the delivery evidence) under the table. Every line is printable."""
    if not reports:
        return "no run: no recorded traffic matched a loaded attack\n"
    if quiet:
        return outcome_summary(reports) + "\n"
    lines = [summary_table(reports)]
    if verbose:
        for report in reports:
            summary = report["execution_summary"]
            lines.append(f"{printable(_attack_key(report), 60)} {printable(summary['session'], 80)}: "
                         f"{report['outcome'].replace('_', ' ')}")
            lines += [f"  {printable(line, 600)}" for line in _evidence(report, ("matched", "error"))]
            lines += [f"  delivered by {printable(d.get('flow'), 60)} {printable(d.get('event'), 40)}: "
                      f"{printable(d.get('excerpt'), 200)}" for d in summary.get("delivery_evidence") or ()]
    return "\n".join(lines) + "\n"


# --- SARIF 2.1.0 ----------------------------------------------------------------------------------------------


def artifact_uri(path: str) -> str:
    """A file (a capture, a document) as a SARIF artifact URI (SARIF §3.4.3: an RFC 3986 URI reference):
    absolute paths `file:`, relative ones a relative reference (POSIX form); either percent-encoded (spaces,
    `#`, `%`, `:` and non-ASCII bytes), so that a path is never read as a scheme, a fragment or an escape."""
    candidate = Path(path)
    posix = candidate.as_posix()
    try:
        raw = os.fsencode(posix)  # the name's bytes on disk (undecodable bytes came in as surrogate escapes)
    except UnicodeEncodeError:  # a lone surrogate no file name decodes to
        raw = posix.encode("utf-8", "surrogatepass")
    return ("file://" if candidate.is_absolute() else "") + urllib.parse.quote_from_bytes(raw)


def _help_uri(url: str) -> str | None:
    """A reference's URL as a rule's `helpUri` (SARIF §3.49.12: an absolute URI), each part percent-encoded
    where RFC 3986 does not allow a character there; None unless it is an `http`/`https` URL with a host (a
    document's `references[].url` is free text to OATF)."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    netloc, path, query, fragment = (
        _LONE_PERCENT.sub("%25", urllib.parse.quote(part, safe=safe, errors="surrogatepass"))
        for part, safe in ((parts.netloc, _SUB_DELIMS + ":@[]"), (parts.path, _SUB_DELIMS + ":@/"),
                           (parts.query, _SUB_DELIMS + ":@/?"), (parts.fragment, _SUB_DELIMS + ":@/?")))
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, query, fragment))


_SUB_DELIMS = "%!$&'()*+,;=~"
"""RFC 3986's sub-delims, with `%` (an escape already there) and `~`: kept as they are in every part of a URL."""
_LONE_PERCENT = re.compile("%(?![0-9A-Fa-f]{2})")
"""A `%` that does not begin an escape (encoded as `%25`)."""


def _rule(key: str, attack: oatf.Attack) -> dict[str, Any]:
    level = str(attack.severity.level) if attack.severity and attack.severity.level else None
    classification = attack.classification
    tags = ["security"]
    if classification is not None:
        tags += [str(classification.category)] if classification.category else []
        tags += list(classification.tags or ())
        tags += [f"{m.framework}/{m.id}" for m in classification.mappings or () if m.framework and m.id]
    rule: dict[str, Any] = {
        "id": key,
        "name": attack.name or key,
        "shortDescription": {"text": attack.name or key},
        "fullDescription": {"text": " ".join((attack.description or attack.name or key).split())},
        "defaultConfiguration": {"level": SARIF_LEVELS.get(level or "", "warning")},
        "properties": {"tags": list(dict.fromkeys(tags))},
    }
    if level in SECURITY_SEVERITY:
        rule["properties"]["security-severity"] = SECURITY_SEVERITY[level]
        rule["properties"]["severity"] = level
    urls = [uri for r in attack.references or () if r.url and (uri := _help_uri(r.url))]
    if urls:
        rule["helpUri"] = urls[0]
    return rule


def _result(report: Report, rule_index: Mapping[str, int], flow_files: Mapping[str, str],
            captures: Sequence[str]) -> dict[str, Any]:
    key = _attack_key(report)
    summary = report["execution_summary"]
    session = str(summary["session"])
    flow = _flow(report)
    evidence = "; ".join(_evidence(report)) or "no indicator evidence"
    name = report["attack"].get("name") or key
    location: dict[str, Any] = {
        "logicalLocations": [{"name": flow or session, "fullyQualifiedName": f"{session}/{flow or ''}".rstrip("/"),
                              "kind": "resource"}],
    }
    capture = flow_files.get(flow or "") or (captures[0] if captures else None)
    if capture is not None:
        location["physicalLocation"] = {"artifactLocation": {"uri": artifact_uri(capture)}}
    result: dict[str, Any] = {
        "ruleId": key,
        "level": SARIF_LEVELS.get(_severity(report) or "", "warning"),
        "kind": "fail",
        "message": {"text": f"{report['outcome']}: {name} (session {session}, flow {flow or 'none'}): {evidence}"},
        "locations": [location],
        "partialFingerprints": {
            "oatfRun/v1": hashlib.sha256(f"{key}\0{session}".encode("utf-8", "surrogatepass")).hexdigest()},
        "properties": {"outcome": report["outcome"], "session": session, "status": summary["status"],
                       "max_tier": report["verdict"].get("max_tier")},
    }
    if key in rule_index:
        result["ruleIndex"] = rule_index[key]
    return result


def to_sarif(reports: Sequence[Report], attacks: Mapping[str, oatf.Attack], flow_files: Mapping[str, str],
             captures: Sequence[str], version: str) -> str:
    """A SARIF 2.1.0 log: one rule per attack loaded (`attacks`, by key: name, description, severity as `level`
    and `security-severity`, classification as tags), one result per exploited or partial run, located at the
    capture file its first cited flow came from (`flow_files`, else the first of `captures`) with a logical
    location naming the session and the flow."""
    keys = list(attacks)
    rule_index = {key: index for index, key in enumerate(keys)}
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": TOOL_NAME, "version": version, "semanticVersion": version,
                                "rules": [_rule(k, attacks[k]) for k in keys]}},
            "artifacts": [{"location": {"uri": artifact_uri(path)}} for path in dict.fromkeys(captures)],
            "results": [_result(r, rule_index, flow_files, captures) for r in reports
                        if r["outcome"] in SARIF_OUTCOMES],
        }],
    }
    return json.dumps(log, indent=2, default=str) + "\n"


# --- JUnit XML --------------------------------------------------------------------------------------------------

_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: object) -> str:
    """`text` with the characters XML 1.0 cannot hold (control characters, lone surrogates) escaped."""
    return _XML_INVALID.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def to_junit(reports: Sequence[Report]) -> str:
    """JUnit XML: one testsuite per attack, one testcase per run (the attack over one session or episode).
    Exploited and partial runs are failures (message: the evidence), `error` verdicts errors, not delivered
    and inconclusive runs skipped (the reason as the element's text), resisted runs pass. Valid against the
    Jenkins JUnit schema (junit-4.xsd: `skipped` holds text and no attribute; `testsuites` counts tests,
    failures and errors, the suites also their skipped tests) and the Jenkins xUnit plugin's junit-10.xsd
    (which pytest's `--junitxml` follows: every suite counts its failures and errors)."""
    suites: dict[str, list[Report]] = {}
    for report in reports:
        suites.setdefault(_attack_key(report), []).append(report)
    root = ET.Element("testsuites", name=TOOL_NAME, tests=str(len(reports)))
    totals = dict.fromkeys(("failures", "errors"), 0)
    for key, runs in suites.items():
        suite = ET.SubElement(root, "testsuite", name=_xml(key), tests=str(len(runs)))
        counts = dict.fromkeys(("failures", "errors", "skipped"), 0)
        for report in runs:
            summary = report["execution_summary"]
            case = ET.SubElement(suite, "testcase", classname=_xml(key), name=_xml(summary["session"]))
            outcome = report["outcome"]
            if outcome in ("exploited", "partial"):
                evidence = _evidence(report)
                node = ET.SubElement(case, "failure", type=outcome,
                                     message=_xml(f"{outcome}: {evidence[0] if evidence else 'no evidence'}"))
                node.text = _xml("\n".join(evidence))
                counts["failures"] += 1
            elif outcome == "error":
                evidence = _evidence(report, ("error", "skipped"))
                node = ET.SubElement(case, "error", type="error",
                                     message=_xml(evidence[0] if evidence else "the verdict is an error"))
                node.text = _xml("\n".join(evidence))
                counts["errors"] += 1
            elif outcome == "not_delivered":
                ET.SubElement(case, "skipped").text = NOT_DELIVERED_REASON
                counts["skipped"] += 1
            elif outcome == "inconclusive":
                unseen = summary.get("uninspected_messages")
                ET.SubElement(case, "skipped").text = (UNINSPECTED_REASON.format(unseen) if unseen else
                                                       f"{INCONCLUSIVE_REASON} (status {_xml(summary['status'])})")
                counts["skipped"] += 1
        for name, value in counts.items():
            suite.set(name, str(value))
        for name in totals:
            totals[name] += counts[name]
    for name, value in totals.items():
        root.set(name, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
