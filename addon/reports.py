"""Verdict reports: one JSON file per run (written atomically), every verdict appended to `verdicts.jsonl`,
and a console summary table. Files only; no mitmproxy."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from addon.text import printable

JSONL_NAME = "verdicts.jsonl"


def report_filename(report: dict[str, Any]) -> str:
    """`<attack id>__<session, first 60 chars>__<session hash>__<end time>.json`, safe on every filesystem.

    The session key comes from the traffic (an attacker may choose it): it is cut to a bounded length and a
    hash of the whole key keeps keys that differ only in cut or unsafe characters apart."""
    attack = str(report["attack"]["id"] or Path(report["attack"]["file"]).stem)[:60]
    session = str(report["execution_summary"]["session"])
    digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    ended = f"{report['execution_summary']['ended_at']:.3f}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{attack}__{session[:60]}__{digest}__{ended}") + ".json"


class ReportWriter:
    """Writes each concluded run's report into `directory` and appends it to `verdicts.jsonl`."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, report: dict[str, Any]) -> Path:
        path = self.directory / report_filename(report)
        data = json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        with open(self.directory / JSONL_NAME, "a", encoding="utf-8") as jsonl:
            jsonl.write(json.dumps(report, separators=(",", ":"), default=str) + "\n")
        return path


OUTCOMES = ("exploited", "partial", "resisted", "inconclusive", "not_delivered", "error")
"""A run's `outcome` (`addon.monitor.delivery.outcome`), most severe first."""

EXIT_OK, EXIT_EXPLOITED, EXIT_ERROR, EXIT_NOT_DELIVERED = 0, 1, 2, 3


def _label(outcome: str) -> str:
    return outcome.replace("_", " ")


def summary_table(reports: Iterable[dict[str, Any]]) -> str:
    """A fixed-width table of concluded runs (attack, session, outcome, matched/total, tier, status), then
    the count of each outcome: *resisted* and *not delivered* are never merged. Every cell is printable and
    bounded (session keys come from the traffic)."""
    rows = [("ATTACK", "SESSION", "OUTCOME", "MATCHED", "MAX TIER", "STATUS")]
    for report in reports:
        summary = report["verdict"]["evaluation_summary"]
        total = sum(summary.values())
        rows.append((
            printable(report["attack"]["id"] or report["attack"]["file"], 60),
            printable(report["execution_summary"]["session"], 40),
            _label(report["outcome"]),
            f"{summary['matched']}/{total}",
            printable(report["verdict"].get("max_tier") or "-", 20),
            printable(report["execution_summary"]["status"], 20),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = [("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()) for row in rows]
    return "\n".join([*table, outcome_summary(reports)])


def outcome_summary(reports: Iterable[dict[str, Any]]) -> str:
    """`N run(s): a exploited, b partial, c resisted, d inconclusive, e not delivered, f error`."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for report in reports:
        counts[report["outcome"]] += 1
    return f"{sum(counts.values())} run(s): " + ", ".join(f"{n} {_label(o)}" for o, n in counts.items())


def undelivered_attacks(reports: Iterable[dict[str, Any]], attack_ids: Iterable[str]) -> list[str]:
    """The attacks among `attack_ids` no run of which was delivered (including attacks with no run)."""
    delivered = {r["attack"]["id"] for r in reports if r["execution_summary"]["delivered"]}
    return [attack_id for attack_id in attack_ids if attack_id not in delivered]


def exit_status(reports: Iterable[dict[str, Any]], undelivered: Iterable[str] = ()) -> int:
    """CI semantics: 1 something exploited or partial; else 2 some verdict is an error; else 3 when
    `undelivered` (attacks `--require-delivered` asked about that never reached the agent) is not empty;
    else 0."""
    results = {r["verdict"]["result"] for r in reports}
    if results & {"exploited", "partial"}:
        return EXIT_EXPLOITED
    if "error" in results:
        return EXIT_ERROR
    return EXIT_NOT_DELIVERED if list(undelivered) else EXIT_OK
