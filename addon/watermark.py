"""The live monitor's clock: the watermark, the time up to which the proxy vouches that every message it read
is queued for evaluation, so that no run is concluded before an event inside its grace period is evaluated.

mitmproxy stamps each step of a flow (request headers, request end, response headers, response end) when it
reads it; the addon's hook for that step runs later — after other addons' hooks (an interception, a slow
script), or turns of a busy event loop later — and only then is its event decoded and queued. So events reach
the worker out of time order, and a clock taken from the wall (or from the latest event) can pass the end of
a run's grace period while an earlier event of that run is still on its way: the run would be concluded, say
`resisted`, and the late event would open a second run of the same session, `exploited` — one exploit
reported as a `resisted` half and an `exploited` half, which a replay of the recording (evaluated in time
order) would not give.

Hence:
- the event loop queues a `ClockMark` every `TICK_SECONDS`, behind the events of the hooks that ran before
  it. Its watermark is now less `SLACK_SECONDS` (or twice as long as the event loop was late for the mark,
  if more: a step is stamped a few turns of the loop before its hook), and never later than the stamp of a
  step the addon knows is under way (`Steps`: a request whose headers came and whose `request` hook has not
  run yet, a buffered response whose headers came and whose `response` hook has not) — unless that step has
  been under way for over `MAX_STEP_SECONDS` (a slow upload or download, a flow a user holds intercepted):
  the rest of the traffic is not held back longer than that;
- the worker journals each event as it takes it in (`oatf_engine.journal`: a crash loses none of them) and
  holds it (`oatf_engine.reorder.Reorder`); at each mark, it hands the monitor those stamped up to the
  watermark in time order — the order in which a replay of the recording evaluates them — together with the
  MCP sessions closed by then, and then moves the monitor's clock to the watermark. An event later than that
  (held beyond `MAX_STEP_SECONDS`) is evaluated at the next mark, as it comes.

Evaluation, and so a flow's marks, follow the traffic by about `SLACK_SECONDS`; reports are unchanged (a
run's times are its events' and timers' own). A busy monitor process or a backlog between the proxy and it
changes nothing here: what is handed over keeps its order, and the clock moves with it.
"""

from __future__ import annotations

from dataclasses import dataclass

TICK_SECONDS = 0.25
"""How often the event loop queues a `ClockMark`."""
SLACK_SECONDS = 0.5
"""How far the watermark stays behind now, at least, for steps stamped before their hook runs."""
MAX_STEP_SECONDS = 30.0
"""A step under way for longer than this no longer holds the watermark back."""

@dataclass(frozen=True)
class ClockMark:
    """Queued by the event loop: every message stamped up to `watermark` is queued before this mark."""

    watermark: float


@dataclass(frozen=True)
class SessionClosed:
    """The agent closed the MCP session `session` at `at` (`Monitor.close_session`), queued as it is seen."""

    session: str
    at: float


class Steps:
    """The steps of flows under way whose hook has not run yet, with their stamps (used on the event loop)."""

    def __init__(self) -> None:
        self._since: dict[str, float] = {}

    def begin(self, flow_id: str, stamp: float | None) -> None:
        """mitmproxy stamped a step of `flow_id` at `stamp` (its headers): its end's hook is still to come."""
        if stamp is not None:
            self._since[flow_id] = stamp

    def end(self, flow_id: str) -> None:
        """The hook that ends the step of `flow_id` ran (its events are queued)."""
        self._since.pop(flow_id, None)

    def __len__(self) -> int:
        return len(self._since)

    def watermark(self, now: float, late: float = 0.0) -> float:
        """The watermark at wall time `now`, the event loop `late` seconds late (see the module docstring);
        steps under way for over `MAX_STEP_SECONDS` are forgotten."""
        horizon = now - max(SLACK_SECONDS, 2 * late)
        oldest = now - MAX_STEP_SECONDS
        for flow_id, stamp in list(self._since.items()):
            if stamp < oldest:
                del self._since[flow_id]
            elif stamp < horizon:
                horizon = stamp
        return horizon
