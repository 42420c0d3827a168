"""A2A's HTTP+JSON/REST binding (`oatf_engine.wire.a2a_rest`, through `WireDecoder`): every route decoded as the
JSON-RPC method it stands for, with the JSON-RPC binding's content Values; recognition; 0.3 protobuf JSON;
errors; and fuzzing of what traffic feeds the new parser. Bodies have the shapes a2a-sdk 1.3 sends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oatf_engine.wire import a2a_rest, parse_overrides

from .test_decoder import Harness, kinds, result, rpc

A2A_JSON = {"content-type": "application/a2a+json"}
V1 = {**A2A_JSON, "a2a-version": "1.0"}
BASE = "http://agent.local:9999"
MESSAGE_1_0 = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
TASK_1_0 = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_CANCELED"}}


def one(events: list[Any], direction: str) -> Any:
    found = [e for e in events if e.direction == direction]
    assert len(found) == 1, events
    return found[0]


def test_message_send_has_the_jsonrpc_events_content_and_keys() -> None:
    reply = {"message": {"messageId": "m2", "contextId": "c1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
    rest = Harness().exchange("POST", f"{BASE}/message:send", {"message": MESSAGE_1_0}, request_headers=V1,
                              response_headers=A2A_JSON, response=reply)
    rpc_events = Harness().exchange("POST", f"{BASE}/", rpc(1, "SendMessage", {"message": MESSAGE_1_0}),
                                    response=result(1, reply))
    assert kinds(rest) == kinds(rpc_events) == [("a2a", "message/send", "request", "client"),
                                                ("a2a", "message/send", "response", "server")]
    assert [(e.content, e.session_keys) for e in rest] == [(e.content, e.session_keys) for e in rpc_events]
    assert rest[1].content["parts"] == [{"kind": "text", "text": "ok"}]
    assert rest[1].session_keys == {"a2a_context": "c1"}
    assert rest[0].envelope == {"message": MESSAGE_1_0} and rest[0].jsonrpc_id is None


def test_stream_fires_method_and_synthetic_events() -> None:
    updates = [{"task": {**TASK_1_0, "status": {"state": "TASK_STATE_SUBMITTED"}}},
               {"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}},
               {"artifactUpdate": {"taskId": "t1", "contextId": "c1", "artifact": {"parts": [{"text": "a"}]}}}]
    events = Harness().exchange("POST", f"{BASE}/message:stream", {"message": MESSAGE_1_0}, request_headers=V1,
                                response=[json.dumps(update) for update in updates], chunk=7)
    assert [e.event_type for e in events] == ["message/stream", "message/stream", "message/stream", "task/status",
                                              "message/stream", "task/artifact"]
    assert events[3].content["status"]["state"] == "working" and events[3].content["final"] is False
    assert all(e.session_keys == {"a2a_context": "c1", "a2a_task": "t1"} for e in events[1:])


@pytest.mark.parametrize(("method", "path", "body", "event", "params"), [
    ("GET", "/tasks/t1?historyLength=2", None, "tasks/get", {"id": "t1", "historyLength": 2}),
    ("GET", "/tasks?pageSize=5&includeArtifacts=true&contextId=c1", None, "tasks/list",
     {"pageSize": 5, "includeArtifacts": True, "contextId": "c1"}),
    ("POST", "/tasks/t1:cancel", {"id": "t1"}, "tasks/cancel", {"id": "t1"}),
    ("POST", "/tasks/t1:subscribe", None, "tasks/resubscribe", {"id": "t1"}),
    ("GET", "/tasks/t1:subscribe", None, "tasks/resubscribe", {"id": "t1"}),
    ("POST", "/tasks/t1/pushNotificationConfigs", {"url": "https://hook.example/x", "token": "tok"},
     "tasks/pushNotificationConfig/set", {"url": "https://hook.example/x", "token": "tok", "taskId": "t1"}),
    ("GET", "/tasks/t1/pushNotificationConfigs", None, "tasks/pushNotificationConfig/list", {"taskId": "t1"}),
    ("GET", "/tasks/t1/pushNotificationConfigs/p1", None, "tasks/pushNotificationConfig/get",
     {"taskId": "t1", "id": "p1"}),
    ("DELETE", "/tasks/t1/pushNotificationConfigs/p1", None, "tasks/pushNotificationConfig/delete",
     {"taskId": "t1", "id": "p1"}),
    ("GET", "/extendedAgentCard", None, "agent/getAuthenticatedExtendedCard", {}),
    ("GET", "/acme/message:send", None, None, None),  # a GET is no send
    ("POST", "/acme/tasks/t1:cancel", {}, "tasks/cancel", {"id": "t1"}),  # under a tenant
])
def test_every_route_is_its_jsonrpc_method(method: str, path: str, body: Any, event: str | None,
                                           params: Any) -> None:
    events = Harness().exchange(method, BASE + path, body, request_headers=V1, response={"id": "t1"})
    if event is None:
        assert events == []
        return
    assert [(e.event_type, e.direction) for e in events] == [(event, "request"), (event, "response")]
    assert events[0].content == params


def test_tasks_get_and_cancel_results_are_tasks_in_the_v03_shape() -> None:
    events = Harness().exchange("POST", f"{BASE}/tasks/t1:cancel", {"id": "t1"}, request_headers=V1,
                                response=TASK_1_0)
    assert one(events, "response").content == {"kind": "task", "id": "t1", "contextId": "c1",
                                               "status": {"state": "canceled"}}
    assert one(events, "response").session_keys == {"a2a_context": "c1", "a2a_task": "t1"}


def test_generic_routes_need_evidence_distinctive_ones_do_not() -> None:
    h = Harness()
    assert h.exchange("GET", "http://api.local/tasks/t1", request_headers={}, response=TASK_1_0) == []
    assert h.exchange("GET", "http://api.local/v1/card", request_headers={}, response={"name": "x"}) == []
    assert kinds(h.exchange("GET", "http://api.local/tasks/t1", request_headers={"a2a-version": "1.0"},
                            response=TASK_1_0))[0] == ("a2a", "tasks/get", "request", "client")
    # an interface seen speaking A2A makes its generic routes A2A too
    h.exchange("POST", "http://other.local/a2a/message:send", {"message": MESSAGE_1_0}, response={})
    assert [e.event_type for e in h.exchange("GET", "http://other.local/a2a/tasks/t1", request_headers={},
                                             response=TASK_1_0)] == ["tasks/get", "tasks/get"]


def test_overrides_pin_rest_routes() -> None:
    pinned = Harness(overrides=parse_overrides("api.local=a2a, mcp.local=mcp, skip.local=ignore"))
    assert [e.event_type for e in pinned.exchange("GET", "http://api.local/tasks/t1", request_headers={},
                                                  response=TASK_1_0)] == ["tasks/get", "tasks/get"]
    for host in ("mcp.local", "skip.local"):
        assert pinned.exchange("POST", f"http://{host}/message:send", {"message": MESSAGE_1_0}, response={}) == []


def test_errors_status_and_sse_error_event() -> None:
    status = {"error": {"code": 404, "status": "NOT_FOUND", "message": "Task not found"}}
    h = Harness()
    failed = h.exchange("GET", f"{BASE}/tasks/nope", request_headers=V1, status=404, response=status)
    answer = one(failed, "response")
    assert (answer.event_type, answer.is_error, answer.content) == ("tasks/get", True, status["error"])
    assert h.diagnostics == []
    jsonrpc_error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found"}}
    over_rpc = h.exchange("POST", f"{BASE}/", rpc(1, "GetTask", {"id": "nope"}), response=jsonrpc_error)
    assert one(over_rpc, "response").content == jsonrpc_error["error"]  # not made a Task
    fid = "stream"
    d = h.decoder
    d.request_headers(fid, "POST", f"{BASE}/message:stream", V1, "127.0.0.1:5000", 1.0)
    d.request_data(fid, json.dumps({"message": MESSAGE_1_0}).encode(), 1.0)
    d.request_end(fid, 1.0)
    d.response_headers(fid, 200, {"content-type": "text/event-stream"}, 2.0)
    streamed = d.response_data(fid, f"event: error\ndata: {json.dumps(status)}\n\n".encode(), 2.0)
    assert [(e.event_type, e.is_error, e.content) for e in streamed] == [("message/stream", True, status["error"])]


# --- A2A 0.3 (routes under /v1, protobuf JSON of the 0.3 .proto) -------------------------------------------------

SEND_0_3 = {  # a2a-sdk 1.3 compat/v0_3/rest_transport.py: MessageToDict(..., preserving_proto_field_name=True)
    "request": {"message_id": "m1", "context_id": "c1", "role": "ROLE_USER",
                "content": [{"text": "hi"},
                            {"file": {"file_with_uri": "https://x/f.pdf", "mime_type": "application/pdf",
                                      "name": "f.pdf"}},
                            {"data": {"data": {"k": 1}}}]},
    "configuration": {"accepted_output_modes": ["text/plain"], "blocking": True},
}
TASK_0_3 = {  # compat/v0_3/rest_handler.py: MessageToDict (camelCase)
    "task": {"id": "t1", "contextId": "c1",
             "status": {"state": "TASK_STATE_CANCELLED",
                        "update": {"messageId": "m2", "role": "ROLE_AGENT", "content": [{"text": "stopped"}]}},
             "artifacts": [{"artifactId": "a1", "parts": [{"data": {"data": {"k": 2}}}]}],
             "history": [{"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "hi"}]}]},
}


def test_v03_protobuf_json_in_the_binding_shape() -> None:
    events = Harness().exchange("POST", f"{BASE}/v1/message:send", SEND_0_3, request_headers=A2A_JSON,
                                response=TASK_0_3)
    sent = one(events, "request").content
    assert sent["message"] == {"kind": "message", "messageId": "m1", "contextId": "c1", "role": "user", "parts": [
        {"kind": "text", "text": "hi"},
        {"kind": "file", "file": {"uri": "https://x/f.pdf", "mimeType": "application/pdf", "name": "f.pdf"}},
        {"kind": "data", "data": {"k": 1}}]}
    assert sent["configuration"] == {"acceptedOutputModes": ["text/plain"], "blocking": True}
    task = one(events, "response").content
    assert task["kind"] == "task" and task["status"]["state"] == "canceled"
    assert task["status"]["message"]["parts"] == [{"kind": "text", "text": "stopped"}]
    assert task["artifacts"][0]["parts"] == [{"kind": "data", "data": {"k": 2}}]
    assert task["history"][0]["role"] == "user"
    assert one(events, "response").session_keys == {"a2a_context": "c1", "a2a_task": "t1"}


def test_v03_extended_card_and_bare_task() -> None:
    h = Harness()
    h.exchange("POST", f"{BASE}/v1/message:send", SEND_0_3, response={})  # the 0.3 interface speaks A2A
    card = h.exchange("GET", f"{BASE}/v1/card", request_headers={}, response={"name": "agent"})
    assert [e.event_type for e in card] == ["agent/getAuthenticatedExtendedCard"] * 2
    got = h.exchange("GET", f"{BASE}/v1/tasks/t1", request_headers={}, response=TASK_0_3["task"])
    assert one(got, "response").content["status"]["message"]["role"] == "agent"


# --- fuzzing: the new parser is fed by traffic ------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["message", "request", "content", "parts", "status", "update", "state", "file", "data",
                         "task", "statusUpdate", "artifactUpdate", "artifact", "artifacts", "history", "id",
                         "message_id", "text", "file_with_uri", "kind"]) | st.text(max_size=6), children, max_size=5),
    max_leaves=20)
paths = st.lists(st.sampled_from(["", "v1", "tasks", "t1", "t1:cancel", "t:subscribe", "message:send", "card",
                                  "message:stream", "pushNotificationConfigs", "extendedAgentCard", ":", "%2F"]),
                 max_size=6).map(lambda parts: "/" + "/".join(parts))


@settings(max_examples=300, deadline=None)
@given(method=st.sampled_from(["GET", "POST", "DELETE", "PUT"]), path=paths, body=json_values,
       query=st.lists(st.tuples(st.sampled_from(["historyLength", "pageSize", "includeArtifacts", "x"]),
                                st.text(max_size=4)), max_size=3))
def test_routes_and_bodies_never_raise(method: str, path: str, body: Any, query: list[tuple[str, str]]) -> None:
    route = a2a_rest.match(method, path)
    if route is not None:
        a2a_rest.request_params(route, body, query)
        a2a_rest.result(route, body)


@settings(max_examples=150, deadline=None)
@given(path=paths, body=json_values, response=json_values, status=st.sampled_from([200, 404, 500]),
       sse=st.booleans())
@example(path="/message:send", body=None, response={"kind": []}, status=200, sse=True)  # an unhashable `kind`
@example(path="/", body=None, response={"method": None}, status=200, sse=False)  # JSON-RPC-shaped, invalid
def test_decoder_never_raises_on_rest_traffic(path: str, body: Any, response: Any, status: int, sse: bool) -> None:
    h = Harness()
    events = h.exchange("POST", f"{BASE}/v1{path}", body, request_headers=V1, status=status,
                        response=[json.dumps(response)] if sse else response)
    events += h.exchange("GET", f"{BASE}{path}", request_headers=V1, status=status, response=response)
    assert all(e.protocol == "a2a" for e in events)
    # Bad input is reported as a diagnostic, never raised: a body that is not JSON, or JSON-RPC-shaped but
    # invalid (a body with a `method` on the agent's root path is taken for JSON-RPC).
    assert {d.code for d in h.diagnostics} <= {"invalid_json", "invalid_jsonrpc"}
    assert json.dumps([e.content for e in events], default=str)  # contents stay JSON values
