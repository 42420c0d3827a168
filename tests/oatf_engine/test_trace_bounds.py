"""The Attest trace collector's memory is bounded by live work: sessions, steps, unanswered calls, text."""

from __future__ import annotations

from typing import Any

from oatf_engine import attest_traces
from oatf_engine.attest_traces import TraceCollector
from tests.oatf_engine.monitor.test_monitor import event


def tool_call(session: str, n: int, at: float) -> list[Any]:
    request = event("tools/call", {"name": "add", "arguments": {"n": n}}, at, session=session, flow=f"{session}{n}")
    answer = event("tools/call", {"name": "add", "arguments": {"n": n}, "content": []}, at + 0.1, session=session,
                   flow=f"{session}{n}", direction="response", sender="server")
    return [request, answer]


def test_sessions_beyond_the_limit_are_evicted_least_recently_active_first_and_handed_over() -> None:
    evicted: list[dict[str, Any]] = []
    collector = TraceCollector(max_sessions=2, max_steps=3, on_evict=evicted.append)
    for at, session in enumerate(["a", "b", "a", "c", "d"]):
        for n in range(5):
            for e in tool_call(session, n, at + n / 10):
                collector.observe(e)
    assert list(collector.sessions) == ["mcp_session:c", "mcp_session:d"]
    assert collector.evicted == 2
    assert [t["metadata"]["session"] for t in evicted] == ["mcp_session:b", "mcp_session:a"]  # a was active later
    for trace in [*evicted, *collector.traces()]:
        assert len(trace["steps"]) == 3
    assert evicted[1]["output"]["structured"]["dropped_steps"] == 7  # a: 10 calls, 3 kept


def test_unanswered_calls_and_agent_text_are_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(attest_traces, "MAX_PENDING", 3)
    monkeypatch.setattr(attest_traces, "MAX_TEXT", 10)
    collector = TraceCollector()
    for n in range(10):
        collector.observe(tool_call("s", n, 0.0)[0])  # never answered
    for _ in range(5):
        collector.observe(event("text_message_content", {"delta": "abcd"}, 1.0, session="s", protocol="ag_ui",
                                direction="response", sender="server"))
    assert len(collector.sessions["mcp_session:s"].pending) == 3
    assert sorted(t["output"]["message"] for t in collector.traces()) == ["", "abcdabcdab"]
