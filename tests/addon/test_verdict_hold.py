"""The bookkeeping of flows whose `-w` write waits for their runs' verdicts (`addon.verdict_hold`), sans I/O: held
until every run they wait for concluded, handed back in the order they were held, bounded in flows and bytes
(the oldest first), each handed back once, every one at shutdown."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from addon.verdict_hold import VerdictHold


def test_a_flow_is_handed_back_once_every_run_it_waits_for_concluded() -> None:
    hold: VerdictHold[str] = VerdictHold(10, 1000)
    assert hold.hold("a", "A", ["r1", "r2"], 10) == []
    assert hold.hold("b", "B", ["r1"], 10) == []
    assert hold.waiting_for("r1") == ["A", "B"] and hold.waiting_for("r2") == ["A"]
    assert hold.concluded("r1") == ["B"]
    assert "a" in hold and "b" not in hold and hold.size == 10
    assert hold.concluded("r1") == []  # told twice: nothing more
    assert hold.concluded("r2") == ["A"]
    assert len(hold) == 0 and hold.size == 0 and hold.waiting == {} and hold.evicted == 0


def test_flows_a_run_releases_together_come_back_in_the_order_they_were_held() -> None:
    hold: VerdictHold[str] = VerdictHold(10, 1000)
    for flow in ("c", "a", "d", "b"):
        hold.hold(flow, flow.upper(), ["r"], 1)
    assert hold.concluded("r") == ["C", "A", "D", "B"]


def test_a_flow_waiting_for_no_run_is_written_at_once_and_none_is_held_when_the_hold_is_off() -> None:
    hold: VerdictHold[str] = VerdictHold(10, 1000)
    assert hold.hold("a", "A", [], 10) == ["A"] and len(hold) == 0
    off: VerdictHold[str] = VerdictHold(0, 1000)
    assert off.hold("a", "A", ["r"], 10) == ["A"] and len(off) == 0 and off.evicted == 0


def test_a_flow_held_again_is_not_handed_back_twice() -> None:
    hold: VerdictHold[str] = VerdictHold(10, 1000)
    hold.hold("a", "A", ["r1"], 10)
    assert hold.hold("a", "A", ["r2"], 10) == []
    assert hold.size == 10 and hold.waiting_for("r2") == []
    assert hold.concluded("r1") == ["A"] and hold.drain() == []


def test_beyond_the_count_the_oldest_held_flow_is_handed_back() -> None:
    hold: VerdictHold[str] = VerdictHold(2, 1000)
    assert hold.hold("a", "A", ["r1"], 1) == []
    assert hold.hold("b", "B", ["r2"], 1) == []
    assert hold.hold("c", "C", ["r1"], 1) == ["A"]
    assert hold.evicted == 1 and hold.waiting_for("r1") == ["C"]
    assert hold.concluded("r1") == ["C"] and hold.drain() == ["B"]


def test_beyond_the_bytes_the_oldest_held_flow_is_handed_back_and_a_flow_too_large_at_once() -> None:
    hold: VerdictHold[str] = VerdictHold(10, 100)
    hold.hold("a", "A", ["r"], 40)
    hold.hold("b", "B", ["r"], 40)
    assert hold.hold("c", "C", ["r"], 50) == ["A"] and hold.size == 90
    assert hold.hold("big", "BIG", ["r"], 101) == ["BIG"]
    assert hold.evicted == 2 and hold.drain() == ["B", "C"] and hold.size == 0 and hold.waiting == {}


def test_drain_hands_back_every_held_flow_in_the_order_they_were_held() -> None:
    hold: VerdictHold[str] = VerdictHold(10, 1000)
    hold.hold("a", "A", ["r1"], 1)
    hold.hold("b", "B", ["r2", "r1"], 1)
    hold.hold("c", "C", ["r3"], 1)
    assert hold.concluded("r2") == []
    assert hold.drain() == ["A", "B", "C"]
    assert hold.drain() == [] and hold.waiting == {} and hold.size == 0


operations = st.lists(st.one_of(
    st.tuples(st.just("hold"), st.sampled_from("abcdefg"), st.sets(st.sampled_from(["r1", "r2", "r3"]), max_size=2),
              st.integers(0, 60)),
    st.tuples(st.just("concluded"), st.sampled_from(["r1", "r2", "r3"])),
), max_size=40)


@given(operations, st.integers(0, 4), st.integers(0, 150))
def test_every_flow_held_is_handed_back_exactly_once_within_the_bounds(ops: list[tuple], max_flows: int,
                                                                      max_bytes: int) -> None:
    """Whatever the order of holds and conclusions: each time a flow is handed over it is handed back exactly
    once (by the end, after `drain`), never more than the bounds are held, and a flow is handed back by a
    conclusion only once no run it waits for is live."""
    hold: VerdictHold[str] = VerdictHold(max_flows, max_bytes)
    live: dict[str, set[str]] = {}
    entered: Counter[str] = Counter()
    out: list[str] = []
    for op in ops:
        if op[0] == "hold":
            _, flow, runs, size = op
            was_held = flow in hold
            back = hold.hold(flow, flow, runs, size)
            if not was_held:
                live[flow] = set(runs)
                entered[flow] += 1
            assert not was_held or back == []
        else:
            back = hold.concluded(op[1])
            for flow in live.values():
                flow.discard(op[1])
            assert all(not live[flow] for flow in back)
        out += back
        assert len(hold) <= max_flows and hold.size <= max_bytes
        for flow in back:
            assert flow not in hold
    out += hold.drain()
    assert Counter(out) == entered and len(hold) == 0 and hold.size == 0 and hold.waiting == {}
