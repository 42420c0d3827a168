"""Free heap memory given back to the operating system (`oatf_engine.heap`, issue 14: RSS flat over a soak)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from oatf_engine.heap import HeapTrim, _malloc_trim
from testing.paths import ROOT

FRAGMENTED = """
import os, sys
from oatf_engine.heap import trim

def resident() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

# 100,000 blocks of 1 KiB (beyond Python's small-object allocator: glibc's heap), then all but every 16th freed:
# ~94 MiB free in 15 KiB holes between live blocks, below the heap's top, which `free` never gives back.
blocks = [b"x" * 1000 + bytes([n % 256]) for n in range(100_000)]
kept = blocks[::16]
del blocks
before = resident()
released = trim()
print(before - resident(), released)
"""


@pytest.mark.skipif(_malloc_trim() is None, reason="glibc's malloc_trim")
def test_trim_gives_back_the_free_pages_between_live_allocations() -> None:
    done = subprocess.run([sys.executable, "-c", FRAGMENTED], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    given_back, released = done.stdout.split()
    assert released == "True"
    assert int(given_back) > 40 << 20, done.stdout  # of ~94 MiB free, the whole pages inside the holes


def test_the_heap_is_trimmed_at_most_once_a_period() -> None:
    heap = HeapTrim(every=60.0)
    for now, trims in ((100.0, 0), (159.0, 0), (160.0, 1), (200.0, 1), (219.9, 1), (220.0, 2), (500.0, 3)):
        heap.due(now)
        assert heap.trims == trims, now
