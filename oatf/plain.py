"""Model values → plain YAML-form mappings, keys in specification order (SDK spec §3.4 step 2).

Absent (None) fields are omitted; `x-` extensions follow the standard fields of their object; enums become
their strings; tuples become lists. `Value` payloads are returned as they are held (not copied).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any

from .model import Action, Document, PatternMatch, Severity, SourceInfo


def to_plain(value: Any) -> Any:
    """The plain YAML form of a model value (or of a tree containing model values)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if not is_dataclass(value):
        return value
    if isinstance(value, Action):
        action = {key: to_plain(v) for key, v in value.entries}
        action.update(value.extensions or {})
        return action
    if isinstance(value, Severity) and value.confidence is None and isinstance(value.level, str):
        return to_plain(value.level)  # scalar form, as written (N-002 expands it)
    out: dict[str, Any] = {}
    for f in fields(value):
        item = getattr(value, f.name)
        if item is None or isinstance(item, SourceInfo):
            continue
        if f.name == "extensions":
            out.update(item)
        elif isinstance(value, PatternMatch) and f.name == "shorthand":
            out.update(to_plain(item))
        elif isinstance(value, Document) and f.name == "schema":
            out["$schema"] = item
        else:
            out[f.name] = to_plain(item)
    return out
