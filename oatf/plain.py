"""Model values → plain YAML-form mappings, keys in specification order (SDK spec §3.4 step 2).

Absent (None) fields are omitted; `x-` extensions follow the standard fields of their object; enums become
their strings; tuples become lists. `Value` payloads are returned as they are held (not copied).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any

from .model import Action, Document, PatternMatch, Severity, SourceInfo

_LEAVES = frozenset({str, int, float, bool, type(None)})
"""Types returned as they are (exactly these: an enum is a `str` too)."""
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}
"""A model type's field names (None: not a dataclass), looked up once per type: `dataclasses.fields` and
`is_dataclass` per value were half of converting a document's classification."""


def to_plain(value: Any) -> Any:
    """The plain YAML form of a model value (or of a tree containing model values)."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    names = _field_names(kind)
    if names is None:
        return value
    if isinstance(value, Action):
        action = {key: to_plain(v) for key, v in value.entries}
        action.update(value.extensions or {})
        return action
    if isinstance(value, Severity) and value.confidence is None and isinstance(value.level, str):
        return to_plain(value.level)  # scalar form, as written (N-002 expands it)
    out: dict[str, Any] = {}
    for name in names:
        item = getattr(value, name)
        if item is None or isinstance(item, SourceInfo):
            continue
        if name == "extensions":
            out.update(item)
        elif name == "shorthand" and isinstance(value, PatternMatch):
            out.update(to_plain(item))
        elif name == "schema" and isinstance(value, Document):
            out["$schema"] = item
        else:
            out[name] = to_plain(item)
    return out


def _field_names(kind: type) -> tuple[str, ...] | None:
    if kind not in _FIELD_NAMES:
        _FIELD_NAMES[kind] = tuple(f.name for f in fields(kind)) if is_dataclass(kind) else None
    return _FIELD_NAMES[kind]
