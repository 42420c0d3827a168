"""`load` (SDK spec §3.5): parse → validate → normalize in one call."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Diagnostic, OATFLoadError, OATFParseError
from .model import Document
from .normalize import normalize
from .parse import parse
from .validation import validate


@dataclass(frozen=True)
class LoadResult:
    """SDK spec §3.5: the normalized, valid document and the validation warnings."""

    document: Document
    warnings: list[Diagnostic]


def load(input: str | bytes) -> LoadResult:
    """SDK spec §3.5. Raises `OATFLoadError` carrying the parse errors, or else the validation errors
    (SDK spec §7.4: the first failing step's list)."""
    try:
        document = parse(input)
    except OATFParseError as exc:
        raise OATFLoadError(list(exc.errors)) from None
    result = validate(document)
    if result.errors:
        raise OATFLoadError(list(result.errors))
    return LoadResult(normalize(document), result.warnings)
