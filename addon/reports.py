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


def summary_table(reports: Iterable[dict[str, Any]]) -> str:
    """A fixed-width table of concluded runs: attack, session, result, matched/total, tier, status. Every cell
    is printable and bounded (session keys come from the traffic)."""
    rows = [("ATTACK", "SESSION", "RESULT", "MATCHED", "MAX TIER", "STATUS")]
    for report in reports:
        summary = report["verdict"]["evaluation_summary"]
        total = sum(summary.values())
        rows.append((
            printable(report["attack"]["id"] or report["attack"]["file"], 60),
            printable(report["execution_summary"]["session"], 40),
            printable(report["verdict"]["result"], 20),
            f"{summary['matched']}/{total}",
            printable(report["verdict"].get("max_tier") or "-", 20),
            printable(report["execution_summary"]["status"], 20),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def exit_status(reports: Iterable[dict[str, Any]]) -> int:
    """0 nothing exploited, 1 something exploited or partial, 2 some verdict is an error (CI semantics)."""
    results = {r["verdict"]["result"] for r in reports}
    if results & {"exploited", "partial"}:
        return 1
    return 2 if "error" in results else 0
