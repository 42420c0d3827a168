"""Verdict reports: one JSON file per run (written atomically), every verdict appended to `verdicts.jsonl`
(mode 0600, like the report files: reports quote what the agent sent), made durable in batches
(`ReportWriter.commit`), a console summary table, and the redaction of matched values (`redact_report`) every
output applies unless asked to show secrets. Files only; no mitmproxy."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oatf
from oatf.evaluation import QUOTED_VALUE, unquote
from oatf_engine.journal import RunKey, fsync_path, run_key
from oatf_engine.text import printable

JSONL_NAME = "verdicts.jsonl"

REDACT_KEEP_ABOVE = 8
"""Values longer than this are shown as their first 4 and last 2 characters (`redact`)."""
_REDACTED = re.compile(r"^.{0,4}….{0,2} \(\d+ chars\)$", re.S)
_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"?')
_SECRET_SHAPES = re.compile(
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub token
    r"|\b(?:sk|xox[abprs])-[A-Za-z0-9_-]{16,}"  # OpenAI-style and Slack tokens
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JSON Web Token
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----(?:\\[rn]|\s)*[A-Za-z0-9+/=]{16,}(?:\\[rn]|[\r\n]|[A-Za-z0-9+/=])*"
    r"(?:-----END [A-Z ]*PRIVATE KEY-----)?")  # a private key block
"""Well-known credential shapes, redacted wherever they appear in evidence and extracted values."""


def redact(value: str) -> str:
    """`value` longer than `REDACT_KEEP_ABOVE` characters as `AKIA…XY (40 chars)`; shorter ones, and values
    already redacted, unchanged."""
    if len(value) <= REDACT_KEEP_ABOVE or _REDACTED.match(value):
        return value
    return f"{value[:4]}…{value[-2:]} ({len(value)} chars)"


def _redact_literal(literal: str) -> str:
    """A JSON string literal (possibly cut short: no closing quote) with its value redacted."""
    return json.dumps(redact(unquote(literal)), ensure_ascii=False)


def redact_evidence(evidence: str) -> str:
    """An indicator's evidence with the traffic value it quotes redacted (`redact`; every string of a JSON
    value), and any well-known credential shape elsewhere in it."""
    found = QUOTED_VALUE.search(evidence)
    if found is not None:
        value = found.group("value")
        value = (_redact_literal(value) if value.startswith('"')
                 else _STRING_LITERAL.sub(lambda m: _redact_literal(m.group()), value))
        evidence = evidence[:found.start("value")] + value
    return _SECRET_SHAPES.sub(lambda m: redact(m.group()), evidence)


def redact_report(report: dict[str, Any]) -> dict[str, Any]:
    """A copy of `report` in which what the agent sent is redacted: each indicator's evidence
    (`redact_evidence`), the excerpt of each matched indicator's structured evidence and each actor's extracted
    values (`redact`). Reports shown or written by every output (report files, `verdicts.jsonl`, `oatf evaluate`'s
    formats) go through this unless secrets are asked for. The copy shares what it leaves as is with `report` (a
    deep copy cost more than writing the report); neither is changed afterwards."""
    verdict, summary = dict(report["verdict"]), dict(report["execution_summary"])
    if verdict.get("indicator_verdicts"):
        verdict["indicator_verdicts"] = [
            {**v, "evidence": redact_evidence(v["evidence"])} if isinstance(v.get("evidence"), str) else v
            for v in verdict["indicator_verdicts"]]
    if summary.get("actors"):
        summary["actors"] = [{**actor, "extractors": {name: redact(value) if isinstance(value, str) else value
                                                      for name, value in (actor.get("extractors") or {}).items()}}
                             for actor in summary["actors"]]
    redacted = {**report, "verdict": verdict, "execution_summary": summary}
    if report.get("evidence"):
        redacted["evidence"] = [{**found, "excerpt": redact(found["excerpt"])} if isinstance(found.get("excerpt"), str)
                                else found for found in report["evidence"]]
    return redacted


def report_filename(report: dict[str, Any]) -> str:
    """`<attack id>__<session, first 60 chars>__<session hash>__<end time>.json`, safe on every filesystem.

    The session key comes from the traffic (an attacker may choose it): it is cut to a bounded length and a
    hash of the whole key keeps keys that differ only in cut or unsafe characters apart."""
    attack = str(report["attack"]["id"] or Path(report["attack"]["file"]).stem)[:60]
    session = str(report["execution_summary"]["session"])
    digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    ended = str(report["execution_summary"]["ended_at"])
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{attack}__{session[:60]}__{digest}__{ended}") + ".json"


class ReportWriter:
    """Writes each concluded run's report into `directory` and appends it to `verdicts.jsonl` (the same compact
    JSON line), matched values redacted (`redact_report`) unless `show_secrets`.

    `write` puts one report in place atomically (a temporary file not named `*.json`, then rename: a reader never
    sees half a report); `commit` makes every report written since the last commit durable at once: one `syncfs` of the
    report directory's filesystem where the system has it (Linux; files, `verdicts.jsonl` and the directory's
    entries in one call, whatever their number), else each file, then `verdicts.jsonl`, then the directory,
    fsynced — so a batch of conclusions costs one round of syncing, not one per report. The directory is
    created on the first write (and again if it disappears)."""

    def __init__(self, directory: str | os.PathLike[str], show_secrets: bool = False):
        self.directory = Path(directory)
        self.show_secrets = show_secrets
        self._folder = os.fspath(directory)
        self._written: list[str] = []
        self._jsonl: int | None = None
        """`verdicts.jsonl`'s descriptor, open between a write and the next `commit`."""

    def write(self, report: dict[str, Any]) -> str:
        """Write one report (see the class docstring); its file's path. A plain string, never a `Path`: Python
        3.12's pathlib interns every part of a path it parses, and interned strings are immortal there, so one
        `Path` per report made a long-running proxy's monitor process grow by every report's name (issue 14)."""
        if not self.show_secrets:
            report = redact_report(report)
        name = report_filename(report)
        # Encoded once, compact, for the file and `verdicts.jsonl` alike: the C encoder (which `indent` turns off)
        # is several times faster, and shutdown writes thousands of reports at once (`jq .` indents a report).
        data = (json.dumps(report, separators=(",", ":"), default=str) + "\n").encode()
        # One writer per process and directory: a name of its own, no random name to draw and retry. Plain
        # descriptors and string paths: creating the file is most of a report's cost, so nothing is added to it.
        path = os.path.join(self._folder, name)
        # The temporary name ends in `.tmp`, not `.json`: whoever lists the reports (`*.json`; pathlib's glob
        # matches hidden names too) never reads a report still being written.
        tmp = os.path.join(self._folder, f".{name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, _CREATE, 0o600)
        except FileNotFoundError:  # the first write, or the directory was removed meanwhile
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, _CREATE, 0o600)
        try:
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._written.append(path)
        if self._jsonl is None:
            self._jsonl = os.open(os.path.join(self._folder, JSONL_NAME), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                  0o600)  # closed by `commit`
        _write_all(self._jsonl, data)
        return path

    def commit(self) -> None:
        """Make every report written since the last commit, `verdicts.jsonl` and the directory durable."""
        written, self._written = self._written, []
        jsonl, self._jsonl = self._jsonl, None
        if jsonl is None:
            return
        os.close(jsonl)
        if SYNCFS is not None:
            _syncfs(self.directory)
            return
        for path in [os.path.join(self._folder, JSONL_NAME), *written, self._folder]:
            fsync_path(path)


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW


def _write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (a write may take part of it), in one call when it can; `verdicts.jsonl` is opened
    to append, so each report is one line, whole, whoever else appends."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _load_syncfs() -> Callable[[int], int] | None:
    """Linux's `syncfs(2)`, or None where the C library has no such function."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    return function


SYNCFS = _load_syncfs()
"""`syncfs(2)` (Linux): makes everything written on one filesystem durable in one call."""


def _syncfs(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        if SYNCFS is not None and SYNCFS(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), str(directory))
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
    flows: tuple[str, ...] = ()
    """The flows the run took part in (`flows_of`): the proxy marks them with its outcome."""
    deliveries: tuple[str, ...] = ()
    """Those of `flows` that delivered an actor's payload to the agent."""

    @classmethod
    def of(cls, run: str, report: dict[str, Any], path: str | None, error: str | None = None) -> Reported:
        return cls(run, run_key(report), RunSummary.of(report), path, error, *flows_of(report))


def flows_of(report: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The flows a report's run took part in, each once — those it cites (where an indicator matched, where a
    phase changed) and those that delivered an actor's payload (`delivery_evidence`) — and the latter."""
    summary = report["execution_summary"]
    delivered = [d.get("flow") for d in summary.get("delivery_evidence", ())]
    flows = dict.fromkeys(f for f in [*summary.get("flows_cited", ()), *delivered] if isinstance(f, str))
    return tuple(flows), tuple(f for f in dict.fromkeys(delivered) if isinstance(f, str))


OUTCOMES = ("exploited", "partial", "resisted", "inconclusive", "not_delivered", "error")
"""A run's `outcome` (`oatf_engine.monitor.delivery.outcome`), most severe first."""

EXIT_OK, EXIT_EXPLOITED, EXIT_ERROR, EXIT_NOT_DELIVERED = 0, 1, 2, 3


def _label(outcome: str) -> str:
    return outcome.replace("_", " ")


def _summaries(reports: Iterable[dict[str, Any] | RunSummary]) -> list[RunSummary]:
    return [r if isinstance(r, RunSummary) else RunSummary.of(r) for r in reports]


SESSION_LIMIT = 1_000
"""Characters of a session key the summary table shows, at most (a key comes from the traffic; the report file
holds it whole)."""
MIN_WRAP_WIDTH = 24
"""A wrapped column (`columns`: the summary table's sessions) is never narrower than this, however narrow the
terminal."""


def summary_table(reports: Iterable[dict[str, Any] | RunSummary], width: int | None = None,
                  counts: Mapping[str, int] | None = None) -> str:
    """A fixed-width table of concluded runs (attack, session, outcome, matched/total, tier, status), most
    severe outcome first (`OUTCOMES`), then by attack and session, then a totals line: the count of each outcome
    (*resisted* and *not delivered* are never merged). Session keys are shown whole (up to `SESSION_LIMIT`
    characters); when the table would be wider than `width` (a terminal's columns), the session column wraps
    onto continuation lines instead. Every cell is printable and bounded (session keys come from the traffic).
    `counts` (outcome → runs), when given, is what the last line counts: every run, of which the table shows
    the latest (`outcome_counts` of `reports` otherwise)."""
    summaries = sorted(_summaries(reports), key=_severity_order)
    counts = outcome_counts(summaries) if counts is None else counts
    rows = [("ATTACK", "SESSION", "OUTCOME", "MATCHED", "MAX TIER", "STATUS")]
    for summary in summaries:
        rows.append((
            printable(summary.attack, 60),
            printable(summary.session, SESSION_LIMIT),
            _label(summary.outcome),
            f"{summary.matched}/{summary.total}",
            printable(summary.max_tier or "-", 20),
            printable(summary.status, 20),
        ))
    table = columns(rows, wrap=1, width=width)
    if sum(counts.values()) > len(summaries):
        table.append(f"(the latest {len(summaries):,} of {sum(counts.values()):,} runs)")
    return "\n".join([*table, _outcome_line(counts)])


def _severity_order(summary: RunSummary) -> tuple[int, str, str]:
    rank = OUTCOMES.index(summary.outcome) if summary.outcome in OUTCOMES else len(OUTCOMES)
    return rank, summary.attack, summary.session


def columns(rows: Sequence[Sequence[str]], wrap: int | None = None, width: int | None = None) -> list[str]:
    """`rows` (printable cells, the first row a header) as lines of left-aligned columns two spaces apart.
    When the lines would be wider than `width`, the cells of column `wrap` are cut into pieces that fit
    (never narrower than `MIN_WRAP_WIDTH`), each further piece on a continuation line of its own."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    if wrap is not None and width is not None:
        others = sum(w for i, w in enumerate(widths) if i != wrap) + 2 * (len(widths) - 1)
        widths[wrap] = min(widths[wrap], max(MIN_WRAP_WIDTH, width - others))
    lines = []
    for row in rows:
        cut = [] if wrap is None else [row[wrap][i:i + widths[wrap]] for i in range(0, len(row[wrap]), widths[wrap])]
        for n in range(max(1, len(cut))):
            cells = [cell if n == 0 else "" for cell in row]
            if cut:
                cells[wrap] = cut[n]  # type: ignore[index]
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
    return lines


def outcome_counts(reports: Iterable[dict[str, Any] | RunSummary]) -> Counter[str]:
    """Outcome → how many of `reports` have it."""
    return Counter(summary.outcome for summary in _summaries(reports))


def outcome_summary(reports: Iterable[dict[str, Any] | RunSummary]) -> str:
    """`N run(s): a exploited, b partial, c resisted, d inconclusive, e not delivered, f error`."""
    return _outcome_line(outcome_counts(reports))


def _outcome_line(counts: Mapping[str, int]) -> str:
    return (f"{sum(counts.values())} run(s): "
            + ", ".join(f"{counts.get(outcome, 0)} {_label(outcome)}" for outcome in OUTCOMES))


def undelivered_attacks(reports: Iterable[dict[str, Any]], attack_ids: Iterable[str]) -> list[str]:
    """The attacks among `attack_ids` no run of which was delivered (including attacks with no run)."""
    delivered = {r["attack"]["id"] for r in reports if r["execution_summary"]["delivered"]}
    return [attack_id for attack_id in attack_ids if attack_id not in delivered]


SEVERITY_LEVELS = ("informational", "low", "medium", "high", "critical")
"""OATF severity levels, lowest first (`--severity-threshold`)."""
FAILING_OUTCOMES = ("exploited", "partial", "inconclusive")
"""Run outcomes a gate can fail on, worst first: `--fail-on` names a threshold in this order (`failing`)."""
FAIL_ON = (*FAILING_OUTCOMES, "not-delivered")
"""What `--fail-on` may name: run outcomes `exploited`, `partial` and `inconclusive` (delivered, but cut short, or
traffic of its session not inspected: nothing shows the agent resisted; exit 1), and `not-delivered`, an attack no
run of which was delivered (exit 3, as `--require-delivered`)."""
DEFAULT_FAIL_ON = frozenset({"partial"})


def failing(fail_on: Iterable[str]) -> tuple[str, ...]:
    """The run outcomes that fail a gate given `fail_on`: the one named least bad in `FAILING_OUTCOMES` and every
    worse one, as grype's `--fail-on` and trivy's `--severity` thresholds go (`partial` when none is named). So
    no flag makes an exploited run pass: a gate that passed an exploited agent would be the worst answer."""
    named = [FAILING_OUTCOMES.index(outcome) for outcome in fail_on if outcome in FAILING_OUTCOMES]
    return FAILING_OUTCOMES[:max(named, default=FAILING_OUTCOMES.index("partial")) + 1]


def severity_at_least(level: str | None, threshold: str | None) -> bool:
    """Whether an attack of severity `level` counts under `threshold` (None: every attack). An attack without
    a known level counts: a gate does not pass on what it cannot rank."""
    if threshold is None or level not in SEVERITY_LEVELS:
        return True
    return SEVERITY_LEVELS.index(level) >= SEVERITY_LEVELS.index(threshold)


def tier_at_least(tier: str | None, minimum: str | None) -> bool:
    """Whether a run whose verdict's `max_tier` is `tier` counts under `minimum` (`oatf.Tier` order: ingested
    < local_action < boundary_breach; None: every run). A run whose matched indicators declare no tier counts."""
    if minimum is None or tier not in {t.value for t in oatf.Tier}:
        return True
    return oatf.Tier(tier).rank >= oatf.Tier(minimum).rank


def exit_status(reports: Iterable[dict[str, Any]], undelivered: Iterable[str] = (),
                fail_on: Iterable[str] = DEFAULT_FAIL_ON, severity_threshold: str | None = None,
                min_tier: str | None = None) -> int:
    """CI semantics: 1 some run counted is exploited or partial (`fail_on`: down to which outcome runs fail,
    `failing`; a run counts when its attack's severity reaches `severity_threshold` and its verdict's tier
    `min_tier`); else 2 some verdict is an error; else 3 when `undelivered` (attacks never delivered that the
    caller asks to fail on: `--require-delivered`, `--fail-on not-delivered`) is not empty; else 0."""
    reports = list(reports)
    gate = failing(fail_on)
    results = set(gate) & {"exploited", "partial"}
    cut_short = "inconclusive" in gate
    if any((r["verdict"]["result"] in results or (cut_short and r.get("outcome") == "inconclusive"))
           and severity_at_least((r["attack"].get("severity") or {}).get("level"), severity_threshold)
           and tier_at_least(r["verdict"].get("max_tier"), min_tier) for r in reports):
        return EXIT_EXPLOITED
    if any(r["verdict"]["result"] == "error" for r in reports):
        return EXIT_ERROR
    return EXIT_NOT_DELIVERED if list(undelivered) else EXIT_OK
