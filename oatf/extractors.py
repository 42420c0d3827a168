"""Extractors (SDK spec §5.6 `evaluate_extractor`; format spec §5.5 "Extractors").

JSONPath selectors are RFC 9535 queries (the `jsonpath_rfc9535` package), compiled once and cached; regex
selectors are RE2 (`oatf.regex`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jsonpath_rfc9535

from .model import Extractor, ExtractorSource, ExtractorType
from .regex import first_group
from .values import compact_json

# Format spec §5.7: JSONPath evaluation must not follow recursive descent unboundedly. 64 matches the
# wildcard dot-path depth limit (SDK spec §5.1.2).
_JSONPATH = jsonpath_rfc9535.JSONPathEnvironment(max_recursion_depth=64)


@lru_cache(maxsize=1024)
def _compile_jsonpath(selector: str) -> jsonpath_rfc9535.JSONPathQuery:
    return _JSONPATH.compile(selector)


def jsonpath_syntax_error(selector: str) -> str | None:
    """Why `selector` is not a valid RFC 9535 JSONPath query, or None when it is (validation rule V-015)."""
    try:
        _compile_jsonpath(selector)
    except jsonpath_rfc9535.JSONPathError as exc:
        return str(exc.args[0]) if exc.args else type(exc).__name__
    except RecursionError:  # a query nested deeply enough to exhaust the parser's stack
        return "query nested too deeply"
    return None


def _as_text(value: Any) -> str | None:
    """Extracted values are strings: a string as it is, anything else as compact JSON in document key
    order (conformance EXTR-008 expects `{"type":"object","properties":…}` unsorted). None when the
    value has no JSON form within the interpreter's limits."""
    if isinstance(value, str):
        return value
    try:
        return compact_json(value)
    except (TypeError, ValueError, RecursionError):
        return None


def evaluate_extractor(extractor: Extractor, message: Any, direction: ExtractorSource | str) -> str | None:
    """SDK spec §5.6 `evaluate_extractor`: the value `extractor` captures from `message`, or None.

    None when `extractor.source` is not `direction` (the message is the other half of the exchange), or
    when nothing matches. `json_path`: the first node in RFC 9535 document order, as text (non-scalars as
    compact JSON). `regex`: the first capture group of the first match in the message's text (a string
    message as it is, any other as compact JSON); None when the pattern has no capture group. Any other
    `type` (which `parse` rejects) captures nothing.

    A selector that passed `validate` (V-015, V-013) never fails to compile; one that does raises
    `jsonpath_rfc9535.JSONPathSyntaxError` or `oatf.regex.RegexSyntaxError`. A valid query failing on
    the data (e.g. a descendant segment nested past the depth limit) captures nothing."""
    if extractor.source != direction:
        return None
    selector = extractor.selector or ""
    if extractor.type == ExtractorType.JSON_PATH:
        query = _compile_jsonpath(selector)
        try:
            node = query.find_one(message)
        except jsonpath_rfc9535.JSONPathError:
            return None
        return None if node is None else _as_text(node.value)
    if extractor.type == ExtractorType.REGEX:
        text = _as_text(message)
        return None if text is None else first_group(selector, text)
    return None
