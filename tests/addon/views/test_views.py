"""The MCP, A2A and AG-UI content views (`addon.views`) over the recorded wire fixtures and made-up flows: what
they render (headers with method, id, direction, what a response answers; SSE events; AG-UI reassembly; Agent
Card skills; matched indicators), which view mitmproxy picks, bounds, and safety on any body."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mitmproxy import contentviews, http, io
from mitmproxy.contentviews import Metadata
from mitmproxy.test import taddons, tflow

from addon import views
from addon.flow_marks import record_match, record_outcome
from addon.oatf_addon import OatfAddon
from addon.views import MAX_EVENTS, MAX_INPUT, PRIORITY, VIEWS, ContentViews
from oatf_engine.monitor import IndicatorMatched
from oatf_engine.reports import Reported
from testing.paths import WIRE_FIXTURES
from tests.oatf_engine.test_reports import report

FIXTURES = WIRE_FIXTURES
NAMES = {view.name for view in VIEWS}


@pytest.fixture(autouse=True, scope="module")
def registered() -> Iterator[None]:
    """The views registered with mitmproxy's registry, as the addon does, for the module's tests."""
    addon = ContentViews()
    addon.load(None)
    yield
    addon.done()


def fixture(name: str) -> list[http.HTTPFlow]:
    with open(FIXTURES / name, "rb") as handle:
        return [flow for flow in io.FlowReader(handle).stream() if isinstance(flow, http.HTTPFlow)]


def show(flow: http.HTTPFlow, message: http.Message | None = None) -> tuple[str, str]:
    """(name of the view mitmproxy picks automatically, its text) for `message` (the response by default)."""
    message = message if message is not None else flow.response
    assert message is not None
    data = message.get_content(strict=False) or b""
    metadata = Metadata(flow=flow, http_message=message, content_type=message.headers.get("content-type"))
    view = contentviews.registry.get_view(data, metadata)
    return view.name, view.prettify(data, metadata)


def find(flows: list[http.HTTPFlow], predicate: Callable[[http.HTTPFlow], bool]) -> http.HTTPFlow:
    return next(flow for flow in flows if predicate(flow))


def made(request_body: Any, response_body: Any = None, *, path: str = "/mcp", method: str = "POST",
         response_type: str = "application/json", request_headers: dict[str, str] | None = None) -> http.HTTPFlow:
    """A flow with these bodies (JSON values are encoded; bytes and str are sent as they are)."""
    def encode(body: Any) -> bytes:
        if isinstance(body, bytes):
            return body
        return body.encode() if isinstance(body, str) else json.dumps(body).encode()

    flow = tflow.tflow(resp=True)
    flow.request.method, flow.request.path = method, path
    flow.request.headers["content-type"] = "application/json"
    for name, value in (request_headers or {}).items():
        flow.request.headers[name] = value
    flow.request.content = encode(request_body)
    assert flow.response is not None
    flow.response.headers["content-type"] = response_type
    flow.response.content = encode(response_body) if response_body is not None else b""
    return flow


def sse(*events: Any, event: str | None = None) -> str:
    prefix = f"event: {event}\n" if event else ""
    return "".join(f"{prefix}data: {json.dumps(value)}\n\n" for value in events)


# --- MCP ---------------------------------------------------------------------------------------------------------

def test_mcp_request_and_streamed_answer() -> None:
    flow = find(fixture("mcp_http.mitm"), lambda f: b'"name":"add"' in f.request.content)
    name, text = show(flow, flow.request)
    assert name == "MCP"
    assert "# MCP request (client → server) · POST /mcp" in text
    assert "# request tools/call · id 2 (client → server)" in text
    assert '"name": "add",' in text  # pretty-printed
    name, text = show(flow)
    assert name == "MCP"
    assert "# SSE stream: 1 event(s)" in text
    assert "# ── SSE event 1 · event: message · id: - ──" in text
    assert "# result · id 2 (server → client) · answers tools/call" in text


def test_mcp_server_request_in_a_stream_and_the_clients_answer() -> None:
    flows = fixture("mcp_http.mitm")
    asked = find(flows, lambda f: b'"ask"' in f.request.content)
    _, text = show(asked)
    assert "# SSE stream: 3 event(s)" in text
    assert "# notification notifications/message (server → client)" in text
    assert "# request sampling/createMessage · id 0 (server → client)" in text
    assert "# result · id 3 (server → client) · answers tools/call" in text
    answer = find(flows, lambda f: b'"forty-two"' in f.request.content)
    name, text = show(answer, answer.request)
    assert name == "MCP"  # a response alone in its flow: the decoder's uncorrelated answer is MCP
    assert "# result · id 0 (client → server) · answers a request not in this flow" in text


def test_legacy_mcp_stream() -> None:
    stream = find(fixture("mcp_sse.mitm"), lambda f: f.request.path == "/sse")
    name, text = show(stream)
    assert name == "MCP"
    assert "# ── SSE event 1 · event: endpoint · id: - ──" in text
    assert "/messages/?session_id=3a88add63aae4a56a356a10eaf2005a7" in text


def test_batch_item_by_item() -> None:
    flow = made([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "add"}},
                 {"not": "json-rpc"}],
                [{"jsonrpc": "2.0", "id": "b", "result": {}}, {"jsonrpc": "2.0", "id": 1, "error": {"code": -1}},
                 {"jsonrpc": "2.0", "id": 9, "result": {}}])
    name, text = show(flow, flow.request)
    assert name == "MCP"
    assert "# JSON-RPC batch of 4 message(s)" in text
    assert "# [1/4] request tools/list · id 1 (client → server)" in text
    assert "# [2/4] notification notifications/initialized (client → server)" in text
    assert '# [3/4] request tools/call · id "b" (client → server)' in text
    assert "# [4/4] not JSON-RPC: neither a request, a notification nor a response (client → server)" in text
    _, text = show(flow)
    assert '# [1/3] result · id "b" (server → client) · answers tools/call' in text
    assert "# [2/3] error · id 1 (server → client) · answers tools/list" in text
    assert "# [3/3] result · id 9 (server → client) · answers a request not in this flow" in text


# --- AG-UI -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["identity", "gzip", "deflate", "br", "zstd"])
def test_ag_ui_stream_events_and_reassembled_tool_call(encoding: str) -> None:
    flow = find(fixture("ag_ui.mitm"), lambda f: f.request.path == f"/agent?encoding={encoding}")
    name, text = show(flow, flow.request)
    assert name == "AG-UI"
    assert "# AG-UI RunAgentInput · thread thread-1 · run " in text
    assert "#   - user u1: Send 100 to Bob" in text
    name, text = show(flow)
    assert name == "AG-UI"
    assert "# SSE stream: 9 event(s)" in text
    assert "# text message m1: Hello world" in text
    assert '# tool call transfer_funds (call-1) arguments, reassembled from 1 delta(s):\n{\n  "amount": 100\n}' in text
    assert "# AG-UI TOOL_CALL_ARGS · tool call call-1 (server → client)" in text
    assert "# AG-UI RUN_FINISHED (server → client)" in text


def test_ag_ui_interleaved_tool_calls_reassembled_per_call() -> None:
    run = {"threadId": "t", "runId": "r", "messages": []}
    events = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
              {"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "send_email"},
              {"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "read_file"},
              {"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": '{"to": "ev'},
              {"type": "TOOL_CALL_ARGS", "toolCallId": "b", "delta": '{"path": "~/.ssh/'},
              {"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": 'e@x.test"}'},
              {"type": "TOOL_CALL_ARGS", "toolCallId": "b", "delta": 'id_rsa"'},
              {"type": "TOOL_CALL_END", "toolCallId": "a"}]
    flow = made(run, sse(*events), path="/agent", response_type="text/event-stream")
    name, text = show(flow)
    assert name == "AG-UI"
    assert '# tool call send_email (a) arguments, reassembled from 2 delta(s):\n{\n  "to": "eve@x.test"\n}' in text
    # arguments that are not (yet) complete JSON are shown as the text received
    assert '# tool call read_file (b) arguments, reassembled from 2 delta(s):\n{"path": "~/.ssh/id_rsa"' in text


# --- A2A ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a2a_v1.mitm", "a2a_v03.mitm", "a2a_rest_v1.mitm"])
def test_agent_card_skills(name: str) -> None:
    card = find(fixture(name), lambda f: f.request.path.startswith("/.well-known/"))
    view, text = show(card)
    assert view == "A2A"
    assert "# A2A response (server → client) · GET /.well-known/agent-card.json" in text
    assert "# A2A Agent Card: wire-test-" in text
    assert "# skills (1):\n#   - echo: echo — Echoes what it is told [tags: test]" in text
    assert '"skills": [' in text


def test_a2a_jsonrpc_answers_its_request() -> None:
    flow = find(fixture("a2a_v1.mitm"), lambda f: b'"GetTask"' in f.request.content)
    request_id = json.loads(flow.request.content)["id"]
    assert show(flow, flow.request) == ("A2A", show(flow, flow.request)[1])
    assert f'# request GetTask · id "{request_id}" (client → server)' in show(flow, flow.request)[1]
    assert f'# result · id "{request_id}" (server → client) · answers GetTask' in show(flow)[1]


def test_a2a_stream_events() -> None:
    flow = find(fixture("a2a_v03.mitm"), lambda f: b'"message/stream"' in f.request.content
                and b"task hello" in f.request.content)
    name, text = show(flow)
    assert name == "A2A"
    count = text.count("# ── SSE event ")
    assert count > 1 and f"# SSE stream: {count} event(s)" in text
    assert text.count("answers message/stream") == count


def test_a2a_rest_call_names_its_method() -> None:
    flow = find(fixture("a2a_rest_v03.mitm"), lambda f: f.request.path == "/v1/message:send")
    name, text = show(flow, flow.request)
    assert name == "A2A" and "# A2A REST call ≙ JSON-RPC message/send" in text
    assert "# answer to A2A REST call ≙ JSON-RPC message/send" in show(flow)[1]


# --- matches, priority, bounds, safety ------------------------------------------------------------------------------

class _Loop:
    """An event loop stand-in that runs what the addon schedules at once."""

    @staticmethod
    def call_soon_threadsafe(callback: Callable[[], None]) -> None:
        callback()


def test_matched_indicator_shown_first() -> None:
    flow = find(fixture("mcp_http.mitm"), lambda f: b'"ask"' in f.request.content)
    addon = OatfAddon()
    addon.loop = _Loop()
    addon.flows[flow.id] = flow
    with taddons.context():
        addon._update_flow(flow.id, record_match, IndicatorMatched(
            "run-1", "OATF-900", "OATF-900-01", flow.id, "content[0].text: model said: forty-two\x1b[31m"))
        addon._to_loop()
    assert flow.metadata["oatf"] == [{"run": "run-1", "attack": "OATF-900", "indicator": "OATF-900-01",
                                      "evidence": "content[0].text: model said: forty-two\\x1b[31m",
                                      "path": None, "excerpt": None}]
    for message in (flow.request, flow.response):
        text = show(flow, message)[1]
        assert text.startswith("# OATF MATCH · attack OATF-900 · indicator OATF-900-01 · content[0].text: model "
                               "said: forty-two\\x1b[31m\n")


def test_the_header_shows_each_runs_verdict_next_to_the_matches_and_an_open_run_as_open() -> None:
    """Two runs matched on the flow: while both are live the header says each is still open; once one has
    concluded it shows that run's attack, outcome, status and whether its payload was delivered in this flow."""
    flow = find(fixture("mcp_http.mitm"), lambda f: b'"ask"' in f.request.content)
    addon = OatfAddon()
    addon.loop = _Loop()
    addon.flows[flow.id] = flow
    with taddons.context():
        for run in ("OATF-900@a", "OATF-901@b"):
            addon._update_flow(flow.id, record_match, IndicatorMatched(
                run, run.partition("@")[0], f"{run.partition('@')[0]}-01", flow.id, "content[0].text: forty-two"))
        addon._to_loop()
        live = show(flow, flow.response)[1].split("\n")
        run = report("exploited", session="b", attack_id="OATF-901")
        run["execution_summary"]["started_at"] = 1.0
        concluded = Reported.of("OATF-901@b", run, None)
        addon._update_flow(flow.id, record_outcome, dataclasses.replace(concluded, deliveries=(flow.id,)))
        addon._to_loop()
    assert live[:5] == [
        "# OATF MATCH · attack OATF-900 · indicator OATF-900-01 · content[0].text: forty-two",
        "# OATF MATCH · attack OATF-901 · indicator OATF-901-01 · content[0].text: forty-two",
        "# OATF RUN · attack OATF-900 · still open: no verdict until it concludes · run OATF-900@a",
        "# OATF RUN · attack OATF-901 · still open: no verdict until it concludes · run OATF-901@b",
        "# "]
    for message in (flow.request, flow.response):
        assert show(flow, message)[1].split("\n")[2:4] == [
            "# OATF RUN · attack OATF-900 · still open: no verdict until it concludes · run OATF-900@a",
            "# OATF RUN · attack OATF-901 · exploited (completed) · payload delivered in this flow · run OATF-901@b"]


def test_views_registered_by_the_addon_and_removed_on_done() -> None:
    addon = OatfAddon()
    [sub] = [a for a in addon.addons if isinstance(a, ContentViews)]
    sub.done()
    assert not NAMES & {view.name for view in contentviews.registry.values()}
    with taddons.context(addon):
        assert {view.name for view in contentviews.registry.values()} >= NAMES


@pytest.mark.parametrize("flow", [
    made({"hello": "world"}, {"ok": True}, path="/api"),
    made("<html>hi</html>", "<html>there</html>", path="/", response_type="text/html"),
    made(b"", sse({"not": "agent"}), method="GET", path="/events", response_type="text/event-stream"),
    made({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, b"", path="/mcp"),  # an empty answer
], ids=["json-api", "html", "plain-sse", "empty-body"])
def test_priority_zero_for_other_traffic(flow: http.HTTPFlow) -> None:
    assert flow.response is not None
    message = flow.response
    data = message.get_content(strict=False) or b""
    metadata = Metadata(flow=flow, http_message=message, content_type=message.headers.get("content-type"))
    assert [view.render_priority(data, metadata) for view in VIEWS] == [0, 0, 0]
    assert show(flow)[0] not in NAMES
    if flow.request.path == "/mcp":
        assert show(flow, flow.request)[0] == "MCP"  # its request is MCP
        assert views.VIEWS[0].render_priority(flow.request.content, Metadata(flow, http_message=flow.request)) \
            == PRIORITY


def test_huge_stream_is_rendered_bounded() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1, "message": "x" * 200}}
    body = sse(note) * (3 * MAX_INPUT // len(sse(note)))
    flow = made({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow"}}, body,
                response_type="text/event-stream")
    started = time.monotonic()
    name, text = show(flow)
    assert time.monotonic() - started < 5
    assert name == "MCP"
    assert text.count("# ── SSE event ") == MAX_EVENTS
    last = text.splitlines()[-1]
    assert last.startswith(f"# … {MAX_INPUT // len(sse(note)) - MAX_EVENTS} more event(s) not rendered and ")
    assert f"{len(body) - MAX_INPUT:,} byte(s) of the body not read" in last
    assert len(text) < views.MAX_TEXT + 1000


def test_one_huge_message_is_cut() -> None:
    flow = made({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"items": [f"item {n}" for n in range(40_000)]}}, None)
    text = show(flow, flow.request)[1]
    assert len(text) < views.MAX_TEXT + 1000
    assert text.endswith(f"# … rendering stopped at {views.MAX_TEXT:,} characters (view limit); the raw view "
                         "shows all")


HOSTILE = "\x1b[2J\x1b]0;owned\x07\r\nforged line\u2028\u202e\x85\x00\ud800"


def _printable(text: str) -> bool:
    return all(line.isprintable() for line in text.split("\n"))


def test_traffic_text_is_escaped() -> None:
    events = [{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": HOSTILE}]}}]
    body = sse(*events, event=f"message{HOSTILE}") + f"id: {HOSTILE}\ndata: {HOSTILE}\n\n"
    flow = made({"jsonrpc": "2.0", "id": 1, "method": f"tools/call{HOSTILE}", "params": {"name": HOSTILE}},
                body.encode("utf-8", "surrogatepass"), response_type="text/event-stream")
    for message in (flow.request, flow.response):
        name, text = show(flow, message)
        assert name == "MCP"
        assert _printable(text), text
        assert "\\x1b[2J" in text and "\\u2028" in text and "\\u202e" in text


def _flows(body: bytes) -> list[tuple[http.HTTPFlow, http.Message]]:
    """`body` as each side of flows the views recognise (or nearly)."""
    mcp_request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    run = {"threadId": "t", "runId": "r"}
    flows = [made(mcp_request, body, response_type=kind) for kind in ("text/event-stream", "application/json")]
    flows += [made(run, body, path="/agent", response_type="text/event-stream"),
              made(b"", body, method="GET", path="/.well-known/agent-card.json")]
    pairs: list[tuple[http.HTTPFlow, http.Message]] = [(flow, flow.response) for flow in flows]  # type: ignore[misc]
    request = made(body, sse(mcp_request), request_headers={"mcp-session-id": "s"},
                   response_type="text/event-stream")
    return [*pairs, (request, request.request)]


def _render_everything(body: bytes) -> None:
    for flow, message in _flows(body):
        data = message.get_content(strict=False) or b""
        metadata = Metadata(flow=flow, http_message=message, content_type=message.headers.get("content-type"))
        for view in VIEWS:
            assert view.render_priority(data, metadata) in (0, PRIORITY)
            assert _printable(view.prettify(data, metadata))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_fuzz_any_bytes_never_raise(body: bytes) -> None:
    _render_everything(body)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4), max_leaves=20)
_KEYS = st.sampled_from(["jsonrpc", "id", "method", "result", "error", "params", "type", "toolCallId", "delta",
                         "messageId", "name", "skills", "tags", "threadId", "runId", "messages", "content"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(_KEYS, _JSON, max_size=6) | _JSON, min_size=1, max_size=4), st.booleans())
def test_fuzz_agent_shaped_json_never_raises(values: list[Any], as_sse: bool) -> None:
    body = sse(*values) if as_sse else json.dumps(values if len(values) > 1 else values[0])
    _render_everything(body.encode())
