"""The `request_id` idempotency cache (Attest protocol v1 §2.2 "Assertion object fields").

"If the same `request_id` is submitted twice, the engine returns the cached result." Results are kept in
a bounded LRU for the process lifetime. Each entry remembers a fingerprint of what was evaluated (the
assertion's type and spec, and the trace_id); reusing a `request_id` for something else is a client bug
the engine reports (ASSERTION_ERROR) instead of answering with an unrelated result. Thread-safe: batches
are evaluated on worker threads.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any


def fingerprint(assertion_type: str, spec: Mapping[str, Any], trace_id: str) -> str:
    """What a `request_id` stands for: the assertion's type and spec, and the trace it ran on."""
    canonical = json.dumps([assertion_type, spec, trace_id], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class ReusedRequestId(Exception):
    """A `request_id` came back with a different assertion or trace."""


class IdempotencyCache:
    """request_id → (fingerprint, wire result), least recently used evicted beyond `max_entries`."""

    def __init__(self, max_entries: int) -> None:
        self._max_entries = max_entries
        self._entries: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, request_id: str, print_: str) -> dict[str, Any] | None:
        """The cached result for `request_id`, None if there is none; raises `ReusedRequestId`."""
        with self._lock:
            entry = self._entries.get(request_id)
            if entry is None:
                return None
            if entry[0] != print_:
                raise ReusedRequestId(request_id)
            self._entries.move_to_end(request_id)
            return entry[1]

    def put(self, request_id: str, print_: str, result: dict[str, Any]) -> None:
        if self._max_entries == 0:
            return
        with self._lock:
            self._entries[request_id] = (print_, result)
            self._entries.move_to_end(request_id)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
