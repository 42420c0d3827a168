"""mitmdump script for the end-to-end tests: `addon.mitm_tap.MitmTap` writing every decoded event as one JSON
line to the file named by the `WIRE_EVENTS` environment variable (flushed per line), or only counting them
when it is not set (decoding cost alone, for the benchmark).

With `WIRE_FLOWS` set, it also records every finished flow to that mitmproxy flow file, streamed response
bodies included (the tap keeps those of streams closed early), so fixtures replay with the chunk timing the
tap notes in `flow.metadata["wire_chunks"]`."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from mitmproxy import http, io

from addon.mitm_tap import MitmTap
from oatf_engine.events import ObservedEvent


class JsonlTap:
    """Forwards the hooks to a `MitmTap` and appends its events to a JSONL file."""

    def __init__(self) -> None:
        events = os.environ.get("WIRE_EVENTS")
        self.out = open(events, "a", buffering=1, encoding="utf-8") if events else None  # noqa: SIM115
        self.count = 0
        self.tap = MitmTap(on_event=self.write)
        flows = os.environ.get("WIRE_FLOWS")
        self.flows = io.FlowWriter(open(flows, "ab", buffering=0)) if flows else None  # noqa: SIM115

    def write(self, event: ObservedEvent) -> None:
        self.count += 1
        if self.out is not None:
            self.out.write(json.dumps(dataclasses.asdict(event), default=repr) + "\n")

    def load(self, loader: Any) -> None:
        self.tap.load(loader)

    def configure(self, updated: set[str]) -> None:
        self.tap.configure(updated)

    def requestheaders(self, flow: Any) -> None:
        self.tap.requestheaders(flow)

    def request(self, flow: Any) -> None:
        self.tap.request(flow)

    def responseheaders(self, flow: Any) -> None:
        self.tap.responseheaders(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        self.tap.response(flow)
        self.record(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self.tap.error(flow)
        self.record(flow)

    def record(self, flow: http.HTTPFlow) -> None:
        """Write the finished flow; the tap has given a streamed response that ended early the bytes seen."""
        if self.flows is not None:
            self.flows.add(flow)


addons = [JsonlTap()]
