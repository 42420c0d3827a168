"""`serialize` (SDK spec §3.4): canonical YAML — `oatf` first, spec field order, defaults explicit, block style."""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

from .model import Document
from .normalize import normalize
from .plain import to_plain


def _emitter() -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.allow_unicode = True
    return yaml


def serialize(document: Document) -> str:
    """SDK spec §3.4. The document is normalized first (idempotent), so the output is always the
    multi-actor normalized form with every default explicit, whatever form the input was in."""
    plain = _literal_multiline(to_plain(normalize(document)))
    out = io.StringIO()
    _emitter().dump(plain, out)
    return out.getvalue()


def _literal_multiline(value: Any) -> Any:
    """Multi-line strings are emitted in literal block style (`|`), for people reading the output."""
    if isinstance(value, str):
        literal = "\n" in value.rstrip("\n") and value.replace("\n", "").replace("\t", "").isprintable()
        return LiteralScalarString(value) if literal else value
    if isinstance(value, dict):
        return {k: _literal_multiline(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal_multiline(v) for v in value]
    return value
