"""Python's cyclic garbage collector paused while many long-lived objects are made (replaying a recording, loading
a library)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration (then back as it was). A replay holds the
    recording's flows and events and builds a report per run: many objects, none of them in reference cycles
    (reference counting frees them), which the collector would scan over and over — about 40% of a replay's
    time (`benchmarks/bench_replay.py`). Loading a library likewise (its documents and plans: a third of a cold
    load, half of a warm one, `benchmarks/bench_library_load.py`). Process-wide: in the addon, the event loop
    goes without cyclic collections while the library loads (seconds)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
