"""mitmproxy content views for agent traffic: `MCP`, `A2A` and `AG-UI`, chosen automatically for recognised flows.

Without them every agent flow reads `POST /mcp` and its body one raw line. Each view renders one HTTP message
(the request or the response of a flow) as text:
- a header with the OATF indicators that matched on the flow (`flow.metadata["oatf"]`, set by the addon when it
  marks the flow) and the runs that took part in it, each with its verdict or still open
  (`flow.metadata["oatf_runs"]`), then a title line (protocol, direction);
- JSON-RPC messages (MCP, A2A) pretty-printed, each under a line with its kind, method, id and direction; a
  response names the request it answers (the request with that id sent the other way in the same flow); a
  batch item by item;
- SSE streams as a list of events (event type, id, data pretty-printed); AG-UI events by type, with the text
  messages and the tool-call arguments reassembled from their deltas, per message and per tool call;
- A2A Agent Cards with their skills listed; A2A REST calls with the JSON-RPC method they stand for; AG-UI
  `RunAgentInput`s with their messages.

Which protocol a flow speaks is decided by the project's own `WireDecoder` fed the flow alone (a view sees one
flow; recognition that needs earlier flows, such as a generic A2A REST route, does not happen here); the body is
read with the project's SSE parser and JSON-RPC classifier. A view's `render_priority` is `PRIORITY` (above
mitmproxy's JSON view) for a non-empty JSON or SSE message of a flow recognised as its protocol, 0 otherwise.

Bounded: at most `MAX_INPUT` bytes of a body are read, `MAX_EVENTS` SSE events and `MAX_TEXT` characters
rendered; a last line says what was left out. Safe: every line is passed through `oatf_engine.text.printable`, so no
control or invisible character from the traffic reaches a terminal. Never raises on any body.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

from mitmproxy import contentviews, http
from mitmproxy.contentviews import Contentview, Metadata, SyntaxHighlight

from oatf_engine.events import ObservedEvent, Protocol, Side
from oatf_engine.text import printable
from oatf_engine.wire import DecoderConfig, SSEEvent, SSEParser, WireDecoder, a2a, a2a_rest, ag_ui
from oatf_engine.wire.jsonrpc import Invalid, Kind, Message, classify, loads, looks_like_jsonrpc

PRIORITY = 2.0
"""`render_priority` of a view for its protocol's messages: above mitmproxy's JSON view (1) and raw view (0.1)."""
MAX_INPUT = 1 << 20
"""Bytes of a body read (parsed, and fed to the decoder for recognition), at most."""
MAX_EVENTS = 200
"""SSE events (or batch members) rendered, at most."""
MAX_TEXT = 256_000
"""Characters rendered, at most (beyond it a line says what was left out)."""
MAX_LINE = 4_000
"""Characters of one rendered line, at most."""
MAX_MATCHES = 20
"""Matched indicators kept per flow in `flow.metadata["oatf"]` and shown."""
CACHE_SIZE = 256
"""Flows whose recognised protocol is remembered (mitmproxy asks every view's priority at each display)."""

METADATA_KEY = "oatf"
"""`flow.metadata` key of the indicators that matched on a flow: a list of {attack, indicator, evidence}."""
RUNS_KEY = "oatf_runs"
"""`flow.metadata` key of the runs that took part in a flow: run id → {attack, outcome, status, delivered, …}
(`addon.flow_marks`); outcome None while the run is live."""

NAMES: dict[Protocol, str] = {"mcp": "MCP", "a2a": "A2A", "ag_ui": "AG-UI"}
_ARROWS: dict[Side, str] = {"client": "client → server", "server": "server → client"}
_SSE = "text/event-stream"


# --- output -------------------------------------------------------------------------------------------------

class _Out:
    """Rendered lines, each made printable and bounded; stops taking lines after `MAX_TEXT` characters."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.cut = False
        """A line was refused: the budget is spent."""

    @property
    def full(self) -> bool:
        return self.cut or self.size >= MAX_TEXT

    def add(self, text: str) -> None:
        """One line per line of `text`, escaped (`printable`)."""
        for line in text.split("\n"):
            if self.full:
                self.cut = True
                return
            safe = printable(line, MAX_LINE)
            self.lines.append(safe)
            self.size += len(safe) + 1

    def note(self, text: str) -> None:
        """A header line (`# …`)."""
        self.add(f"# {text}")

    def pretty(self, value: Any) -> None:
        """`value` as indented JSON."""
        self.add(json.dumps(value, indent=2, ensure_ascii=False, default=str))

    def text(self) -> str:
        return "\n".join(self.lines)


# --- recognition --------------------------------------------------------------------------------------------

_recognised: OrderedDict[tuple[Any, ...], Protocol | None] = OrderedDict()


def recognise(flow: http.HTTPFlow) -> Protocol | None:
    """The protocol the project's `WireDecoder` decodes `flow` as (alone, at most `MAX_INPUT` bytes of each
    body), or None. JSON-RPC responses that answer no request of the flow (an MCP client's answer to a sampling
    or elicitation request, the legacy MCP transport's stream) are MCP: A2A servers send no requests.
    Remembered per flow and body sizes."""
    response = flow.response
    key = (flow.id, len(flow.request.raw_content or b""),
           None if response is None else (len(response.raw_content or b""), response.timestamp_end))
    if key in _recognised:
        _recognised.move_to_end(key)
        return _recognised[key]
    protocol = _decode(flow)
    _recognised[key] = protocol
    if len(_recognised) > CACHE_SIZE:
        _recognised.popitem(last=False)
    return protocol


def _decode(flow: http.HTTPFlow) -> Protocol | None:
    events, codes = decode(flow)
    if events:
        return events[0].protocol
    return "mcp" if "uncorrelated_response" in codes else None


def decode(flow: http.HTTPFlow) -> tuple[list[ObservedEvent], set[str]]:
    """The events the project's `WireDecoder` decodes from `flow` alone (at most `MAX_INPUT` bytes of each
    body), and the codes of its diagnostics."""
    codes: set[str] = set()
    decoder = WireDecoder(DecoderConfig(max_body_size=MAX_INPUT, max_event_size=MAX_INPUT),
                          on_diagnostic=lambda diagnostic: codes.add(diagnostic.code))
    request, response, fid = flow.request, flow.response, flow.id
    events = decoder.request_headers(fid, request.method, request.url, request.headers.fields, "", 0.0)
    events += decoder.request_data(fid, (request.raw_content or b"")[:MAX_INPUT], 0.0)
    events += decoder.request_end(fid, 0.0)
    if response is not None:
        body = response.raw_content or b""
        events += decoder.response_headers(fid, response.status_code, response.headers.fields, 0.0)
        events += decoder.response_data(fid, body[:MAX_INPUT], 0.0)
        ended = decoder.response_end(fid, 0.0) if len(body) <= MAX_INPUT else decoder.abort(fid, 0.0)
        events += [event for event in ended if isinstance(event, ObservedEvent)]  # not its end: no message
    return events, codes


def _media_type(message: http.Message) -> str:
    return message.headers.get("content-type", "").partition(";")[0].strip().lower()


# --- the message ----------------------------------------------------------------------------------------------

@dataclass
class _Message:
    """One HTTP message of a recognised flow, read (bounded)."""

    flow: http.HTTPFlow
    protocol: Protocol
    side: Side
    size: int
    sse: list[SSEEvent] | None = None
    """The SSE events read, for an SSE body."""
    sse_dropped: int = 0
    value: Any = None
    is_json: bool = False
    answers: dict[Any, str] = field(default_factory=dict)
    """JSON-RPC id → method of the requests the other side sent in this flow."""

    @property
    def renderable(self) -> bool:
        return bool(self.sse) or self.is_json


def _read(data: bytes, flow: http.HTTPFlow, message: http.Message, protocol: Protocol) -> _Message:
    side: Side = "client" if message is flow.request else "server"
    read = _Message(flow, protocol, side, len(data))
    if _media_type(message) == _SSE:
        parser = SSEParser(MAX_INPUT)
        read.sse = parser.feed(data[:MAX_INPUT])
        read.sse_dropped = parser.dropped
    elif data and len(data) <= MAX_INPUT:
        read.is_json, read.value = _json(data)
    return read


def _json(data: bytes | str) -> tuple[bool, Any]:
    """(whether `data` is JSON, its value) with the project's bounded JSON reader."""
    try:
        return True, loads(data).value
    except ValueError:
        return False, None


def _requests_sent(flow: http.HTTPFlow, side: Side) -> dict[Any, str]:
    """id → method of the JSON-RPC requests `side` sent in `flow` (what the other side's responses answer)."""
    message = flow.request if side == "client" else flow.response
    if message is None:
        return {}
    data = (message.get_content(strict=False) or b"")[:MAX_INPUT]
    values: list[Any] = []
    if _media_type(message) == _SSE:
        for event in SSEParser(MAX_INPUT).feed(data):
            is_json, value = _json(event.data)
            if is_json:
                values.append(value)
    else:
        is_json, value = _json(data)
        if is_json:
            values.append(value)
    found: dict[Any, str] = {}
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            classified = classify(item)
            if isinstance(classified, Message) and classified.kind is Kind.REQUEST and classified.id is not None:
                found[classified.id] = classified.method or ""
    return found


# --- rendering --------------------------------------------------------------------------------------------------

def _message(data: bytes, metadata: Metadata) -> _Message | None:
    flow, message = metadata.flow, metadata.http_message
    if not isinstance(flow, http.HTTPFlow) or message is None or not data:
        return None
    protocol = recognise(flow)
    if protocol is None:
        return None
    return _read(data, flow, message, protocol)


def _render(read: _Message) -> str:
    out = _Out()
    _header(read.flow, out)
    request = read.flow.request
    direction = "request" if read.side == "client" else "response"
    out.note(f"{NAMES[read.protocol]} {direction} ({_ARROWS[read.side]}) · {request.method} {request.path}")
    read.answers = _requests_sent(read.flow, "server" if read.side == "client" else "client")
    if read.sse is not None:
        _render_sse(read, out)
    else:
        _render_body(read, read.value, out)
    if out.cut:
        out.cut = False
        out.lines.append(f"# … rendering stopped at {MAX_TEXT:,} characters (view limit); the raw view shows all")
    return out.text()


def _header(flow: http.HTTPFlow, out: _Out) -> None:
    """What OATF found on this flow, first: the indicators that matched on it, then each run that took part in
    it with its verdict (attack, outcome and status, whether its payload was delivered in this flow), or that it
    is still open."""
    matches = flow.metadata.get(METADATA_KEY)
    matches = [m for m in matches[:MAX_MATCHES] if isinstance(m, dict)] if isinstance(matches, list) else []
    runs = flow.metadata.get(RUNS_KEY)
    runs = [(str(n), r) for n, r in islice(runs.items(), MAX_MATCHES) if isinstance(r, dict)] \
        if isinstance(runs, dict) else []
    for match in matches:
        out.note(f"OATF MATCH · attack {match.get('attack', '?')} · indicator {match.get('indicator', '?')}"
                 f" · {match.get('evidence', '')}")
    for name, run in runs:
        if run.get("outcome"):
            delivered = "payload delivered in this flow" if run.get("delivered") else \
                "payload not delivered in this flow"
            verdict = f"{run['outcome']} ({run.get('status', '?')}) · {delivered}"
        else:
            verdict = "still open: no verdict until it concludes"
        out.note(f"OATF RUN · attack {run.get('attack', '?')} · {verdict} · run {name}")
    if matches or runs:
        out.note("")


def _render_body(read: _Message, value: Any, out: _Out) -> None:
    """A whole JSON body (or one SSE event's data)."""
    flow = read.flow
    if read.protocol == "a2a" and read.side == "server" and _is_card(flow) and isinstance(value, dict):
        _render_card(value, out)
        return
    route = a2a_rest.match(flow.request.method, urlsplit(flow.request.path).path) if read.protocol == "a2a" else None
    if route is not None and not looks_like_jsonrpc(value):
        if read.side == "client":
            out.note(f"A2A REST call ≙ JSON-RPC {route.event}")
        else:
            out.note(f"answer to A2A REST call ≙ JSON-RPC {route.event}")
        out.pretty(value)
        return
    if read.protocol == "ag_ui" and read.side == "client" and ag_ui.is_run_agent_input(value):
        _render_run_input(value, out)
        return
    if looks_like_jsonrpc(value):
        _render_jsonrpc(read, value, out)
        return
    kind = _ag_ui_type(value) if read.protocol == "ag_ui" else None
    if kind is not None:
        call = value.get("toolCallId")
        out.note(f"AG-UI {kind}" + (f" · tool call {call}" if isinstance(call, str) else "")
                 + f" ({_ARROWS[read.side]})")
    out.pretty(value)


def _is_card(flow: http.HTTPFlow) -> bool:
    return flow.request.method == "GET" and urlsplit(flow.request.path).path in a2a.CARD_PATHS


def _render_jsonrpc(read: _Message, value: Any, out: _Out) -> None:
    if not isinstance(value, list):
        _render_one(read, value, "", out)
        return
    out.note(f"JSON-RPC batch of {len(value)} message(s)")
    for n, item in enumerate(value[:MAX_EVENTS], 1):
        if out.full:
            break
        _render_one(read, item, f"[{n}/{len(value)}] ", out)
    if len(value) > MAX_EVENTS:
        out.lines.append(f"# … {len(value) - MAX_EVENTS} more batch member(s) not rendered (view limit)")


def _render_one(read: _Message, item: Any, prefix: str, out: _Out) -> None:
    """One JSON-RPC message: a header line (kind, method, id, direction, what it answers), then the message."""
    message = classify(item)
    arrow = _ARROWS[read.side]
    if isinstance(message, Invalid):
        out.note(f"{prefix}not JSON-RPC: {message.reason} ({arrow})")
    elif message.kind in (Kind.REQUEST, Kind.NOTIFICATION):
        ident = f" · id {_id(message.id, message.envelope)}" if message.kind is Kind.REQUEST else ""
        out.note(f"{prefix}{message.kind.value} {message.method}{ident} ({arrow})")
    else:
        answered = read.answers.get(message.id)
        answers = f"answers {answered}" if answered is not None else "answers a request not in this flow"
        out.note(f"{prefix}{message.kind.value} · id {_id(message.id, message.envelope)} ({arrow}) · {answers}")
    out.pretty(item)


def _id(msg_id: Any, envelope: dict[str, Any]) -> str:
    return json.dumps(envelope.get("id") if msg_id is None else msg_id, ensure_ascii=False)


def _render_card(card: dict[str, Any], out: _Out) -> None:
    out.note(f"A2A Agent Card: {card.get('name', '?')} (version {card.get('version', '?')})")
    if card.get("description"):
        out.note(f"description: {card['description']}")
    skills = card.get("skills")
    skills = skills if isinstance(skills, list) else []
    out.note(f"skills ({len(skills)}):")
    for skill in skills[:MAX_EVENTS]:
        if not isinstance(skill, dict):
            continue
        tags = skill.get("tags")
        tagged = f" [tags: {', '.join(map(str, tags))}]" if isinstance(tags, list) and tags else ""
        out.note(f"  - {skill.get('id', '?')}: {skill.get('name', '?')} — {skill.get('description', '')}{tagged}")
    out.pretty(card)


def _render_run_input(value: dict[str, Any], out: _Out) -> None:
    messages = value.get("messages")
    messages = messages if isinstance(messages, list) else []
    tools = value.get("tools")
    out.note(f"AG-UI RunAgentInput · thread {ag_ui.thread_id(value)} · run {ag_ui.run_id(value)} · "
             f"{len(messages)} message(s), {len(tools) if isinstance(tools, list) else 0} tool(s)")
    for message in messages[:MAX_EVENTS]:
        if isinstance(message, dict):
            content = message.get("content")
            shown = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            out.note(f"  - {message.get('role', '?')} {message.get('id', '')}: {printable(shown, 200)}")
    out.pretty(value)


def _render_sse(read: _Message, out: _Out) -> None:
    events = read.sse or []
    out.note(f"SSE stream: {len(events)} event(s)" + (f", {read.sse_dropped} over {MAX_INPUT:,} characters "
                                                       "skipped" if read.sse_dropped else ""))
    decoded = [(event, *_json(event.data)) for event in events]
    if read.protocol == "ag_ui":
        _render_ag_ui_summary([value for _, is_json, value in decoded if is_json], out)
    shown = 0
    for n, (event, is_json, value) in enumerate(decoded, 1):
        if shown == MAX_EVENTS or out.full:
            break
        shown += 1
        out.note(f"── SSE event {n} · event: {event.event} · id: {event.last_event_id or '-'} ──")
        if is_json:
            _render_body(read, value, out)
        else:
            out.add(event.data)
    left = len(events) - shown
    unread = read.size - MAX_INPUT if read.size > MAX_INPUT else 0
    if left or unread:
        what = [f"{left} more event(s) not rendered"] if left else []
        what += [f"{unread:,} byte(s) of the body not read"] if unread else []
        out.lines.append(f"# … {' and '.join(what)} (view limits: {MAX_EVENTS} events, {MAX_INPUT:,} bytes, "
                         f"{MAX_TEXT:,} characters); the raw view shows all")


def _ag_ui_type(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


def _render_ag_ui_summary(values: list[Any], out: _Out) -> None:
    """The text messages and tool calls of an AG-UI stream, reassembled from their deltas."""
    texts: dict[str, list[str]] = {}
    calls: dict[str, tuple[str, list[str]]] = {}
    for value in values:
        kind = (_ag_ui_type(value) or "").upper()
        if kind == "TEXT_MESSAGE_START" and isinstance(value.get("messageId"), str):
            texts.setdefault(value["messageId"], [])
        elif kind == "TEXT_MESSAGE_CONTENT" and isinstance(value.get("delta"), str):
            texts.setdefault(str(value.get("messageId")), []).append(value["delta"])
        elif kind == "TOOL_CALL_START" and isinstance(value.get("toolCallId"), str):
            calls[value["toolCallId"]] = (str(value.get("toolCallName", "?")), [])
        elif kind == "TOOL_CALL_ARGS" and isinstance(value.get("delta"), str):
            calls.setdefault(str(value.get("toolCallId")), ("?", []))[1].append(value["delta"])
    for message_id, parts in _first(texts):
        out.note(f"text message {message_id}: {''.join(parts)}")
    for call_id, (name, parts) in _first(calls):
        arguments = "".join(parts)
        is_json, value = _json(arguments)
        out.note(f"tool call {name} ({call_id}) arguments, reassembled from {len(parts)} delta(s):")
        if is_json:
            out.pretty(value)
        else:
            out.add(arguments)


def _first[T](items: dict[str, T]) -> Iterator[tuple[str, T]]:
    for n, item in enumerate(items.items()):
        if n == MAX_EVENTS:
            return
        yield item


# --- the views --------------------------------------------------------------------------------------------------

class AgentView(Contentview):
    """The content view of one agent protocol: chosen automatically (`PRIORITY`) for its recognised messages."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol

    @property
    def name(self) -> str:
        return NAMES[self.protocol]

    @property
    def syntax_highlight(self) -> SyntaxHighlight:
        return "yaml"  # JSON is YAML; header lines are YAML comments

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        read = _message(data, metadata)
        return PRIORITY if read is not None and read.protocol == self.protocol and read.renderable else 0

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        read = _message(data, metadata)
        if read is None:
            return f"# not a message of a recognised agent flow; {len(data):,} byte(s)"
        if not read.renderable:
            return f"# {NAMES[read.protocol]} flow, but this body is neither JSON nor SSE; {len(data):,} byte(s)"
        return _render(read)


VIEWS: tuple[AgentView, ...] = tuple(AgentView(protocol) for protocol in NAMES)


class ContentViews:
    """Sub-addon: registers `VIEWS` with mitmproxy on `load`, removes them on `done`."""

    def load(self, loader: Any) -> None:
        for view in VIEWS:
            contentviews.add(view)

    def done(self) -> None:
        registry = contentviews.registry
        for view in VIEWS:
            if registry.get(view.name) is view:
                del registry._by_name[view.name.lower()]  # the registry has no public removal
