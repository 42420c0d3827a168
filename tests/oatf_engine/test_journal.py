"""The evaluation journal (`oatf_engine.journal`) and recovery from it (`oatf_engine.recovery`), without processes."""

from __future__ import annotations

import dataclasses
import errno
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oatf_engine import journal as journal_module
from oatf_engine.events import Endpoint, ExchangeEnded, ObservedEvent
from oatf_engine.journal import (
    JOURNAL_DIR,
    Journal,
    decode_event,
    decode_item,
    encode_event,
    encode_item,
    records,
    run_key,
)
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded
from oatf_engine.recovery import monitor_inputs, pending_journal, recover, recover_runs
from oatf_engine.reports import ReportWriter
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.steps import WireStep
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, RUG_PULL, attack, call, event

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


def on_disk(*journaled: dict[str, Any]) -> list[dict[str, Any]]:
    """Records as `records` reads them back."""
    return [json.loads(json.dumps(record)) for record in journaled]


def test_held_events_replay_as_the_proxy_released_them() -> None:
    """`received` events are held until a tick (the "released up to" marker) passes them, then given in time
    order — a late one (stamped before the last tick) at the next tick; `drained` gives every held event; after
    a crash of the proxy the events still held come last, in time order, after the loss of the monitor process
    only they do not (the proxy hands them to the new one)."""
    early, a, b, c = (call("x", at, session="s") for at in (0.5, 1.0, 2.0, 5.0))
    journal = on_disk({"received": [encode_event(e) for e in (b, c, a)]}, {"tick": 3.0},
                      {"received": [encode_event(early)]}, {"tick": 3.5})
    assert list(monitor_inputs(journal)) == [a, b, 3.0, early, 3.5, c]
    assert list(monitor_inputs(journal, unreleased=False)) == [a, b, 3.0, early, 3.5]
    drained = on_disk({"received": [encode_event(c), encode_event(a)]}, {"drained": True}, {"tick": 1.0})
    assert list(monitor_inputs(drained, unreleased=False)) == [a, c, 1.0]
    handed = on_disk({"events": [encode_event(c), encode_event(a)]}, {"tick": 1.0})  # `oatf tap`: no watermark
    assert list(monitor_inputs(handed)) == [c, a, 1.0]


def test_the_events_held_at_a_cut_count_once_whichever_segments_are_read() -> None:
    """A recovery cut the journal while `c` was held: the next segment starts with `held` [c]. Read from there
    (the segments before were dropped) or from the start, `c` is given once."""
    a, c = call("x", 1.0, session="s"), call("x", 5.0, session="s")
    before = on_disk({"received": [encode_event(a), encode_event(c)]}, {"tick": 3.0})
    after = on_disk({"held": [encode_event(c)]}, {"tick": 6.0})
    assert list(monitor_inputs(after)) == [c, 6.0]
    assert list(monitor_inputs(before + after)) == [a, 3.0, c, 6.0]


def test_a_crash_recovers_the_runs_of_events_the_watermark_had_not_released(tmp_path: Path) -> None:
    """The proxy died right after an exploit, before the watermark released it: a crash recovery reports it;
    the recovery of a lost monitor process (the proxy goes on, and hands it to the new one) does not."""
    options = MonitorOptions(grace_period=5)
    journal = Journal(tmp_path)
    journal.received([event("tools/list", {}, 0.0, session="b")])
    journal.tick(1.0)
    journal.received([call("-----BEGIN PRIVATE KEY", 1.5, session="b")])
    journal.close()
    [report] = recover(tmp_path, [attack(POISONED_TOOL)], options)
    assert (report["verdict"]["result"], report["execution_summary"]["status"]) == ("exploited", "recovered")
    [run] = recover_runs(tmp_path, [attack(POISONED_TOOL)], options, unreleased=False)
    assert run.report["verdict"]["result"] == "not_exploited", "only the released tools/list was given"


def test_the_journaled_runs_reported_are_collected() -> None:
    reported: set[tuple[str, str, str]] = set()
    assert list(monitor_inputs([{"concluded": ["A", "s", "1"]}, {"tick": 1.0}], reported=reported)) == [1.0]
    assert reported == {("A", "s", "1")}


calls = st.lists(st.tuples(st.text(max_size=5), st.sampled_from(["client", "server"]),
                           st.none() | st.integers() | st.text(max_size=5)), max_size=4)


@given(st.text(max_size=8), st.floats(0, 2e9), st.integers(0, 10**9), calls)
def test_the_end_of_an_exchange_survives_the_journal(flow: str, at: float, seq: int,
                                                     unanswered: list[tuple[str, str, Any]]) -> None:
    original = ExchangeEnded(flow, at, seq, tuple(unanswered))
    assert decode_item(json.loads(json.dumps(encode_item(original)))) == original
    event = call("x", at)
    assert decode_item(json.loads(json.dumps(encode_item(event)))) == event  # events pass through as before
    for damaged in ({"ended": [flow, at, seq]}, {"ended": [flow, "late", seq, []]},
                    {"ended": [flow, at, seq, [[flow, "both", 1]]]}, {"other": 1}):
        with pytest.raises(ValueError):
            decode_item(damaged)


def test_a_crash_recovers_the_end_of_an_exchange_as_the_live_monitor_had_it(tmp_path: Path) -> None:
    """The call at 0 s got a 502 at 1 s (its exchange ended without an answer): the live monitor concluded the run
    a grace period after the call, at the tick of 10 s, and the proxy died before reporting it. Recovery, given
    the journaled end, concludes it the same way (`completed` at 5 s), not as a run still waiting (`recovered`)."""
    options = MonitorOptions(grace_period=5)
    request = dataclasses.replace(call("-----BEGIN PRIVATE KEY", 0.0, session="b", flow="c"), jsonrpc_id=1,
                                  envelope={"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
    live = Monitor([attack(POISONED_TOOL)], options)
    journal = Journal(tmp_path)
    journal.received([request, ExchangeEnded("c", 1.0, request.seq, (("c", "client", 1),))])
    journal.tick(10.0)
    journal.close()
    outputs = [*live.observe(request), *live.exchange_ended(ExchangeEnded("c", 1.0, request.seq,
                                                                          (("c", "client", 1),))), *live.tick(10.0)]
    [concluded_live] = [o.report for o in outputs if isinstance(o, RunConcluded)]
    [report] = recover(tmp_path, [attack(POISONED_TOOL)], options)
    assert report == concluded_live
    assert (report["verdict"]["result"], report["execution_summary"]["status"]) == ("exploited", "completed")


def test_runs_reported_together_are_journaled_with_one_write_a_record_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of reported runs (a shutdown reports thousands at once) costs one write of the journal, and
    reads back as a `concluded` record per run, in order."""
    journal = Journal(tmp_path)
    journal.tick(1.0)
    writes: list[str] = []
    real = journal._handle.write
    monkeypatch.setattr(journal._handle, "write", lambda text: (writes.append(text), real(text))[1])
    keys = [("OW-001", f"mcp_session:s{n}", "1970-01-01T00:00:01.000Z") for n in range(3)]
    journal.concluded(*keys)
    journal.close()
    assert len(writes) == 1
    assert [tuple(r["concluded"]) for r in records(tmp_path / JOURNAL_DIR) if "concluded" in r] == keys


def test_closed_sessions_replay_where_the_proxy_told_them() -> None:
    """A `closed` record is held like a received event and told at the tick that passes it, before the events of
    its time; at a cut, the closes held are journaled again (`held` ... `closed`) and count once whichever
    segments are read; a damaged one is skipped."""
    a, b = call("x", 1.0, session="s"), call("x", 4.0, session="s")
    journal = on_disk({"received": [encode_event(a), encode_event(b)]}, {"closed": ["s", 1.0]}, {"tick": 2.0},
                      {"closed": ["t", 3.0]}, {"closed": ["broken"]}, {"closed": [1, 2.0]})
    assert list(monitor_inputs(journal)) == [("s", 1.0), a, 2.0, ("t", 3.0), b]
    assert list(monitor_inputs(journal, unreleased=False)) == [("s", 1.0), a, 2.0]
    before = on_disk({"closed": ["s", 5.0]}, {"tick": 3.0})
    after = on_disk({"held": [], "closed": [["s", 5.0]]}, {"tick": 6.0})
    assert list(monitor_inputs(after)) == [("s", 5.0), 6.0]
    assert list(monitor_inputs(before + after)) == [3.0, ("s", 5.0), 6.0]


def test_recovery_concludes_a_closed_session_as_the_proxy_would_have(tmp_path: Path) -> None:
    """The agent closed session `a` (journaled `closed`), then the proxy died inside the grace period: recovery
    reports its run as the proxy would have had it gone on — `session_closed`, a grace period after the close,
    the same report — while the run of `b`, whose agent could still send more, is `recovered`. (Before closes
    were journaled, both came back `recovered`.)"""
    options = MonitorOptions(grace_period=5)
    rug_pull = [attack(RUG_PULL)]  # stays in its first phase: only a close or its lifetime ends it
    traffic = [event("tools/call", {"arguments": {"q": "x"}}, 0.0, session=s) for s in ("a", "b")]
    journal = Journal(tmp_path)
    journal.received(traffic)
    journal.closed("a", 1.0)
    journal.tick(2.0)
    journal.close()
    live = Monitor(rug_pull, options)
    for item in traffic:
        live.observe(item)
    live.close_session("mcp", "mcp_session", "a", 1.0)
    [went_on] = [o.report for o in live.tick(6.0) if isinstance(o, RunConcluded)]
    reports = {r["execution_summary"]["session"]: r for r in recover(tmp_path, rug_pull, options)}
    assert reports["mcp_session:a"] == went_on
    assert went_on["execution_summary"]["status"] == "session_closed"
    assert reports["mcp_session:b"]["execution_summary"]["status"] == "recovered"


@pytest.mark.parametrize("across_filesystems", [False, True])
def test_a_journal_handed_over_moves_its_segments_but_those_a_recovery_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, across_filesystems: bool) -> None:
    """`Journal.hand_over` (the report directory changed at runtime): the old directory's segments move after the
    new one's own (mode 0600 kept; copied then deleted across filesystems), in order, and replay as they did;
    a segment a recovery holds stays where it is."""
    if across_filesystems:
        def no_rename(source: Any, target: Any) -> None:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        monkeypatch.setattr(journal_module.os, "rename", no_rename)
    old, new = Journal(tmp_path / "old"), Journal(tmp_path / "new")
    old.tick(1.0)
    [recovering] = old.cut()
    old.tick(2.0)
    old.tick(3.0)
    new.tick(0.5)
    old.hand_over(new)
    new.tick(4.0)
    new.close()
    assert segments_of(old) == [recovering]
    assert [r["tick"] for r in records(new.path)] == [0.5, 2.0, 3.0, 4.0]
    assert {segment.stat().st_mode & 0o777 for segment in segments_of(new)} == {0o600}


def segments_of(journal: Journal) -> list[Path]:
    return sorted(journal.path.glob("*.jsonl"))


@pytest.mark.parametrize("primed", [True, False])
def test_a_recovery_after_a_cut_decodes_the_exchanges_then_under_way(tmp_path: Path, primed: bool) -> None:
    """A recovery reads only the segments after a cut (those before were dropped): the `held` record's `primed`
    steps — the start of a request whose body was still coming — prime its decoder, so the rest of that request
    decodes and the exploit in it is reported; without them the rest is noise and the run is never even opened."""
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"note": "-----BEGIN PRIVATE KEY"}}}).encode()
    headers = ((b"content-type", b"application/json"), (b"mcp-session-id", b"b"))
    start = [WireStep("request_headers", "f", 1.0, ("POST", "http://127.0.0.1:8000/mcp", headers, "127.0.0.1:5")),
             WireStep("request_data", "f", 1.0, (body[:40],))]
    journal = Journal(tmp_path)
    journal.received([event("tools/list", {}, 0.5, session="b"), *start])
    journal.tick(1.2)
    before = journal.cut()
    journal.held([], [], start if primed else [])
    journal.received([WireStep("request_data", "f", 1.5, (body[40:],)), WireStep("request_end", "f", 1.5)])
    journal.close()
    after = [segment for segment in journal_module.segments(tmp_path / JOURNAL_DIR) if segment not in before]
    runs = recover_runs(tmp_path, [attack(POISONED_TOOL)], MonitorOptions(grace_period=5), segments=after)
    assert [run.report["verdict"]["result"] for run in runs] == (["exploited"] if primed else [])
    whole = recover_runs(tmp_path, [attack(POISONED_TOOL)], MonitorOptions(grace_period=5))
    assert [run.report["verdict"]["result"] for run in whole] == ["exploited"], "primed again, it counts once"


def test_a_journaled_step_the_decoder_raises_at_cuts_off_its_exchange_and_is_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery decodes the journaled steps through the monitor process's `StepDecoder`: a step that makes the
    decoder raise (a bug) cuts off its exchange alone — the other exchange's exploit is still reported — and the
    recovery says how many steps did (they are not dropped unseen)."""
    def exchange(flow: str, session: str, at: float) -> list[WireStep]:
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "add", "arguments": {"note": "-----BEGIN PRIVATE KEY"}}}).encode()
        headers = ((b"content-type", b"application/json"), (b"mcp-session-id", session.encode()))
        return [WireStep("request_headers", flow, at, ("POST", "http://127.0.0.1:8000/mcp", headers, "127.0.0.1:5")),
                WireStep("request_end", flow, at, (body,))]

    journal = Journal(tmp_path)
    journal.received([event("tools/list", {}, 0.5, session="a"), event("tools/list", {}, 0.5, session="b"),
                      *exchange("fa", "a", 1.0), *exchange("fb", "b", 1.0)])
    journal.tick(1.2)
    journal.close()
    original = WireDecoder.request_data

    def request_data(self: WireDecoder, exchange_id: str, *args: Any) -> Any:
        if exchange_id == "fb":
            raise RuntimeError("a decoder bug")
        return original(self, exchange_id, *args)

    monkeypatch.setattr(WireDecoder, "request_data", request_data)
    runs = recover_runs(tmp_path, [attack(POISONED_TOOL)], MonitorOptions(grace_period=5))
    verdicts = {run.report["execution_summary"]["session"]: run.report["verdict"]["result"] for run in runs}
    assert verdicts.get("mcp_session:a") == "exploited" and verdicts.get("mcp_session:b") != "exploited"
    assert "1 journaled step(s) made the wire decoder raise" in caplog.text
