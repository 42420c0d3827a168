"""The multi-pattern prefilter: which of a library's pattern indicators and payloads a message can possibly
match, found in one pass over the message (as Snort and Suricata pick the few rules a packet can match).

**Requirements.** For a pattern indicator (SDK spec §4.2) whose condition holds a string operator, an RE2
pattern that any text the condition accepts must match somewhere (`requirements`):
- `contains`, `starts_with`, `ends_with` (format spec §5.4, SDK spec §5.3): the operand, as a literal;
- `regex`: the regex itself (RE2's own prefilter derives the literal atoms a match needs, see below);
- a bare string (deep equality) or an `any_of` of strings only: the string(s), as literals (a value equal to
  one of them is that string).
Operators combine with AND, so one operator's requirement is the condition's. A condition without one
(`exists: true`, numeric operators, a bare non-string, an `any_of` holding a non-string) still needs its
target to resolve — every other condition fails on a path that resolves to nothing — so the message must
hold the path's last member name as a key (`key_requirement`: `"name":` in the haystack); that key is also
the fallback of a condition whose own requirement gives RE2 no literal to look for (a regex of character
classes only: `choose`). Only a condition with a false `exists` (which an absent value satisfies) has no
requirement. A trigger's `match` predicate (SDK spec §5.4) has the requirements of its entries (conditions'
own first, paths' keys next), and a JSONPath extractor of the member-name form `$.a.b` (SDK spec §5.6: it
captures nothing where no node is found) the key of its last name. Every other indicator has no
requirement and is always evaluated: expressions and semantic indicators (their errors are verdicts too, so
skipping a message that would have raised one would change the verdict), conditions with a false
`exists`, a regex RE2 rejects (evaluation reports it as an error), a pattern without target or condition
(an error on every message).

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
the atom set's automaton stays small next to RE2's memory budget. Should it run out of memory anyway, RE2
answers "no atom" without saying so; every filter therefore also holds `CANARY`, which every text it is run
on ends with: a filter whose answer lacks the canary failed, and all of its requirements count as possible
(a missed requirement would skip an indicator: a false not_exploited).

Delivery (`oatf_engine.monitor.delivery`) uses the same matching: a payload can only be found in a message
whose joined strings contain its longest literal piece, and so any piece of that (`distinctive_pieces`: the
`PIECE_WIDTH` characters of it the fewest payloads share; an RE2 set of long literals is several times
slower to run than one of short ones).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import re2

import oatf
from oatf.conditions import compile_condition
from oatf.evaluation import MAX_RESOLVED_VALUES
from oatf.model import Condition, Extractor, ExtractorType
from oatf.paths import path_keys
from oatf.regex import regex_syntax_error
from oatf.values import compact_json

FILTER_SIZE = 256
"""Requirements per RE2 filter (see the module docstring)."""

CANARY = "\x00oatf prefilter canary\x00"
"""A literal every filter holds and every text it matches ends with (see the module docstring)."""

_CANARY_SUFFIX = CANARY.encode("utf-8")

PIECE_WIDTH = 16
"""Characters of a payload's longest piece its requirement keeps (`distinctive_pieces`)."""

_MEMBER_NAMES = re2.compile(r"\A\$(?:\.[A-Za-z_][A-Za-z0-9_]*)+\z")
"""An RFC 9535 query of member-name shorthands only (`$.arguments.project`)."""


def requirements(indicator: oatf.Indicator) -> tuple[str, ...]:
    """RE2 patterns the haystack of any message `indicator` matches must each match, the most selective
    first; none when the indicator must be evaluated on every message (see the module docstring)."""
    pattern = indicator.pattern
    if pattern is None:
        return ()
    target = pattern.target if pattern.target is not None else indicator.target
    condition = pattern.condition if pattern.condition is not None else pattern.shorthand
    if not isinstance(target, str) or condition is None:
        return ()
    found = [_valid(condition_requirement(condition))]
    if _needs_value(condition):
        found.append(key_requirement(path_keys(target)))
    return tuple(f for f in found if f is not None)


def predicate_requirements(predicate: oatf.MatchPredicate) -> tuple[str, ...]:
    """RE2 patterns the haystack of any content `predicate` holds on must each match (SDK spec §5.4: an AND
    of conditions on resolved paths, each a simple dot-path; a path that does not resolve satisfies only
    `exists: false`), conditions' own first."""
    found = [_valid(condition_requirement(condition)) for condition in predicate.values()]
    found += [key_requirement(path_keys(path, wildcard=False)) for path, condition in predicate.items()
              if _needs_value(condition)]
    return tuple(f for f in found if f is not None)


def choose(wanted: Sequence[Sequence[str]]) -> list[str | None]:
    """For each sequence of requirements in `wanted`, the first RE2 can filter on (one in which it finds
    literal atoms; a regex of character classes only has none, and would pass every message), or None."""
    chosen: list[str | None] = [None] * len(wanted)
    tried = [0] * len(wanted)
    undecided = [n for n, candidates in enumerate(wanted) if candidates]
    while undecided:
        unfilterable = LiteralFilter({n: wanted[n][tried[n]] for n in undecided}).matching(b"")
        for n in undecided:
            if n not in unfilterable:
                chosen[n] = wanted[n][tried[n]]
            tried[n] += 1
        undecided = [n for n in unfilterable if tried[n] < len(wanted[n])]
    return chosen


def extractor_requirement(extractor: Extractor) -> str | None:
    """The RE2 pattern the haystack of any message `extractor` captures a value from must match: for a
    JSONPath of member-name shorthands, the key of its last name (the node it captures is that member's
    value); None for any other selector."""
    selector = extractor.selector
    if extractor.type != ExtractorType.JSON_PATH or selector is None or not _MEMBER_NAMES.search(selector):
        return None
    return key_requirement((selector.rpartition(".")[2],))


def key_requirement(keys: Sequence[str]) -> str | None:
    """The RE2 pattern of a message holding the last of `keys` as a member name (a path's last name is its
    most particular: `arguments.page`): its compact JSON form (as `haystack` writes keys) followed by the
    colon; None without keys."""
    if not keys:
        return None
    return re2.escape(json.dumps(keys[-1], ensure_ascii=False) + ":")


def _needs_value(condition: Condition) -> bool:
    """Whether `condition` fails wherever its path resolves to nothing (SDK spec §4.2 step 1, §5.4): every
    condition but one with a false `exists`."""
    operators = compile_condition(condition).operators
    return operators is None or "exists" not in operators or bool(operators["exists"])


def distinctive_pieces(texts: Sequence[str], width: int = PIECE_WIDTH) -> list[str]:
    """For each of `texts`, the piece of `width` characters (the whole text if shorter) that the fewest of
    `texts` contain, the first such: what a text holding it must hold (see the module docstring)."""
    windows = [{text[start:start + width] for start in range(max(len(text) - width, 0) + 1)} for text in texts]
    shared = Counter(window for found in windows for window in found)
    return [min((text[start:start + width] for start in range(max(len(text) - width, 0) + 1)),
                key=shared.__getitem__) for text in texts]


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
        self._filters: list[tuple[Any, list[list[int]], set[int]]] = []
        """Each filter, the ids of its patterns by index (index 0: the canary), and all of those ids."""
        self._always: set[int] = set()
        """Ids of patterns a filter refused (a filter that failed to compile: all of its patterns)."""
        for start in range(0, len(distinct), FILTER_SIZE):
            chunk: list[str] = []
            compiled = re2.Filter()
            compiled.Add(re2.escape(CANARY))
            for pattern in distinct[start:start + FILTER_SIZE]:
                try:
                    compiled.Add(pattern)
                except re2.error:
                    self._always.update(ids[pattern])
                else:
                    chunk.append(pattern)
            if not chunk:
                continue
            every = {n for pattern in chunk for n in ids[pattern]}
            try:
                compiled.Compile()
            except re2.error:
                self._always.update(every)
            else:
                self._filters.append((compiled, [[], *(ids[p] for p in chunk)], every))

    def matching(self, text: bytes) -> set[int]:
        found = set(self._always)
        probe = text + _CANARY_SUFFIX
        for compiled, ids, every in self._filters:
            indices = compiled.Match(probe, True) or ()
            if 0 not in indices:
                found.update(every)
                continue
            for index in indices:
                found.update(ids[index])
        return found
