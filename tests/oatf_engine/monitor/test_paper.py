"""Runs on paper (`oatf_engine.monitor.paper`): an attack nothing in a session has concerned yet costs a bit,
not a run, and reports exactly as the run followed from the start would (`Monitor(prefilter=False)`, which
keeps no run on paper, is the reference) — through a session close, a library reload and the end of the
traffic."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import oatf
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
    """The whole library, an agent resisting one attack: every MCP attack has a live run in its episode, most of
    them on paper; each concludes with the report its followed run gives."""
    library = _library()
    events = _events("OW-001", "resisting")
    monitor, reference = Monitor(library, MonitorOptions(grace_period=5.0)), Monitor(
        library, MonitorOptions(grace_period=5.0), prefilter=False)
    for event in events:
        monitor.observe(event)
        reference.observe(event)
    mcp_attacks = sum("mcp" in a.protocols for a in library)
    assert monitor.live_runs == reference.live_runs == len(reference.runs) >= mcp_attacks
    assert len(monitor.runs) < mcp_attacks // 4
    assert _status(monitor) == _status(reference)
    end = events[-1].timestamp
    reports = [o.report for o in monitor.end_of_traffic(end) if isinstance(o, RunConcluded)]
    assert _sorted(reports) == _sorted([o.report for o in reference.end_of_traffic(end) if isinstance(o, RunConcluded)])
    assert monitor.live_runs == 0 and monitor.queued_timers == 0


def _with_close_and_reload(library: list[LoadedAttack], events: list[ObservedEvent],
                           prefilter: bool) -> tuple[list[str], list[str]]:
    """Feed `events`; after the first MCP response once runs are open, the agent closes its session; from
    halfway, once runs are open, the library is reloaded without every other attack (their runs conclude
    `reloaded`). The reports and a status snapshot just before the reload."""
    monitor = Monitor(library, MonitorOptions(grace_period=5.0), prefilter=prefilter)
    outputs: list[Any] = []
    closed = False
    snapshot: list[str] = []
    for n, event in enumerate(events):
        outputs += monitor.observe(event)
        session = event.session_keys.get("mcp_session")
        if not closed and session is not None and event.direction == "response" and monitor.live_runs:
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


def test_runs_on_paper_wait_for_a_slow_agent_as_followed_runs_do() -> None:
    """An AG-UI agent answers its `RunAgentInput` 40 s later (work after the grace period): the runs of every
    AG-UI attack wait for the answer (`AttackRun.awaited_at`), on paper as followed, and end a grace period after
    the agent's last message — before the next `RunAgentInput` of the thread 10 s later, which opens runs of its
    own."""
    events = _events("OW-037")
    slow = [events[0], *(dataclasses.replace(e, timestamp=e.timestamp + 40.0) for e in events[1:])]
    last = slow[-1].timestamp
    again = last + 10.0
    slow += [dataclasses.replace(e, flow_id=f"again-{e.flow_id}", timestamp=again + n * 0.01)
             for n, e in enumerate(events[:2])]
    library = _library()
    reports = {}
    for prefilter in (True, False):
        monitor = Monitor(library, MonitorOptions(grace_period=5.0), prefilter=prefilter)
        outputs = [o for e in slow for o in monitor.observe(e)]
        outputs += monitor.end_of_traffic(slow[-1].timestamp)
        reports[prefilter] = _sorted([o.report for o in outputs if isinstance(o, RunConcluded)])
    assert reports[True] == reports[False]
    summaries = [json.loads(r)["execution_summary"] for r in reports[True]]
    ended = [summary["ended_at"] for summary in summaries]
    assert min(ended) == oatf.timestamp_at(last + 5.0) and ended.count(min(ended)) >= 10, (
        "they waited for the answer, then a grace period after the agent's last message")
    assert sum(summary["started_at"] == oatf.timestamp_at(again) for summary in summaries) >= 10


def test_runs_on_paper_wait_for_slow_answers_of_every_kind_as_followed_runs_do() -> None:
    """Recorded sessions decoded from the wire, every server message 12 s late (over twice the grace period):
    MCP calls, A2A sends and AG-UI runs all wait for their answers; the timers of runs on paper end where the
    followed runs end, through a session close and a reload; and no MCP run ends between a call and its
    answer."""
    library = _library()
    for attack_id in sessions.script_ids()[1::4]:
        events = sessions.slow_answers(sessions.decoded_events(attack_id, "complying"), 12.0)
        with_paper, status = _with_close_and_reload(library, events, True)
        assert (with_paper, status) == _with_close_and_reload(library, events, False), attack_id
        answered = {e.flow_id: e.timestamp for e in events if e.sender == "server" and e.jsonrpc_id is not None}
        for report in map(json.loads, with_paper):
            summary = report["execution_summary"]
            if summary["status"] != "completed":
                continue
            for event in events:
                if (event.protocol == "mcp" and event.sender == "client" and event.jsonrpc_id is not None
                        and event.flow_id in answered and summary["session"].endswith(
                            event.session_keys.get("mcp_session", "\0"))):
                    sent, answer = oatf.timestamp_at(event.timestamp), oatf.timestamp_at(answered[event.flow_id])
                    assert not sent <= summary["ended_at"] < answer, (attack_id, report["attack"]["id"], event)


def test_runs_on_paper_concluded_together_report_as_followed_runs_without_verdict_objects(monkeypatch: Any) -> None:
    """A shutdown with many sessions open concludes thousands of runs on paper at once: after an attack's first,
    each one's verdict is its blank's plain form with the time and the indicators' evidence stamped in
    (`AttackRun.verdict_form`), no verdict object built — and every report is byte for byte the followed run's
    (`prefilter=False`), over sessions of different lengths (different counts in the evidence), the semantic
    indicators skipped (no evaluator), at the shutdown and at the end of the traffic."""
    library = _library()
    events = []
    for n, attack_id in enumerate(sessions.script_ids()[:12]):
        for event in _events(attack_id, sessions.VARIANTS[n % 2])[:3 + 2 * n]:
            keys = {k: f"{v}-{n}" for k, v in event.session_keys.items()}
            events.append(dataclasses.replace(event, session_keys=keys, flow_id=f"{event.flow_id}-{n}",
                                              client=f"10.30.0.{n}:4000", timestamp=event.timestamp + n * 0.5))
    events.sort(key=lambda e: e.timestamp)
    built = []
    real = oatf.AttackVerdict.to_dict
    monkeypatch.setattr(oatf.AttackVerdict, "to_dict", lambda self: (built.append(self.attack_id), real(self))[1])
    for end in ("shutdown", "end_of_traffic"):
        reports = {}
        for prefilter in (True, False):
            monitor = Monitor(library, MonitorOptions(grace_period=3600.0), prefilter=prefilter)
            for event in events:
                monitor.observe(event)
            built.clear()
            outputs = monitor.shutdown() if end == "shutdown" else monitor.end_of_traffic(events[-1].timestamp)
            reports[prefilter] = [json.dumps(o.report) for o in outputs if isinstance(o, RunConcluded)]
            if prefilter:
                on_paper = len(reports[True]) - len(built)
                assert on_paper > len(reports[True]) // 2, "most runs reported from their blank's verdict form"
        assert sorted(reports[True]) == sorted(reports[False]), end
        counts = {n for r in reports[True] for n in re.findall(r"no matching message among (\d+) examined", r)}
        assert len(counts) >= 2, "sessions of different lengths: evidence stamped per run"
        assert any('"result": "skipped"' in r for r in reports[True])


def test_runs_of_a_closed_session_conclude_at_once_as_the_clock_would_conclude_them() -> None:
    """`Monitor.conclude_closed_sessions` (a crashed proxy's journal replayed, `oatf_engine.recovery`): the runs
    of a session the agent closed — on paper or followed, their `after` timers firing on the way — conclude now
    with the reports a clock going on gives them; the runs of other sessions stay live."""
    library = _library()
    for attack_id in sessions.script_ids()[::4]:
        events = _events(attack_id)
        closed = next((e.session_keys["mcp_session"] for e in events if "mcp_session" in e.session_keys), None)
        if closed is None:
            continue
        end = events[-1].timestamp
        clock, now = (Monitor(library, MonitorOptions(grace_period=5.0)) for _ in range(2))
        for monitor in (clock, now):
            for event in events:
                monitor.observe(event)
            monitor.close_session("mcp", "mcp_session", closed, end)
        ours = f"mcp_session:{closed}"
        later = [o.report for second in range(1, 2 * 3600) for o in clock.tick(end + second)  # as the live ticks
                 if isinstance(o, RunConcluded)]
        expected = [r for r in later if r["execution_summary"]["session"] == ours]
        at_once = [o.report for o in now.conclude_closed_sessions() if isinstance(o, RunConcluded)]
        assert expected and _sorted(at_once) == _sorted(expected), attack_id
        assert {r["execution_summary"]["status"] for r in at_once} <= {"session_closed", "completed"}, attack_id
        assert not any(row["run"].endswith(ours) for row in now.status()), attack_id
        assert now.live_runs == clock.live_runs + len(later) - len(expected), "the other sessions' runs stay live"
