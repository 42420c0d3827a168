"""Turns SDK errors and warnings into `file:line:col: RULE path: message` lines or JSON records."""

from __future__ import annotations

from dataclasses import dataclass

import oatf


@dataclass(frozen=True)
class Finding:
    """One diagnostic about one file, in the shape both output formats print."""

    file: str
    severity: str  # "error" | "warning"
    rule: str  # V-NNN, W-NNN, or the ParseError kind
    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def text(self) -> str:
        where = f"{self.line}:{self.column}:" if self.line is not None else ""
        label = "warning " if self.severity == "warning" else ""
        path = f" {self.path}" if self.path else ""
        return f"{self.file}:{where} {label}{self.rule}{path}: {self.message}"

    def record(self) -> dict[str, object]:
        return {"file": self.file, "severity": self.severity, "rule": self.rule, "path": self.path,
                "line": self.line, "column": self.column, "message": self.message}


def parse_findings(file: str, errors: list[oatf.ParseError]) -> list[Finding]:
    return [Finding(file, "error", f"parse/{e.kind.value}", e.path or "", e.message, e.line, e.column)
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
