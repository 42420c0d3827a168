"""What validation rules yield (`Issue`) and the collector drivers record it in (SDK spec §3.2, §7.0, §7.2)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import Diagnostic, DiagnosticSeverity, ValidationError
from ..model import Document

SPEC_REFS = {
    "V-001": "§11.1.1", "V-002": "§11.1.2", "V-003": "§11.1.3", "V-004": "§11.1.4", "V-005": "§11.1.5",
    "V-006": "§11.1.9", "V-007": "§11.1.7", "V-008": "§11.1.7", "V-009": "§11.1.7", "V-010": "§11.1.10",
    "V-011": "§11.1.7", "V-012": "§11.1.11", "V-013": "§6.2", "V-014": "§6.3", "V-015": "§5.5",
    "V-016": "§5.7", "V-017": "§4.3", "V-018": "§7", "V-019": "§5.3", "V-020": "§11.1.1", "V-021": "§6.1",
    "V-022": "§6.4", "V-023": "§4.2", "V-024": "§6.1", "V-025": "§6.1", "V-026": "§6.3", "V-027": "§5.4",
    "V-028": "§5.1", "V-029": "§7", "V-030": "§5.1", "V-031": "§5.1", "V-032": "§5.5", "V-033": "§11.1.14",
    "V-034": "§5.1", "V-035": "§4.2", "V-036": "§5.2", "V-037": "§5.5", "V-038": "§11.1.7",
    "V-039": "§11.1.15", "V-040": "§5.3", "V-041": "§11.1.16", "V-042": "§5.5", "V-043": "§5.2",
    "V-044": "§5.2", "V-045": "§4.2", "V-046": "§4.2", "V-047": "§2.3a", "V-048": "§6.1", "V-049": "§6.1",
}
"""Rule id → the format specification section it enforces (SDK spec §3.2 table)."""


@dataclass(frozen=True)
class ValidationResult:
    """SDK spec §3.2: conforming iff `errors` is empty; `warnings` never make a document invalid."""

    errors: list[ValidationError]
    warnings: list[Diagnostic]

    @property
    def valid(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class Issue:
    """One finding of a rule, `path` relative to the node the rule inspected ("" for the node itself)."""

    rule: str
    path: str
    message: str
    key: bool = False
    """Locate the finding at the mapping key naming `path` rather than at its value."""
    warning: bool = False
    """A warning (W-codes, and the V-018/V-029 recommendations), never an error."""


def join_path(base: str, relative: str) -> str:
    """The dot-path of `relative` (`name`, `[0].name`, or "" for the node itself) below `base`."""
    if not relative:
        return base
    if not base or relative.startswith("["):
        return f"{base}{relative}"
    return f"{base}.{relative}"


@dataclass
class Report:
    """Collects violations with their source position; sorts them by dot-path at the end (SDK spec §7.4)."""

    document: Document
    errors: list[ValidationError] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)

    def add(self, base: str, issues: Iterable[Issue]) -> None:
        """Record each issue at its path joined to `base`, errors with their source position."""
        for issue in issues:
            path = join_path(base, issue.path)
            if issue.warning:
                self.warnings.append(Diagnostic(DiagnosticSeverity.WARNING, issue.rule, issue.message, path))
            else:
                line, column = self._locate(path, issue.key)
                self.errors.append(ValidationError(issue.rule, SPEC_REFS[issue.rule], issue.message, path,
                                                   line, column))

    def _locate(self, path: str, key: bool = False) -> tuple[int | None, int | None]:
        source = self.document.source
        found = source.locate(path, key) if source is not None else None
        return found if found is not None else (None, None)

    def result(self) -> ValidationResult:
        key = _path_sort_key
        return ValidationResult(sorted(self.errors, key=lambda e: (key(e.path), e.rule)),
                                sorted(self.warnings, key=lambda w: (key(w.path or ""), w.code)))


def _path_sort_key(path: str) -> tuple[object, ...]:
    """Dot-paths in document order: `a[2]` before `a[10]`, parents before children."""
    parts: list[object] = []
    for segment in path.replace("[", ".[").split("."):
        if segment.startswith("[") and segment[1:-1].isdigit():
            parts.append((1, int(segment[1:-1]), ""))
        elif segment:
            parts.append((0, 0, segment))
    return tuple(parts)
