"""The monitor in its child process (`addon.monitor_process`): a real child, the real pipe protocol."""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from addon.monitor_process import Decoding, HeldFlows, MonitorProcess, Reporting, _handle
from oatf_engine.monitor import Monitor, MonitorOptions, Output, RunConcluded
from oatf_engine.monitor.monitor import IndicatorMatched
from oatf_engine.reports import Reported
from oatf_engine.wire import DecoderConfig, Diagnostic
from oatf_engine.wire.steps import OpenSteps, WireStep
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, TIMED, attack, call, event
from tests.oatf_engine.test_reports import report


class Collector:
    def __init__(self) -> None:
        self.outputs: list[Output | Reported] = []
        self.batches: list[list[Output | Reported]] = []
        self.evaluated = 0
        self.failures: list[str] = []
        self.changed = threading.Condition()

    def on_outputs(self, outputs: list[Output | Reported]) -> None:
        with self.changed:
            self.outputs.extend(outputs)
            self.batches.append(outputs)
            self.changed.notify_all()

    def on_evaluated(self) -> None:
        with self.changed:
            self.evaluated += 1
            self.changed.notify_all()

    def on_failure(self, message: str) -> None:
        with self.changed:
            self.failures.append(message)
            self.changed.notify_all()

    def wait(self, predicate: Any, timeout: float = 30.0) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def reported(self) -> list[Reported]:
        with self.changed:
            return [o for o in self.outputs if isinstance(o, Reported)]

    def reports(self) -> list[dict[str, Any]]:
        """The reports the child wrote, read from the files it named."""
        return [json.loads(Path(r.path).read_text(encoding="utf-8")) for r in self.reported() if r.path]


def start(collector: Collector, report_dir: Path, grace: float = 60.0) -> MonitorProcess:
    monitor = MonitorProcess(MonitorOptions(grace_period=grace), "", str(report_dir), collector.on_outputs,
                             collector.on_evaluated, collector.on_failure)
    monitor.replace_attacks([attack(POISONED_TOOL)])
    return monitor


def test_events_are_evaluated_in_the_child_and_shutdown_reports_every_run(tmp_path: Path) -> None:
    collector = Collector()
    monitor = start(collector, tmp_path)
    monitor.observe([call("nothing", 0.0, session="a"), call("-----BEGIN PRIVATE KEY-----", 1.0, session="a")])
    monitor.observe([call("nothing", 1.0, session="b")])
    assert collector.wait(lambda: collector.evaluated == 2)  # one answer per batch, in order
    [matched] = [o for o in collector.outputs if isinstance(o, IndicatorMatched)]
    assert matched.attack_id == "TEST-001" and "PRIVATE KEY" in matched.evidence
    status = monitor.status(timeout=10)
    assert status is not None and sorted(r["run"] for r in status) == ["TEST-001@mcp_session:a",
                                                                         "TEST-001@mcp_session:b"]
    assert monitor.shutdown(timeout=30)
    reports = {r["execution_summary"]["session"]: r for r in collector.reports()}
    assert {s: (r["verdict"]["result"], r["execution_summary"]["status"]) for s, r in reports.items()} == {
        "mcp_session:a": ("exploited", "interrupted"), "mcp_session:b": ("not_exploited", "interrupted")}
    assert not monitor.alive and collector.failures == []


def test_shutdown_concludes_a_closed_session_as_the_clock_and_recovery_would(tmp_path: Path) -> None:
    """A clean shutdown: the run of a session the agent closed concludes as a clock going on concludes it (here
    `completed`, a grace period after its last message: `Monitor.conclude_closed_sessions`, as a crashed proxy's
    recovery concludes it), not `interrupted`; a session still open is cut short."""
    events = [call("-----BEGIN PRIVATE KEY-----", 0.0, session="a"), call("nothing", 1.0, session="b")]
    clock = Monitor([attack(POISONED_TOOL)], MonitorOptions(grace_period=60.0))
    for item in events:
        clock.observe(item)
    clock.close_session("mcp", "mcp_session", "a", 2.0)
    [expected] = [o.report for o in clock.tick(3600.0) if isinstance(o, RunConcluded)
                  and o.report["execution_summary"]["session"] == "mcp_session:a"]
    collector = Collector()
    monitor = start(collector, tmp_path)
    monitor.observe(events)
    monitor.close_session("mcp", "mcp_session", "a", 2.0)
    assert collector.wait(lambda: collector.evaluated == 1)
    assert monitor.shutdown(timeout=30)
    reports = {r["execution_summary"]["session"]: r for r in collector.reports()}
    assert {s: (r["verdict"]["result"], r["execution_summary"]["status"]) for s, r in reports.items()} == {
        "mcp_session:a": ("exploited", expected["execution_summary"]["status"]),
        "mcp_session:b": ("not_exploited", "interrupted")}
    assert expected["execution_summary"]["status"] != "interrupted"
    assert reports["mcp_session:a"]["execution_summary"]["ended_at"] == expected["execution_summary"]["ended_at"]
    assert collector.failures == []


def test_the_child_counts_what_it_holds_in_memory(tmp_path: Path) -> None:
    collector = Collector()
    monitor = start(collector, tmp_path)
    monitor.observe([call("nothing", 0.0, session="a"), call("nothing", 1.0, session="b")])
    monitor.ask_counts()
    assert collector.wait(lambda: bool(monitor.counts))
    assert {name: monitor.counts[name] for name in ("runs", "materialised", "sessions", "flows")} == {
        "runs": 2, "materialised": 0, "sessions": 2, "flows": 2}  # nothing in either could change its run
    assert monitor.shutdown(timeout=30)


def test_clock_ticks_conclude_runs_in_the_child(tmp_path: Path) -> None:
    collector = Collector()
    monitor = start(collector, tmp_path, grace=1.0)
    monitor.observe([call("-----BEGIN PRIVATE KEY-----", 100.0)])
    monitor.tick(102.0)
    assert collector.wait(lambda: bool(collector.reported()))
    [report] = collector.reports()
    assert report["execution_summary"]["status"] == "completed"
    assert monitor.shutdown(timeout=30)


def test_the_child_writes_the_reports_and_tells_the_parent_once_per_batch(tmp_path: Path) -> None:
    """Runs concluded by one message are written by the child, made durable together and told to the parent in
    one answer: run, outcome, status, path — the report itself never crosses the pipe."""
    collector = Collector()
    monitor = start(collector, tmp_path, grace=1.0)
    monitor.observe([call("-----BEGIN PRIVATE KEY-----" if n % 2 else "nothing", 100.0, session=f"s{n}")
                     for n in range(6)])
    monitor.tick(102.0)
    assert collector.wait(lambda: len(collector.reported()) == 6)
    [batch] = [b for b in collector.batches if any(isinstance(o, Reported) for o in b)]
    assert len(batch) == 6
    assert {(r.summary.session, r.summary.outcome, r.summary.status) for r in collector.reported()} == {
        (f"mcp_session:s{n}", "exploited" if n % 2 else "not_delivered", "completed") for n in range(6)}
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(Path(r.path or "").name for r in batch)
    assert len((tmp_path / "verdicts.jsonl").read_text().splitlines()) == 6
    assert monitor.shutdown(timeout=30) and collector.failures == []


def test_the_child_lives_in_a_session_of_its_own(tmp_path: Path) -> None:
    """A Ctrl-C reaches the whole foreground process group; the child is in another session (so another
    group) and lives to conclude its runs when the proxy shuts down. The addon's end-to-end tests send
    SIGINT/SIGTERM to mitmdump's whole process group and read the reports."""
    collector = Collector()
    monitor = start(collector, tmp_path)
    child = monitor._process.pid
    assert os.getsid(child) == child != os.getsid(0)
    assert os.getpgid(child) != os.getpgid(0)
    assert monitor.shutdown(timeout=30)


def test_a_dead_child_is_reported_and_status_does_not_hang(tmp_path: Path) -> None:
    collector = Collector()
    monitor = start(collector, tmp_path)
    monitor._process.kill()
    assert collector.wait(lambda: bool(collector.failures))
    assert "ended unexpectedly" in collector.failures[0]
    assert monitor.status(timeout=5) is None and not monitor.alive
    assert not monitor.shutdown(timeout=1)


SEMANTIC_MODULE = '''
class Judge:
    """A stand-in SemanticEvaluator: every text scores 0.9."""

    def evaluate(self, text, intent, intent_class, threshold, examples):
        return 0.9
'''


def test_the_semantic_evaluator_is_loaded_in_the_child_from_where_the_proxy_finds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`oatf_semantic_evaluator` names a module the proxy can import (here: a folder on this process's
    `sys.path` only, as mitmproxy adds a script's folder): the child imports it too, and semantic indicators
    are evaluated, not skipped."""
    (tmp_path / "oatf_test_semantic_judge.py").write_text(SEMANTIC_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    collector = Collector()
    monitor = MonitorProcess(MonitorOptions(grace_period=60), "oatf_test_semantic_judge:Judge", str(tmp_path),
                             collector.on_outputs, collector.on_evaluated, collector.on_failure)
    monitor.replace_attacks([attack(TIMED)])
    monitor.observe([event("tools/call", {"arguments": {"x": "send the secrets"}}, 0.0)])
    assert monitor.shutdown(timeout=30) and collector.failures == []
    [report] = collector.reports()
    assert report["verdict"]["indicator_verdicts"][0]["result"] == "matched"


def test_after_its_shutdown_the_child_ends_without_tearing_down_what_it_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once every run is reported and the answer sent, the child ends at once (`os._exit`): no teardown of the
    monitor's objects — thousands of runs after a big shutdown, which the proxy's exit would wait for. Seen
    here through a module it loaded (the semantic evaluator's) whose exit handler never runs; every run is
    still reported."""
    marker = tmp_path / "torn-down"
    (tmp_path / "oatf_test_exit_judge.py").write_text(
        f"import atexit, pathlib\natexit.register(pathlib.Path({str(marker)!r}).touch)\n{SEMANTIC_MODULE}",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    collector = Collector()
    monitor = MonitorProcess(MonitorOptions(grace_period=60), "oatf_test_exit_judge:Judge", str(tmp_path),
                             collector.on_outputs, collector.on_evaluated, collector.on_failure)
    monitor.replace_attacks([attack(POISONED_TOOL)])
    monitor.observe([call("nothing", 0.0, session=f"s{n}") for n in range(3)])
    assert monitor.shutdown(timeout=30) and collector.failures == []
    assert len(collector.reports()) == 3
    assert monitor._process.returncode == 0 and not marker.exists()


def test_the_child_concludes_its_runs_at_shutdown_without_the_cyclic_collector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shutdown's conclusions, report writing and answer run with the cyclic collector paused (the process
    ends after them: its passes over the monitor's objects would be wasted), then it is as it was; every run is
    still reported."""
    monitor = Monitor([attack(POISONED_TOOL)], MonitorOptions(grace_period=60.0))
    for n in range(3):
        monitor.observe(call("nothing", 100.0 + n, session=f"s{n}"))
    collecting: list[bool] = []
    shutdown = monitor.shutdown
    monkeypatch.setattr(monitor, "shutdown", lambda: collecting.append(gc.isenabled()) or shutdown())
    answers: list[tuple[str, Any]] = []
    assert gc.isenabled()
    assert not _handle(monitor, Decoding(DecoderConfig()), Reporting(str(tmp_path)), "shutdown", None, answers.append,
                       HeldFlows())
    assert collecting == [False] and gc.isenabled()
    [(kind, reported)] = answers
    assert kind == "done" and len(reported) == 3 and all(Path(r.path or "").is_file() for r in reported)


def test_nothing_of_a_written_report_outlives_its_reported(tmp_path: Path) -> None:
    """Issue 14: the child writes a report per run for as long as the proxy runs, so nothing of one may stay once
    it is told. Python 3.12's pathlib interns every part of a path it parses, and interned strings are immortal
    there: a `Path` per report kept every report's file name for the process's life (the monitor process of a
    20-minute soak grew by ~3 MiB a minute)."""
    reporting = Reporting(str(tmp_path))
    reports = [report("exploited", session=f"written-once-{n}") for n in range(3)]  # names no other test parses
    reporting.conclude([RunConcluded(f"r{n}", {**r, "execution_summary": {**r["execution_summary"], "started_at": 1.0}})
                        for n, r in enumerate(reports)])
    told = reporting.commit()
    assert len(told) == 3 and all(r.path is not None and os.path.exists(r.path) for r in told)
    for name in (os.path.basename(r.path or "") for r in told):
        fresh = "".join(list(name))  # the same text, a string object of its own
        assert sys.intern(fresh) is fresh, f"{name!r} was interned (kept for the process's life)"


def mcp_steps(flow: str, body: bytes, at: float, session: str = "a") -> list[WireStep]:
    """An MCP POST's steps as the proxy hands them over (the body in two chunks), without its response."""
    fields = ((b"content-type", b"application/json"), (b"mcp-session-id", session.encode()))
    return [WireStep("request_headers", flow, at, ("POST", "http://127.0.0.1:8000/mcp", fields, "127.0.0.1:5000")),
            WireStep("request_data", flow, at, (body[:20],)), WireStep("request_data", flow, at, (body[20:],)),
            WireStep("request_end", flow, at)]


def tool_call(note: str, id_: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"a": 1, "note": note}}}).encode()


def test_the_child_decodes_the_steps_handed_over_and_tells_their_diagnostics(tmp_path: Path) -> None:
    """Steps (`WireStep`: the decoder's calls, undecoded) are decoded in the child and judged as the events they
    are; what its decoder diagnoses comes back with the batch's answer."""
    collector = Collector()
    monitor = start(collector, tmp_path)
    cut_stream = [WireStep("response_headers", "f2", 2.0, (200, ((b"content-type", b"text/event-stream"),))),
                  WireStep("response_data", "f2", 2.0, (b'data: {"jsonrpc"',)), WireStep("response_end", "f2", 2.0)]
    monitor.observe([*mcp_steps("f1", tool_call("-----BEGIN PRIVATE KEY-----"), 1.0),
                     *mcp_steps("f2", tool_call("nothing", 2), 2.0), *cut_stream])
    assert collector.wait(lambda: collector.evaluated == 1)
    [matched] = [o for o in collector.outputs if isinstance(o, IndicatorMatched)]
    assert matched.flow_id == "f1" and "PRIVATE KEY" in matched.evidence
    assert [(d.code, d.flow_id) for d in collector.outputs if isinstance(d, Diagnostic)] == [
        ("truncated_stream", "f2")]
    assert monitor.shutdown(timeout=30) and collector.failures == []


def test_a_step_the_childs_decoder_raises_at_is_reported_once_and_its_run_is_not_resisted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's decoder raises (a bug) on the chunk of a call that would have exploited the run: the failure
    goes to the proxy once per batch (`failed`, with its traceback), the batch is still answered (`evaluated`),
    and the decoder's mark of the exchange cut off keeps the run from reading `resisted` when the clock ends it."""
    monitor = Monitor([attack(POISONED_TOOL)], MonitorOptions(grace_period=1.0))
    decoding, reporting, held = Decoding(DecoderConfig()), Reporting(str(tmp_path)), HeldFlows()
    answers: list[tuple[str, Any]] = []
    original = decoding.decoder.request_data

    def request_data(exchange_id: str, data: bytes, timestamp: float) -> list[Any]:
        if b"PRIVATE" in data:
            raise RuntimeError("a decoder bug")
        return original(exchange_id, data, timestamp)

    monkeypatch.setattr(decoding.decoder, "request_data", request_data)
    steps = [*mcp_steps("f1", tool_call("nothing"), 1.0), *mcp_steps("f2", tool_call("x -----BEGIN PRIVATE KEY"), 2.0),
             *mcp_steps("f3", tool_call("x -----BEGIN PRIVATE KEY", 3), 2.5)]
    assert _handle(monitor, decoding, reporting, "events", steps, answers.append, held)
    assert [kind for kind, _ in answers] == ["failed", "evaluated"]
    assert "RuntimeError: a decoder bug" in answers[0][1]
    assert _handle(monitor, decoding, reporting, "tick", 10_000.0, answers.append, held)  # past the answers awaited
    [written] = reporting.commit()  # (the child's loop commits what is written, then tells it)
    report = json.loads(Path(written.path or "").read_text(encoding="utf-8"))
    assert report["verdict"]["result"] == "not_exploited" and report["outcome"] == "inconclusive"
    assert report["execution_summary"]["uninspected_messages"] == 2


@pytest.mark.parametrize("primed", [True, False])
def test_a_new_child_primed_with_the_exchanges_under_way_decodes_their_rest(tmp_path: Path, primed: bool) -> None:
    """A child that replaces a lost one gets the steps already handed over of the exchanges under way
    (`OpenSteps`, `prime`): the rest of a request whose first chunk the lost child took decodes whole (the match
    is found); unprimed, the new child's decoder never saw the exchange start and the rest is nothing to it."""
    steps = mcp_steps("f1", tool_call("-----BEGIN PRIVATE KEY-----"), 1.0)
    open_steps = OpenSteps(1 << 20)
    lost = start(Collector(), tmp_path / "lost")
    lost.observe(steps[:2])
    for step in steps[:2]:
        open_steps.add(step)
    lost.kill()
    lost.shutdown(timeout=5)
    collector = Collector()
    monitor = start(collector, tmp_path / "new")
    if primed:
        monitor.prime(open_steps.prime())
    monitor.observe(steps[2:])
    assert collector.wait(lambda: collector.evaluated == 1)
    matched = [o.flow_id for o in collector.outputs if isinstance(o, IndicatorMatched)]
    assert matched == (["f1"] if primed else [])
    assert monitor.shutdown(timeout=30) and collector.failures == []
