"""Dot-path resolution (SDK spec §5.1; format spec §5.4 "Field paths").

Two variants: simple dot-paths (`arguments.command`; match predicate keys, `{{request.*}}` templates) and
wildcard dot-paths (`tools[*].description`; indicator targets). Resolution never raises: a missing key, a
type mismatch or a wildcard on a non-array just produces no value.

"Not found" is the `NOT_FOUND` sentinel, distinct from a found JSON `null` (`None`):

    value = resolve_simple_path("x", {"x": None})   # None: found, and it is null
    value = resolve_simple_path("y", {"x": None})   # NOT_FOUND
    if value is NOT_FOUND: ...
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from functools import lru_cache
from typing import Any, Final, Literal

from .regex import compile_regex


class NotFound(Enum):
    """The type of `NOT_FOUND` (an enum of one member, so type checkers narrow `value is NOT_FOUND`)."""

    NOT_FOUND = "NOT_FOUND"

    def __repr__(self) -> str:
        return "NOT_FOUND"


NOT_FOUND: Final = NotFound.NOT_FOUND
"""Returned by `resolve_simple_path` when the path does not resolve (SDK spec §5.1.1 "returns nothing")."""

Resolved = Any | Literal[NotFound.NOT_FOUND]
"""A resolved JSON value, or `NOT_FOUND`."""

MAX_WILDCARD_DEPTH: Final = 64
"""SDK spec §5.1.2: the RECOMMENDED maximum traversal depth. Each field access and each `[*]` fan-out
descends one level; a path that would descend further resolves to no values."""

_SIMPLE_PATH = compile_regex(r"\A(?:[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)?\z")
_WILDCARD_PATH = compile_regex(r"\A(?:[A-Za-z0-9_-]+(?:\[\*\])?(?:\.[A-Za-z0-9_-]+(?:\[\*\])?)*)?\z")
_WILDCARD = "[*]"


def is_simple_path(path: str) -> bool:
    """Whether `path` is a simple dot-path: `segment *("." segment)`, segment `[A-Za-z0-9_-]+`, or ""
    (SDK spec §5.1.1; format spec §5.4 grammar)."""
    return _SIMPLE_PATH.search(path) is not None


def is_wildcard_path(path: str) -> bool:
    """Whether `path` is a wildcard dot-path: simple segments each optionally suffixed by `[*]`, or ""
    (SDK spec §5.1.2; format spec §5.4 grammar)."""
    return _WILDCARD_PATH.search(path) is not None


def resolve_simple_path(path: str, value: Any) -> Resolved:
    """SDK spec §5.1.1 `resolve_simple_path`: the value at `path`, or `NOT_FOUND`.

    "" is the root itself. Each segment must meet an object (a mapping) holding that key; meeting a
    missing key, an array or a scalar gives `NOT_FOUND`. Iterative and linear in the path length."""
    if not path:
        return value
    current = value
    for segment in path.split("."):
        if not isinstance(current, Mapping):
            return NOT_FOUND
        current = current.get(segment, NOT_FOUND)
        if current is NOT_FOUND:
            return NOT_FOUND
    return current


@lru_cache(maxsize=1024)
def _wildcard_steps(path: str) -> tuple[str | None, ...]:
    """`path` as traversal steps: a key to access, or None for a `[*]` fan-out."""
    steps: list[str | None] = []
    for segment in path.split("."):
        if segment.endswith(_WILDCARD):
            name = segment[: -len(_WILDCARD)]
            if name:
                steps.append(name)
            steps.append(None)
        else:
            steps.append(segment)
    return tuple(steps)


def resolve_wildcard_path(path: str, value: Any) -> list[Any]:
    """SDK spec §5.1.2 `resolve_wildcard_path`: every value `path` reaches, in document order.

    "" gives `[value]`. A field step keeps the branches that are objects holding the key; a `[*]` step
    fans each array branch out to its elements and drops non-array branches. A path descending more than
    `MAX_WILDCARD_DEPTH` levels gives `[]`. Breadth-first and iterative: no recursion, and every terminal
    value is a distinct node of `value`, so the result is never larger than the input tree."""
    if not path:
        return [value]
    steps = _wildcard_steps(path)
    if len(steps) > MAX_WILDCARD_DEPTH:
        return []
    current = [value]
    for step in steps:
        following: list[Any] = []
        if step is None:
            for node in current:
                if isinstance(node, list | tuple):
                    following.extend(node)
        else:
            for node in current:
                if isinstance(node, Mapping):
                    child = node.get(step, NOT_FOUND)
                    if child is not NOT_FOUND:
                        following.append(child)
        if not following:
            return []
        current = following
    return current
