"""Free heap memory given back to the operating system now and then, in the long-lived processes (issue 14: "RSS
flat over a long soak").

glibc's `free` returns memory to the system only from the top of a heap (above `M_TRIM_THRESHOLD`); what is freed
below live allocations stays resident, and with several threads each has an arena of its own. A proxy that handles
a flow's bodies and headers (mostly allocations beyond Python's small-object allocator) in between long-lived
objects keeps the pages of every freed body: its resident size creeps up while what it holds does not (the proxy's
traced Python memory stayed at 6-10 MiB over a 20-minute soak while its RSS grew ~1 MiB/min). `malloc_trim(0)`
walks every arena and releases each whole free page (`MADV_DONTNEED`); it runs without the interpreter lock
(ctypes releases it) and takes each arena's lock in turn, a few milliseconds with a heap of a hundred MiB.

`HeapTrim.due(now)` is called from a loop the process runs anyway (the addon's worker, the monitor process's
evaluation loop, the tap's evaluation process): it trims at most every `TRIM_SECONDS`. Elsewhere than on glibc
it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

TRIM_SECONDS = 60.0
"""How often a process gives its free heap back, at most."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where there is none (musl, macOS)."""
    try:
        function: Callable[[int], int] = ctypes.CDLL(ctypes.util.find_library("c") or None).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]  # type: ignore[attr-defined]
    function.restype = ctypes.c_int  # type: ignore[attr-defined]
    return function


def trim() -> bool:
    """Give the free heap back to the operating system now; True when memory was released."""
    function = _malloc_trim()
    return function is not None and bool(function(0))


class HeapTrim:
    """`trim` at most every `every` seconds (see the module docstring). Not thread-safe: one loop calls it."""

    __slots__ = ("every", "next_at", "trims")

    def __init__(self, every: float = TRIM_SECONDS) -> None:
        self.every = every
        self.next_at: float | None = None
        self.trims = 0
        """How many times the heap was trimmed."""

    def due(self, now: float) -> None:
        """Called with a monotonic clock from a loop that runs anyway: the first call starts the period."""
        if self.next_at is None:
            self.next_at = now + self.every
        elif now >= self.next_at:
            self.next_at = now + self.every
            trim()
            self.trims += 1
