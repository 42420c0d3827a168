"""What the session rules remember per HTTP exchange (flow), forgotten once the exchange has been quiet for
longer than any answer may take (issue 14: memory bounded by live work, not by the traffic seen so far).

A flow's session (`sessions` rule 1) and the episodes its first message joined (`episodes` rule 4) decide
where its *later* messages go. Nothing of an exchange comes `MAX_ANSWER_WAIT` after its previous message
(a request waits that long for its answer at most), so an entry whose flow has been quiet that long (in event
time) is never read again: it is treated as absent on lookup and dropped as the clock passes it. Both depend
only on event times, so a live proxy and a replay of its recording forget the same entries at the same point
of the traffic. The count bound (`limit`) stays, for floods of exchanges within one quiet period."""

from __future__ import annotations

from collections import OrderedDict


class RecentFlows[V]:
    """Flow id → value, least recently seen first; an entry quiet for more than `quiet` seconds of event
    time is gone, and at most `limit` entries are kept (the least recently seen dropped first)."""

    __slots__ = ("_entries", "limit", "quiet")

    def __init__(self, limit: int, quiet: float) -> None:
        self.limit = limit
        self.quiet = quiet
        self._entries: OrderedDict[str, tuple[V, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, flow: str, now: float) -> V | None:
        """The flow's value if it was seen within `quiet` seconds before `now` (then seen again at `now`)."""
        entry = self._entries.get(flow)
        if entry is None:
            return None
        value, seen = entry
        if now - seen > self.quiet:
            return None
        if now > seen:
            self._entries[flow] = (value, now)
            self._entries.move_to_end(flow)
        return value

    def put(self, flow: str, value: V, now: float) -> None:
        """Remember the flow's value, seen at `now`; entries quiet for longer than `quiet` are dropped, and the
        least recently seen beyond `limit`."""
        entries = self._entries
        entries[flow] = (value, now)
        entries.move_to_end(flow)
        self.forget_quiet(now)
        while len(entries) > self.limit:
            entries.popitem(last=False)

    def pop(self, flow: str) -> None:
        self._entries.pop(flow, None)

    def take(self, flow: str, now: float) -> V | None:
        """Forget the flow, returning its value if it was seen within `quiet` seconds before `now`."""
        entry = self._entries.pop(flow, None)
        return None if entry is None or now - entry[1] > self.quiet else entry[0]

    def forget_quiet(self, now: float) -> None:
        """Drop the entries quiet for longer than `quiet` seconds at `now` (they are never read again)."""
        entries = self._entries
        horizon = now - self.quiet
        while entries:
            _flow, (_value, seen) = next(iter(entries.items()))
            if seen >= horizon:
                return
            entries.popitem(last=False)
