"""Response dispatch (SDK spec §5.7 `select_response`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .conditions import evaluate_predicate

_WHEN = "when"


def select_response(entries: Iterable[Mapping[str, Any]], request: Any) -> dict[str, Any] | None:
    """SDK spec §5.7 `select_response`: the response of the first entry whose `when` predicate matches
    `request`, else of the first entry without `when` (the default), else None.

    Predicate-bearing entries are all tried, in order, before the default is considered, wherever it
    stands in the list. An entry with `when: null` is a default entry.

    The prose returns the entry itself; the conformance fixtures (select-response.yaml, SELR-001/002/003/
    005) expect the entry without its `when` key. Following the fixtures, the result is a new dict of the
    entry's other keys: the response to build, with the dispatch predicate left out."""
    default: Mapping[str, Any] | None = None
    for entry in entries:
        predicate = entry.get(_WHEN)
        if predicate is None:
            if default is None:
                default = entry
        elif evaluate_predicate(predicate, request):
            return _response(entry)
    return None if default is None else _response(default)


def _response(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entry.items() if key != _WHEN}
