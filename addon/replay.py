"""Offline replay: recorded traffic (mitmproxy flow files or HAR) through the same decoders and monitor as
the live addon, with the recorded timestamps as the clock. This is how CI runs an attack library.

The recording ends the observation: once every event is fed, runs whose actors are all terminal conclude as
`completed` (nothing more can happen in their grace period), and the others as `interrupted`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mitmproxy.exceptions import FlowReadException

from addon.events import ObservedEvent
from addon.flow_file import AnyHTTPFlow, read_flow_file
from addon.mitm_tap import decode_flows
from addon.monitor import LoadedAttack, LoadProblem, Monitor, MonitorOptions, RunConcluded, load_library
from addon.wire import WireDecoder


class ReplayError(Exception):
    """A flow file that cannot be read."""


@dataclass
class ReplayResult:
    reports: list[dict[str, Any]]
    problems: list[LoadProblem]
    events: int
    flows: int


def read_flows(path: str) -> list[AnyHTTPFlow]:
    """The HTTP flows of a mitmproxy flow file or a HAR file, in recorded order (`addon.flow_file`)."""
    try:
        with open(path, "rb") as handle:
            flows = read_flow_file(handle.read())
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except FlowReadException as exc:
        raise ReplayError(f"{path}: not a mitmproxy flow file or HAR: {exc}") from None
    try:
        return sorted(flows, key=lambda f: f.request.timestamp_start)
    except TypeError:
        raise ReplayError(f"{path}: not a mitmproxy flow file or HAR: a request without a start time") from None


def decode_recordings(flow_paths: list[str]) -> tuple[list[ObservedEvent], int]:
    """Every event of every recorded flow, in time order, and the number of flows."""
    flows = [flow for path in flow_paths for flow in read_flows(path)]
    # One decoder over all flows, interleaved by recorded time: exchanges answer each other (the legacy MCP
    # transport answers POSTs on its SSE stream), so flows cannot be decoded one by one.
    events = decode_flows(WireDecoder(), flows)
    events.sort(key=lambda e: (e.timestamp, e.seq))
    return events, len(flows)


def evaluate_events(attacks: list[LoadedAttack], events: list[ObservedEvent],
                    options: MonitorOptions | None = None) -> list[dict[str, Any]]:
    """The reports of every run over recorded events; the recording's end concludes the runs."""
    monitor = Monitor(attacks, options)
    outputs = []
    for event in events:
        outputs.extend(monitor.observe(event))
    end = events[-1].timestamp if events else 0.0
    grace = max((run.grace_period for run in monitor.runs.values()), default=0.0)
    outputs.extend(monitor.tick(end + grace))
    outputs.extend(monitor.shutdown())
    return [o.report for o in outputs if isinstance(o, RunConcluded)]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration (then back as it was). A replay holds the
    recording's flows and events and builds a report per run: many objects, none of them in reference cycles
    (reference counting frees them), which the collector would scan over and over — about 40% of a replay's
    time (`benchmarks/bench_replay.py`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def replay(attack_paths: list[str], flow_paths: list[str], options: MonitorOptions | None = None) -> ReplayResult:
    """Evaluate the attacks under `attack_paths` over the recordings in `flow_paths`."""
    with collector_paused():
        library = load_library(attack_paths)
        events, flow_count = decode_recordings(flow_paths)
        reports = evaluate_events(list(library.attacks), events, options)
    return ReplayResult(reports, list(library.problems), len(events), flow_count)


def replay_flows(attack_paths: list[str], flow_paths: list[str], *, grace_period: float | None = None) -> list[dict]:
    """The per-run reports of `replay` (the attack library's tests use this)."""
    options = MonitorOptions() if grace_period is None else MonitorOptions(grace_period=grace_period)
    return replay(attack_paths, flow_paths, options).reports


__all__ = ["ReplayError", "ReplayResult", "collector_paused", "decode_recordings", "evaluate_events", "read_flows",
           "replay", "replay_flows"]
