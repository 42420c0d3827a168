"""Recorded fixtures for the fast tests: loading, replaying through `addon.recordings.decode_flows`, and splitting
streamed chunks further (to check that chunking never changes the events)."""

from __future__ import annotations

import copy
from typing import Any

from mitmproxy import http, io

from oatf_engine.events import ObservedEvent
from testing.paths import WIRE_FIXTURES

FIXTURES = WIRE_FIXTURES


def load(name: str) -> list[http.HTTPFlow]:
    """The flows of fixture `name` (`mcp_http`, `mcp_sse`, `a2a_v1`, `a2a_v03`, `ag_ui`)."""
    with open(FIXTURES / f"{name}.mitm", "rb") as handle:
        return [flow for flow in io.FlowReader(handle).stream() if isinstance(flow, http.HTTPFlow)]


def byte_by_byte(flows: list[http.HTTPFlow]) -> list[http.HTTPFlow]:
    """Copies of `flows` whose responses arrive one byte at a time (at the recorded chunk times)."""
    out = []
    for flow in flows:
        flow = copy.deepcopy(flow)
        body = flow.response.raw_content if flow.response is not None else None
        if body:
            recorded = flow.metadata.get("wire_chunks") or [[flow.response.timestamp_end, len(body)]]
            flow.metadata["wire_chunks"] = [[at, 1] for at, size in recorded for _ in range(size)]
        out.append(flow)
    return out


def summary(events: list[ObservedEvent]) -> list[tuple[Any, ...]]:
    """(protocol, event_type, direction, sender, is_error) of each event."""
    return [(e.protocol, e.event_type, e.direction, e.sender, e.is_error) for e in events]
