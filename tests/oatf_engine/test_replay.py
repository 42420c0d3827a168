"""`oatf_engine.replay`: the cyclic garbage collector is paused while a recording is replayed, and restored."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import addon.recordings as recordings_module
import oatf_engine.replay as replay_module
from addon.recordings import replay
from oatf_engine.replay import collector_paused
from testing.paths import ROOT


def test_collector_paused_restores_the_previous_state_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_replay_evaluates_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In one process and with workers (forked before the recording is read: they inherit the paused collector)."""
    seen: list[bool] = []
    for name in ("evaluate_events", "evaluate_stream"):
        evaluate = getattr(recordings_module, name)

        def spy(*args: object, evaluate: Any = evaluate, **kwargs: object) -> Any:
            seen.append(gc.isenabled())
            return evaluate(*args, **kwargs)

        monkeypatch.setattr(recordings_module, name, spy)
    empty = tmp_path / "empty.mitm"
    empty.write_bytes(b"")
    result = replay([str(ROOT / "examples")], [str(empty)])
    assert seen == [False] and gc.isenabled() and result.events == 0
    monkeypatch.setattr(replay_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(replay_module.threading, "active_count", lambda: 1)
    result = replay([str(ROOT / "examples")], [str(empty)], workers=2)
    assert seen == [False, False] and gc.isenabled() and (result.events, result.workers) == (0, 2)


PARALLEL_CHECK = """
import json, sys
from pathlib import Path
import addon.recordings as recordings
import oatf_engine.replay as replay_module
from testing import sessions

replay_module.PARALLEL_MIN_BYTES = 0  # this recording is small: split it anyway
flows = []
for n, attack_id in enumerate(sessions.script_ids()):
    script = sessions.load_script(attack_id)
    for v, variant in enumerate(sessions.VARIANTS):
        # One agent host per session: independent agents (one host's keyless traffic to one server is one
        # agent episode, `oatf_engine.monitor.sessions` rule 3).
        flows += sessions.to_flows(sessions.play(script, variant), f"10.1.{n}.{v + 1}", f"{attack_id}/{variant}")
path = Path(sys.argv[1])
sessions.write_flows(path, flows)
results = [recordings.replay([sys.argv[2]], [str(path)], workers=n) for n in (1, 3)]
print(json.dumps([[r.workers, r.reports] for r in results]))
"""


def strip_clock(report: dict) -> dict:
    """A report without the wall-clock times of its verdict (when it was computed, not what it says)."""
    verdict = {k: v for k, v in report["verdict"].items() if k != "timestamp"}
    verdict["indicator_verdicts"] = [{k: v for k, v in i.items() if k != "timestamp"}
                                     for i in verdict["indicator_verdicts"]]
    return {**report, "verdict": verdict}


def test_sessions_split_over_processes_give_the_same_reports(tmp_path: Path) -> None:
    """Sessions are independent: evaluated by three forked workers, every attack session of the library gives
    exactly the reports (verdicts, evidence, phases, times, statuses) one process gives. In a subprocess:
    forking needs a process without other threads."""
    done = subprocess.run([sys.executable, "-c", PARALLEL_CHECK, str(tmp_path / "rec.mitm"), str(ROOT / "attacks")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=True)
    (one_workers, one), (many_workers, many) = json.loads(done.stdout)
    assert (one_workers, many_workers) == (1, 3)

    def by_run(reports: list[dict]) -> dict:
        return {(r["attack"]["id"], r["execution_summary"]["session"]): strip_clock(r) for r in reports}

    assert len(one) == len(many) > 100
    assert by_run(many) == by_run(one)
    assert [r["execution_summary"]["ended_at"] for r in many] == sorted(r["execution_summary"]["ended_at"]
                                                                        for r in many)
