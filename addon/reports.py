"""Verdict reports: one JSON file per run (written atomically), every verdict appended to `verdicts.jsonl`,
made durable in batches (`ReportWriter.commit`), and a console summary table. Files only; no mitmproxy."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from addon.journal import RunKey, run_key
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
    """Writes each concluded run's report into `directory` and appends it to `verdicts.jsonl`.

    `write` puts one report in place atomically (temporary file, then rename: a reader never sees half a
    report); `commit` makes every report written since the last commit durable at once — each file, then
    `verdicts.jsonl`, then the directory, fsynced — so a batch of conclusions costs one round of fsyncs, not
    one per report. The directory is created on the first write (and again if it disappears)."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self._written: list[Path] = []
        self._jsonl: IO[str] | None = None

    def write(self, report: dict[str, Any]) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / report_filename(report)
        data = json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._written.append(path)
        if self._jsonl is None:
            self._jsonl = open(self.directory / JSONL_NAME, "a", encoding="utf-8")  # noqa: SIM115 (commit closes)
        self._jsonl.write(json.dumps(report, separators=(",", ":"), default=str) + "\n")
        self._jsonl.flush()
        return path

    def commit(self) -> None:
        """fsync every report written since the last commit, `verdicts.jsonl` and the directory."""
        written, self._written = self._written, []
        jsonl, self._jsonl = self._jsonl, None
        if jsonl is not None:
            with jsonl:
                os.fsync(jsonl.fileno())
        for path in written:
            _fsync(path)
        if written:
            _fsync(self.directory)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class RunSummary:
    """What the summary table shows of one report."""

    attack: str
    session: str
    outcome: str
    matched: int
    total: int
    max_tier: str | None
    status: str

    @classmethod
    def of(cls, report: dict[str, Any]) -> RunSummary:
        summary = report["verdict"]["evaluation_summary"]
        return cls(str(report["attack"]["id"] or report["attack"]["file"]),
                   str(report["execution_summary"]["session"]), report["outcome"], summary["matched"],
                   sum(summary.values()), report["verdict"].get("max_tier"),
                   str(report["execution_summary"]["status"]))


@dataclass(frozen=True)
class Reported:
    """A concluded run, as the monitor process tells the proxy once its report is written and durable (or
    could not be written): what the proxy logs, shows and journals — never the report itself."""

    run: str
    key: RunKey
    summary: RunSummary
    path: str | None
    """The report file; None when it could not be written (`error`)."""
    error: str | None = None

    @classmethod
    def of(cls, run: str, report: dict[str, Any], path: Path | None, error: str | None = None) -> Reported:
        return cls(run, run_key(report), RunSummary.of(report), None if path is None else str(path), error)


OUTCOMES = ("exploited", "partial", "resisted", "inconclusive", "not_delivered", "error")
"""A run's `outcome` (`addon.monitor.delivery.outcome`), most severe first."""

EXIT_OK, EXIT_EXPLOITED, EXIT_ERROR, EXIT_NOT_DELIVERED = 0, 1, 2, 3


def _label(outcome: str) -> str:
    return outcome.replace("_", " ")


def _summaries(reports: Iterable[dict[str, Any] | RunSummary]) -> list[RunSummary]:
    return [r if isinstance(r, RunSummary) else RunSummary.of(r) for r in reports]


def summary_table(reports: Iterable[dict[str, Any] | RunSummary]) -> str:
    """A fixed-width table of concluded runs (attack, session, outcome, matched/total, tier, status), then
    the count of each outcome: *resisted* and *not delivered* are never merged. Every cell is printable and
    bounded (session keys come from the traffic)."""
    summaries = _summaries(reports)
    rows = [("ATTACK", "SESSION", "OUTCOME", "MATCHED", "MAX TIER", "STATUS")]
    for summary in summaries:
        rows.append((
            printable(summary.attack, 60),
            printable(summary.session, 40),
            _label(summary.outcome),
            f"{summary.matched}/{summary.total}",
            printable(summary.max_tier or "-", 20),
            printable(summary.status, 20),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = [("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()) for row in rows]
    return "\n".join([*table, outcome_summary(summaries)])


def outcome_summary(reports: Iterable[dict[str, Any] | RunSummary]) -> str:
    """`N run(s): a exploited, b partial, c resisted, d inconclusive, e not delivered, f error`."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for summary in _summaries(reports):
        counts[summary.outcome] += 1
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
