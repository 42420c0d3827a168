"""Inject mode's A2A and AG-UI parts (`addon.inject_a2a`, `addon.inject_ag_ui`) driven through `OatfAddon`'s
hooks with test flows: A2A 0.3 answers rewritten in 0.3 shapes with the server's ids, a streamed answer
replaced in any chunking, an answer built from the phase its request came in (a rug pull on the extended
card), the card's endpoint kept; an AG-UI run input overlaid (by id, name, key) and judged as received; its
players advance on the decoded run events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow

from addon.inject_ag_ui import overlay
from addon.oatf_addon import OatfAddon
from oatf_engine.events import ObservedEvent
from testing.paths import ROOT

CARD_POISONING = ROOT / "attacks" / "OW-025_travel-agent-card-payment-harvest.yaml"
EXTENDED_CARD_RUG_PULL = ROOT / "attacks" / "OW-030_extended-card-rug-pull.yaml"
FORGED_SYSTEM_MESSAGE = ROOT / "attacks" / "OW-037_forged-system-message-payee-swap.yaml"
A2A = "http://127.0.0.1:9100/"
AG_UI = "http://127.0.0.1:9200/agent"


class Driven:
    """`OatfAddon` (inject mode configured only: no monitor process) and the events its tap emits."""

    def __init__(self, addon: OatfAddon) -> None:
        self.addon = addon
        self.events: list[ObservedEvent] = []
        addon._enqueue = self.events.append  # type: ignore[method-assign]

    def exchange(self, method: str, url: str, body: Any, answer: bytes, content_type: str = "application/json",
                 chunks: list[bytes] | None = None, status: int = 200) -> tuple[http.HTTPFlow, bytes]:
        """One exchange through the hooks; the bytes the client receives."""
        content = json.dumps(body).encode() if body is not None else b""
        flow = tflow.tflow(req=http.Request.make(method, url, content, {"content-type": "application/json"}))
        flow.response = None
        self.addon.requestheaders(flow)
        self.addon.request(flow)
        flow.response = http.Response.make(status, b"", {"content-type": content_type})
        flow.response.raw_content = None
        self.addon.responseheaders(flow)
        if callable(flow.response.stream):
            received = b"".join(flow.response.stream(chunk) for chunk in [*(chunks or [answer]), b""])
            self.addon.response(flow)
            return flow, received
        flow.response.raw_content = answer
        self.addon.response(flow)
        return flow, flow.response.raw_content or b""


@pytest.fixture
def inject(request: pytest.FixtureRequest) -> Iterator[Driven]:
    addon = OatfAddon()
    with taddons.context(addon.inject) as tctx:
        tctx.configure(addon.inject, oatf_inject=str(request.param))
        yield Driven(addon)


def rpc(method: str, params: dict[str, Any], id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def message_v03(text: str, context: str = "ctx-client") -> dict[str, Any]:
    return {"message": {"kind": "message", "role": "user", "messageId": "m-1", "contextId": context,
                        "parts": [{"kind": "text", "text": text}]}}


def honest_task_v03(id_: int = 1) -> bytes:
    task = {"kind": "task", "id": "task-real", "contextId": "ctx-client", "status": {"state": "completed"}}
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": task}).encode()


@pytest.mark.parametrize("inject", [CARD_POISONING], indirect=True)
def test_a2a_card_overlaid_endpoint_kept(inject: Driven) -> None:
    real = {"name": "Travel Desk", "description": "Honest.", "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://127.0.0.1:9100/", "protocolBinding": "JSONRPC",
                                     "protocolVersion": "1.0"}],
            "capabilities": {"streaming": True}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": []}
    flow, received = inject.exchange("GET", f"{A2A}.well-known/agent-card.json", None, json.dumps(real).encode())
    card = json.loads(received)
    assert card["name"] == "FareWise Travel" and "CVV" in card["description"]
    assert card["supportedInterfaces"] == real["supportedInterfaces"] and "url" not in card  # reaches the server
    assert "protocolVersion" not in card  # the document's 0.3 version is not forced on a 1.0 server's card
    assert flow.metadata["oatf_injected"]["method"] == "agent_card/get"
    judged = [e for e in inject.events if e.event_type == "agent_card/get" and e.sender == "server"]
    assert "CVV" in judged[0].content["description"] and judged[0].injected  # judged as received, tagged


@pytest.mark.parametrize("inject", [CARD_POISONING], indirect=True)
def test_a2a_0_3_answer_replaced_in_0_3_with_the_servers_ids(inject: Driven) -> None:
    _, received = inject.exchange("POST", A2A, rpc("message/send", message_v03("Book OSL-CPH")), honest_task_v03())
    answer = json.loads(received)
    assert answer["id"] == 1 and answer["result"]["kind"] == "task"
    assert answer["result"]["id"] == "task-real" and answer["result"]["contextId"] == "ctx-client"
    assert "Ref FW-88120" in answer["result"]["status"]["message"]["parts"][0]["text"]
    assert answer["result"]["status"]["message"]["contextId"] == "ctx-client"


def sse(*messages: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(m).encode() + b"\r\n\r\n" for m in messages)


@pytest.mark.parametrize("inject", [CARD_POISONING], indirect=True)
def test_a2a_stream_replaced_in_any_chunking(inject: Driven) -> None:
    status = {"kind": "status-update", "taskId": "task-real", "contextId": "ctx-client", "final": True,
              "status": {"state": "completed"}}
    body = sse({"jsonrpc": "2.0", "id": 7, "result": {"kind": "task", "id": "task-real", "contextId": "ctx-client",
                                                      "status": {"state": "working"}}},
               {"jsonrpc": "2.0", "id": 7, "result": status})
    outputs = set()
    for at in range(1, len(body), 7):
        _, received = inject.exchange("POST", A2A, rpc("message/stream", message_v03("Book"), 7), body,
                                      "text/event-stream", [body[:at], body[at:]])
        outputs.add(received)
    assert len(outputs) == 1  # the same bytes whatever the chunking
    results = [json.loads(line[6:])["result"] for line in outputs.pop().decode().splitlines() if line]
    assert [r["kind"] for r in results] == ["task", "status-update"]  # the document's stream, the server's dropped
    assert {r.get("taskId", r.get("id")) for r in results} == {"task-real"}
    assert "Ref FW-88120" in results[-1]["status"]["message"]["parts"][0]["text"]


@pytest.mark.parametrize("inject", [ROOT / "attacks" / "OW-028_research-artifact-cascading-payment.yaml"],
                         indirect=True)
def test_a2a_artifacts_rewritten(inject: Driven) -> None:
    """OW-028: the honest task's artifacts are replaced by the document's (the planted comparison table), in
    the answer and in the stream (one artifact update each), judged as received."""
    _, received = inject.exchange("POST", A2A, rpc("message/send", message_v03("compare vendors")), honest_task_v03())
    [artifact] = json.loads(received)["result"]["artifacts"]
    assert artifact["artifactId"] == "a-vs-1" and "| Kestrel Cloud |" in artifact["parts"][0]["text"]
    body = sse({"jsonrpc": "2.0", "id": 2, "result": {"kind": "task", "id": "task-real", "contextId": "ctx-client",
                                                      "status": {"state": "completed"}}})
    _, received = inject.exchange("POST", A2A, rpc("message/stream", message_v03("compare vendors"), 2), body,
                                  "text/event-stream")
    results = [json.loads(line[6:])["result"] for line in received.decode().splitlines() if line]
    assert [r["kind"] for r in results] == ["task", "artifact-update", "status-update"]
    assert results[1]["taskId"] == "task-real" and results[1]["artifact"]["name"] == "comparison.md"
    judged = [e for e in inject.events if e.event_type == "task/artifact" and e.sender == "server"]
    assert judged and "| Kestrel Cloud |" in judged[0].content["artifact"]["parts"][0]["text"]


REST = "http://127.0.0.1:9100/a2a/rest"
REST_MESSAGE = {"message": {"messageId": "m-1", "role": "ROLE_USER", "contextId": "ctx-client",
                            "parts": [{"text": "Book OSL-CPH"}]}}
REST_TASK = {"id": "task-real", "contextId": "ctx-client", "status": {"state": "TASK_STATE_COMPLETED"}}


@pytest.mark.parametrize("inject", [CARD_POISONING], indirect=True)
def test_a2a_rest_answer_replaced_in_1_0_with_the_servers_ids(inject: Driven) -> None:
    """HTTP+JSON `message:send` (A2A 1.0): the body is the document's task as a `SendMessageResponse`, judged
    as received and tagged."""
    flow, received = inject.exchange("POST", f"{REST}/message:send", REST_MESSAGE,
                                     json.dumps({"task": REST_TASK}).encode())
    task = json.loads(received)["task"]
    assert (task["id"], task["contextId"], task["status"]["state"]) == ("task-real", "ctx-client",
                                                                       "TASK_STATE_COMPLETED")
    assert "Ref FW-88120" in task["status"]["message"]["parts"][0]["text"]
    assert flow.metadata["oatf_injected"]["method"] == "message/send"
    [judged] = [e for e in inject.events if e.event_type == "message/send" and e.sender == "server"]
    assert "Ref FW-88120" in judged.content["status"]["message"]["parts"][0]["text"] and judged.injected


@pytest.mark.parametrize("inject", [CARD_POISONING], indirect=True)
def test_a2a_rest_0_3_answer_replaced_in_0_3_protobuf_json(inject: Driven) -> None:
    """0.3's REST routes (under `/v1`) answer in 0.3 protobuf JSON (`content` for the parts), as the a2a-sdk's
    0.3 REST handler writes it; an error status becomes 200."""
    request = {"request": {"message_id": "m-1", "role": "ROLE_USER", "context_id": "ctx-client",
                           "content": [{"text": "Book"}]}}
    flow, received = inject.exchange("POST", "http://127.0.0.1:9100/v1/message:send", request,
                                     json.dumps({"error": {"code": 13, "message": "down"}}).encode(), status=500)
    assert flow.response is not None and flow.response.status_code == 200
    task = json.loads(received)["task"]
    assert task["contextId"] == "ctx-client" and "Ref FW-88120" in task["status"]["message"]["content"][0]["text"]
    assert "the server's HTTP status 500 replaced by 200" in flow.metadata["oatf_injected"]["injected"]


@pytest.mark.parametrize("inject", [CARD_POISONING], indirect=True)
def test_a2a_rest_stream_replaced_in_any_chunking(inject: Driven) -> None:
    body = sse({"task": {**REST_TASK, "status": {"state": "TASK_STATE_WORKING"}}},
               {"statusUpdate": {"taskId": "task-real", "contextId": "ctx-client", "status": REST_TASK["status"]}})
    outputs = set()
    for at in range(1, len(body), 11):
        _, received = inject.exchange("POST", f"{REST}/message:stream", REST_MESSAGE, body, "text/event-stream",
                                      [body[:at], body[at:]])
        outputs.add(received)
    assert len(outputs) == 1
    results = [json.loads(line[6:]) for line in outputs.pop().decode().splitlines() if line]
    assert [next(iter(r)) for r in results] == ["task", "statusUpdate"]
    assert "Ref FW-88120" in results[-1]["statusUpdate"]["status"]["message"]["parts"][0]["text"]
    assert results[-1]["statusUpdate"]["taskId"] == "task-real"


@pytest.mark.parametrize("inject", [CARD_POISONING], indirect=True)
def test_a2a_rest_extended_card_overlaid(inject: Driven) -> None:
    real = {"name": "Travel Desk", "description": "Honest.", "version": "1.0.0", "skills": [],
            "supportedInterfaces": [{"url": REST, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]}
    flow, received = inject.exchange("GET", f"{REST}/extendedAgentCard", None, json.dumps(real).encode())
    card = json.loads(received)
    assert card["name"] == "FareWise Travel" and card["supportedInterfaces"] == real["supportedInterfaces"]
    assert flow.metadata["oatf_injected"]["method"] == "agent/getAuthenticatedExtendedCard"


@pytest.mark.parametrize("inject", [EXTENDED_CARD_RUG_PULL], indirect=True)
def test_a2a_phases_advance_on_the_traffic_and_answer_from_the_phase_a_request_came_in(inject: Driven) -> None:
    """OW-030: three messages (the third enters the next phase: its answer is still the first phase's), then
    the extended card is the swapped one."""
    versions = []
    for number in range(1, 4):
        _, received = inject.exchange("POST", A2A, rpc("message/send", message_v03("sales"), number),
                                      honest_task_v03(number))
        versions.append(json.loads(received)["result"]["messageId"])
    assert versions == ["m-dc-1"] * 3
    real_card = {"name": "DemandCast", "description": "d", "version": "3.0.0", "skills": []}
    _, received = inject.exchange("POST", A2A, rpc("agent/getAuthenticatedExtendedCard", {}, 4),
                                  json.dumps({"jsonrpc": "2.0", "id": 4, "result": real_card}).encode())
    card = json.loads(received)["result"]
    assert card["version"] == "3.1.0" and "customer export" in card["skills"][0]["description"]


def run_input(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"threadId": "thr-1", "runId": "run-9", "state": {"cart": 1}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": messages, **fields}


def test_ag_ui_overlay_by_id_name_and_key() -> None:
    document = {"threadId": "doc", "runId": "doc", "messages": [{"id": "u1", "role": "user", "content": "forged"},
                                                                {"id": "s9", "role": "system", "content": "new"}],
                "tools": [{"name": "pay", "description": "doc"}], "state": {"role": "admin"},
                "context": [{"description": "page", "value": "doc"}], "synthesize": {"prompt": "x"}}
    real = run_input([{"id": "u1", "role": "user", "content": "hi"}, {"id": "u2", "role": "user", "content": "go"}],
                     tools=[{"name": "pay", "description": "real"}, {"name": "other", "description": "o"}])
    notes: list[str] = []
    result = overlay(real, document, "doc phase", notes)
    assert result["threadId"] == "thr-1" and result["runId"] == "run-9" and "synthesize" not in result
    assert [m["content"] for m in result["messages"]] == ["forged", "go", "new"]
    assert result["tools"] == [{"name": "pay", "description": "doc"}, {"name": "other", "description": "o"}]
    assert result["state"] == {"cart": 1, "role": "admin"} and result["context"] == document["context"]
    assert notes == ["doc phase: run_agent_input.messages: replaced 'u1', added 's9'",
                     "doc phase: run_agent_input.tools: replaced 'pay'", "doc phase: run_agent_input.state: 'role'",
                     "doc phase: run_agent_input.context: added 'page'"]
    assert overlay(result, document, "again", []) == result  # idempotent: nothing more to change


@pytest.mark.parametrize("inject", [FORGED_SYSTEM_MESSAGE], indirect=True)
def test_ag_ui_run_input_rewritten_before_the_tap_and_tagged(inject: Driven) -> None:
    flow, _ = inject.exchange("POST", AG_UI, run_input([{"id": "u1", "role": "user", "content": "Pay 4410"}]),
                              b'data: {"type":"RUN_STARTED","threadId":"thr-1","runId":"run-9"}\n\n',
                              "text/event-stream")
    sent = json.loads(flow.request.content or b"")
    assert [m["id"] for m in sent["messages"]] == ["u1", "m1", "m2"] and sent["threadId"] == "thr-1"
    judged = next(e for e in inject.events if e.event_type == "run_agent_input")
    assert [m["id"] for m in judged.content["messages"]] == ["u1", "m1", "m2"]  # the tap decoded the rewrite
    assert judged.injected == ("OW-037 actor default phase phase-1: run_agent_input.messages: added 'm1', "
                               "added 'm2'",)
    assert not next(e for e in inject.events if e.event_type == "run_started").injected


def test_ag_ui_phases_advance_on_the_runs_events(tmp_path: Path) -> None:
    """A two-phase ag_ui_client actor: the second run of the thread gets the second phase's input once the
    agent's first run finished (the trigger observes the decoded run events)."""
    document = tmp_path / "two-runs.yaml"
    document.write_text('''oatf: "0.1"
attack:
  id: TEST-002
  name: two runs
  execution:
    mode: ag_ui_client
    phases:
      - name: first
        state:
          run_agent_input: {threadId: t, runId: r, messages: [{id: d1, role: user, content: "first"}]}
        trigger: {event: run_finished}
      - name: second
        state:
          run_agent_input: {threadId: t, runId: r, messages: [{id: d2, role: user, content: "second"}]}
  indicators:
    - {id: TEST-002-01, surface: tool_call_args, target: delta, pattern: {regex: never}}
''', encoding="utf-8")
    addon = OatfAddon()
    with taddons.context(addon.inject) as tctx:
        tctx.configure(addon.inject, oatf_inject=str(document))
        driven = Driven(addon)
        finished = b'data: {"type":"RUN_FINISHED","threadId":"thr-1","runId":"run-9"}\n\n'
        first, _ = driven.exchange("POST", AG_UI, run_input([]), finished, "text/event-stream")
        second, _ = driven.exchange("POST", AG_UI, run_input([]), finished, "text/event-stream")
    assert [m["id"] for m in json.loads(first.request.content or b"")["messages"]] == ["d1"]
    assert [m["id"] for m in json.loads(second.request.content or b"")["messages"]] == ["d2"]
