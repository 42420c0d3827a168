"""A shutdown that cannot wait for a monitor process behind the traffic (the soak's case: a backlog beyond the
shutdown's allowance) loses nothing: the runs still open and the events not evaluated stay in the journal, the
shutdown's summary says how many and how to have them reported, and `oatf recover` (the next start's recovery)
reports every run the proxy did not, each once. mitmproxy's test context, a real child, made slow by a semantic
evaluator that waits for a gate (so the backlog is there whatever the machine's speed: no timing involved)."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mitmproxy.test import taddons

import addon.oatf_addon as oatf_addon
from addon.oatf_addon import OatfAddon
from oatf_engine.journal import JOURNAL_DIR
from oatf_engine.reports import JSONL_NAME
from tests.addon.test_monitor_faults import KEY, start_worker, wait_until
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, TIMED, call

GATED_JUDGE = '''
import os, time

class Judge:
    """A SemanticEvaluator that takes its time over a text saying "slow": until the gate file exists."""

    def evaluate(self, text, intent, intent_class, threshold, examples):
        while "slow" in text and not os.path.exists(GATE):
            time.sleep(0.05)
        return 0.1
'''


def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path]]:
    """The gated semantic evaluator (importable by the child and by `oatf recover`), a 2 s allowance for the
    monitor to conclude its runs (the child waits for the gate: 120 s would too), and the attacks: the gate's
    file and the attacks' files."""
    gate = tmp_path / "gate"
    (tmp_path / "oatf_test_gated_judge.py").write_text(f"GATE = {str(gate)!r}\n{GATED_JUDGE}", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(oatf_addon, "SHUTDOWN_SECONDS", 2.0)
    attacks = [tmp_path / "poisoned.yaml", tmp_path / "timed.yaml"]
    for path, text in zip(attacks, (POISONED_TOOL, TIMED), strict=True):
        path.write_text(text, encoding="utf-8")
    return gate, attacks


def backlog(addon: OatfAddon, context: taddons.context, attacks: list[Path], reports: Path) -> None:
    """A run reported ("early"), then a monitor process held by the gate with 4 events sent and not evaluated
    ("slow", then three exploits, "later0" to "later2")."""
    context.configure(addon, oatf_attacks=",".join(map(str, attacks)), oatf_report_dir=str(reports),
                      oatf_watch=False, oatf_grace_period="1s", oatf_semantic_evaluator="oatf_test_gated_judge:Judge")
    start_worker(addon)
    addon._enqueue(call(KEY, time.time(), session="early"))
    assert wait_until(lambda: any(r.summary.session == "mcp_session:early" for r in addon.concluded_reports()[0]))
    addon._enqueue(call("slow", time.time(), session="slow"))  # the child waits for the gate from here
    for n in range(3):
        addon._enqueue(call(KEY, time.time(), session=f"later{n}"))
    assert wait_until(lambda: addon.events_in_flight == 4)  # sent, none evaluated


def test_runs_a_shutdown_could_not_wait_for_are_left_to_the_journal_and_reported_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    gate, attacks = gated(tmp_path, monkeypatch)
    reports = tmp_path / "reports"
    addon = OatfAddon()
    with taddons.context(addon) as context, caplog.at_level(logging.WARNING, logger="oatf"):
        backlog(addon, context, attacks, reports)
        addon.done()
    live = {(r.summary.attack, r.summary.session) for r in addon.concluded_reports()[0]}
    [left] = [r.message for r in caplog.records if r.message.startswith("oatf: not reported yet:")]
    found = re.search(r"(\d+) run\(s\) open and 4 event\(s\) not evaluated yet are left to the journal in (\S+);",
                      left)
    assert found is not None and found[2] == str(reports), left
    assert f"`oatf recover {reports} --attacks {attacks[0]},{attacks[1]}`" in left
    assert list((reports / JOURNAL_DIR).glob("*.jsonl")), "the journal is kept"

    gate.touch()
    done = subprocess.run([str(Path(sys.executable).parent / "oatf"), "recover", str(reports), "--attacks",
                           ",".join(map(str, attacks)), "--grace-period", "1s",
                           "--semantic-evaluator", "oatf_test_gated_judge:Judge"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1, done.stdout + done.stderr  # the later sessions were exploited
    lines = [json.loads(line) for line in (reports / JSONL_NAME).read_text().splitlines()]
    runs = Counter((r["attack"]["id"], r["execution_summary"]["session"]) for r in lines)
    assert set(runs.values()) == {1}, f"each run reported once: {runs}"
    recovered = {(r["attack"]["id"], r["execution_summary"]["session"]) for r in lines
                 if r["execution_summary"]["status"] == "recovered"}
    assert f"{len(recovered)} run(s) recovered" in done.stderr
    assert not live & recovered and len(lines) == len(live) + len(recovered)
    sessions = {f"mcp_session:{s}" for s in ("early", "slow", "later0", "later1", "later2")}
    assert {session for _, session in runs} == sessions
    outcomes = {session: r["outcome"] for r in lines if r["attack"]["id"] == "TEST-001"
                for session in [r["execution_summary"]["session"]]}
    assert {outcomes[f"mcp_session:later{n}"] for n in range(3)} == {"exploited"}, outcomes
    assert ("TEST-001", "mcp_session:early") in live and not list((reports / JOURNAL_DIR).glob("*.jsonl"))


def test_runs_a_replaced_monitor_could_not_conclude_in_time_are_reported_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The semantic evaluator changes while the monitor process is behind: the old one cannot conclude its runs
    within the allowance, and the new one concludes them from the journal at once (`recovered`), rather than
    leaving them to the next start — which a clean shutdown, clearing the journal, would have lost."""
    gate, attacks = gated(tmp_path, monkeypatch)
    (tmp_path / "oatf_test_quick_judge.py").write_text("GATE = ''\n" + GATED_JUDGE.replace('"slow" in text', "False"),
                                                       encoding="utf-8")
    reports = tmp_path / "reports"
    addon = OatfAddon()
    with taddons.context(addon) as context, caplog.at_level(logging.WARNING, logger="oatf"):
        backlog(addon, context, attacks, reports)
        context.configure(addon, oatf_semantic_evaluator="oatf_test_quick_judge:Judge")
        assert wait_until(lambda: not addon.unrecovered)  # recovered, its reports durable
        addon.done()
    assert any("4 event(s) not evaluated yet are left to the journal" in r.message for r in caplog.records)
    assert not any(r.message.startswith("oatf: not reported yet:") for r in caplog.records)
    lines = [json.loads(line) for line in (reports / JSONL_NAME).read_text().splitlines()]
    runs = Counter((r["attack"]["id"], r["execution_summary"]["session"]) for r in lines)
    assert set(runs.values()) == {1}, f"each run reported once: {runs}"
    assert {session for _, session in runs} == {f"mcp_session:{s}" for s in ("early", "slow", "later0", "later1",
                                                                              "later2")}
    exploited = {r["execution_summary"]["session"]: r["execution_summary"]["status"] for r in lines
                 if r["attack"]["id"] == "TEST-001" and r["outcome"] == "exploited"}
    assert {exploited[f"mcp_session:later{n}"] for n in range(3)} == {"recovered"}, exploited
    assert not list((reports / JOURNAL_DIR).glob("*.jsonl")), "every run reported: the journal is cleared"
    assert not gate.exists()
