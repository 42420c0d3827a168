"""JSON value helpers shared by the execution primitives: deep equality (SDK spec §5.3 "Deep equality")
and compact JSON serialization (SDK spec §5.3 "Type coercion", §5.5, §5.6)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .paths import NOT_FOUND


def deep_equal(left: Any, right: Any) -> bool:
    """Deep equality of two JSON values (SDK spec §5.3 "Deep equality").

    Numbers compare by mathematical value (`42 == 42.0`) and NaN equals nothing, itself included; booleans
    are not numbers (`True != 1`); `null` equals only `null`; arrays (lists or tuples) compare element-wise
    by position and length; objects compare by key set and values, whatever their key order. Iterative, so
    nesting depth cannot exhaust the stack."""
    pending = [(left, right)]
    while pending:
        a, b = pending.pop()
        if isinstance(a, str):
            if not (isinstance(b, str) and a == b):
                return False
        elif a is None:
            if b is not None:
                return False
        elif isinstance(a, bool):
            if not (isinstance(b, bool) and a == b):
                return False
        elif isinstance(a, int | float):
            if not (isinstance(b, int | float) and not isinstance(b, bool) and a == b):
                return False
        elif isinstance(a, list | tuple):
            if not (isinstance(b, list | tuple) and len(a) == len(b)):
                return False
            pending.extend(zip(a, b, strict=True))
        elif isinstance(a, Mapping):
            if not (isinstance(b, Mapping) and len(a) == len(b)):
                return False
            for key, a_value in a.items():
                b_value = b.get(key, NOT_FOUND)
                if b_value is NOT_FOUND:
                    return False
                pending.append((a_value, b_value))
        elif not (type(a) is type(b) and a == b):
            return False
    return True


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def compact_json(value: Any, *, sort_keys: bool = False) -> str:
    """`value` as compact JSON: no whitespace, non-ASCII kept as is, keys in insertion order unless
    `sort_keys`. Raises `TypeError`, `ValueError` or `RecursionError` for a value JSON cannot express
    within the interpreter's limits."""
    return (_SORTED if sort_keys else _COMPACT).encode(value)


_COMPACT, _SORTED = (json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys,
                                      default=_json_default) for sort_keys in (False, True))
"""`compact_json`'s encoders, made once (`json.dumps` with these options makes one per call; they hold no
state between calls)."""
