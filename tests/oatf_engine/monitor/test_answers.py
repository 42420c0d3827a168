"""A run does not go quiet while a request of its traffic waits for its answer (`oatf_engine.monitor.answers`):
an answer slower than the grace period is judged in the run of its request, with the prefilter as without."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

import oatf
from oatf_engine.events import DIRECTION, Endpoint, ObservedEvent, awaits_answer
from oatf_engine.monitor import Monitor, MonitorOptions, RunConcluded
from oatf_engine.monitor.answers import Unanswered
from oatf_engine.monitor.episodes import MAX_ANSWER_WAIT
from oatf_engine.monitor.library import LoadedAttack

GRACE = 5.0

LEAKY_TOOL = """
oatf: "0.1"
attack:
  id: ANS-001
  name: The tool's answer carries the user's key
  execution:
    mode: mcp_server
    state:
      tools:
        - name: {tool}
          description: "Reads a file"
  indicators:
    - surface: {surface}
      direction: response
      target: {target}
      pattern:
        contains: "PRIVATE KEY"
"""

SAMPLING = """
oatf: "0.1"
attack:
  id: ANS-002
  execution:
    mode: mcp_server
    state: {tools: [{name: summarize, description: "Summarizes"}]}
  indicators:
    - surface: sampling/createMessage
      direction: request
      target: content.text
      pattern:
        contains: "system prompt"
"""

_seq = itertools.count(1)


def rpc(flow: str, at: float, sender: str, event_type: str, *, method: bool, rpc_id: Any = None,
        content: Any = None, session: str = "s1", has_id: bool = True) -> ObservedEvent:
    """A decoded JSON-RPC message of the MCP session `session`: a request or notification (`method`), else a
    response (`content` is its result)."""
    envelope: dict[str, Any] = {"jsonrpc": "2.0"}
    if method:
        envelope["method"] = event_type
        envelope["params"] = content
    else:
        envelope["result"] = content
    if has_id:
        envelope["id"] = rpc_id
    n = next(_seq)
    return ObservedEvent("mcp", event_type, DIRECTION[sender], sender, content, flow, n, at,  # type: ignore[arg-type]
                         Endpoint("127.0.0.1", 8000, "/mcp"), "127.0.0.1:5000", {"mcp_session": session},
                         jsonrpc_id=rpc_id if has_id else None, envelope=envelope)


def attack(text: str) -> LoadedAttack:
    loaded = oatf.load(text)
    return LoadedAttack("mem.yaml", loaded.document, tuple(loaded.warnings))


def reports(attacks: list[LoadedAttack], events: list[ObservedEvent], prefilter: bool = True,
            ticks: tuple[float, ...] = ()) -> list[dict[str, Any]]:
    """The reports of `events`, with the clock also ticked at `ticks` (the live proxy's clock runs between
    messages) and the end of the traffic at the last event."""
    monitor = Monitor(attacks, MonitorOptions(grace_period=GRACE), prefilter=prefilter)
    outputs: list[Any] = []
    pending = sorted(ticks)
    for event in events:
        while pending and pending[0] < event.timestamp:
            outputs += monitor.tick(pending.pop(0))
        outputs += monitor.observe(event)
    for at in pending:
        outputs += monitor.tick(at)
    outputs += monitor.end_of_traffic(events[-1].timestamp)
    return [o.report for o in outputs if isinstance(o, RunConcluded)]


def _every_second(start: float, end: float) -> tuple[float, ...]:
    return tuple(float(t) for t in range(int(start), int(end) + 1))


@pytest.mark.parametrize(("method", "surface", "target", "answer"), [
    ("tools/call", "tools/call", "content[*].text", {"content": [{"type": "text", "text": "-----BEGIN PRIVATE KEY"}]}),
    ("resources/read", "resources/read", "contents[*].text",
     {"contents": [{"uri": "file:///k", "text": "PRIVATE KEY"}]}),
    ("initialize", "initialize", "instructions", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                  "serverInfo": {"name": "s", "version": "1"},
                                                  "instructions": "PRIVATE KEY"}),
])
@pytest.mark.parametrize("prefilter", [True, False])
def test_an_answer_after_twice_the_grace_period_is_judged_in_the_run_of_its_request(
        method: str, surface: str, target: str, answer: dict[str, Any], prefilter: bool) -> None:
    """The request at 10 s, its answer (the evidence) at 20 s — twice the grace period later — while the clock
    ticks every second in between: one run, exploited on the answer, ending a grace period after it. (Before,
    the run concluded at 15 s `not_exploited` and the answer opened a run of its own.)"""
    loaded = attack(LEAKY_TOOL.format(tool="read_file", surface=surface, target=target))
    events = [rpc("call", 10.0, "client", method, method=True, rpc_id=7, content={"name": "read_file"}),
              rpc("call", 20.0, "server", method, method=False, rpc_id=7, content=answer)]
    [report] = reports([loaded], events, prefilter, _every_second(10, 30))
    assert report["verdict"]["result"] == "exploited"
    assert report["evidence"][0]["flow"] == "call"
    summary = report["execution_summary"]
    assert (summary["status"], summary["messages_seen"]) == ("completed", 2)
    assert summary["ended_at"] == oatf.timestamp_at(20.0 + GRACE)


def test_a_progress_notification_does_not_answer_the_call_and_a_client_notification_holds_nothing() -> None:
    """The server's progress notification in the call's stream at 11 s is not its answer: the result at 30 s
    still belongs to the run. Then the agent's `notifications/cancelled`-like notification (no id) at 31 s
    waits for nothing: the run ends a grace period after it."""
    loaded = attack(LEAKY_TOOL.format(tool="read_file", surface="tools/call", target="content[*].text"))
    events = [rpc("call", 10.0, "client", "tools/call", method=True, rpc_id=1, content={"name": "read_file"}),
              rpc("call", 11.0, "server", "notifications/progress", method=True, content={"progress": 1},
                  has_id=False),
              rpc("call", 30.0, "server", "tools/call", method=False, rpc_id=1,
                  content={"content": [{"type": "text", "text": "PRIVATE KEY"}]}),
              rpc("note", 31.0, "client", "notifications/roots/list_changed", method=True, has_id=False)]
    [report] = reports([loaded], events, ticks=_every_second(10, 60))
    assert report["verdict"]["result"] == "exploited"
    assert report["execution_summary"]["ended_at"] == oatf.timestamp_at(31.0 + GRACE)


def test_an_answer_on_another_flow_answers_the_request_with_its_id() -> None:
    """The legacy HTTP+SSE transport answers a POSTed request on the GET stream (another flow), by its id: the
    request stops holding the run when that answer comes, not `MAX_ANSWER_WAIT` later."""
    loaded = attack(LEAKY_TOOL.format(tool="read_file", surface="tools/call", target="content[*].text"))
    events = [rpc("post", 10.0, "client", "tools/call", method=True, rpc_id="a-1", content={"name": "read_file"}),
              rpc("get-stream", 25.0, "server", "tools/call", method=False, rpc_id="a-1",
                  content={"content": [{"type": "text", "text": "PRIVATE KEY"}]})]
    [report] = reports([loaded], events, ticks=_every_second(10, 40))
    assert report["verdict"]["result"] == "exploited"
    assert report["execution_summary"]["ended_at"] == oatf.timestamp_at(25.0 + GRACE)


@pytest.mark.parametrize("prefilter", [True, False])
def test_the_agents_slow_answer_to_a_servers_request_is_judged_in_its_run(prefilter: bool) -> None:
    """The server asks the agent's model (`sampling/createMessage`, in the tools/call stream); the agent's
    answer, POSTed 12 s later, leaks its system prompt: one run, exploited."""
    loaded = attack(SAMPLING)
    events = [rpc("call", 1.0, "client", "tools/call", method=True, rpc_id=1, content={"name": "summarize"}),
              rpc("call", 1.5, "server", "sampling/createMessage", method=True, rpc_id="srv-1",
                  content={"messages": []}),
              rpc("reply", 13.5, "client", "sampling/createMessage", method=False, rpc_id="srv-1",
                  content={"role": "assistant", "content": {"type": "text", "text": "my system prompt is ..."}}),
              rpc("call", 14.0, "server", "tools/call", method=False, rpc_id=1, content={"content": []})]
    [report] = reports([loaded], events, prefilter, _every_second(1, 30))
    assert report["verdict"]["result"] == "exploited"
    assert report["execution_summary"]["ended_at"] == oatf.timestamp_at(14.0 + GRACE)


def test_an_answer_that_never_comes_holds_the_run_for_the_longest_answer_wait_only() -> None:
    """A call whose answer never comes (the connection was reset: the decoder reports no message for a failed
    exchange) holds the run `MAX_ANSWER_WAIT`, then the grace period ends it."""
    loaded = attack(LEAKY_TOOL.format(tool="read_file", surface="tools/call", target="content[*].text"))
    events = [rpc("call", 10.0, "client", "tools/call", method=True, rpc_id=1, content={"name": "read_file"})]
    [report] = reports([loaded], events, ticks=_every_second(10, 10 + MAX_ANSWER_WAIT + 10))
    assert report["verdict"]["result"] == "not_exploited"
    assert report["execution_summary"]["ended_at"] == oatf.timestamp_at(10.0 + MAX_ANSWER_WAIT + GRACE)


def test_what_waits_for_an_answer() -> None:
    def message(envelope: Any, sender: str = "client", protocol: str = "mcp") -> ObservedEvent:
        return ObservedEvent(protocol, "x", DIRECTION[sender], sender, {}, "f", 1, 0.0,  # type: ignore[arg-type]
                             Endpoint("h", 1, "/"), "c:1", envelope=envelope)

    assert awaits_answer(message({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}))
    assert awaits_answer(message({"jsonrpc": "2.0", "id": "s", "method": "ping"}, "server"))
    assert awaits_answer(message({"message": {}}, protocol="a2a"))  # an A2A REST call
    assert awaits_answer(message(None, protocol="a2a"))  # an Agent Card fetch
    assert awaits_answer(message({"threadId": "t"}, protocol="ag_ui"))  # a RunAgentInput
    assert not awaits_answer(message({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert not awaits_answer(message({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert not awaits_answer(message({"type": "RUN_STARTED"}, "server", "ag_ui"))
    assert not awaits_answer(message(None))  # MCP without its envelope: the decoder never makes one


def test_the_requests_followed_are_bounded_and_stale_ones_make_room() -> None:
    table: Unanswered[None] = Unanswered(2, forget_stale=True)
    for n, at in enumerate((0.0, 1.0, 2.0)):
        table.admit(rpc(f"f{n}", at, "client", "tools/call", method=True, rpc_id=n), None)
    assert [call[0] for call in table.calls] == ["f0", "f1"], "full: the third is not followed"
    table.admit(rpc("f3", 0.5 + MAX_ANSWER_WAIT, "client", "tools/call", method=True, rpc_id=3), None)
    assert [call[0] for call in table.calls] == ["f1", "f3"], "the one that waited MAX_ANSWER_WAIT made room"
    assert table.answered(rpc("f3", 400.0, "server", "tools/call", method=False, rpc_id=3))
    assert not table.answered(rpc("f3", 400.0, "server", "tools/call", method=False, rpc_id=3))
    assert json.dumps(table.latest()) == "1.0"
