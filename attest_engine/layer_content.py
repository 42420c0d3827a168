"""Layer 4 — Content Matching (Attest protocol v1 §4 "Layer 4").

Text checks on the value a target selects (`output.message`, `output.structured.<field>`,
`steps[?name=='<name>'].result.<field>`, ...). A selected string is read as is; any other JSON value as its
compact JSON text. When the target selects several values, every one must pass. A target that selects
nothing fails, whatever the check.

| check          | passes when                                        | fields                          |
|----------------|----------------------------------------------------|---------------------------------|
| `contains`     | the text contains `value`                          | `value`, `case_sensitive`       |
| `not_contains` | the text does not contain `value`                  | `value`, `case_sensitive`       |
| `regex_match`  | RE2 pattern `value` matches somewhere in the text  | `value`                         |
| `keyword_all`  | the text contains every string of `values`         | `values`, `case_sensitive`      |
| `keyword_any`  | the text contains at least one string of `values`  | `values`, `case_sensitive`      |
| `forbidden`    | the text contains none of `values`                 | `values`, `case_sensitive`      |

`case_sensitive` defaults to false (comparison after Unicode case folding); this engine applies it to
`forbidden` too. `regex_match` uses RE2 syntax as written (use `(?i)` for case-insensitive matching); an
invalid pattern is an ASSERTION_ERROR. Boolean checks: score 1.0 or 0.0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import re2

from .checks import (
    DeterministicCheck,
    Outcome,
    SpecError,
    TraceView,
    as_text,
    field,
    not_found,
    show,
    string_list,
    target,
)

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is reported in the response, not printed on stderr by RE2

TextTest = Callable[[str], tuple[bool, str]]
"""Tests one text; returns (passed, the predicate that held), e.g. (False, "does not contain 'refund'")."""


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re2._Regexp | str:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


def _folder(spec: Mapping[str, Any]) -> Callable[[str], str]:
    sensitive = field(spec, "case_sensitive", bool, "a boolean", required=False)
    return (lambda text: text) if sensitive else str.casefold


def _contains(spec: Mapping[str, Any]) -> TextTest:
    value = field(spec, "value", str, "a string", required=True)
    fold = _folder(spec)
    needle = fold(value)

    def test(text: str) -> tuple[bool, str]:
        found = needle in fold(text)
        return found, f"{'contains' if found else 'does not contain'} {show(value)}"

    return test


def _not_contains(spec: Mapping[str, Any]) -> TextTest:
    contains = _contains(spec)

    def test(text: str) -> tuple[bool, str]:
        found, predicate = contains(text)
        return not found, predicate

    return test


def _regex_match(spec: Mapping[str, Any]) -> TextTest:
    pattern = field(spec, "value", str, "an RE2 regular expression", required=True)
    compiled = _regex(pattern)
    if isinstance(compiled, str):
        raise SpecError(
            f"invalid regex {show(pattern, 200)}: {compiled}",
            f"The regex pattern {show(pattern, 200)} is not valid RE2 syntax. Fix the regex in assertion spec.",
        )
    shown = f"/{pattern[:120]}/"

    def test(text: str) -> tuple[bool, str]:
        try:
            match = compiled.search(text)
        except UnicodeEncodeError:  # a lone surrogate (legal in JSON strings, not in UTF-8)
            match = compiled.search(text.encode("utf-8", "replace").decode("utf-8"))
        if match is None:
            return False, f"does not match {shown}"
        return True, f"matches {shown} at {show(match.group(0), 80)}"

    return test


def _keywords(spec: Mapping[str, Any]) -> tuple[list[str], Callable[[str], list[str]]]:
    """The keywords and a function giving those present in a text."""
    values = string_list(spec, "values")
    fold = _folder(spec)
    folded = [(value, fold(value)) for value in values]

    def present(text: str) -> list[str]:
        haystack = fold(text)
        return [value for value, needle in folded if needle in haystack]

    return values, present


def _listed(values: list[str]) -> str:
    return ", ".join(show(value, 60) for value in values[:10]) + (", …" if len(values) > 10 else "")


def _keyword_all(spec: Mapping[str, Any]) -> TextTest:
    values, present = _keywords(spec)

    def test(text: str) -> tuple[bool, str]:
        found = present(text)
        if len(found) == len(values):
            return True, f"contains all keywords {_listed(values)}"
        missing = [value for value in values if value not in found]
        return False, f"is missing {len(missing)} of {len(values)} keywords: {_listed(missing)}"

    return test


def _keyword_any(spec: Mapping[str, Any]) -> TextTest:
    values, present = _keywords(spec)

    def test(text: str) -> tuple[bool, str]:
        found = present(text)
        if found:
            return True, f"contains keyword {_listed(found)}"
        return False, f"contains none of the keywords {_listed(values)}"

    return test


def _forbidden(spec: Mapping[str, Any]) -> TextTest:
    values, present = _keywords(spec)

    def test(text: str) -> tuple[bool, str]:
        found = present(text)
        if found:
            return False, f"contains forbidden terms {_listed(found)}"
        return True, f"contains none of the forbidden terms {_listed(values)}"

    return test


CHECKS: dict[str, Callable[[Mapping[str, Any]], TextTest]] = {
    "contains": _contains,
    "not_contains": _not_contains,
    "regex_match": _regex_match,
    "keyword_all": _keyword_all,
    "keyword_any": _keyword_any,
    "forbidden": _forbidden,
}
"""§4 layer 4 check types."""


def compile_content(spec: Mapping[str, Any]) -> DeterministicCheck:
    """The layer 4 check for `spec` (`target`, `check` and its fields)."""
    selector = target(spec)
    check = field(spec, "check", str, "a content check name", required=True)
    if check not in CHECKS:
        raise SpecError(f"unknown content check {show(check)}", f"Use one of {', '.join(CHECKS)} (§4 layer 4).")
    test = CHECKS[check](spec)

    def run(view: TraceView) -> Outcome:
        selection = view.select(selector)
        if not selection.values:
            return not_found(selection, selector)
        sentences = []
        for path, value in selection.values:
            text = as_text(value)
            passed, predicate = test(text)
            if not passed:
                return Outcome(False, 0.0, f"{path} {predicate}. Text: {show(text)}.")
            sentences.append(f"{path} {predicate}.")
        return Outcome(True, 1.0, " ".join(sentences[:3]) + (" …" if len(sentences) > 3 else ""))

    return run
