"""The soak's traffic, sans I/O: the MCP agent sessions of `testing/load.py` (and `benchmarks/bench_live_load.py`)
as the wire decoder reads them (JSON-RPC envelopes included: requests wait for their answers, as live), fed
straight to a `Monitor` for many simulated minutes (issue 14: memory bounded by live work). `agents` agents at
once, each running sessions one after another: `initialize` (answered with a new `Mcp-Session-Id`),
`notifications/initialized`, `tools/list` (OW-001's poisoned description), a pause, `tools/call render_invoice`
(one session in five complying), then `DELETE` (`Monitor.close_session`). The clock moves (`Monitor.tick`) every
`addon.watermark.TICK_SECONDS` of event time, `SLACK_SECONDS` behind, as the live addon moves it."""

from __future__ import annotations

import copy
import dataclasses
import heapq
import random
from collections.abc import Iterator
from typing import Any

from addon.recordings import decode_flows
from addon.watermark import SLACK_SECONDS, TICK_SECONDS
from oatf_engine.events import ObservedEvent
from oatf_engine.monitor import Monitor, Output
from oatf_engine.monitor.recent import RecentFlows
from oatf_engine.wire import WireDecoder
from testing import sessions

START = 1_800_000_000.0
TEMPLATE_PAUSE = 5.0


def _templates() -> dict[str, list[ObservedEvent]]:
    """One session's events per variant (`sessions.VARIANTS`), from OW-001's recorded session."""
    ow = sessions.load_script("OW-001")
    answer = {"content": [{"type": "text", "text": "Invoice INV-2041 rendered."}]}
    call = {"complying": ow["complying"]["steps"][1]["mcp"]["params"],
            "resisting": ow["resisting"]["steps"][0]["mcp"]["params"]}
    script: dict[str, Any] = {
        "servers": {"mcp": "127.0.0.1:8931"},
        "steps": [{"mcp_init": {"session": "S", "server_info": {"name": "invoice-kit", "version": "0.9.2"}}},
                  {"mcp": {"method": "tools/list", "result": ow["steps"][3]["mcp"]["result"]}}],
        **{variant: {"steps": [{"wait": TEMPLATE_PAUSE, "mcp": {"method": "tools/call", "params": call[variant],
                                                                 "result": answer}}]}
           for variant in sessions.VARIANTS}}
    return {variant: decode_flows(WireDecoder(), sessions.to_flows(sessions.play(script, variant), "127.0.0.1"))
            for variant in sessions.VARIANTS}


Item = tuple[float, int, ObservedEvent | str]
"""(time, 0, event) or (time, 1, closed session id)."""


def _agent(templates: dict[str, list[ObservedEvent]], agent: int, seconds: float, pause: tuple[float, float],
           exploit_every: int) -> Iterator[Item]:
    rng = random.Random(agent)
    at, number = START + agent * 0.13, 0
    while at < START + seconds:
        variant = "complying" if number % exploit_every == 0 else "resisting"
        think = rng.uniform(*pause) - TEMPLATE_PAUSE
        session = f"a{agent}-{number}"
        first = templates[variant][0].timestamp
        events = [dataclasses.replace(
            e, content=copy.deepcopy(e.content), flow_id=f"{session}/{e.flow_id}",
            timestamp=at + e.timestamp - first + (think if e.event_type == "tools/call" else 0.0),
            client=f"127.0.0.1:{40000 + agent}", session_keys=dict.fromkeys(e.session_keys, session))
            for e in templates[variant]]
        yield from ((e.timestamp, 0, e) for e in events)
        at = events[-1].timestamp + 0.02
        yield at, 1, session
        at += 0.01
        number += 1


def traffic(agents: int, seconds: float, pause: tuple[float, float] = (4.0, 8.0),
            exploit_every: int = 5) -> Iterator[Item]:
    """The sessions of `agents` agents started within `seconds` of simulated time, in time order."""
    templates = _templates()
    return heapq.merge(*(_agent(templates, n, seconds, pause, exploit_every) for n in range(agents)),
                       key=lambda item: (item[0], item[1]))


class Driver:
    """Feeds `traffic` to a monitor as the live addon does: events in order (numbered), closes, clock marks."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.seq = 0
        self.next_tick = 0.0
        self.now = START

    def feed(self, item: Item) -> list[Output]:
        at, _kind, what = item
        self.now = at
        outputs: list[Output] = []
        if isinstance(what, ObservedEvent):
            outputs += self.monitor.observe(dataclasses.replace(what, seq=self.seq))
            self.seq += 1
        else:
            self.monitor.close_session("mcp", "mcp_session", what, at)
        if at >= self.next_tick:
            outputs += self.monitor.tick(at - SLACK_SECONDS)
            self.next_tick = at + TICK_SECONDS
        return outputs


def sizes(monitor: Monitor) -> dict[str, int]:
    """Entries of every per-session and per-flow table the monitor, its session resolver and its agent episodes
    hold (every dict, set, list and `RecentFlows` among their attributes; the library's tables included)."""
    parts: dict[str, object] = {"monitor": monitor, "resolver": monitor.sessions}
    if monitor.sessions.agent_episodes is not None:
        parts["episodes"] = monitor.sessions.agent_episodes
    found = {}
    for name, part in parts.items():
        for attribute, value in vars(part).items():
            if isinstance(value, dict | set | list | frozenset | RecentFlows):
                found[f"{name}.{attribute}"] = len(value)
    return found
