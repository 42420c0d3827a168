"""What a flow carries of the OATF runs it took part in: its mark, its comment and `flow.metadata`, updated as
the monitor reports matches, phase changes and verdicts (on the event loop: mitmproxy's flows are not
thread-safe). mitmweb, the console and the flows `-w` saves show them; `oatf.flow` (`addon.flow_details`)
reads them back.

Mark scheme — one per state a flow's runs can be in (mitmproxy marks are emoji shortcodes; mitmweb and the
console show the emoji, and `~marker red_circle` filters by it):

    ⚠  :warning:        an indicator matched on this flow; its run has not concluded yet
    🔴 :red_circle:     exploited       a run it took part in concluded exploited
    🟠 :orange_circle:  partial
    🟡 :yellow_circle:  inconclusive
    🟢 :green_circle:   resisted        the attack reached the agent (or was played to it), which resisted
    ⚪ :white_circle:   not_delivered   the run's payload never reached the agent
    🟣 :purple_circle:  error           an indicator could not be evaluated

A flow that took part in several runs shows the most severe state (`RANK`: exploited, partial, a pending
match, then the other outcomes in the summary table's order). A run takes part in a flow where one of its
indicators matched, where one of its actors changed phase, or where an actor's payload was delivered
(`oatf_engine.reports.flows_of`); the last is known only once the run concludes. A mark the user set (any
other shortcode) is never replaced: the comment and metadata still tell.

`flow.metadata` (saved with the flow by `-w`):
- `"oatf"` (`addon.views.METADATA_KEY`, which the content views show first): the indicators that matched on
  the flow, each {run, attack, indicator, evidence, path, excerpt};
- `"oatf_runs"` (`RUNS_KEY`): run id → {attack, outcome, status, report, delivered, phases}; outcome, status and
  report are None while the run is live; delivered tells whether this flow delivered an actor's payload (known
  once the run concluded); phases lists the phase changes this flow caused.
Each list is bounded (`MAX_MATCHES`, `MAX_RUNS`, `MAX_PHASES`); every string from the traffic or an attack
file is made printable (`oatf_engine.text.printable`)."""

from __future__ import annotations

from typing import Any

from mitmproxy import flow as mitmflow
from mitmproxy import http

from addon.views import MAX_MATCHES, METADATA_KEY, RUNS_KEY
from oatf_engine.monitor import IndicatorMatched, PhaseChanged
from oatf_engine.reports import OUTCOMES, Reported
from oatf_engine.text import printable

MATCHED = "matched"
"""The state of a run that matched on the flow and has not concluded yet."""
MARKS: dict[str, str] = {
    MATCHED: ":warning:",
    "exploited": ":red_circle:",
    "partial": ":orange_circle:",
    "inconclusive": ":yellow_circle:",
    "resisted": ":green_circle:",
    "not_delivered": ":white_circle:",
    "error": ":purple_circle:",
}
"""The mark of each state (see the module docstring)."""
RANK: tuple[str, ...] = ("exploited", "partial", MATCHED, *(o for o in OUTCOMES if o not in ("exploited", "partial")))
"""States, most severe first: the mark a flow shows is that of its most severe run."""
MAX_RUNS = 20
"""Runs recorded per flow (the first ones)."""
MAX_PHASES = 10
"""Phase changes recorded per run and flow."""
EVIDENCE = 300
"""Characters of evidence kept per match."""


def record_match(flow: http.HTTPFlow, match: IndicatorMatched) -> None:
    """An indicator of `match.run` matched on `flow`."""
    matches = flow.metadata.setdefault(METADATA_KEY, [])
    if len(matches) < MAX_MATCHES:
        matches.append({"run": printable(match.run, 300), "attack": printable(match.attack_id, 200),
                        "indicator": printable(match.indicator_id, 200),
                        "evidence": printable(match.evidence, EVIDENCE),
                        "path": None if match.path is None else printable(match.path, 200),
                        "excerpt": None if match.excerpt is None else printable(match.excerpt, EVIDENCE)})
    _run(flow, match.run, match.attack_id)
    _comment(flow, f"OATF {printable(match.indicator_id)} matched: {printable(match.evidence, EVIDENCE)}")
    _remark(flow)


def record_phase(flow: http.HTTPFlow, changed: PhaseChanged) -> None:
    """An actor of `changed.run` changed phase on `flow`."""
    run = _run(flow, changed.run, changed.run.partition("@")[0])
    c = changed.change
    if run is not None and len(run["phases"]) < MAX_PHASES:
        run["phases"].append(printable(f"{c.actor}: {c.from_phase} → {c.to_phase} ({c.reason})", 300))


def record_outcome(flow: http.HTTPFlow, reported: Reported) -> None:
    """`reported.run`, which took part in `flow`, concluded."""
    summary = reported.summary
    run = _run(flow, reported.run, summary.attack)
    if run is None:
        return
    run.update(outcome=summary.outcome, status=printable(summary.status),
               report=None if reported.path is None else printable(reported.path, 500),
               delivered=flow.id in reported.deliveries)
    _comment(flow, f"OATF {printable(summary.attack)}: {summary.outcome} ({printable(summary.status)}), "
                   f"run {printable(reported.run, 300)}")
    _remark(flow)


def runs(flow: mitmflow.Flow) -> dict[str, dict[str, Any]]:
    """The runs recorded on `flow` (empty when none, or when the metadata is not this module's)."""
    recorded = flow.metadata.get(RUNS_KEY)
    return recorded if isinstance(recorded, dict) else {}


def open_runs(flow: mitmflow.Flow) -> list[str]:
    """The runs recorded on `flow` that have not concluded yet (their keys, `run_key`)."""
    return [name for name, run in runs(flow).items() if isinstance(run, dict) and not run.get("outcome")]


def run_key(run: str) -> str:
    """The key of a run in `flow.metadata["oatf_runs"]`: its id, made printable."""
    return printable(run, 300)


def matches(flow: http.HTTPFlow) -> list[dict[str, Any]]:
    """The matches recorded on `flow`."""
    recorded = flow.metadata.get(METADATA_KEY)
    return [m for m in recorded if isinstance(m, dict)] if isinstance(recorded, list) else []


def state(flow: http.HTTPFlow) -> str | None:
    """The most severe state of the flow's runs (`RANK`), None when no run has one yet."""
    matched_runs = {m.get("run") for m in matches(flow)}
    states = {run["outcome"] if run.get("outcome") in MARKS else MATCHED if name in matched_runs else None
              for name, run in runs(flow).items()}
    return next((s for s in RANK if s in states), None)


def _run(flow: http.HTTPFlow, name: str, attack: str) -> dict[str, Any] | None:
    recorded = flow.metadata.get(RUNS_KEY)
    if not isinstance(recorded, dict):
        recorded = flow.metadata[RUNS_KEY] = {}
    key = run_key(name)
    if key not in recorded:
        if len(recorded) >= MAX_RUNS:
            return None
        recorded[key] = {"attack": printable(attack, 200), "outcome": None, "status": None, "report": None,
                         "delivered": False, "phases": []}
    run: dict[str, Any] = recorded[key]
    return run


def _comment(flow: http.HTTPFlow, line: str) -> None:
    if line not in flow.comment.split("\n"):
        flow.comment = f"{flow.comment}\n{line}" if flow.comment else line


def _remark(flow: http.HTTPFlow) -> None:
    """The mark of the flow's most severe state, unless the user marked the flow."""
    if flow.marked and flow.marked not in MARKS.values():
        return
    current = state(flow)
    if current is not None:
        flow.marked = MARKS[current]
