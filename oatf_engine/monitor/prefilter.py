"""The multi-pattern prefilter: which of a library's pattern indicators and payloads a message can possibly
match, found in one pass over the message (as Snort and Suricata pick the few rules a packet can match).

**Requirements.** For a pattern indicator (SDK spec §4.2) whose condition holds a string operator, an RE2
pattern that any text the condition accepts must match somewhere (`requirement`):
- `contains`, `starts_with`, `ends_with` (format spec §5.4, SDK spec §5.3): the operand, as a literal;
- `regex`: the regex itself (RE2's own prefilter derives the literal atoms a match needs, see below);
- a bare string (deep equality) or an `any_of` of strings only: the string(s), as literals (a value equal to
  one of them is that string).
Operators combine with AND, so one operator's requirement is the condition's. A trigger's `match` predicate
(SDK spec §5.4) has the requirement of any of its conditions. Every other indicator has no
requirement and is always evaluated: expressions and semantic indicators (their errors are verdicts too, so
skipping a message that would have raised one would change the verdict), `exists` (which `exists: false`
matches when nothing resolves), numeric operators, an `any_of` holding a non-string, a regex RE2 rejects
(evaluation reports it as an error), a pattern without target or condition (an error on every message).

**The haystack** of a message (`haystack`): its content as compact JSON with sorted keys — the text SDK spec
§5.3 gives a non-string value, and JSON composes, so the text of every value inside the message is a
substring of it — followed, when the JSON holds an escape (every escape starts with a backslash), by the
message's strings as they are (an escaped string differs from its JSON form). Every string value of the
message and the text of every other value are therefore substrings of the haystack: a text a condition
accepts contains the requirement's match, so the haystack does. The haystack is not built (every indicator
is evaluated) for a content JSON cannot express, or longer than `MAX_RESOLVED_VALUES` characters, the
messages on which a pattern can fail with an error rather than not match (too many values: each resolved
value is at least one character of the JSON).

**Matching** (`LiteralFilter`): RE2's FilteredRE2 (`re2.Filter`), compiled once per library: it extracts
from each regex the literal atoms any match must contain (an AND/OR formula), finds every atom in the text
in one pass (an RE2 set, case-insensitive: a superset), and returns the regexes whose formula holds, with the
ones it cannot filter (no atom) always among them. Filters hold at most `FILTER_SIZE` requirements each, so
the atom set's automaton stays small next to RE2's memory budget (RE2 would answer "no atom" if its automaton
ran out of memory).

Delivery (`oatf_engine.monitor.delivery`) uses the same matching: a payload can only be found in a message
whose joined strings contain its longest literal piece.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import re2

import oatf
from oatf.conditions import compile_condition
from oatf.evaluation import MAX_RESOLVED_VALUES
from oatf.model import Condition
from oatf.regex import regex_syntax_error
from oatf.values import compact_json

FILTER_SIZE = 256
"""Requirements per RE2 filter (see the module docstring)."""


def requirement(indicator: oatf.Indicator) -> str | None:
    """The RE2 pattern the haystack of any message `indicator` matches must match, or None when the
    indicator must be evaluated on every message (see the module docstring)."""
    pattern = indicator.pattern
    if pattern is None:
        return None
    target = pattern.target if pattern.target is not None else indicator.target
    condition = pattern.condition if pattern.condition is not None else pattern.shorthand
    if not isinstance(target, str) or condition is None:
        return None
    return _valid(condition_requirement(condition))


def predicate_requirement(predicate: oatf.MatchPredicate) -> str | None:
    """The RE2 pattern the haystack of any content `predicate` holds on must match (SDK spec §5.4: an AND of
    conditions on resolved paths; a path that does not resolve satisfies only `exists: false`, which has no
    requirement), or None."""
    for condition in predicate.values():
        found = _valid(condition_requirement(condition))
        if found is not None:
            return found
    return None


def _valid(pattern: str | None) -> str | None:
    return pattern if pattern is not None and regex_syntax_error(pattern) is None else None


def condition_requirement(condition: Condition) -> str | None:
    """The RE2 pattern the text of any value `condition` accepts must match (see the module docstring), or
    None."""
    compiled = compile_condition(condition)
    operators = compiled.operators
    if operators is None:
        expected = compiled.expected
        return re2.escape(expected) if type(expected) is str and expected else None
    regex = operators.get("regex")
    if isinstance(regex, str) and regex_syntax_error(regex) is not None:
        return None  # evaluation raises an error wherever it reaches this regex
    if isinstance(regex, str):
        return regex
    for name in ("contains", "starts_with", "ends_with"):
        operand = operators.get(name)
        if type(operand) is str and operand:
            return re2.escape(operand)
    items = operators.get("any_of")
    if isinstance(items, list | tuple) and items and all(type(item) is str and item for item in items):
        return "|".join(re2.escape(item) for item in items)
    return None


def _strings(content: Any) -> Iterable[str]:
    """Every string value of `content` (not keys), depth first."""
    stack = [content]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)


def haystack(content: Any) -> bytes | None:
    """The text a requirement is searched in (see the module docstring), UTF-8 (lone surrogates kept, as
    `oatf.regex` matches them); None when every indicator must be evaluated on this content."""
    try:
        text = compact_json(content, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None
    if len(text) > MAX_RESOLVED_VALUES:
        return None
    if "\\" in text:
        text = "\x00".join((text, *_strings(content)))
    return text.encode("utf-8", "surrogatepass")


class LiteralFilter:
    """RE2 filters over requirements (RE2 patterns by id, possibly repeated): `matching(text)` holds the ids
    whose pattern can match somewhere in `text`, a superset of those that do."""

    __slots__ = ("_always", "_filters")

    def __init__(self, patterns: Mapping[int, str]) -> None:
        ids: dict[str, list[int]] = {}
        for number, pattern in patterns.items():
            ids.setdefault(pattern, []).append(number)
        distinct = list(ids)
        self._filters: list[tuple[Any, list[list[int]]]] = []
        self._always: set[int] = set()
        """Ids of patterns a filter refused (a filter that failed to compile: all of its patterns)."""
        for start in range(0, len(distinct), FILTER_SIZE):
            chunk: list[str] = []
            compiled = re2.Filter()
            for pattern in distinct[start:start + FILTER_SIZE]:
                try:
                    compiled.Add(pattern)
                except re2.error:
                    self._always.update(ids[pattern])
                else:
                    chunk.append(pattern)
            if not chunk:
                continue
            try:
                compiled.Compile()
            except re2.error:
                self._always.update(n for pattern in chunk for n in ids[pattern])
            else:
                self._filters.append((compiled, [ids[p] for p in chunk]))

    def matching(self, text: bytes) -> set[int]:
        found = set(self._always)
        for compiled, ids in self._filters:
            for index in compiled.Match(text, True) or ():
                found.update(ids[index])
        return found
