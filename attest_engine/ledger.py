"""Recording, aggregation and reporting of results (Attest protocol v1 §2.4 `submit_plugin_result`, §2.3).

§2.4: the SDK submits results of its own custom assertions "to the engine for recording, aggregation, and
reporting", and "the engine treats plugin results identically to natively evaluated assertions for
reporting purposes". When the config names a `report_path`, the ledger records both — every
`evaluate_batch` result and every accepted plugin result — per trace, bounded to the most recent
`max_records` (older ones are dropped and counted), and at `shutdown` (or end of input) the report is
written there as JSON, atomically (a temporary file renamed into place). Without a `report_path`,
accepted plugin results are only logged (info level).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

from .errors import clip, invalid_params

STATUSES = ("pass", "soft_fail", "hard_fail")
"""§2.2 result statuses."""


def _text(params: dict[str, Any], key: str, where: str = "params") -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise invalid_params(
            f"submit_plugin_result {where}.{key} must be a non-empty string",
            f"Send {where}.{key} as a non-empty string (§2.4).",
        )
    return value


def parse_plugin_result(params: Any) -> dict[str, Any]:
    """The §2.4 request params as a ledger record; raises `RpcError` (-32602) for invalid params."""
    if not isinstance(params, dict):
        raise invalid_params("submit_plugin_result params must be an object", "See §2.4 for the fields.")
    record: dict[str, Any] = {key: _text(params, key) for key in ("trace_id", "plugin_name", "assertion_id")}
    result = params.get("result")
    if not isinstance(result, dict):
        raise invalid_params("submit_plugin_result params.result must be an object", "See §2.4 for result fields.")
    status = result.get("status")
    if status not in STATUSES:
        raise invalid_params(
            f"submit_plugin_result result.status must be one of {', '.join(STATUSES)}",
            "Report pass, soft_fail or hard_fail.",
        )
    score = result.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= score <= 1.0:
        raise invalid_params(
            "submit_plugin_result result.score must be a number from 0.0 to 1.0", "Normalise the score to [0, 1]."
        )
    explanation = result.get("explanation")
    if not isinstance(explanation, str):
        raise invalid_params(
            "submit_plugin_result result.explanation must be a string", "Explain the result in result.explanation."
        )
    metadata = result.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise invalid_params("submit_plugin_result result.metadata must be an object", "Send metadata as an object.")
    record.update(status=status, score=float(score), explanation=clip(explanation, 1000))
    if metadata is not None:
        record["metadata"] = metadata
    return record


class Ledger:
    """Results by (trace_id, assertion_id), most recent last; a resubmitted result replaces the earlier one."""

    def __init__(self, max_records: int = 100_000) -> None:
        self._max_records = max_records
        self._records: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self.dropped = 0

    def record(self, trace_id: str, result: dict[str, Any]) -> None:
        key = (trace_id, result["assertion_id"])
        self._records.pop(key, None)
        self._records[key] = {"trace_id": trace_id, **result}
        while len(self._records) > self._max_records:
            self._records.popitem(last=False)
            self.dropped += 1

    def report(self, counters: dict[str, int]) -> dict[str, Any]:
        """The aggregated report: counters, per-status totals, total cost, and each trace's results."""
        traces: dict[str, list[dict[str, Any]]] = {}
        for record in self._records.values():
            traces.setdefault(record["trace_id"], []).append(
                {key: value for key, value in record.items() if key != "trace_id"}
            )
        statuses = Counter(record["status"] for record in self._records.values())
        return {
            **counters,
            "results_recorded": len(self._records),
            "results_dropped": self.dropped,
            "status_counts": {status: statuses.get(status, 0) for status in STATUSES},
            "total_cost": math.fsum(record.get("cost", 0.0) for record in self._records.values()),
            "traces": traces,
        }

    def write(self, path: str, counters: dict[str, int]) -> None:
        """Write the report to `path` atomically."""
        target = Path(path)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.report(counters), handle, indent=2, ensure_ascii=False)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
