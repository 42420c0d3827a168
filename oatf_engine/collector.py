"""Python's cyclic garbage collector paused while many long-lived objects are made (replaying a recording, loading
a library), and kept off what a long-lived process keeps for its life."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused(freeze: bool = False) -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration (then back as it was). A replay holds the
    recording's flows and events and builds a report per run: many objects, none of them in reference cycles
    (reference counting frees them), which the collector would scan over and over — about 40% of a replay's
    time (`benchmarks/bench_replay.py`). Loading a library likewise (its documents and plans: a third of a cold
    load, half of a warm one, `benchmarks/bench_library_load.py`). Process-wide: in the addon, the event loop
    goes without cyclic collections while the library loads (seconds). `freeze`: see `freeze_long_lived`, done
    before the collector resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            freeze_long_lived()
        if enabled:
            gc.enable()


def freeze_long_lived() -> None:
    """Every object alive now moved out of the cyclic collector's reach (`gc.freeze`): called by the processes
    that keep a library for their life (the proxy's, the monitor process, the tap's evaluation, `oatf monitor`,
    `oatf serve`) once it is loaded. A library of 2,000 documents is ~250,000 objects that every full collection
    walked (0.25-0.3 s each, on whichever thread allocated: mitmproxy's event loop, in the proxy), and the first
    collections after a load walked them all again (`benchmarks/bench_addon.py`, 2,000 documents: 0.5 s of
    collections in the proxy, 0.04 s frozen). Reference counting still frees them: a library, runs and monitor
    hold no reference cycles (a replaced library is freed as before); only cyclic garbage among what was alive
    at that moment would never be collected, once per load."""
    gc.freeze()
