"""How many messages of each flow wait unplaced: the session rules' holds (`sessions`) and the agent episodes'
deferred and parked exchanges (`episodes`). The flows with any are those whose matches are still to come, which
the proxy's `-w` saving waits for (`Monitor.held_flows`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import KeysView


class FlowCounts:
    """Messages waiting, per flow id."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def add(self, flow_id: str) -> None:
        """A message of `flow_id` waits."""
        self._counts[flow_id] += 1

    def remove(self, flow_id: str) -> None:
        """A waiting message of `flow_id` is placed."""
        left = self._counts[flow_id] - 1
        if left > 0:
            self._counts[flow_id] = left
        else:
            self._counts.pop(flow_id, None)

    @property
    def flows(self) -> KeysView[str]:
        """The flows with a message waiting."""
        return self._counts.keys()
