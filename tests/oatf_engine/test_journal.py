"""The evaluation journal (`oatf_engine.journal`) and recovery from it (`oatf_engine.recovery`), without processes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oatf_engine import journal as journal_module
from oatf_engine.events import Endpoint, ObservedEvent
from oatf_engine.journal import JOURNAL_DIR, Journal, decode_event, encode_event, records, run_key
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded
from oatf_engine.recovery import pending_journal, recover
from oatf_engine.reports import ReportWriter
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, attack, call, event

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=10)


@given(json_values, st.text(), st.floats(0, 2e9), st.sampled_from(["request", "response"]))
def test_an_event_survives_the_journal(content: Any, flow: str, at: float, direction: str) -> None:
    original = ObservedEvent("mcp", "tools/call", direction, "client", content, flow, 7, at,  # type: ignore[arg-type]
                             Endpoint("h", 1, "/p"), "c:1", {"mcp_session": "s"}, 3, False, {"x": content},
                             ("added tools entry 'x'",))
    assert decode_event(json.loads(json.dumps(encode_event(original)))) == original
    # a journal written before `injected` existed (one field fewer) still decodes, with the default
    older = json.loads(json.dumps(encode_event(original)))[:-1]
    assert decode_event(older) == dataclasses.replace(original, injected=())
    with pytest.raises(ValueError):
        decode_event([*encode_event(original), "one too many"])


def journal_reported_run(journal: Journal, options: MonitorOptions, session: str) -> dict[str, Any]:
    """A run of `session` that leaked a key at 0 s, concluded by the live monitor at the tick of 6 s and reported:
    its events, that tick and its `concluded` marker journaled; its report."""
    live = Monitor([attack(POISONED_TOOL)], options)
    first = [call("-----BEGIN PRIVATE KEY", 0.0, session=session)]
    journal.events(first)
    outputs = [o for e in first for o in live.observe(e)]
    journal.tick(6.0)
    [done] = [o.report for o in outputs + live.tick(6.0) if isinstance(o, RunConcluded)]
    journal.concluded(run_key(done))
    return done


def test_recovery_reports_the_open_runs_once_and_skips_the_reported_ones(tmp_path: Path) -> None:
    """A proxy that journaled two sessions, concluded and reported one, then died: recovery concludes the
    other (status `recovered`) with its evidence, and nothing twice."""
    options = MonitorOptions(grace_period=5)
    journal = Journal(tmp_path)
    journal_reported_run(journal, options, "a")
    second = [event("tools/list", {}, 7.0, session="b"), call("-----BEGIN PRIVATE KEY", 7.5, session="b")]
    journal.events(second)
    journal.close()  # the process dies here: run b is open

    assert pending_journal(tmp_path)
    [report] = recover(tmp_path, [attack(POISONED_TOOL)], options)
    assert report["execution_summary"]["session"] == "mcp_session:b"
    assert report["execution_summary"]["status"] == "recovered"
    assert report["verdict"]["result"] == "exploited" and "PRIVATE KEY" in str(report["verdict"])


def test_recovery_skips_a_run_whose_report_file_was_written_without_its_marker(tmp_path: Path) -> None:
    """The monitor process writes a report before the proxy journals its `concluded` marker: a crash in between
    leaves the file without the marker. That run is not reported again; the open one is."""
    options = MonitorOptions(grace_period=5)
    live = Monitor([attack(POISONED_TOOL)], options)
    journal = Journal(tmp_path)
    events = [call("-----BEGIN PRIVATE KEY", 0.0, session="a"), call("nothing", 7.0, session="b")]
    journal.events(events[:1])
    journal.tick(6.0)
    journal.events(events[1:])
    journal.close()  # the process dies here: a's report is written, no marker; b is open
    outputs = [*live.observe(events[0]), *live.tick(6.0)]
    [done] = [o.report for o in outputs if isinstance(o, RunConcluded)]
    ReportWriter(tmp_path).write(done)

    [report] = recover(tmp_path, [attack(POISONED_TOOL)], options)
    assert report["execution_summary"]["session"] == "mcp_session:b"


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.tick(1.0)
    journal.close()
    [segment] = (tmp_path / JOURNAL_DIR).glob("*.jsonl")
    with open(segment, "a", encoding="utf-8") as handle:
        handle.write('{"events": [[')  # the process died mid-write
    assert list(records(tmp_path / JOURNAL_DIR)) == [{"tick": 1.0}]


def test_the_journal_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "SEGMENT_BYTES", 100)
    journal = Journal(tmp_path)
    for n in range(50):
        journal.tick(float(n))
    journal.close()
    kept = sorted((tmp_path / JOURNAL_DIR).glob("*.jsonl"))
    assert len(kept) == journal_module.MAX_SEGMENTS
    ticks = [r["tick"] for r in records(tmp_path / JOURNAL_DIR)]
    assert ticks[-1] == 49.0 and ticks == sorted(ticks), "the latest records are kept, in order"
    journal.clear()
    assert not pending_journal(tmp_path)
