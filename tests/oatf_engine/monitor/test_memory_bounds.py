"""Issue 14: what the monitor remembers per session and per exchange follows the live traffic, not all the
traffic seen (`oatf_engine.monitor.recent`): the soak's sessions (`testing/soak.py`), driven for simulated
minutes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from oatf_engine.events import ObservedEvent, awaits_answer
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded, load_library
from oatf_engine.monitor.sessions import FLOW_QUIET_SECONDS
from testing import soak

ATTACKS = Path(__file__).resolve().parents[3] / "attacks"


def test_flow_maps_forget_exchanges_quiet_for_longer_than_any_answer_takes() -> None:
    monitor = Monitor(list(load_library([str(ATTACKS)]).attacks), MonitorOptions(grace_period=30.0))
    driver = soak.Driver(monitor)
    seconds = 3 * FLOW_QUIET_SECONDS
    flows: dict[str, float] = {}
    reports = 0
    for item in soak.traffic(agents=4, seconds=seconds):
        reports += sum(isinstance(o, RunConcluded) for o in driver.feed(item))
        if not isinstance(item[2], str):
            flows[item[2].flow_id] = item[0]
    sizes = soak.sizes(monitor)
    recent = sum(at >= driver.now - FLOW_QUIET_SECONDS for at in flows.values())
    assert reports > 1_000 and len(flows) > 3 * recent / 2, "many sessions concluded, most exchanges long over"
    assert sizes["resolver.flow_session"] <= recent, sizes  # without forgetting: every flow seen
    assert 0 < sizes["episodes.flows"] <= recent, sizes
    assert 0 < sizes["monitor._awaiting_flows"] <= recent, sizes  # flows whose requests an exchange's end releases
    # Time passes (one more request, long after the last): the sessions' exchanges are forgotten.
    at = driver.now + FLOW_QUIET_SECONDS + 1
    keyed = next(e for _, _, e in soak.traffic(agents=1, seconds=1.0)
                 if isinstance(e, ObservedEvent) and e.session_keys and awaits_answer(e))
    driver.feed((at, 0, dataclasses.replace(keyed, timestamp=at, flow_id="later", session_keys={"mcp_session": "z"})))
    sizes = soak.sizes(monitor)
    assert sizes["resolver.flow_session"] <= 1 and sizes["episodes.flows"] <= 1, sizes
    assert sizes["monitor._awaiting_flows"] == 1, sizes
