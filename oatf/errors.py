"""Error and diagnostic types of the SDK (SDK spec §7).

Errors are values: each carries a machine-readable kind or rule id and a dot-path. The entry points that
fail as a whole (`parse`, `load`) raise one exception type each, carrying the list of error values in
`.errors` (SDK spec §8.1: in Python, `Result` failures are raised).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

ECHO_LIMIT: Final = 80
"""Most characters of one user-controlled value a diagnostic message quotes (see `echo`)."""


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """`value` as a diagnostic message quotes it (SDK spec §7: messages name the offending value): its
    `repr`, or for a longer value its first `limit` characters, an ellipsis and the full length, so a
    1 MB id cannot make a 1 MB message. Every message that echoes a document or message value uses this;
    a value whose `repr` raises is shown by its type."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value)} characters)"
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__, or an int beyond Python's int/str conversion limit
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def did_you_mean(name: object, known: Collection[str]) -> str:
    """`; did you mean 'indicators'?` naming the known name closest to a misspelled field name or enum value
    (SDK spec §7: messages help the author fix the document), or "" when none is close (`difflib`'s ratio
    of at least 0.6). Every diagnostic about an unknown name ends with it."""
    if not isinstance(name, str) or not known:
        return ""
    close = difflib.get_close_matches(name, sorted(str(k) for k in known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class ParseErrorKind(StrEnum):
    """SDK spec §2.20 `ParseErrorKind`."""

    SYNTAX = "syntax"
    TYPE_MISMATCH = "type_mismatch"
    UNKNOWN_VARIANT = "unknown_variant"


class DiagnosticSeverity(StrEnum):
    """SDK spec §2.20 `DiagnosticSeverity`."""

    ERROR = "error"
    WARNING = "warning"


class EvaluationErrorKind(StrEnum):
    """SDK spec §2.20 `EvaluationErrorKind`."""

    PATH_RESOLUTION = "path_resolution"
    REGEX_TIMEOUT = "regex_timeout"
    CEL_ERROR = "cel_error"
    TYPE_ERROR = "type_error"
    SEMANTIC_ERROR = "semantic_error"
    UNSUPPORTED_METHOD = "unsupported_method"


class GenerationErrorKind(StrEnum):
    """SDK spec §2.20 `GenerationErrorKind`."""

    PROVIDER_UNAVAILABLE = "provider_unavailable"
    MODEL_ERROR = "model_error"
    VALIDATION_FAILURE = "validation_failure"
    TIMEOUT = "timeout"
    CONTENT_POLICY = "content_policy"


@dataclass(frozen=True)
class Diagnostic:
    """SDK spec §7.0: a non-fatal (or fatal) diagnostic with a code such as `W-001`."""

    severity: DiagnosticSeverity
    code: str
    message: str
    path: str | None = None


UNKNOWN_FIELD: Final = "unknown_field"
"""`ParseError.code` of a field its type does not define (and not an `x-` extension)."""


@dataclass(frozen=True)
class ParseError:
    """SDK spec §7.1: why YAML deserialization or typing failed, and where (1-based line/column).

    `code` refines `kind` for tools (SDK spec §7.0 lets SDKs add diagnostics of their own): `UNKNOWN_FIELD`
    for a field the type does not define. The spec's `ParseErrorKind` has no kind for it, so `kind` stays
    `type_mismatch` (the document does not deserialize into the type)."""

    kind: ParseErrorKind
    message: str
    path: str | None = None
    line: int | None = None
    column: int | None = None
    code: str | None = None


@dataclass(frozen=True)
class ValidationError:
    """SDK spec §7.2: one violated conformance rule (`V-NNN`). `line`/`column` locate it when known."""

    rule: str
    spec_ref: str
    message: str
    path: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class EvaluationError:
    """SDK spec §7.3: a runtime error while evaluating an indicator."""

    kind: EvaluationErrorKind
    message: str
    indicator_id: str | None = None


@dataclass(frozen=True)
class GenerationError:
    """SDK spec §7.3a: a GenerationProvider failure."""

    kind: GenerationErrorKind
    message: str
    phase_name: str | None = None
    prompt_preview: str | None = None


OATFError = ParseError | ValidationError
"""SDK spec §7.5: any error of the parse → validate → normalize pipeline."""


class OATFParseError(Exception):
    """Raised by `parse` (and `parse_duration`): `.errors` holds the ParseError values."""

    def __init__(self, errors: list[ParseError]):
        self.errors = list(errors)
        super().__init__("; ".join(e.message for e in self.errors) or "parse failed")


class OATFLoadError(Exception):
    """Raised by `load`: `.errors` holds the ParseError or ValidationError values (SDK spec §3.5, §7.4)."""

    def __init__(self, errors: list[OATFError]):
        self.errors = list(errors)
        super().__init__("; ".join(e.message for e in self.errors) or "load failed")
