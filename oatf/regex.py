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

from functools import lru_cache

import re2

Regex = re2._Regexp
"""A compiled RE2 pattern (google-re2's compiled-pattern type)."""

_CACHE_SIZE = 1024

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is reported to the caller, not logged to stderr by RE2


class RegexSyntaxError(ValueError):
    """A pattern is not valid RE2 syntax (V-013). `.pattern` is the pattern, `.reason` RE2's message."""

    def __init__(self, pattern: str, reason: str):
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"invalid RE2 regular expression {pattern!r}: {reason}")


@lru_cache(maxsize=_CACHE_SIZE)
def _compile(pattern: str) -> Regex | str:
    """The compiled pattern, or RE2's error message (cached either way, so a bad pattern costs once)."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


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


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text`: a partial match, as `re2.search`, Go's
    `regexp.MatchString` and Rust's `Regex::is_match` (SDK spec §5.3). Anchor with `^`/`$` for a full match.

    Raises `RegexSyntaxError` for a pattern outside the RE2 subset (a document that passed V-013 has none)."""
    return compile_regex(pattern).search(_encode(text)) is not None


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
