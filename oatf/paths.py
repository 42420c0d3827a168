"""Dot-path resolution (SDK spec §5.1; format spec §5.4 "Field paths").

Two variants: simple dot-paths (`arguments.command`; match predicate keys, `{{request.*}}` templates) and
wildcard dot-paths (`tools[*].description`; indicator targets). Resolution never raises: a missing key, a
type mismatch or a wildcard on a non-array just produces no value.

"Not found" is the `NOT_FOUND` sentinel, distinct from a found JSON `null` (`None`):

    value = resolve_simple_path("x", {"x": None})   # None: found, and it is null
    value = resolve_simple_path("y", {"x": None})   # NOT_FOUND
    if value is NOT_FOUND: ...

A wildcard path evaluated against many messages is compiled once: `compile_wildcard_path(path)` is a
function of the message (cached by path text), `resolve_wildcard_path` its one-off form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from functools import lru_cache
from operator import itemgetter
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


def path_keys(path: str, wildcard: bool = True) -> tuple[str, ...]:
    """The member names a value `path` reaches is found under, in path order: a value resolves only through
    objects holding each of them. A wildcard dot-path's field steps (its `[*]` fan-outs left out, SDK spec
    §5.1.2), or with `wildcard=False` a simple dot-path's segments as they are (SDK spec §5.1.1: a segment
    is a key, whatever it holds); none for "" (the root)."""
    if not path:
        return ()
    if not wildcard:
        return tuple(path.split("."))
    return tuple(step for step in _wildcard_steps(path) if step is not None)


@lru_cache(maxsize=1024)
def is_wildcard_path(path: str) -> bool:
    """Whether `path` is a wildcard dot-path: simple segments each optionally suffixed by `[*]`, or ""
    (SDK spec §5.1.2; format spec §5.4 grammar). Remembered: a library's documents name few targets, and a
    search in re2 costs more than the lookup."""
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


_ARRAYS: Final = (list, tuple)
_DICT_ONLY: Final = frozenset((dict,))


def _only_dicts(items: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every one of `items` is a `dict` exactly (not a subclass, whose lookups are its own)."""
    try:
        return set(map(type, items)) <= _DICT_ONLY
    except TypeError:  # a type whose metaclass makes it unhashable: certainly not `dict`
        return False


def _field_of(key: str) -> Callable[[list[Any]], list[Any]]:
    """A field step over a list of branches: the `key` children of the branches that are mappings."""

    def field(nodes: list[Any]) -> list[Any]:
        following = []
        for node in nodes:
            if type(node) is dict or isinstance(node, Mapping):
                child = node.get(key, NOT_FOUND)
            else:
                continue
            if child is not NOT_FOUND:
                following.append(child)
        return following

    return field


def _fan_out(nodes: list[Any]) -> list[Any]:
    """A `[*]` step over a list of branches: the elements of the branches that are arrays."""
    following: list[Any] = []
    for node in nodes:
        if isinstance(node, _ARRAYS):
            following.extend(node)
    return following


def _fan_out_field(key: str) -> Callable[[list[Any]], list[Any]]:
    """A `[*]` step followed by a field step (`tools[*].description`), in one pass."""
    get = itemgetter(key)

    def fan_out_field(nodes: list[Any]) -> list[Any]:
        following: list[Any] = []
        for node in nodes:
            if not isinstance(node, _ARRAYS):
                continue
            if type(node) is list or type(node) is tuple:
                # An array of plain objects (the usual case), all holding the key: the children at C speed.
                try:
                    children = list(map(get, node)) if _only_dicts(node) else None
                except KeyError:  # some do not hold it: the general loop below
                    children = None
                if children is not None:
                    following += children
                    continue
            for item in node:
                if type(item) is dict or isinstance(item, Mapping):
                    child = item.get(key, NOT_FOUND)
                    if child is not NOT_FOUND:
                        following.append(child)
        return following

    return fan_out_field


def _nothing(value: Any) -> list[Any]:
    return []


@lru_cache(maxsize=1024)
def compile_wildcard_path(path: str) -> Callable[[Any], list[Any]]:
    """`path` compiled once into a function of the root value: `compile_wildcard_path(path)(value)` is
    `resolve_wildcard_path(path, value)` (a fresh list at each call). Cached by path text."""
    if not path:
        return lambda value: [value]
    steps = _wildcard_steps(path)
    if len(steps) > MAX_WILDCARD_DEPTH:
        return _nothing
    leading: list[str] = []  # the field steps before the first `[*]`, taken on the root alone
    index = 0
    while index < len(steps) and (step := steps[index]) is not None:
        leading.append(step)
        index += 1
    stages: list[Callable[[list[Any]], list[Any]]] = []
    while index < len(steps):
        step = steps[index]
        following = steps[index + 1] if index + 1 < len(steps) else None
        if step is not None:
            stages.append(_field_of(step))
            index += 1
        elif following is not None:  # `[*]` then a field: one pass (the depth is that of two steps)
            stages.append(_fan_out_field(following))
            index += 2
        else:
            stages.append(_fan_out)
            index += 1
    keys = tuple(leading)

    def resolve(value: Any) -> list[Any]:
        node = value
        for key in keys:
            if type(node) is dict or isinstance(node, Mapping):
                node = node.get(key, NOT_FOUND)
            else:
                return []
            if node is NOT_FOUND:
                return []
        current = [node]
        for stage in stages:
            current = stage(current)
            if not current:
                return current
        return current

    return resolve


def resolve_wildcard_path(path: str, value: Any) -> list[Any]:
    """SDK spec §5.1.2 `resolve_wildcard_path`: every value `path` reaches, in document order.

    "" gives `[value]`. A field step keeps the branches that are objects holding the key; a `[*]` step
    fans each array branch out to its elements and drops non-array branches. A path descending more than
    `MAX_WILDCARD_DEPTH` levels gives `[]`. Breadth-first and iterative: no recursion, and every terminal
    value is a distinct node of `value`, so the result is never larger than the input tree.

    One-off form of `compile_wildcard_path(path)(value)`."""
    if not path:
        return [value]
    return compile_wildcard_path(path)(value)
