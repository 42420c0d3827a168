"""RE2 regular expressions for OATF (SDK spec §5.3 "Regex", format spec §5.7 "Sandboxing and Resource Limits").

Every regular expression an OATF document carries (`regex` conditions, `regex` extractors) is compiled
here, with google-re2 only: linear-time matching, and no lookarounds, backreferences or possessive
quantifiers. google-re2's `re2` module never falls back to Python's backtracking `re`: a pattern outside
the RE2 subset fails to compile, which is what `validate` reports as V-013.

Compiled patterns are cached in a bounded LRU keyed by the pattern text, so a pattern is compiled once
however many messages it is matched against. Text is matched as UTF-8 bytes encoded with
`surrogatepass`, so a JSON string carrying a lone surrogate (legal in JSON, not in UTF-8) is matched
instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol, overload

import re2

from .errors import echo


class RegexMatch[T: (str, bytes)](Protocol):
    """A match of a compiled RE2 pattern (the part of google-re2's `re2._Match` used here). As with
    `re.Match` in typeshed, a group is `T | Any`: None for a group that took no part in the match."""

    def group(self, index: int = 0, /) -> T | Any: ...
    def groups(self) -> tuple[T | Any, ...]: ...
    def start(self, index: int = 0, /) -> int: ...


class Regex(Protocol):
    """A compiled RE2 pattern (the part of google-re2's compiled-pattern type, `re2._Regexp`, used here;
    google-re2 ships no type information). A `str` text gives `str` groups, a `bytes` text `bytes` groups."""

    @property
    def groups(self) -> int: ...
    @overload
    def search(self, text: str, /) -> RegexMatch[str] | None: ...
    @overload
    def search(self, text: bytes, /) -> RegexMatch[bytes] | None: ...

_CACHE_SIZE = 1024

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is reported to the caller, not logged to stderr by RE2


class RegexSyntaxError(ValueError):
    """A pattern is not valid RE2 syntax (V-013). `.pattern` is the pattern, `.reason` RE2's message."""

    def __init__(self, pattern: str, reason: str):
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"invalid RE2 regular expression {echo(pattern)}: {reason}")


@lru_cache(maxsize=_CACHE_SIZE)
def _compile(pattern: str) -> Regex | str:
    """The compiled pattern, or RE2's error message (cached either way, so a bad pattern costs once)."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        # RE2 says "<problem>: <the offending part of the pattern>": the part is quoted (bounded) after the
        # problem, and left out when it is the whole pattern, which the V-013 message already quotes.
        what, _, fragment = text.partition(": ")
        return f"{what} at {echo(fragment)}" if fragment and fragment != pattern else what
    except UnicodeEncodeError:  # RE2 reads UTF-8: a lone surrogate (legal in JSON) has no such form
        return "the pattern is not expressible as UTF-8 (it holds a lone surrogate)"


def compile_regex(pattern: str) -> Regex:
    """Compile `pattern` with RE2 semantics, through a bounded cache (SDK spec §5.3 "Regex").

    Raises `RegexSyntaxError` when the pattern is outside the RE2 subset."""
    compiled = _compile(pattern)
    if isinstance(compiled, str):
        raise RegexSyntaxError(pattern, compiled)
    return compiled


def regex_syntax_error(pattern: str) -> str | None:
    """Why `pattern` is not valid RE2, or None when it is (validation rule V-013)."""
    compiled = _compile(pattern)
    return compiled if isinstance(compiled, str) else None


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


_SEARCH_OPTIONS = re2.Options()
_SEARCH_OPTIONS.log_errors = False
_SEARCH_OPTIONS.never_capture = True  # a yes/no search needs no submatch positions


@lru_cache(maxsize=_CACHE_SIZE)
def _search_functions(pattern: str) -> tuple[Callable[[str], bool], Callable[[bytes], int]]:
    """For a valid `pattern`: the yes/no partial match of a text (see `searcher`), and the byte offset
    where the first match of UTF-8 bytes starts (-1 for none)."""
    capturing = compile_regex(pattern)  # validity is judged with the capturing options, as V-013 does
    try:
        # Parentheses parsed as non-capturing: the same language and the same leftmost-first matches,
        # and RE2 can answer from its DFA alone.
        compiled = re2.compile(pattern, _SEARCH_OPTIONS)
    except re2.error:  # not expected for a valid pattern; the capturing compilation answers the same
        compiled = capturing
    low_level = getattr(compiled, "_regexp", None)
    match = getattr(low_level, "Match", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if match is None or anchor is None:  # a google-re2 without the low-level binding: the public API
        public = compiled.search

        def start_public(data: bytes) -> int:
            found = public(data)
            return -1 if found is None else found.start()

        def found_public(text: str) -> bool:
            return public(text.encode("utf-8", "surrogatepass")) is not None

        return found_public, start_public

    # `_Regexp.search` on bytes calls this same binding, then wraps its spans in a match object.

    def start(data: bytes) -> int:
        return match(anchor, data, 0, len(data))[0][0]

    def found(text: str) -> bool:
        data = text.encode("utf-8", "surrogatepass")
        return match(anchor, data, 0, len(data))[0][0] >= 0

    return found, start


def searcher(pattern: str) -> Callable[[str], bool]:
    """A function telling whether `pattern` matches anywhere in a text, as `search(pattern, text)` does, with
    the compilation and cache look-up done once (a condition evaluated against many values holds on to it).

    Raises `RegexSyntaxError` for a pattern outside the RE2 subset."""
    return _search_functions(pattern)[0]


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text`: a partial match, as `re2.search`, Go's
    `regexp.MatchString` and Rust's `Regex::is_match` (SDK spec §5.3). Anchor with `^`/`$` for a full match.

    Raises `RegexSyntaxError` for a pattern outside the RE2 subset (a document that passed V-013 has none)."""
    return _search_functions(pattern)[0](text)


def match_start(pattern: str, text: str) -> int | None:
    """Where (in characters) the first match of `pattern` in `text` starts, None when there is none. An
    offset inside a character (`\\C` matches any byte) counts the partial character as one.

    Raises `RegexSyntaxError` for a pattern outside the RE2 subset."""
    data = _encode(text)
    start = _search_functions(pattern)[1](data)
    if start < 0:
        return None
    return len(data[:start].decode("utf-8", "replace"))


_EMPTY_WIDTH_SYNTAX = ("^", "$", "\\A", "\\z", "\\b", "\\B")


def is_context_free(pattern: str) -> bool:
    """Whether `pattern` certainly has no empty-width assertion (`^`, `$`, `\\A`, `\\z`, `\\b`, `\\B`, the
    only ones RE2 has), judged conservatively from its text: any of those characters anywhere (in a class,
    escaped) answers False.

    Whether a context-free pattern matches a text's substring does not depend on what surrounds it, so a
    text in which it finds no match proves that none of the text's substrings has one either: searching
    several strings joined together once can rule them all out (a match found there proves nothing)."""
    return not any(syntax in pattern for syntax in _EMPTY_WIDTH_SYNTAX)


def first_group(pattern: str, text: str) -> str | None:
    """The first capture group of the first match of `pattern` in `text` (SDK spec §5.6, `regex` extractors).

    None when the pattern does not match, has no capture group, or its first group took no part in the
    match. Raises `RegexSyntaxError` for a pattern outside the RE2 subset."""
    compiled = compile_regex(pattern)
    if compiled.groups < 1:
        return None
    match = compiled.search(_encode(text))
    if match is None:
        return None
    group = match.group(1)
    if group is None:
        return None
    try:
        return group.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # `\C` (any byte) can cut a character in two
        return group.decode("utf-8", "replace")
