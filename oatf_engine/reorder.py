"""Events held until a watermark passes their time, then released in time order: the live addon's hand-over to
the monitor (`addon.watermark`), and its replay from the journal after a crash (`oatf_engine.recovery`), which
must give the monitor the same events in the same order."""

from __future__ import annotations

import heapq
import itertools
import math


class Reorder[T]:
    """Items held until the watermark passes their time, then released in time order (ties: `rank`, then the
    order they were added). The watermark never goes back."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, T]] = []
        self._order = itertools.count()
        self.watermark = -math.inf

    def add(self, at: float, item: T, rank: int = 1) -> None:
        heapq.heappush(self._heap, (at, rank, next(self._order), item))

    def release(self, watermark: float) -> list[T]:
        """The items up to `watermark` (or the highest watermark so far), oldest first."""
        self.watermark = max(self.watermark, watermark)
        released = []
        while self._heap and self._heap[0][0] <= self.watermark:
            released.append(heapq.heappop(self._heap)[3])
        return released

    def drain(self) -> list[T]:
        """Every item held, oldest first, whatever the watermark (which stays where it is)."""
        released = self.held()
        self._heap.clear()
        return released

    def held(self) -> list[T]:
        """Every item held, oldest first, left held."""
        return [item for *_, item in sorted(self._heap)]

    def __len__(self) -> int:
        return len(self._heap)
