"""Target expressions: the paths assertions use to reach into a trace (Attest protocol v1 §4).

The §4 tables name these forms: `output`, `output.message`, `output.structured`, `output.structured.<field>`,
`metadata.cost_usd`, `steps.length`, `steps[?type=='tool_call'].length`, `steps[?name=='<name>'].args`,
`steps[?name=='<name>'].result` and `steps[?name=='<name>'].result.<field>`. They are parsed exactly, by
this grammar (an optional leading `$.` is accepted, as in JSONPath):

    expression := name segment*
    segment    := '.' name | '[?' name '==' string ']' | '[' integer ']' | '[' string ']'
    name       := [A-Za-z_][A-Za-z0-9_-]*        string := '...' or "..." (backslash escapes)

Semantics. `.name` and `['key']` select an object member. `[?key=='v']` keeps the elements of an array
whose member `key` equals `v`; segments after a filter apply to each kept element. `[i]` indexes an array
(negative from the end), or picks the i-th kept element after a filter. `.length` right after a filter is
the number of kept elements; on an array it is the array's length; otherwise it selects a member named
`length`. An expression therefore selects zero, one or several values, each with its concrete path (e.g.
`steps[2].result`); when it selects none, the selection says why. Anything outside the grammar raises
`TargetSyntaxError`, which the engine reports as ASSERTION_ERROR (1002) "unsupported JSONPath expression".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

_NAME = re2.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_INTEGER = re2.compile(r"-?[0-9]+")


class TargetSyntaxError(ValueError):
    """`expression` is outside the target grammar; `reason` says where and why."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"unsupported JSONPath expression '{expression[:200]}': {reason}")
        self.expression = expression
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Member:
    """`.name` or `['key']`."""

    name: str


@dataclass(frozen=True, slots=True)
class Filter:
    """`[?key=='value']`."""

    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Index:
    """`[i]`."""

    index: int


Segment = Member | Filter | Index


@dataclass(frozen=True, slots=True)
class Selection:
    """What an expression selected: `(path, value)` pairs in trace order, or why there are none."""

    values: list[tuple[str, Any]]
    missing: str | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed target expression."""

    text: str
    segments: tuple[Segment, ...]

    def select(self, document: Any) -> Selection:
        """Evaluate the expression against `document` (a trace)."""
        current: list[tuple[str, Any]] = [("", document)]
        projected = False
        for position, segment in enumerate(self.segments):
            follows_filter = position > 0 and isinstance(self.segments[position - 1], Filter)
            match segment:
                case Member(name="length") if follows_filter:
                    current = [(f"{_render(self.segments[:position])}.length", len(current))]
                    projected = False
                    continue
                case Member(name=name):
                    current, missing = _member(current, name)
                case Filter(key=key, value=value):
                    current, missing = _filter(current, key, value)
                    projected = True
                case Index(index=index):
                    current, missing = _index(current, index, projected)
                    projected = False
            counted_next = position + 1 < len(self.segments) and self.segments[position + 1] == Member("length")
            if not current and not (isinstance(segment, Filter) and counted_next):
                return Selection([], missing or f"{self.text} selected nothing")
        return Selection(current)


def _join(path: str, name: str) -> str:
    if _NAME.fullmatch(name):
        return f"{path}.{name}" if path else name
    return f"{path}[{json.dumps(name)}]"


def _render(segments: tuple[Segment, ...]) -> str:
    path = ""
    for segment in segments:
        match segment:
            case Member(name=name):
                path = _join(path, name)
            case Filter(key=key, value=value):
                path += f"[?{key}=={_quote(value)}]"
            case Index(index=index):
                path += f"[{index}]"
    return path


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _member(current: list[tuple[str, Any]], name: str) -> tuple[list[tuple[str, Any]], str | None]:
    selected: list[tuple[str, Any]] = []
    missing = None
    for path, value in current:
        if name == "length" and isinstance(value, list):
            selected.append((_join(path, "length"), len(value)))
        elif isinstance(value, dict) and name in value:
            selected.append((_join(path, name), value[name]))
        elif missing is None:
            where = path or "the trace"
            missing = f"{where} has no field '{name}'" if isinstance(value, dict) else f"{where} is not an object"
    return selected, missing


def _filter(current: list[tuple[str, Any]], key: str, wanted: str) -> tuple[list[tuple[str, Any]], str | None]:
    selected: list[tuple[str, Any]] = []
    missing = None
    for path, value in current:
        if not isinstance(value, list):
            missing = missing or f"{path or 'the trace'} is not an array"
            continue
        selected.extend(
            (f"{path}[{i}]", element)
            for i, element in enumerate(value)
            if isinstance(element, dict) and element.get(key) == wanted
        )
        if not selected:
            noun = "step" if path.endswith("steps") else "element"
            missing = f"no {noun} with {key} == {_quote(wanted)} in {path or 'the trace'}"
    return selected, missing


def _index(current: list[tuple[str, Any]], index: int, projected: bool) -> tuple[list[tuple[str, Any]], str | None]:
    if projected:
        if -len(current) <= index < len(current):
            return [current[index]], None
        return [], f"only {len(current)} element(s) matched, no [{index}]"
    selected: list[tuple[str, Any]] = []
    missing = None
    for path, value in current:
        if isinstance(value, list) and -len(value) <= index < len(value):
            position = index % len(value)
            selected.append((f"{path}[{position}]", value[position]))
        elif missing is None:
            missing = (
                f"{path} has {len(value)} element(s), no [{index}]"
                if isinstance(value, list)
                else f"{path or 'the trace'} is not an array"
            )
    return selected, missing


def _string(text: str, start: int) -> tuple[str, int]:
    """The quoted string at `text[start]` and the position after it."""
    quote = text[start]
    chars: list[str] = []
    position = start + 1
    while position < len(text):
        char = text[position]
        if char == "\\" and position + 1 < len(text):
            chars.append(text[position + 1])
            position += 2
        elif char == quote:
            return "".join(chars), position + 1
        else:
            chars.append(char)
            position += 1
    raise TargetSyntaxError(text, f"unterminated string starting at column {start + 1}")


def _name(text: str, start: int, what: str) -> tuple[str, int]:
    match = _NAME.match(text, start)
    if match is None:
        raise TargetSyntaxError(text, f"expected {what} at column {start + 1}")
    return match.group(0), match.end()


def _expect(text: str, position: int, token: str) -> int:
    if not text.startswith(token, position):
        raise TargetSyntaxError(text, f"expected '{token}' at column {position + 1}")
    return position + len(token)


def _bracket(text: str, position: int) -> tuple[Segment, int]:
    """The `[...]` segment opening at `text[position]`."""
    position += 1
    if text.startswith("?", position):
        key, position = _name(text, position + 1, "a field name after '[?'")
        position = _expect(text, position, "==")
        if position >= len(text) or text[position] not in "'\"":
            raise TargetSyntaxError(text, f"expected a quoted string at column {position + 1}")
        value, position = _string(text, position)
        return Filter(key, value), _expect(text, position, "]")
    if position < len(text) and text[position] in "'\"":
        name, position = _string(text, position)
        return Member(name), _expect(text, position, "]")
    match = _INTEGER.match(text, position)
    if match is None:
        raise TargetSyntaxError(text, f"expected '?', a quoted key or an index at column {position + 1}")
    return Index(int(match.group(0))), _expect(text, match.end(), "]")


@lru_cache(maxsize=1024)
def parse_target(text: str) -> Target:
    """Parse a target expression; raises `TargetSyntaxError` outside the grammar (see the module doc)."""
    position = 2 if text.startswith("$.") else 0
    first, position = _name(text, position, "a field name")
    segments: list[Segment] = [Member(first)]
    while position < len(text):
        if text[position] == ".":
            name, position = _name(text, position + 1, "a field name after '.'")
            segments.append(Member(name))
        elif text[position] == "[":
            segment, position = _bracket(text, position)
            segments.append(segment)
        else:
            raise TargetSyntaxError(text, f"unexpected '{text[position]}' at column {position + 1}")
    return Target(text, tuple(segments))
