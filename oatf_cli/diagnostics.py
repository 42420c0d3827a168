"""`oatf validate`'s findings and their output formats: `text` (`file:line:col: RULE path: message`, then the
offending source line with a caret under the column, as compilers print it), `json`, `github` (GitHub
Actions workflow commands, which annotate the lines of a pull request) and `sarif` (SARIF 2.1.0, for code
scanning). Rule ids are the SDK's: V-NNN and W-NNN (SDK spec §3.2, §7.0), S-NNN (`oatf.strict`), and
`parse/<kind>` for a ParseError (SDK spec §7.1; `parse/unknown_field` for its `unknown_field` code)."""

from __future__ import annotations

import dataclasses
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import oatf
from oatf.strict import STRICT_RULES
from oatf.validation import SPEC_REFS
from oatf_engine.text import ELLIPSIS, printable

from .outputs import SARIF_SCHEMA, SARIF_VERSION, TOOL_NAME, artifact_uri

EXCERPT_WIDTH = 100
"""Most characters of the offending source line `Finding.excerpt` shows (a window around the column)."""
_BEFORE = 60
"""Characters of a cut line kept before the column."""


@dataclass(frozen=True)
class Finding:
    """One diagnostic about one file, in the shape every output format prints."""

    file: str
    severity: str  # "error" | "warning"
    rule: str  # V-NNN, W-NNN, S-NNN, or parse/<the ParseError's code or kind>
    path: str
    message: str
    line: int | None = None
    column: int | None = None
    source: str | None = None
    """The text of line `line` of the file (without its line break), when known."""

    def text(self) -> str:
        where = f"{self.line}:{self.column}:" if self.line is not None else ""
        label = "warning " if self.severity == "warning" else ""
        path = f" {self.path}" if self.path else ""
        return f"{self.file}:{where} {label}{self.rule}{path}: {printable(self.message, 2000)}"

    def excerpt(self) -> list[str]:
        """The offending line and a caret under the column (`  12 |   indicatrs:` / `     |   ^`), control
        and invisible characters escaped (`\\t`, `\\x1b`), wide characters counted twice, a long line cut to
        a window around the column; no lines when the line is unknown."""
        if self.source is None or self.line is None:
            return []
        column = max(1, self.column or 1)
        before, after = self.source[:column - 1], self.source[column - 1:]
        cut = ELLIPSIS if len(before) > _BEFORE else ""
        if cut:
            before = before[-(_BEFORE - 1):]
        shown_before = cut + printable(before, 10 * len(before) + 1)  # never cut: an escape is at most 10
        shown_after = printable(after, max(1, EXCERPT_WIDTH - len(shown_before)))
        gutter = f"{self.line:>5} | "
        return [f"{gutter}{shown_before}{shown_after}".rstrip(),
                f"{' ' * (len(gutter) - 2)}| {' ' * _display_width(shown_before)}^"]

    def record(self) -> dict[str, object]:
        """The finding as `--format json` gives it (line and column 1-based, null when unknown)."""
        return {"file": self.file, "line": self.line, "column": self.column, "severity": self.severity,
                "rule": self.rule, "path": self.path, "message": self.message}


@dataclass(frozen=True)
class CheckedFile:
    """One file `oatf validate` checked: whether it could be read, and its findings."""

    file: str
    readable: bool
    findings: Sequence[Finding]

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def valid(self) -> bool:
        return self.readable and not self.errors


def summary(files: Sequence[CheckedFile]) -> dict[str, int]:
    """The counts every format's summary gives: documents checked, valid, invalid (read, with errors),
    unreadable, and the errors and warnings found."""
    errors = sum(f.errors for f in files)
    return {"documents": len(files), "valid": sum(f.valid for f in files),
            "invalid": sum(f.readable and not f.valid for f in files),
            "unreadable": sum(not f.readable for f in files), "errors": errors,
            "warnings": sum(len(f.findings) for f in files) - errors}


def summary_line(files: Sequence[CheckedFile]) -> str:
    """`3 document(s) checked, 2 invalid` (`, 1 unreadable` when some could not be read)."""
    counts = summary(files)
    unreadable = f", {counts['unreadable']} unreadable" if counts["unreadable"] else ""
    return f"{counts['documents']} document(s) checked, {counts['invalid']} invalid{unreadable}"


def _display_width(text: str) -> int:
    """Terminal columns `text` takes: East Asian wide and fullwidth characters two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def parse_findings(file: str, errors: list[oatf.ParseError]) -> list[Finding]:
    return [Finding(file, "error", f"parse/{e.code or e.kind.value}", e.path or "", e.message, e.line, e.column)
            for e in errors]


def error_findings(file: str, errors: list[oatf.ValidationError]) -> list[Finding]:
    return [Finding(file, "error", e.rule, e.path, e.message, e.line, e.column) for e in errors]


def validation_findings(file: str, document: oatf.Document, result: oatf.ValidationResult) -> list[Finding]:
    findings = error_findings(file, result.errors)
    for w in result.warnings:
        located = document.source.locate(w.path or "") if document.source else None
        line, column = located if located else (None, None)
        findings.append(Finding(file, "warning", w.code, w.path or "", w.message, line, column))
    return findings


def with_source(findings: list[Finding], text: str) -> list[Finding]:
    """`findings` with the source line each one points at (`Finding.source`), from the file's `text` (the
    line after the last is the empty end of the file, where an unclosed quote or bracket is found)."""
    lines = [*text.splitlines(), ""]
    return [dataclasses.replace(f, source=lines[f.line - 1]) if f.line and f.line <= len(lines) else f
            for f in findings]


# --- text, JSON ------------------------------------------------------------------------------------------------


def to_text(findings: Sequence[Finding]) -> str:
    """Each finding's line and its source excerpt."""
    return "".join(line + "\n" for f in findings for line in (f.text(), *f.excerpt()))


def to_json(files: Sequence[CheckedFile]) -> str:
    """One JSON document: the `summary` (`summary`), and per file checked, in order, its `file`, `valid`,
    `readable`, counts of `errors` and `warnings`, and its `diagnostics` (`Finding.record`)."""
    document = {
        "summary": summary(files),
        "files": [{"file": f.file, "valid": f.valid, "readable": f.readable, "errors": f.errors,
                   "warnings": len(f.findings) - f.errors, "diagnostics": [d.record() for d in f.findings]}
                  for f in files],
    }
    return json.dumps(document, indent=2) + "\n"


# --- GitHub Actions workflow commands ------------------------------------------------------------------------


def _command_data(text: str) -> str:
    """A workflow command's message, escaped as the Actions runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _command_property(text: str) -> str:
    """A workflow command's property value (`file=…`, `title=…`), escaped."""
    return _command_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(findings: Sequence[Finding]) -> str:
    """One `::error file=F,line=L,col=C,title=RULE::path: message` (or `::warning`) per finding: GitHub Actions
    turns them into annotations on the file's lines."""
    lines = []
    for f in findings:
        properties = [f"file={_command_property(f.file)}"]
        if f.line is not None:
            properties.append(f"line={f.line}")
            if f.column is not None:
                properties.append(f"col={f.column}")
        properties.append(f"title={_command_property(f.rule)}")
        message = f"{f.path}: {f.message}" if f.path else f.message
        lines.append(f"::{f.severity} {','.join(properties)}::{_command_data(message)}\n")
    return "".join(lines)


# --- SARIF 2.1.0 ---------------------------------------------------------------------------------------------


def _rule_descriptor(rule: str) -> dict[str, object]:
    spec_ref = SPEC_REFS.get(rule) or STRICT_RULES.get(rule)
    descriptor: dict[str, object] = {"id": rule, "name": rule}
    if spec_ref:
        descriptor["properties"] = {"spec_ref": spec_ref}
    return descriptor


def to_sarif(findings: Sequence[Finding], files: Sequence[str], version: str) -> str:
    """A SARIF 2.1.0 log of one run: a rule per rule id found, one result per finding (level `error` or
    `warning`) located at its file, line and column (with the source line as the region's snippet) and at
    its dot-path as a logical location; every file checked is an artifact."""
    rules = list(dict.fromkeys(f.rule for f in findings))
    index = {rule: i for i, rule in enumerate(rules)}
    results = []
    for f in findings:
        physical: dict[str, object] = {"artifactLocation": {"uri": artifact_uri(f.file)}}
        if f.line is not None:
            region: dict[str, object] = {"startLine": f.line}
            if f.column is not None:
                region["startColumn"] = f.column
            if f.source is not None:
                region["snippet"] = {"text": f.source}
            physical["region"] = region
        location: dict[str, object] = {"physicalLocation": physical}
        if f.path:
            location["logicalLocations"] = [{"fullyQualifiedName": f.path, "kind": "member"}]
        results.append({"ruleId": f.rule, "ruleIndex": index[f.rule], "level": f.severity,
                        "message": {"text": f.message}, "locations": [location]})
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": TOOL_NAME, "version": version, "semanticVersion": version,
                                "rules": [_rule_descriptor(rule) for rule in rules]}},
            "artifacts": [{"location": {"uri": artifact_uri(file)}} for file in dict.fromkeys(files)],
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"
