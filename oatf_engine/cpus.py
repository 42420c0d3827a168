"""How many CPUs this process may use: the default number of replay workers (`replay`) and of the child
processes a large library loads in (`monitor.load_workers`)."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1
