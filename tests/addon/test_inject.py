"""Inject mode (`addon.inject`) driven through `OatfAddon`'s hooks with test flows: off, not one byte altered;
on, the document's current phase overlaid on real MCP answers (JSON and SSE in any chunking), its tools
answered without the server, phase-entry notifications ahead of the next streamed answer, and what the tap
decodes (what the engine judges) is what the agent receives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mitmproxy import exceptions, http
from mitmproxy.test import taddons, tflow

from addon.inject import METADATA_KEY
from addon.oatf_addon import OatfAddon
from addon.recordings import decode_flow
from addon.sse_frames import EventFramer
from oatf_engine.events import ObservedEvent
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.sse import SSEParser
from oatf_engine.wire.steps import WireStep, feed
from testing.paths import ROOT

INVOICE = ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml"
RUG_PULL = ROOT / "attacks" / "OW-006_fx-converter-rug-pull.yaml"
CLIENT_ONLY = ROOT / "attacks" / "OW-021_support-agent-config-disclosure.yaml"
SESSION = {"mcp-session-id": "s-1"}
HONEST_TOOLS = {"tools": [{"name": "add", "description": "Adds two numbers.", "inputSchema": {"type": "object"}}]}


def rpc(method: str, params: dict[str, Any] | None = None, id_: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if id_ is not None:
        message["id"] = id_
    return message


def answer(result: dict[str, Any], id_: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}).encode()


class Driven:
    """`OatfAddon` (inject mode configured only: no monitor process) and the events its tap emits."""

    def __init__(self, addon: OatfAddon) -> None:
        self.addon = addon
        self.events: list[ObservedEvent] = []
        self.decoder = WireDecoder()  # the monitor process's, for the flows handed over undecoded (inject mode off)
        addon._enqueue = self._enqueue  # type: ignore[method-assign]

    def _enqueue(self, item: ObservedEvent | WireStep) -> None:
        if isinstance(item, WireStep):
            self.events += [event for event in feed(self.decoder, item) if isinstance(event, ObservedEvent)]
        else:
            self.events.append(item)

    def request(self, message: dict[str, Any], accept: str = "application/json, text/event-stream") -> http.HTTPFlow:
        request = http.Request.make("POST", "http://127.0.0.1:9000/mcp", json.dumps(message).encode(),
                                    {"content-type": "application/json", "accept": accept, **SESSION})
        flow = tflow.tflow(req=request)
        flow.response = None
        self.addon.requestheaders(flow)
        self.addon.request(flow)
        return flow

    def respond(self, flow: http.HTTPFlow, body: bytes, content_type: str = "application/json",
                chunks: list[bytes] | None = None) -> bytes:
        """The server's answer through the hooks; the bytes the agent receives."""
        if flow.response is not None:  # answered in the request hook: mitmproxy emulates responseheaders
            self.addon.responseheaders(flow)
            self.addon.response(flow)
            return flow.response.raw_content or b""
        flow.response = http.Response.make(200, b"", {"content-type": content_type, **SESSION})
        flow.response.raw_content = None  # as at `responseheaders`: the body has not come yet
        self.addon.responseheaders(flow)
        if callable(flow.response.stream):
            received = b""
            for chunk in chunks if chunks is not None else [body]:
                out = flow.response.stream(chunk)
                received += out if isinstance(out, bytes) else b"".join(out)
            end = flow.response.stream(b"")
            received += end if isinstance(end, bytes) else b"".join(end)
            self.addon.response(flow)
            return received
        flow.response.raw_content = body
        self.addon.response(flow)
        return flow.response.raw_content or b""

    def exchange(self, message: dict[str, Any], body: bytes, content_type: str = "application/json",
                 chunks: list[bytes] | None = None) -> tuple[http.HTTPFlow, bytes]:
        flow = self.request(message)
        return flow, self.respond(flow, body, content_type, chunks)


@pytest.fixture
def off() -> Driven:
    return Driven(OatfAddon())


@pytest.fixture
def injecting() -> Iterator[Driven]:
    addon = OatfAddon()
    with taddons.context(addon.inject) as tctx:
        tctx.configure(addon.inject, oatf_inject=str(INVOICE))
        yield Driven(addon)


def sse(*messages: dict[str, Any]) -> bytes:
    return b"".join(b"event: message\r\ndata: " + json.dumps(m).encode() + b"\r\n\r\n" for m in messages)


def messages_of(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(event.data) for event in SSEParser().feed(body)]


def tool_names(result_message: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in result_message["result"]["tools"]]


def every_split(body: bytes) -> Iterator[list[bytes]]:
    for at in range(1, len(body)):
        yield [body[:at], body[at:]]


# --- off ---------------------------------------------------------------------------------------------------
def test_off_not_one_byte_altered(off: Driven) -> None:
    """Without `oatf_inject` every body reaches the agent as the server sent it (each streamed chunk the very
    same object), nothing is answered by the proxy and no event says otherwise."""
    listing = answer(HONEST_TOOLS)
    flow, received = off.exchange(rpc("tools/list"), listing)
    assert received == listing and METADATA_KEY not in flow.metadata
    streamed = sse(rpc("notifications/message", {"level": "info", "data": "x"}, None),
                   json.loads(listing)) + b": ping\n"
    flow = off.request(rpc("tools/list", id_=2))
    assert flow.response is None
    flow.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    flow.response.raw_content = None
    off.addon.responseheaders(flow)
    assert callable(flow.response.stream)
    chunks = [streamed[:7], streamed[7:40], streamed[40:], b""]
    assert all(flow.response.stream(chunk) is chunk for chunk in chunks)
    off.addon.response(flow)
    call = off.request(rpc("tools/call", {"name": "render_invoice", "arguments": {}}, 3))
    assert call.response is None  # forwarded
    assert off.events and all(not e.injected for e in off.events)


# --- on: listings --------------------------------------------------------------------------------------------
def test_json_listing_overlaid_and_judged_as_received(injecting: Driven) -> None:
    flow, received = injecting.exchange(rpc("tools/list"), answer(HONEST_TOOLS))
    message = json.loads(received)
    assert tool_names(message) == ["add", "render_invoice"]
    assert "~/.aws/credentials" in message["result"]["tools"][1]["description"]
    assert "responses" not in message["result"]["tools"][1]  # OATF extensions are not listed
    assert flow.metadata[METADATA_KEY] == {"method": "tools/list", "injected": [
        "OW-001 actor default phase phase-1: added tools entry 'render_invoice' in tools/list"]}
    decoded = [e for e in injecting.events if e.direction == "response"]
    assert len(decoded) == 1 and [t["name"] for t in decoded[0].content["tools"]] == ["add", "render_invoice"]
    assert decoded[0].injected == tuple(flow.metadata[METADATA_KEY]["injected"])
    replayed = decode_flow(WireDecoder(), flow)  # a recording of the flow replays the same event
    assert [(e.event_type, e.content, e.injected) for e in replayed] == [
        (e.event_type, e.content, e.injected) for e in injecting.events]


def test_a_tool_of_the_same_name_is_replaced(injecting: Driven) -> None:
    real = {"tools": [{"name": "render_invoice", "description": "honest"}, HONEST_TOOLS["tools"][0]]}
    flow, received = injecting.exchange(rpc("tools/list"), answer(real))
    tools = json.loads(received)["result"]["tools"]
    assert [t["name"] for t in tools] == ["render_invoice", "add"] and tools[0]["description"] != "honest"
    assert "replaced tools entry 'render_invoice'" in flow.metadata[METADATA_KEY]["injected"][0]


def test_sse_listing_rewritten_in_any_chunking_with_framing_kept(injecting: Driven) -> None:
    """The answer inside `data:` is rewritten whatever the chunk boundaries (even inside a CRLF); other events
    pass byte for byte; the output is well-formed SSE; the tap decodes the rewritten answer."""
    before = sse(rpc("notifications/message", {"level": "info", "data": "hello"}, None))
    body = before + sse(json.loads(answer(HONEST_TOOLS, 5))) + b": trailing comment\r\n"
    for chunks in [[body], *every_split(body), [bytes([b]) for b in body]]:
        injecting.events.clear()
        flow = injecting.request(rpc("tools/list", id_=5))
        received = injecting.respond(flow, b"", "text/event-stream", chunks)
        assert received.startswith(before), chunks
        events = messages_of(received)
        assert len(events) == 2 and events[0]["method"] == "notifications/message"
        assert tool_names(events[1]) == ["add", "render_invoice"]
        assert received.endswith(b"\r\n\r\n: trailing comment\r\n")
        decoded = [e for e in injecting.events if e.direction == "response"]
        assert [e.event_type for e in decoded] == ["notifications/message", "tools/list"]
        assert [t["name"] for t in decoded[1].content["tools"]] == ["add", "render_invoice"]
        assert not decoded[0].injected and decoded[1].injected  # the answer carries what was injected


def test_a_listing_the_server_refused_is_answered_and_initialize_declares_it(injecting: Driven) -> None:
    init = {"protocolVersion": "2025-06-18", "capabilities": {"logging": {}}, "serverInfo": {"name": "real"}}
    _, received = injecting.exchange(rpc("initialize", {"protocolVersion": "2025-06-18"}), answer(init))
    assert json.loads(received)["result"]["capabilities"] == {"logging": {}, "tools": {"listChanged": True}}
    assert json.loads(received)["result"]["serverInfo"] == {"name": "real"}  # the real server's identity stays
    refused = json.dumps({"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found"}})
    _, received = injecting.exchange(rpc("tools/list", id_=2), refused.encode())
    assert tool_names(json.loads(received)) == ["render_invoice"] and "error" not in json.loads(received)


def test_a_second_page_and_other_methods_pass_unaltered(injecting: Driven) -> None:
    page = answer(HONEST_TOOLS)
    flow, received = injecting.exchange(rpc("tools/list", {"cursor": "2"}), page)
    assert received == page and METADATA_KEY not in flow.metadata
    other = answer({"resources": []})
    flow, received = injecting.exchange(rpc("resources/list"), other)
    assert received == other  # the document has no resources


# --- on: answers -----------------------------------------------------------------------------------------------
def test_attacker_tool_answered_from_the_document_honest_tool_forwarded(injecting: Driven) -> None:
    call = rpc("tools/call", {"name": "render_invoice", "arguments": {"invoice_number": "INV-7"}}, 9)
    flow, received = injecting.exchange(call, b"")
    assert flow.response is not None and flow.response.headers["content-type"] == "application/json"
    assert json.loads(received) == {"jsonrpc": "2.0", "id": 9, "result": {"content": [
        {"type": "text", "text": "Invoice INV-7 rendered: https://invoice-kit.example/dl/7731.pdf"}]}}
    assert "answered tools/call 'render_invoice' (not forwarded" in flow.metadata[METADATA_KEY]["injected"][0]
    decoded = [e for e in injecting.events if e.event_type == "tools/call"]
    assert [e.direction for e in decoded] == ["request", "response"] and decoded[1].injected
    honest = injecting.request(rpc("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, 10))
    assert honest.response is None  # goes to the real server


def test_rug_pull_phases_advance_and_list_changed_goes_ahead_of_the_next_streamed_answer() -> None:
    addon = OatfAddon()
    with taddons.context(addon.inject) as tctx:
        tctx.configure(addon.inject, oatf_inject=str(RUG_PULL))
        driven = Driven(addon)
        call = {"name": "convert_currency", "arguments": {"amount": 5, "from": "EUR", "to": "SEK"}}
        _, first = driven.exchange(rpc("tools/call", call, 1), b"")
        assert "11.52" in first.decode()
        flow, second = driven.exchange(rpc("tools/call", call, 2), b"")  # the trigger: the swap phase
        assert flow.response is not None and flow.response.headers["content-type"] == "text/event-stream"
        messages = messages_of(second)
        assert [m.get("method") for m in messages] == ["notifications/tools/list_changed", None]
        assert "11.52" in messages[1]["result"]["content"][0]["text"]  # built from the phase it arrived in
        _, listed = driven.exchange(rpc("tools/list", id_=3), answer(HONEST_TOOLS, 3))
        assert "DE44 5001 0517 5407 3249 31" in json.loads(listed)["result"]["tools"][1]["description"]
        other = dict(SESSION)
        SESSION["mcp-session-id"] = "s-2"  # another session starts at the first phase
        try:
            _, listed = driven.exchange(rpc("tools/list", id_=1), answer(HONEST_TOOLS))
        finally:
            SESSION.update(other)
        assert "DE44" not in json.loads(listed)["result"]["tools"][1]["description"]


# --- the option -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, message", [
    ("/nonexistent/doc.yaml", "oatf_inject: /nonexistent/doc.yaml"),
    (str(CLIENT_ONLY), "no mcp_server, a2a_server, ag_ui_client actor"),
])
def test_bad_values_are_option_errors(value: str, message: str) -> None:
    addon = OatfAddon()
    with taddons.context(addon.inject) as tctx:
        tctx.configure(addon.inject, oatf_inject=str(INVOICE))
        with pytest.raises(exceptions.OptionsError, match=message):
            tctx.configure(addon.inject, oatf_inject=value)
        assert addon.inject.actors and addon.inject.on  # the previous documents stay
        tctx.configure(addon.inject, oatf_inject="")
        assert not addon.inject.actors and not addon.inject.on


def test_event_framer_cuts_whole_events_in_any_chunking() -> None:
    body = b"data: a\n\nevent: x\r\ndata: b\r\n\r\n: c\rdata: d\r\r" + b"data: tail"
    whole = [b"data: a\n\n", b"event: x\r\ndata: b\r\n\r\n", b": c\rdata: d\r\r"]
    for chunks in [[body], *every_split(body), [bytes([b]) for b in body]]:
        framer = EventFramer()
        events = [event for chunk in chunks for event in framer.feed(chunk)]
        assert events == whole, chunks
        assert framer.drain() == b"data: tail"


def test_no_exception_escapes(injecting: Driven, caplog: pytest.LogCaptureFixture,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while overlaying lets the answer through as it came, logged once."""

    def broken(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(injecting.addon.inject, "_overlay", broken)
    body = sse(json.loads(answer(HONEST_TOOLS, 4)))
    flow = injecting.request(rpc("tools/list", id_=4))
    assert injecting.respond(flow, b"", "text/event-stream", [body[:10], body[10:]]) == body
    _, received = injecting.exchange(rpc("tools/list", id_=5), answer(HONEST_TOOLS, 5))
    assert received == answer(HONEST_TOOLS, 5)
    failures = [r.message for r in caplog.records if "boom" in r.message]
    assert len(failures) == 2 and failures[0].startswith(f"oatf inject: stream failed on flow {flow.id}")
    assert failures[1].startswith("oatf inject: response failed on flow")


MIXED = """\
oatf: "0.1"
attack:
  id: INJ-MIXED-001
  name: "What inject mode plays and what it does not"
  version: 1
  severity: high
  execution:
    actors:
      - name: desk
        mode: a2a_server
        phases:
          - state: {task_responses: [{content: {kind: message, role: agent, messageId: m, parts: []}}]}
            trigger: {event: message/send}
          - on_enter:
              - send_push_notification: {url: "http://127.0.0.1:1/hook", payload: {task: {id: t, status: {}}}}
      - name: probe
        mode: mcp_client
        phases: [{state: {actions: [{method: tools/list}]}}]
  indicators:
    - id: INJ-MIXED-001-01
      protocol: a2a
      surface: message/send
      target: "message.parts[*].text"
      pattern: {contains: secret}
"""


def test_what_is_not_injected_is_said(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing is skipped silently: an actor of a mode inject mode does not play, and an on_enter action it
    does not send, are named at start."""
    document = tmp_path / "mixed.yaml"
    document.write_text(MIXED, encoding="utf-8")
    addon = OatfAddon()
    with taddons.context(addon.inject) as tctx:
        tctx.configure(addon.inject, oatf_inject=str(document))
    said = [r.getMessage() for r in caplog.records if r.name == "oatf.inject"]
    assert any(line.startswith("oatf inject: not injected: ") and line.endswith(
        "actor probe: mode: mcp_client is not played in inject mode (it plays mcp_server, a2a_server, "
        "ag_ui_client; oatf serve --agent drives it)") for line in said), said
    assert any("injected without: " in line and "actor desk, phase phase-2: on_enter.send_push_notification: "
               "push notifications are not sent in inject mode" in line for line in said), said


def test_resources_and_prompts_overlaid_and_answered() -> None:
    """OW-003's resource and OW-004's prompt, injected together: added to the real server's listings, and
    `resources/read` / `prompts/get` of them answered from the documents (templates resolved), never
    forwarded; a resource of the real server's is still forwarded."""
    addon = OatfAddon()
    with taddons.context(addon.inject) as tctx:
        tctx.configure(addon.inject, oatf_inject=",".join(
            str(ROOT / "attacks" / name) for name in ("OW-003_onboarding-resource-remote-bootstrap.yaml",
                                                      "OW-004_report-prompt-public-sharing.yaml")))
        driven = Driven(addon)
        real_resource = {"uri": "file:///readme.md", "name": "readme.md"}
        _, listed = driven.exchange(rpc("resources/list"), answer({"resources": [real_resource]}))
        _, prompts = driven.exchange(rpc("prompts/list", id_=2), answer({"prompts": []}, 2))
        read = driven.request(rpc("resources/read", {"uri": "docs://handbook/onboarding.md"}, 3))
        got = driven.request(rpc("prompts/get", {"name": "weekly_report", "arguments": {"team": "Atlas"}}, 4))
        honest = driven.request(rpc("resources/read", {"uri": "file:///readme.md"}, 5))
    assert [r["uri"] for r in json.loads(listed)["result"]["resources"]] == ["file:///readme.md",
                                                                           "docs://handbook/onboarding.md"]
    assert [p["name"] for p in json.loads(prompts)["result"]["prompts"]] == ["weekly_report"]
    assert read.response is not None and got.response is not None and honest.response is None
    contents = json.loads(read.response.content or b"")["result"]["contents"]
    assert contents[0]["uri"] == "docs://handbook/onboarding.md" and contents[0]["text"]
    messages = json.loads(got.response.content or b"")["result"]["messages"]
    assert "for team Atlas and file it with share_document" in json.dumps(messages)
    assert "answered prompts/get 'weekly_report' (not forwarded to the server)" in \
        got.metadata[METADATA_KEY]["injected"][0]
