"""Runs on paper (`oatf_engine.monitor.paper`): an attack nothing in a session has concerned yet costs a bit,
not a run, and reports exactly as the run followed from the start would (`Monitor(prefilter=False)`, which
keeps no run on paper, is the reference) — through a session close, a library reload and the end of the
traffic."""

from __future__ import annotations

import json
from typing import Any

from oatf_engine.events import ObservedEvent
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded
from oatf_engine.monitor.library import LoadedAttack
from testing import sessions
from tests.attacks.harness import loaded


def _library() -> list[LoadedAttack]:
    return [loaded(path) for path in sessions.attack_files().values()]


def _events(attack_id: str, variant: str = "complying") -> list[ObservedEvent]:
    script = sessions.load_script(attack_id)
    return sessions.expected_events(sessions.play(script, variant), str(script.get("client", "10.20.0.15")))


def _sorted(reports: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in reports)


def _status(monitor: Monitor) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in monitor.status())


def test_an_honest_session_keeps_the_runs_it_cannot_change_on_paper() -> None:
    """The whole library, one session with no attack in it: every MCP attack has a live run, most of them on
    paper; each concludes with the report its followed run gives."""
    library = _library()
    events = [e for e in _events("OW-001", "resisting") if e.event_type in ("initialize", "tools/list")][:3]
    monitor, reference = Monitor(library, MonitorOptions(grace_period=5.0)), Monitor(
        library, MonitorOptions(grace_period=5.0), prefilter=False)
    for event in events:
        monitor.observe(event)
        reference.observe(event)
    mcp_attacks = sum("mcp" in a.protocols for a in library)
    assert monitor.live_runs == reference.live_runs == len(reference.runs) >= mcp_attacks
    assert len(monitor.runs) < mcp_attacks // 2
    assert _status(monitor) == _status(reference)
    end = events[-1].timestamp
    reports = [o.report for o in monitor.end_of_traffic(end) if isinstance(o, RunConcluded)]
    assert _sorted(reports) == _sorted([o.report for o in reference.end_of_traffic(end) if isinstance(o, RunConcluded)])
    assert monitor.live_runs == 0 and monitor.queued_timers == 0


def _with_close_and_reload(library: list[LoadedAttack], events: list[ObservedEvent],
                           prefilter: bool) -> tuple[list[str], list[str]]:
    """Feed `events`; after the first MCP response, the agent closes its session; from halfway, once runs are
    open, the library is reloaded without every other attack (their runs conclude `reloaded`). The reports
    and a status snapshot just before the reload."""
    monitor = Monitor(library, MonitorOptions(grace_period=5.0), prefilter=prefilter)
    outputs: list[Any] = []
    closed = False
    snapshot: list[str] = []
    for n, event in enumerate(events):
        outputs += monitor.observe(event)
        session = event.session_keys.get("mcp_session")
        if not closed and session is not None and event.direction == "response":
            monitor.close_session("mcp", "mcp_session", session, event.timestamp)
            closed = True
        if n >= len(events) // 2 and monitor.live_runs and not snapshot:
            snapshot = _status(monitor)
            outputs += monitor.replace_attacks(library[::2])
    outputs += monitor.end_of_traffic(events[-1].timestamp)
    return _sorted([o.report for o in outputs if isinstance(o, RunConcluded)]), snapshot


def test_runs_on_paper_close_reload_and_conclude_as_followed_runs_do() -> None:
    library = _library()
    for attack_id in sessions.script_ids()[::5]:
        events = _events(attack_id)
        with_paper, status = _with_close_and_reload(library, events, True)
        assert (with_paper, status) == _with_close_and_reload(library, events, False), attack_id
        if status:
            assert any('"status": "reloaded"' in r for r in with_paper), attack_id
        if any("mcp_session" in e.session_keys for e in events):
            assert any('"status": "session_closed"' in r for r in with_paper), attack_id
