"""The watermark and the reordering of the live monitor's input (`addon.watermark`)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from addon.watermark import MAX_STEP_SECONDS, SLACK_SECONDS, Steps
from oatf_engine.reorder import Reorder


@given(st.lists(st.tuples(st.floats(0, 100), st.booleans())), st.lists(st.floats(0, 100)))
def test_reorder_releases_everything_once_in_time_order_up_to_the_watermark(
        items: list[tuple[float, bool]], marks: list[float]) -> None:
    """Whatever the arrival order and the marks: nothing is released past the highest watermark so far, what is
    released in one go is in time order (closes first at a tie), and everything comes out exactly once."""
    order: Reorder[tuple[float, bool, int]] = Reorder()
    released: list[tuple[float, bool, int]] = []
    for n, (at, close) in enumerate(items):
        order.add(at, (at, close, n), rank=0 if close else 1)
        if marks:
            mark = marks.pop()
            out = order.release(mark)
            assert all(item[0] <= order.watermark for item in out)
            assert out == sorted(out, key=lambda item: (item[0], not item[1], item[2]))
            released += out
    released += order.release(math.inf)
    assert sorted(released, key=lambda item: item[2]) == [(at, close, n) for n, (at, close) in enumerate(items)]
    assert len(order) == 0


def test_the_watermark_waits_for_a_step_under_way_but_not_for_ever() -> None:
    steps = Steps()
    assert steps.watermark(100.0) == 100.0 - SLACK_SECONDS
    assert steps.watermark(100.0, late=2.0) == 96.0  # a late event loop: its hooks are later after their stamps
    steps.begin("flow", 90.0)  # a request whose headers came at 90: its `request` hook has not run
    assert steps.watermark(100.0) == 90.0
    steps.end("flow")
    assert steps.watermark(100.0) == 100.0 - SLACK_SECONDS
    steps.begin("held", 90.0)  # held (intercepted) for longer than MAX_STEP_SECONDS: the rest goes on
    assert steps.watermark(90.0 + MAX_STEP_SECONDS + 1) == 90.0 + MAX_STEP_SECONDS + 1 - SLACK_SECONDS
    assert len(steps) == 0
