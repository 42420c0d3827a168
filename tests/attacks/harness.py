"""Helpers shared by the attack-library tests: load documents, run scripts through the monitor, summarise."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import oatf
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded
from oatf_engine.monitor.library import LoadedAttack
from testing import sessions

RESULT_ORDER = ("error", "exploited", "partial", "not_exploited")


def loaded(path: Path) -> LoadedAttack:
    result = oatf.load(path.read_bytes())
    return LoadedAttack(str(path), result.document, tuple(result.warnings))


def monitor_reports(path: Path, variant: str, *, grace_period: float = 10.0) -> list[dict[str, Any]]:
    """Feed the script's expected events (no wire decoding) to the monitor, then let every run conclude."""
    attack_id = path.name.split("_", 1)[0]
    script = sessions.load_script(attack_id)
    events = sessions.expected_events(sessions.play(script, variant), str(script.get("client", "10.20.0.15")))
    monitor = Monitor([loaded(path)], MonitorOptions(grace_period=grace_period))
    outputs: list[Any] = []
    for event in events:
        outputs.extend(monitor.observe(event))
    last = events[-1].timestamp if events else 0.0
    outputs.extend(monitor.tick(last + 24 * 3600))
    outputs.extend(monitor.shutdown())
    return [o.report for o in outputs if isinstance(o, RunConcluded)]


def outcome(reports: Iterable[dict[str, Any]], attack_id: str) -> str:
    """One result for an attack over all its runs in a replay.

    The monitor keeps one run per (attack, session) and a recording may hold several sessions (two MCP
    servers, the A2A card fetch before a context exists, the AG-UI thread and the MCP session of a
    cross-protocol chain). The attack's outcome is the most severe run result: error, then exploited,
    partial, not_exploited. A recording with no run of the attack is reported as "no-run"."""
    results = {r["verdict"]["result"] for r in reports if r["attack"]["id"] == attack_id}
    for result in RESULT_ORDER:
        if result in results:
            return result
    return "no-run"


def describe(reports: Iterable[dict[str, Any]]) -> str:
    """A compact rendering of the reports for assertion messages."""
    lines = []
    for report in reports:
        verdict = report["verdict"]
        lines.append(f"{report['attack']['id']} {report['execution_summary']['session']}: {verdict['result']}")
        for iv in verdict["indicator_verdicts"]:
            lines.append(f"    {iv['indicator_id']} {iv['result']}: {(iv.get('evidence') or '')[:200]}")
        for actor in report["execution_summary"]["actors"]:
            lines.append(f"    actor {actor['name']}: {actor['phases_reached']} extractors={actor['extractors']}")
    return "\n".join(lines)
