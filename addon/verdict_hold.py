"""The flows whose `-w` write waits for the verdicts of their runs: the bookkeeping, sans I/O (no event loop, no
file, no mitmproxy: the caller writes what it is told to, `addon.deferred_save` with mitmproxy's `save` addon).

A run's verdict (exploited, resisted, partial, not delivered…) is known only when the run concludes, a grace period
after its last message, long after the flows where its indicators matched or its actors changed phase have ended
and been evaluated. A flow that took part in runs still live is held here until each of them has concluded
(`concluded`), then handed back to be written, with the verdicts its mark and comment then carry
(`addon.flow_marks`).

Bounded: at most `max_flows` flows and `max_bytes` bytes (each flow's estimated size) are held; beyond either, the
oldest held flow is handed back at once, to be written with what is known of it, and a flow larger than
`max_bytes` is not held (`evicted` counts both). Each flow
is held once and handed back once: `hold` of a flow already held is ignored, and `concluded`, `drain` and the bound
each hand back a flow that they remove. Flows are handed back in the order they were held (`drain`: every flow, at
shutdown, after the runs concluded by then were `concluded`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class _Held[T]:
    item: T
    runs: set[str]
    """The runs not concluded yet that the flow waits for."""
    size: int
    order: int
    """When it was held (`VerdictHold.count` then)."""


class VerdictHold[T]:
    """Flows (`T`: whatever the caller writes) waiting for their runs' verdicts, by flow id, oldest first."""

    def __init__(self, max_flows: int = 0, max_bytes: int = 0) -> None:
        self.max_flows = max_flows
        """Flows held at most; 0: none is held."""
        self.max_bytes = max_bytes
        """Bytes (the flows' estimated sizes) held at most."""
        self.held: OrderedDict[str, _Held[T]] = OrderedDict()
        self.waiting: dict[str, set[str]] = {}
        """Run → the ids of the held flows that wait for it."""
        self.size = 0
        """The estimated bytes held."""
        self.evicted = 0
        """Flows handed back before their runs concluded, to keep within the bounds."""
        self.count = 0
        """Flows held so far."""

    def __contains__(self, flow_id: str) -> bool:
        return flow_id in self.held

    def __len__(self) -> int:
        return len(self.held)

    def hold(self, flow_id: str, item: T, runs: Iterable[str], size: int) -> list[T]:
        """Hold the flow until `runs` (those of its runs still live) have concluded. What is to be written now:
        the flow itself when it waits for no run (or none may be held) or alone exceeds `max_bytes`, else the
        oldest held flows beyond the bounds. A flow already held: nothing."""
        if flow_id in self.held:
            return []
        waiting_for = set(runs)
        if not waiting_for or self.max_flows <= 0:
            return [item]
        if size > self.max_bytes:
            self.evicted += 1
            return [item]
        self.held[flow_id] = _Held(item, waiting_for, size, self.count)
        self.count += 1
        self.size += size
        for run in waiting_for:
            self.waiting.setdefault(run, set()).add(flow_id)
        evicted: list[T] = []
        while self.held and (len(self.held) > self.max_flows or self.size > self.max_bytes):
            evicted.append(self._pop(next(iter(self.held))))
            self.evicted += 1
        return evicted

    def waiting_for(self, run: str) -> list[T]:
        """The held flows that wait for `run`, in the order they were held."""
        return [self.held[flow_id].item for flow_id in self._in_order(self.waiting.get(run, set()))]

    def concluded(self, run: str) -> list[T]:
        """`run` concluded: the flows that waited for it and for no other run still live, to be written now (in
        the order they were held)."""
        done: list[str] = []
        for flow_id in self._in_order(self.waiting.pop(run, set())):
            runs = self.held[flow_id].runs
            runs.discard(run)
            if not runs:
                done.append(flow_id)
        return [self._pop(flow_id) for flow_id in done]

    def drain(self) -> list[T]:
        """Every held flow, in the order they were held (shutdown)."""
        return [self._pop(flow_id) for flow_id in list(self.held)]

    def _in_order(self, ids: set[str]) -> list[str]:
        return sorted(ids, key=lambda flow_id: self.held[flow_id].order)

    def _pop(self, flow_id: str) -> T:
        held = self.held.pop(flow_id)
        self.size -= held.size
        for run in held.runs:
            ids = self.waiting.get(run)
            if ids is not None:
                ids.discard(flow_id)
                if not ids:
                    del self.waiting[run]
        return held.item
