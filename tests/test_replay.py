"""`addon.replay`: the cyclic garbage collector is paused while a recording is replayed, and restored."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from addon import replay as replay_module
from addon.replay import collector_paused, replay

ROOT = Path(__file__).resolve().parents[1]


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
    seen: list[bool] = []
    evaluate = replay_module.evaluate_events

    def spy(*args: object, **kwargs: object) -> list:
        seen.append(gc.isenabled())
        return evaluate(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(replay_module, "evaluate_events", spy)
    empty = tmp_path / "empty.mitm"
    empty.write_bytes(b"")
    result = replay([str(ROOT / "examples")], [str(empty)])
    assert seen == [False] and gc.isenabled() and result.events == 0
