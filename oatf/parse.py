"""`parse` (SDK spec §3.1): YAML text → unvalidated typed document, or OATFParseError."""

from __future__ import annotations

from .build import ModelBuilder
from .model import Document
from .yaml_source import load_yaml


def parse(input: str | bytes) -> Document:
    """SDK spec §3.1. Raises `OATFParseError` whose `.errors` are ParseError values (kind, message,
    dot-path, line, column): `syntax` for text that is not one YAML document within the size and nesting
    limits, `type_mismatch` for a value of the wrong type or an unknown field."""
    source = load_yaml(input)
    return ModelBuilder(source).document(source)
