"""Replaying recorded flows through a `WireDecoder` in wire order, for the fixture tests.

Flows are interleaved by their recorded timestamps: request start, request end, response start, each response
chunk (at the time `tests/e2e_wire/tap_script.py` recorded in `flow.metadata["wire_chunks"]`; else the whole
body at the response end), then the end, or an abort for a flow that failed. `split` cuts every chunk further
(to check that chunking never changes the events)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mitmproxy import http, io

from addon.events import ObservedEvent
from addon.wire import WireDecoder

FIXTURES = Path(__file__).resolve().parent / "fixtures"

Step = tuple[float, int, Callable[[], list[ObservedEvent]]]


def load(name: str) -> list[http.HTTPFlow]:
    """The flows of fixture `name` (`mcp_http`, `mcp_sse`, `a2a_v1`, `a2a_v03`, `ag_ui`)."""
    with open(FIXTURES / f"{name}.mitm", "rb") as handle:
        return [flow for flow in io.FlowReader(handle).stream() if isinstance(flow, http.HTTPFlow)]


def _chunks(flow: http.HTTPFlow) -> list[tuple[float, bytes]]:
    response = flow.response
    assert response is not None
    body = response.raw_content or b""
    recorded = flow.metadata.get("wire_chunks")
    if not recorded:
        return [(response.timestamp_end or response.timestamp_start, body)] if body else []
    out, offset = [], 0
    for at, size in recorded:
        out.append((at, body[offset:offset + size]))
        offset += size
    return out


def _steps(decoder: WireDecoder, flow: http.HTTPFlow, split: Callable[[bytes], list[bytes]]) -> list[Step]:
    request, response, fid = flow.request, flow.response, flow.id
    client = f"{flow.client_conn.peername[0]}:{flow.client_conn.peername[1]}"
    steps: list[tuple[float, Callable[[], list[ObservedEvent]]]] = [
        (request.timestamp_start,
         lambda: decoder.request_headers(fid, request.method, request.url, request.headers, client, 0.0)),
        (request.timestamp_end or request.timestamp_start,
         lambda: [e for part in split(request.raw_content or b"") for e in decoder.request_data(fid, part, 0.0)]
         + decoder.request_end(fid, 0.0)),
    ]
    if response is not None:
        steps.append((response.timestamp_start,
                      lambda: decoder.response_headers(fid, response.status_code, response.headers, 0.0)))
        for at, data in _chunks(flow):
            steps.append((at, lambda data=data: [e for part in split(data)
                                                 for e in decoder.response_data(fid, part, 0.0)]))
    last = max(at for at, _ in steps)
    if flow.error is None and response is not None:
        steps.append((max(last, response.timestamp_end or last), lambda: decoder.response_end(fid, 0.0)))
    else:
        steps.append((max(last, flow.error.timestamp if flow.error else last), lambda: decoder.abort(fid, 0.0)))
    # within a flow the order is the wire order even if a clock went backwards
    monotonic = list(itertools.accumulate((at for at, _ in steps), max))
    return [(at, index, action) for index, (at, (_, action)) in enumerate(zip(monotonic, steps, strict=True))]


def replay(decoder: WireDecoder, flows: list[http.HTTPFlow],
           split: Callable[[bytes], list[bytes]] = lambda data: [data] if data else []) -> list[ObservedEvent]:
    """Every event of `flows`, fed to `decoder` in recorded wire order."""
    steps = [step for flow in flows for step in _steps(decoder, flow, split)]
    steps.sort(key=lambda step: (step[0], step[1]))
    return [event for _, _, action in steps for event in action()]


def summary(events: list[ObservedEvent]) -> list[tuple[Any, ...]]:
    """(protocol, event_type, direction, sender, is_error) of each event."""
    return [(e.protocol, e.event_type, e.direction, e.sender, e.is_error) for e in events]
