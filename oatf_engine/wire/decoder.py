"""`WireDecoder`: HTTP exchanges in, `ObservedEvent`s out (format spec §7.1–§7.3, SDK spec §4.1). Sans-I/O.

The owner drives one exchange (one HTTP request and its response) through these calls, in this order, each
returning the events the call completed:

    request_headers(exchange_id, method, url, headers, client, timestamp)
    request_data(exchange_id, data, timestamp)*        # raw body bytes as sent, in any chunking
    request_end(exchange_id, timestamp)
    response_headers(exchange_id, status, headers, timestamp)
    response_data(exchange_id, data, timestamp)*
    response_unrecorded(exchange_id, timestamp)?       # replay: the recording holds no more of the body
    response_end(exchange_id, timestamp)               # or abort(exchange_id, timestamp) at any point

The last call also returns an `ExchangeEnded` (after the exchange's events) when requests its client sent in it
were left without their answer (`oatf_engine.events.awaits_answer`: no message of the server in it that may
answer them, `may_answer`): an HTTP error without a JSON-RPC body, a stream closed before the answer, a failed
exchange (but not a stream that gave an SSE event ID: its client may resume it and get the answer there). The
legacy HTTP+SSE transport answers a POST on its GET stream: a POST the server accepted (2xx) leaves
its requests to the stream, and the stream's end reports those still unanswered then.

A transport that frames whole messages (MCP stdio: `oatf_engine.wire.ndjson`) is one long session instead:

    open_stream(stream_id, endpoint, client, keys)
    stream_message(stream_id, data, sender, timestamp)*   # one JSON-RPC message or batch, sent by `sender`
    close_stream(stream_id)

Both go through the same JSON-RPC → event logic (naming, correlation per requesting side, content enrichment).
On a stream, each JSON-RPC exchange is a flow of its own, as an HTTP exchange is: a request's events and its
answer's carry flow id `<stream>#<the request event's seq>`, a notification's `<stream>#<its seq>` (so the
episode rules place each call by when it began, not by when the stream opened).

What it decodes: JSON-RPC 2.0 bodies (MCP, A2A; single or batch; JSON or SSE answers), A2A's HTTP+JSON/REST
routes (`a2a_rest`: each decoded as the JSON-RPC method it stands for), AG-UI RunAgentInput POSTs and their SSE
answers, Agent Card fetches, and the legacy MCP HTTP+SSE transport (`endpoint` event, POSTs to it, answers on
the stream); the requests an MCP 2026-07-28 result embeds and the answers its retry carries (`mcp.input_requests`)
as the standalone messages they stand for. Bodies are content-decoded (gzip, deflate, br, zstd) for inspection.
SSE bodies are decoded as they arrive, so an event is reported when its blank line arrives.

Which protocol: user overrides (host/path), then the traffic itself — the Agent Card path, a legacy endpoint
announced earlier, an A2A REST route (one only A2A uses, like `POST …/message:send`; or a generic one, like
`GET …/tasks/{id}`, with an A2A version header or under an interface path already seen speaking A2A), an
unambiguous JSON-RPC method name, MCP/A2A version headers, the protocol already seen at
the same endpoint, the content of an SSE stream (an `endpoint` event, JSON-RPC, AG-UI event types), and
finally MCP for JSON-RPC nobody claimed. JSON that is neither JSON-RPC nor a RunAgentInput is ignored.

Bounded memory: at most `max_exchanges` open exchanges, `max_pending` outstanding requests, `max_sessions`
remembered endpoints / legacy sessions / open AG-UI tool calls (oldest forgotten first); bodies beyond
`max_body_size` and SSE events beyond `max_event_size` are skipped with one diagnostic each, JSON-RPC batch
members beyond `max_batch` too, and JSON nested deeper than `jsonrpc.MAX_DEPTH` is inspected with the deeper
values cut (one diagnostic). Bad input never
raises: it produces a `Diagnostic` through `on_diagnostic`.
"""

from __future__ import annotations

import functools
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast
from urllib.parse import parse_qsl, urlsplit

from oatf_engine.events import (
    DIRECTION,
    UNINSPECTED_EVENT,
    Call,
    Endpoint,
    ExchangeEnded,
    ObservedEvent,
    Protocol,
    Side,
    awaits_answer,
    may_answer,
)

from . import a2a, a2a_rest, ag_ui, mcp
from .encoding import ContentDecoder, TooLarge, UndecodableBody
from .jsonrpc import (
    HEAD_SCAN,
    MAX_DEPTH,
    Correlator,
    Invalid,
    JsonRpcId,
    Kind,
    Message,
    Pending,
    classify_body,
    leading_method,
    loads,
    looks_like_jsonrpc,
)
from .recognition import IGNORE, Override, find_override, protocol_of_method
from .sse import SSEEvent, SSEParser

Headers = Mapping[str, str] | Iterable[tuple[str, str]] | Iterable[tuple[bytes, bytes]]
"""A request's or response's headers: a mapping of names to values, or the header fields as (name, value) pairs,
text or raw bytes as on the wire (decoded as UTF-8, undecodable bytes surrogate-escaped, as mitmproxy decodes
them); mitmproxy's `Headers` are read through their raw `fields`. A repeated field's values are joined by ", "
(RFC 9110 §5.3), as mitmproxy's `Headers` mapping joins them."""

Decoded = ObservedEvent | ExchangeEnded
"""What the last call of an exchange (`response_end`, `abort`) returns: its events, then its end if it left
requests unanswered."""

_KEPT_HEADERS = frozenset({
    "content-type", "content-encoding", mcp.SESSION_HEADER, mcp.VERSION_HEADER, "a2a-version", "x-a2a-version",
})
_KEPT_RAW_HEADERS = {name.encode(): name for name in _KEPT_HEADERS}


@dataclass(frozen=True, slots=True)
class DecoderConfig:
    """Limits and overrides of a `WireDecoder`."""

    max_body_size: int = 16 << 20
    """Largest (content-decoded) non-streamed body inspected, in bytes; larger ones are skipped."""
    max_event_size: int = 4 << 20
    """Largest SSE event inspected, in characters; larger ones are skipped."""
    max_exchanges: int = 10_000
    max_pending: int = 10_000
    max_sessions: int = 10_000
    max_batch: int = 1_000
    """Most messages of one JSON-RPC batch (§6) decoded: each is an event, and a batch is decoded at once on the
    proxy's event loop; the members beyond it are not inspected (one `oversize_batch` diagnostic)."""
    overrides: tuple[Override, ...] = ()
    """Host/path → protocol pins (`recognition.parse_overrides`), first match wins."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Something in the traffic that could not be decoded (never an error of the proxy)."""

    code: str
    """`oversize_body`, `oversize_event`, `undecodable_body`, `invalid_json`, `invalid_request_json`, `deep_json`,
    `invalid_jsonrpc`, `oversize_batch`, `uncorrelated_response`, `unread_answer`, `truncated_stream`, `evicted`,
    `binary_encoding`."""
    flow_id: str
    message: str


UNINSPECTED = frozenset({"oversize_body", "oversize_event", "undecodable_body", "oversize_batch", "deep_json",
                         "evicted", "unread_answer", "uncorrelated_response", "invalid_request_json",
                         "binary_encoding"})
"""Diagnostic codes of messages (or parts of them) the decoder passed on without inspecting: a body or SSE event
over the size limit, a body it could not content-decode, batch members over the limit, values nested deeper than
`jsonrpc.MAX_DEPTH` (cut), an open exchange (or an outstanding request's correlation) forgotten beyond
`max_exchanges` (`max_pending`), the answer to a request of its own exchange that was not inspected (it answers no
request seen, so it cannot be read as one: `unread_answer`, whose mark carries the session keys of the answer, so
that the request's mark joins its session, `oatf_engine.monitor.sessions` rule 1), an answer to no request seen
(`uncorrelated_response`: an agent's answer to a server's request the proxy never saw — a sampling or elicitation
request sent before a capture began, an input request asked another agent — says what it says to a question
unknown, so no indicator can be judged on it; its mark carries its keys too), a request body that is no JSON at
an endpoint that speaks a protocol (`invalid_request_json`: the server got its bytes, `_parse`), an AG-UI answer in
the binary encoding, which is not decoded (`binary_encoding`: `ag_ui.PROTOBUF_MEDIA_TYPE`). Evidence there is
never seen, so no verdict of their sessions may be trusted as resisted: the decoder marks where each was
(`UNINSPECTED_EVENT`), so that the runs of its session read `inconclusive`, and `oatf evaluate` exits 2 (the proxy's
shutdown summary says so) — for those it could not place in a session too."""


DECODER_FAILURE = "decoder_failure"
"""The code of the mark of an exchange whose decoding was cut off by a decoder failure (`WireDecoder.cut_off`)."""


def uninspected(counts: Mapping[str, int]) -> str:
    """The `UNINSPECTED` diagnostics among `counts` (by code) as `code n, ...`; "" when there are none."""
    return ", ".join(f"{code} {count}" for code, count in sorted(counts.items()) if code in UNINSPECTED and count)


@dataclass
class Unread:
    """What of some traffic was not read through, for a command to say and to gate on (`oatf evaluate`, `oatf
    recover`: exit 2): the steps that made the decoder raise (a bug: `steps.StepDecoder` cuts their exchanges off
    there, as live) and the decoder's diagnostics by code (`diagnosed`: an `on_diagnostic`), `UNINSPECTED` among
    them."""

    failures: int = 0
    diagnostics: Counter[str] = field(default_factory=Counter)

    def diagnosed(self, diagnostic: Diagnostic) -> None:
        self.diagnostics[diagnostic.code] += 1

    def problems(self) -> list[str]:
        """Why runs of this traffic cannot be trusted as resisted, a sentence each; [] when nothing was missed."""
        said = []
        if missed := uninspected(self.diagnostics):
            said.append(f"traffic not inspected ({missed}): bodies or SSE events over the size limit (--wire-max-body),"
                        " bodies that could not be content-decoded, JSON-RPC batch members over the limit, JSON nested "
                        "deeper than the limit (cut), open exchanges or outstanding requests forgotten over the "
                        "decoder's bounds, the answers to requests not inspected or to none seen, request bodies "
                        "that are no JSON at an agent protocol's endpoint, AG-UI answers in the binary encoding; "
                        "the runs of their sessions read inconclusive, not resisted (but a first request to an "
                        "endpoint of no protocol yet, whose first bytes and answer do not tell one, has no session: "
                        "its runs may read resisted for want of what it held); traffic that is no agent's: "
                        "leave its host out with --wire-protocols HOST=ignore")
        if self.failures:
            said.append(f"{self.failures} step(s) of the traffic made the wire decoder raise (a bug in oatf-watch: "
                        "please report it): their exchanges were cut off there, as live, and what came after in them "
                        "was not evaluated (the runs of their sessions read inconclusive)")
        return said


class _Binding(NamedTuple):
    """How a JSON-RPC protocol names events and builds content Values."""

    protocol: Protocol
    event_name: Callable[[str], str]
    request_content: Callable[[Any], Any]
    response_content: Callable[[str, Any, Any], Any]  # (event name, result or error, request params)
    session_keys: Callable[[Any], dict[str, str]]
    request_keys: Callable[[str, Any], dict[str, str]]  # (event name, request content)


_BINDINGS: dict[str, _Binding] = {
    "mcp": _Binding("mcp", str, lambda params: params,
                    lambda _event, payload, params: mcp.response_content(payload, params), lambda _content: {},
                    lambda _event, _content: {}),
    "a2a": _Binding("a2a", a2a.event_name, a2a.request_content,
                    lambda event, payload, _params: a2a.result_content(event, payload), a2a.session_keys,
                    a2a.request_keys),
}

_STREAM = "STREAM"
"""The method of a message stream's `_Exchange` (`open_stream`): it lasts a whole session, so the requests of its
client are correlated through the session's `Correlator` only, never kept with the exchange."""
_JSON_SUFFIXES = ("/json", "+json", "/json-rpc")
_IDENTITY = ContentDecoder(None)  # no coding: stateless, shared
_SSE = "text/event-stream"


def _media_type(headers: Mapping[str, str]) -> str:
    return _media_type_of(headers.get("content-type", ""))


@functools.lru_cache(maxsize=1024)
def _media_type_of(content_type: str) -> str:
    """The media type of a Content-Type value, lower case (remembered: an endpoint's messages repeat it)."""
    return content_type.partition(";")[0].strip().lower()


STREAMED_MEDIA_TYPES = frozenset({
    "text/event-stream", "application/x-ndjson", "application/jsonl", "application/stream+json",
})
"""Response types whose messages arrive over time: the live tap streams them through mitmproxy chunk by chunk
(`addon.mitm_tap`), and a recording of one without chunk times is replayed from the response's start."""


def kept_header(headers: Headers, name: str) -> str | None:
    """The value of header `name` (lower case; one the decoder reads, e.g. `Mcp-Session-Id`), or None."""
    return _kept(headers).get(name)


def is_streamed(headers: Headers) -> bool:
    """Whether a response with these headers is of a `STREAMED_MEDIA_TYPES` type."""
    return _media_type(_kept(headers)) in STREAMED_MEDIA_TYPES


def _is_json(media_type: str) -> bool:
    return media_type.endswith(_JSON_SUFFIXES) or media_type == "text/json"


def _read_request(media_type: str) -> bool:
    """Whether a request body of `media_type` is read at an endpoint of no protocol yet: JSON's types, none
    (curl, scripts) and `text/plain` — what `fetch` sends a string body as when no type is set; servers that
    read the body whatever its type (`a2a-sdk`'s and `fasta2a`'s A2A servers) execute such a request. At an
    endpoint that speaks a protocol every body is read."""
    return not media_type or _is_json(media_type) or media_type == "text/plain"


class _Body:
    """A body being read: content-decoded, then buffered up to the limit, or fed to an SSE parser."""

    __slots__ = ("buffer", "decoder", "sse", "typed")

    def __init__(self, content_encoding: str | None, sse: SSEParser | None, typed: bool) -> None:
        self.decoder = ContentDecoder(content_encoding) if content_encoding else _IDENTITY
        self.sse = sse
        self.buffer = bytearray()
        self.typed = typed
        """Its media type is JSON's (or SSE's): a body of another type read because its client reads it as JSON
        (an A2A answer) says nothing when it is no JSON (an error page)."""


def _resumable(body: _Body | None) -> bool:
    """Whether a response's SSE stream gave an event ID (a client may resume it: `WireDecoder._ended`)."""
    return body is not None and body.sse is not None and body.sse.last_event_id != ""


class _Exchange:
    """Everything known about one HTTP exchange while it is open."""

    __slots__ = (
        "asked", "card", "client", "endpoint", "events", "id", "ignored", "keys", "method", "null_id", "proto",
        "request", "request_headers", "requests", "response", "rest", "scope", "status", "tool_names", "unanswered",
        "unread", "unread_method", "url",
    )

    def __init__(self, exchange_id: str, method: str, url: str, endpoint: Endpoint, client: str) -> None:
        self.id = exchange_id
        self.method = method
        self.url = url
        self.endpoint = endpoint
        self.client = client
        self.proto: Protocol | None = None
        self.ignored = False
        self.card = False
        self.rest: a2a_rest.Route | None = None  # an A2A REST route: the exchange is one call, its own correlation
        self.status = 0
        self.scope = f"x|{exchange_id}"
        self.keys: dict[str, str] = {}  # shared by this exchange's events: replaced, never changed in place
        self.asked: dict[str, str] = {}
        """The session keys of the requests its client sent in it (an A2A `tasks/get`'s task): the mark of an
        answer in it not inspected carries them, so it is placed with its request (`_read`)."""
        self.request_headers: Mapping[str, str] = {}
        self.request: _Body | None = None
        self.response: _Body | None = None
        self.requests: dict[JsonRpcId, Pending] = {}  # requests this exchange's body carried
        self.null_id: Pending | None = None
        """A request with `"id": null` this exchange's body carried (`fasta2a`'s client sends `tasks/get` so):
        JSON-RPC 2.0 §4 discourages it, and only its own answer, in this exchange's response, can be told to
        answer it."""
        self.tool_names: dict[str, str] = {}  # AG-UI toolCallId → toolCallName on this stream
        self.events = 0  # events of this exchange so far (a message stream numbers its flows with it)
        self.unanswered: dict[JsonRpcId | None, None] = {}
        """The requests its client sent in it still waiting for an answer in it (see the module docstring), by
        JSON-RPC id (None: an HTTP request that is not JSON-RPC, or a JSON-RPC request with a null id)."""
        self.unread = False
        """Its client sent something in it that was not inspected (`UNINSPECTED`): an answer in it that answers no
        request seen answers that (`unread_answer`)."""
        self.unread_method: str | None = None
        """The method of the request not inspected, when its first bytes name it (`_read_head`)."""


def _marking_unseen[Call_: Callable[..., list[Any]]](method: Call_) -> Call_:
    """A call of the exchange API (whose last argument is the timestamp) returns, after its events, the marks of
    what it passed on without inspecting (`UNINSPECTED_EVENT`: see `WireDecoder._marks`), at its time."""

    @functools.wraps(method)
    def call(self: WireDecoder, *args: Any) -> list[Any]:
        self._at = args[-1]
        decoded = method(self, *args)
        return [*decoded, *self._marks()] if self._unseen else decoded

    return cast(Call_, call)


class WireDecoder:
    """Decodes HTTP exchanges into `ObservedEvent`s; see the module docstring for the call sequence."""

    def __init__(self, config: DecoderConfig | None = None,
                 on_diagnostic: Callable[[Diagnostic], None] | None = None, seq_base: int = 0) -> None:
        """`seq_base`: the events' `seq` count from it (decoders feeding one monitor number apart)."""
        self.config = config or DecoderConfig()
        self._on_diagnostic = on_diagnostic
        self._seq = seq_base
        self._at = 0.0  # the time of the exchange API call under way (`_marking_unseen`)
        self._unseen: list[tuple[_Exchange, str, str, Side, dict[str, str]]] = []
        """Not inspected so far (`_diagnose`, `cut_off`): where, code, message, sender, session keys of its own."""
        self._exchanges: OrderedDict[str, _Exchange] = OrderedDict()
        self._streams: dict[str, _Exchange] = {}  # open message streams (`open_stream`), closed by their owner
        self._pending = Correlator(self.config.max_pending)
        self._evicted_reported = 0
        self._endpoints: OrderedDict[tuple[str, int, str], Protocol] = OrderedDict()
        self._legacy: OrderedDict[tuple[str, int, str], tuple[str, str]] = OrderedDict()  # → (scope, session)
        self._tool_calls: OrderedDict[tuple[str, str], str] = OrderedDict()  # (threadId, toolCallId) → name
        self._legacy_waiting: OrderedDict[str, dict[JsonRpcId | None, str]] = OrderedDict()
        """Legacy HTTP+SSE sessions (by scope): the requests of POSTs the server accepted that still wait for
        their answer on the GET stream, by JSON-RPC id → the POST's flow."""

    @property
    def open_exchanges(self) -> int:
        """How many exchanges are open (started and neither ended nor aborted)."""
        return len(self._exchanges)

    def ignores(self, url: str) -> bool:
        """Whether exchanges to `url` (absolute) are left undecoded: an `ignore` override (`DecoderConfig.overrides`),
        which a front door may apply before decoding starts (`addon.mitm_tap`)."""
        endpoint, _ = _endpoint(url)
        return find_override(self.config.overrides, endpoint.host, endpoint.port, endpoint.path) == IGNORE

    def is_open(self, exchange_id: str) -> bool:
        """Whether that exchange started here and has not ended (`response_end`, `abort`)."""
        return exchange_id in self._exchanges

    # --- the exchange API -----------------------------------------------------------------------------------

    @_marking_unseen
    def request_headers(self, exchange_id: str, method: str, url: str, headers: Headers, client: str,
                        timestamp: float) -> list[ObservedEvent]:
        """A request started: `url` absolute (`http://host:port/path?query`), `client` as `host:port`."""
        endpoint, target = _endpoint(url)
        host, port, path = endpoint.host, endpoint.port, endpoint.path
        ex = _Exchange(exchange_id, method.upper(), url, endpoint, client)
        ex.request_headers = _kept(headers)
        self._open(ex)
        override = find_override(self.config.overrides, host, port, path)
        if override == IGNORE:
            ex.ignored = True
            return []
        legacy = self._legacy.get((host, port, target))
        session = ex.request_headers.get(mcp.SESSION_HEADER)
        if legacy is not None:
            ex.proto = "mcp"
            ex.scope, ex.keys["mcp_session"] = legacy
        elif session:
            ex.scope = f"mcp|{host}:{port}|{session}"
            ex.keys["mcp_session"] = session
        if override is not None:
            ex.proto = override  # type: ignore[assignment]
        if ex.method == "GET" and path in a2a.CARD_PATHS and ex.proto in (None, "a2a"):
            ex.proto, ex.card = "a2a", True
            return [self._event(ex, "a2a", "agent_card/get", "client", {}, timestamp)]
        route = a2a_rest.match(ex.method, path) if ex.proto in (None, "a2a") else None
        if route is not None and (route.distinctive or ex.proto == "a2a" or self._hint(ex, route.base) == "a2a"):
            ex.rest = route
            self._decide(ex, "a2a", route.base)
            ex.request = self._body(ex, ex.request_headers, "client", sse=False)
            return []
        if _read_request(_media_type(ex.request_headers)) or (ex.proto or self._hint(ex)) is not None:
            ex.request = self._body(ex, ex.request_headers, "client", sse=False)
        return []

    @_marking_unseen
    def request_data(self, exchange_id: str, data: bytes, timestamp: float) -> list[ObservedEvent]:
        """The next bytes of the request body (as sent, content-encoded or not)."""
        ex = self._exchanges.get(exchange_id)
        if ex is not None and ex.request is not None:
            decoded = self._read(ex, ex.request, data, "client")
            if decoded is None:
                ex.request = None
            else:
                ex.request.buffer += decoded
        return []

    @_marking_unseen
    def request_end(self, exchange_id: str, timestamp: float) -> list[ObservedEvent]:
        """The request body is complete: its messages are decoded."""
        ex = self._exchanges.get(exchange_id)
        if ex is None or ex.request is None:
            return []
        body, ex.request = ex.request, None
        if ex.rest is not None:
            return self._rest_request(ex, ex.rest, body, timestamp)
        if not body.buffer:
            return []
        value = self._parse(ex, body.buffer, "request body", "client", quiet=False)
        if value is None:
            return []
        if looks_like_jsonrpc(value) and ex.proto != "ag_ui":
            return self._jsonrpc(ex, value, "client", False, timestamp)
        if ag_ui.is_run_agent_input(value) and ex.proto in (None, "ag_ui"):
            return self._run_agent_input(ex, value, timestamp)
        return []

    @_marking_unseen
    def response_headers(self, exchange_id: str, status: int, headers: Headers,
                         timestamp: float) -> list[ObservedEvent]:
        """The response started."""
        ex = self._exchanges.get(exchange_id)
        if ex is None or ex.ignored or status == 101 or (ex.card and not 200 <= status < 300):
            return []
        ex.status = status
        kept = _kept(headers)
        session = kept.get(mcp.SESSION_HEADER)
        if session and "mcp_session" not in ex.keys:
            ex.keys = {**ex.keys, "mcp_session": session}
        if ex.proto is None:
            ex.proto = self._hint(ex)
        media_type = _media_type(kept)
        if ex.proto == "ag_ui" and 200 <= status < 300 and media_type == ag_ui.PROTOBUF_MEDIA_TYPE:
            self._diagnose("binary_encoding", ex, "AG-UI answer in the binary (protobuf) encoding: not inspected",
                           "server")
        elif media_type == _SSE or (ex.proto == "ag_ui" and 200 <= status < 300):  # as `HttpAgent` reads it
            ex.response = self._body(ex, kept, "server", sse=True)
        elif (ex.proto is not None or ex.unread) and _is_json(media_type):  # unread: its answer may tell (`_jsonrpc`)
            ex.response = self._body(ex, kept, "server", sse=False)
        elif ex.proto == "a2a":  # A2A clients (a2a-sdk's, @a2a-js/sdk's) read any answer as JSON; MCP's check the type
            ex.response = self._body(ex, kept, "server", sse=False, typed=False)
        return []

    @_marking_unseen
    def response_data(self, exchange_id: str, data: bytes, timestamp: float) -> list[ObservedEvent]:
        """The next bytes of the response body; SSE events completed by them are decoded now."""
        ex = self._exchanges.get(exchange_id)
        if ex is None or ex.response is None:
            return []
        body = ex.response
        decoded = self._read(ex, body, data, "server")
        if decoded is None:
            ex.response = None
            return []
        sse = body.sse
        if sse is None:
            body.buffer += decoded
            return []
        dropped = sse.dropped
        events = []
        for sse_event in sse.feed(decoded):
            events.extend(self._sse_event(ex, sse_event, timestamp))
        if sse.dropped != dropped:
            self._diagnose("oversize_event", ex, f"SSE event over {self.config.max_event_size} characters skipped",
                           "server")
        return events

    @_marking_unseen
    def response_end(self, exchange_id: str, timestamp: float) -> list[Decoded]:
        """The response is complete: a buffered body is decoded, the exchange closed (and its end reported if it
        left requests unanswered: see the module docstring)."""
        ex = self._exchanges.pop(exchange_id, None)
        if ex is None:
            return []
        body = ex.response
        resumable = _resumable(body)
        events = self._stream_end(ex, body, timestamp)
        self._close(ex)
        events += self._response_body(ex, body, timestamp)
        return [*events, *self._ended(ex, timestamp, 200 <= ex.status < 300, resumable)]

    def _stream_end(self, ex: _Exchange, body: _Body | None, timestamp: float) -> list[ObservedEvent]:
        """The event under way when an A2A or AG-UI stream ends, read as their JavaScript clients read it (`SSEParser.
        finish`): an agent that wrote its last event without the blank line after it, or whose stream broke after it,
        sent that message, and `@a2a-js/sdk` and `@ag-ui/client` read it. MCP's clients (and a2a-sdk's) discard it, as
        §9.2.6 does: at an MCP stream's end it is told, not read (`_close`)."""
        if body is None or body.sse is None or ex.proto not in ("a2a", "ag_ui") or not body.sse.in_event:
            return []
        self._diagnose("truncated_stream", ex, "SSE stream ended inside an event (no blank line after it): read as "
                                               "A2A's and AG-UI's JavaScript clients read it")
        return [event for sse_event in body.sse.finish() for event in self._sse_event(ex, sse_event, timestamp)]

    def _response_body(self, ex: _Exchange, body: _Body | None, timestamp: float) -> list[ObservedEvent]:
        """The events of a buffered response body, complete."""
        if body is None or body.sse is not None or not body.buffer:
            return []
        value = self._parse(ex, body.buffer, "response body", "server", quiet=not body.typed)
        if value is None:
            return []
        if ex.rest is not None:
            return self._rest_answer(ex, ex.rest, value, not 200 <= ex.status < 300, False, timestamp)
        if ex.card:
            if isinstance(value, dict):
                self._learn_card(value)
                return [self._event(ex, "a2a", "agent_card/get", "server", value, timestamp, envelope=value)]
            return []
        if looks_like_jsonrpc(value):
            return self._jsonrpc(ex, value, "server", False, timestamp)
        return []

    def _ended(self, ex: _Exchange, timestamp: float, accepted: bool, resumable: bool) -> list[ExchangeEnded]:
        """The end of `ex` when it leaves requests unanswered (see the module docstring; `accepted`: the server
        answered it with a 2xx status; `resumable`: its SSE stream gave an event ID, so its answers may still
        come on a stream the client resumes from it — MCP Streamable HTTP 2025-11-25, "Resumability and
        Redelivery": a server may close the stream before the response once it sent an event ID — and its
        requests are not reported)."""
        legacy = ex.scope.startswith("mcp-legacy|")
        calls: list[Call] = [] if resumable else [(ex.id, "client", request) for request in ex.unanswered]
        if legacy and ex.method == "GET":
            waiting = self._legacy_waiting.pop(ex.scope, {})
            calls += [(flow, "client", request) for request, flow in waiting.items()]
        elif legacy and accepted and calls:  # the answers come on the session's stream
            waiting = self._legacy_waiting.setdefault(ex.scope, {})
            self._legacy_waiting.move_to_end(ex.scope)
            for request in ex.unanswered:
                if len(waiting) < self.config.max_pending:
                    waiting[request] = ex.id
            if len(self._legacy_waiting) > self.config.max_sessions:
                self._legacy_waiting.popitem(last=False)
            return []
        return [ExchangeEnded(ex.id, timestamp, self._seq, tuple(calls))] if calls else []

    # --- the message stream API (transports that frame whole messages: MCP stdio) ------------------------------

    def open_stream(self, stream_id: str, endpoint: Endpoint, client: str, keys: dict[str, str]) -> None:
        """An MCP message stream started: one session whose messages arrive whole, each sent by one side (MCP's
        stdio transport, framed by `oatf_engine.wire.ndjson`). Every event of the stream carries `keys`; requests are
        correlated per requesting side within the stream, as within an HTTP session."""
        ex = _Exchange(stream_id, _STREAM, f"{endpoint.host}:{endpoint.port}{endpoint.path}", endpoint, client)
        ex.proto, ex.scope, ex.keys = "mcp", f"stream|{stream_id}", dict(keys)
        self._streams[stream_id] = ex

    @_marking_unseen
    def stream_message(self, stream_id: str, data: bytes | str, sender: Side, timestamp: float) -> list[ObservedEvent]:
        """One whole message (JSON text: a JSON-RPC message or batch) that `sender` sent on an open stream."""
        ex = self._streams.get(stream_id)
        if ex is None:
            return []
        if len(data) > self.config.max_body_size:
            self._diagnose("oversize_body", ex, f"message over {self.config.max_body_size} bytes: not inspected",
                           sender)
            return []
        value = self._parse(ex, data, "message", sender, quiet=False)
        if value is None:
            return []
        if not looks_like_jsonrpc(value):
            self._diagnose("invalid_jsonrpc", ex, "a message that is not JSON-RPC")
            return []
        return self._jsonrpc(ex, value, sender, False, timestamp)

    def close_stream(self, stream_id: str) -> None:
        """The stream ended: forget it (its outstanding requests stay until evicted)."""
        self._streams.pop(stream_id, None)

    @_marking_unseen
    def cut_off(self, exchange_id: str, sender: Side, timestamp: float) -> list[ObservedEvent]:
        """Its owner stops decoding `exchange_id`: a call for it raised (a bug), at a step `sender` sent. A mark where
        it was (`UNINSPECTED_EVENT`, code `decoder_failure`), so that the runs of its session read `inconclusive`,
        not `resisted` for want of what came after; nothing when the exchange is not open. No diagnostic: the owner
        counts and reports the failure."""
        ex = self._exchanges.get(exchange_id) or self._streams.get(exchange_id)
        if ex is not None:
            self._unseen.append((ex, DECODER_FAILURE, "the wire decoder failed here (a bug): the rest of the "
                                                      "exchange was not decoded", sender, {}))
        return []

    @_marking_unseen
    def response_unrecorded(self, exchange_id: str, timestamp: float) -> list[ObservedEvent]:
        """A recording holds the response's first bytes only: the proxy forwarded more of its stream than it kept
        (`addon.mitm_tap`: a stream mitmproxy stored no body for keeps the first `oatf_wire_max_body` bytes). The
        rest, which the client got and live decoding read, is not inspected (`oversize_body`): a mark, so that the
        runs of its session read `inconclusive`, not `resisted` for want of it. Nothing when the body was not being
        read (not open, or of a type not read)."""
        ex = self._exchanges.get(exchange_id)
        if ex is not None and ex.response is not None:
            ex.response = None
            self._diagnose("oversize_body", ex, "response stream longer than the recording holds (the proxy kept "
                                                "its first bytes only): the rest not inspected", "server", ex.asked)
        return []

    @_marking_unseen
    def abort(self, exchange_id: str, timestamp: float) -> list[Decoded]:
        """The exchange failed (connection lost, killed): forget it; nothing half-received is reported but the event
        under way on an A2A or AG-UI stream (`_stream_end`), and its end is, if it left requests unanswered."""
        ex = self._exchanges.pop(exchange_id, None)
        if ex is None:
            return []
        resumable = _resumable(ex.response)
        events: list[Decoded] = [*self._stream_end(ex, ex.response, timestamp)]
        self._close(ex)
        return events + self._ended(ex, timestamp, False, resumable)

    # --- exchanges and bodies --------------------------------------------------------------------------------

    def _open(self, ex: _Exchange) -> None:
        old = self._exchanges.pop(ex.id, None)
        if old is not None:
            self._close(old)
        self._exchanges[ex.id] = ex
        if len(self._exchanges) > self.config.max_exchanges:
            _, oldest = self._exchanges.popitem(last=False)
            self._close(oldest)
            self._diagnose("evicted", oldest, f"more than {self.config.max_exchanges} open exchanges: forgotten, the "
                                              "rest of it not inspected", "server")

    def _close(self, ex: _Exchange) -> None:
        body = ex.response
        if body is not None and body.sse is not None and body.sse.close():
            self._diagnose("truncated_stream", ex, "SSE stream ended inside an event; the event was discarded")
        if ex.method == "GET" and ex.scope.startswith("mcp-legacy|"):
            self._forget_legacy(ex.scope)
        ex.request = ex.response = None

    def _body(self, ex: _Exchange, headers: Mapping[str, str], sender: Side, sse: bool,
              typed: bool = True) -> _Body | None:
        try:
            return _Body(headers.get("content-encoding"), SSEParser(self.config.max_event_size) if sse else None,
                         typed)
        except UndecodableBody as exc:
            self._diagnose("undecodable_body", ex, f"{exc}; body not inspected", sender)
            return None

    def _read(self, ex: _Exchange, body: _Body, data: bytes, sender: Side) -> bytes | None:
        """`data` (of the body `sender` sends) content-decoded; None (stop reading the body) when it is oversize or
        corrupt."""
        what = "request" if sender == "client" else "response"
        limit = self.config.max_body_size - (0 if body.sse is not None else len(body.buffer))
        try:
            return body.decoder.decode(data, limit)
        except TooLarge:
            if sender == "client":
                self._read_head(ex, body, data, limit)
            self._diagnose("oversize_body", ex, f"{what} body over {self.config.max_body_size} bytes: not inspected",
                           sender, ex.asked if sender == "server" else None)
            return None
        except UndecodableBody as exc:
            self._diagnose("undecodable_body", ex, f"{what} body: {exc}; not inspected", sender,
                           ex.asked if sender == "server" else None)
            return None

    def _parse(self, ex: _Exchange, data: bytes | bytearray | str, what: str, sender: Side, quiet: bool) -> Any:
        """`data` (`what`, sent by `sender`) parsed; None when it is no JSON (`quiet`: nothing said of a server's that
        is not: one read because its client reads any type, or sent where no protocol is known). What a
        client sends that is no JSON, at an endpoint that speaks a protocol (else it is no agent's traffic: nothing
        is said), is not inspected (`invalid_request_json`): its bytes reached the server, which may read them (a
        lenient parser) and is the attacker's when the attacker plays it. What a server sends that is no JSON
        (`invalid_json`) is not: its client could not read it either."""
        try:
            parsed = loads(bytes(data) if isinstance(data, bytearray) else data)
        except ValueError as exc:
            if sender == "server":
                if not quiet:
                    self._diagnose("invalid_json", ex, f"{what} is not JSON: {exc}")
            elif (ex.proto or self._hint(ex)) is not None:  # asked only of a body that is no JSON
                self._diagnose("invalid_request_json", ex, f"{what} is not JSON: {exc}; not inspected", sender)
            return None
        if parsed.truncated:
            self._diagnose("deep_json", ex, f"{what} nested deeper than {MAX_DEPTH} levels: inspected with the "
                                            "deeper values cut", sender)
        return parsed.value

    # --- protocol decisions ---------------------------------------------------------------------------------

    def _hint(self, ex: _Exchange, path: str | None = None) -> Protocol | None:
        """The protocol suggested by version/session headers, else the one seen before at this endpoint (or at
        `path` on its host)."""
        headers = ex.request_headers
        if mcp.SESSION_HEADER in headers or mcp.VERSION_HEADER in headers:
            return "mcp"
        if "a2a-version" in headers or "x-a2a-version" in headers:
            return "a2a"
        endpoint = ex.endpoint
        return self._endpoints.get((endpoint.host, endpoint.port, path or endpoint.path))

    def _decide(self, ex: _Exchange, protocol: Protocol, path: str | None = None) -> None:
        """`ex` speaks `protocol`, and so does its endpoint (or `path` on its host) from now on."""
        ex.proto = protocol
        self._remember_endpoint((ex.endpoint.host, ex.endpoint.port, path or ex.endpoint.path), protocol)

    def _read_head(self, ex: _Exchange, body: _Body, data: bytes, limit: int) -> None:
        """An oversize request whose first bytes name its method (`jsonrpc.leading_method`: most clients write
        `method` before `params`): its mark names the event (`_marks`: a `message/send` not inspected still opens
        its agent's task, `monitor.episodes`), and at an endpoint of no protocol yet it speaks the method's, so
        that its mark is made in that protocol's session. Bytes of a content-coded body not yet decoded are not
        read."""
        head = bytes(body.buffer[:HEAD_SCAN])
        if body.decoder is _IDENTITY and len(head) < HEAD_SCAN:
            head += data[:min(limit, HEAD_SCAN - len(head))]
        method = leading_method(head)
        if method is None:
            return
        ex.unread_method = method
        if ex.proto is None and (protocol := protocol_of_method(method)) is not None:
            self._decide(ex, protocol)

    def _learn_card(self, card: dict[str, Any]) -> None:
        """The JSON-RPC endpoints an Agent Card names (`a2a.jsonrpc_urls`) speak A2A, unless one was seen to speak
        something else: the first request there is A2A's even when it is not inspected (an oversize `message/send`
        is marked in its A2A session, `_marks`)."""
        for url in a2a.jsonrpc_urls(card):
            try:
                endpoint, _ = _endpoint(url)
            except ValueError:  # not a URL (the card comes from the traffic)
                continue
            key = (endpoint.host, endpoint.port, endpoint.path)
            if endpoint.host and key not in self._endpoints:
                self._remember_endpoint(key, "a2a")

    def _remember_endpoint(self, key: tuple[str, int, str], protocol: Protocol) -> None:
        self._endpoints[key] = protocol
        self._endpoints.move_to_end(key)
        if len(self._endpoints) > self.config.max_sessions:
            self._endpoints.popitem(last=False)

    # --- JSON-RPC (MCP, A2A) ---------------------------------------------------------------------------------

    def _jsonrpc(self, ex: _Exchange, value: Any, sender: Side, in_stream: bool,
                 timestamp: float) -> list[ObservedEvent]:
        limit = self.config.max_batch
        if isinstance(value, list) and len(value) > limit:
            self._diagnose("oversize_batch", ex, f"JSON-RPC batch of {len(value)} messages: the first {limit} "
                                                 f"inspected, {len(value) - limit} not inspected", sender)
            value = value[:limit]
        items = classify_body(value)
        if ex.proto not in _BINDINGS:
            named = [(item.method, item.payload) for item in items if isinstance(item, Message) and item.method]
            # a name one protocol alone uses, else the headers or the endpoint's past, else a shared name's params
            decided = next((p for method, _ in named if (p := protocol_of_method(method)) is not None), None)
            decided = decided or self._hint(ex) or next(
                (p for method, params in named if (p := protocol_of_method(method, params)) is not None), None)
            if decided is None and ex.unread:  # the answer to a request not inspected, to an endpoint of no protocol
                decided = _answering_protocol(items)
                if decided is None:
                    return []  # nothing tells: told by its diagnostics only
            self._decide(ex, decided or "mcp")
        binding = _BINDINGS[ex.proto]  # type: ignore[index]
        events: list[ObservedEvent] = []
        for item in items:
            if isinstance(item, Invalid):
                self._diagnose("invalid_jsonrpc", ex, item.reason)
            elif item.method is not None:
                request = self._jsonrpc_request(ex, binding, item, sender, timestamp)
                events.append(request)
                if binding.protocol == "mcp" and sender == "client":
                    events.extend(self._input_answers(ex, binding, item.payload, timestamp, request.flow_id))
            else:
                events.extend(self._jsonrpc_response(ex, binding, item, sender, in_stream, timestamp))
        return events

    def _jsonrpc_request(self, ex: _Exchange, binding: _Binding, item: Message, sender: Side,
                         timestamp: float) -> ObservedEvent:
        assert item.method is not None
        name = binding.event_name(item.method)
        params = {} if item.payload is None else item.payload
        # A message stream's request is a flow of its own, numbered by its event's place in the stream (not in
        # the decoder: a capture replayed with other recordings keeps the flow ids the tap gave it live).
        flow = f"{ex.id}#{ex.events + 1}" if ex.method == _STREAM else None
        if item.kind is Kind.REQUEST and item.id is None and sender == "client" and ex.method != _STREAM:
            ex.null_id = Pending(name, params, "")
        if item.kind is Kind.REQUEST and item.id is not None:
            pending = Pending(name, params, flow or "")
            if sender == "client" and ex.method != _STREAM and len(ex.requests) < self.config.max_pending:
                ex.requests[item.id] = pending
            # Ids are correlated per requesting side: both peers number their requests from 0/1, so a
            # server-to-client request may share its id with an open client request (JSON-RPC 2.0 §4).
            self._pending.register(f"{ex.scope}|{sender}", item.id, pending)
            self._report_evictions(ex)
        content = binding.request_content(params)
        keys = binding.request_keys(name, content)
        if keys and sender == "client" and ex.method != _STREAM:
            ex.asked = {**ex.asked, **keys}
        return self._event(ex, binding.protocol, name, sender, content, timestamp, keys=keys, jsonrpc_id=item.id,
                           envelope=item.envelope, flow=flow)

    def _jsonrpc_response(self, ex: _Exchange, binding: _Binding, item: Message, sender: Side, in_stream: bool,
                          timestamp: float) -> list[ObservedEvent]:
        pending = None
        if item.id is not None:
            # An answer in this exchange's response to a request in its own body (an A2A stream answers
            # one request many times), else an answer to a request seen elsewhere in the session.
            local = ex.requests.get(item.id) if sender == "server" else None
            requester = "server" if sender == "client" else "client"
            pending = self._pending.pop(f"{ex.scope}|{requester}", item.id) or local
        elif sender == "server":
            pending, ex.null_id = ex.null_id, None
        if pending is None:  # not inspected: marked with the keys it carries (a server's: and its requests')
            keys = _answer_keys(binding, item.payload)
            if sender == "server":
                keys = {**ex.asked, **keys}
            if ex.unread and sender == "server":
                self._diagnose("unread_answer", ex, f"response id {item.id!r} answers a request that was not "
                               "inspected: not inspected either", sender, keys)
            else:
                self._diagnose("uncorrelated_response", ex, f"response id {item.id!r} answers no request seen: not "
                               "inspected", sender, keys)
            return []
        return self._answer(ex, binding, pending, item.payload, sender, item.kind is Kind.ERROR, in_stream,
                            timestamp, item.id, item.envelope)

    def _answer(self, ex: _Exchange, binding: _Binding, pending: Pending, payload: Any, sender: Side,
                is_error: bool, in_stream: bool, timestamp: float, jsonrpc_id: JsonRpcId | None,
                envelope: Any) -> list[ObservedEvent]:
        """The events of an answer (`result` or `error`) to `pending`: the method's, and for a streamed A2A
        update also `task/status` / `task/artifact` (format spec §7.2.2). An A2A error's content is the error
        object as sent (no result shape applies to it)."""
        a2a_error = is_error and binding.protocol == "a2a"
        content = payload if a2a_error else binding.response_content(pending.method, payload, pending.params)
        keys = binding.session_keys(content)
        flow = pending.flow or None
        events = [self._event(ex, binding.protocol, pending.method, sender, content, timestamp,
                              keys=keys, jsonrpc_id=jsonrpc_id, is_error=is_error, envelope=envelope, flow=flow)]
        kind = content.get("kind") if isinstance(content, dict) else None
        synthetic = a2a.STREAM_EVENTS.get(kind) if (  # `kind` comes from the traffic: any JSON value
            isinstance(kind, str) and in_stream and binding.protocol == "a2a" and not is_error) else None
        if synthetic is not None:
            events.append(self._event(ex, "a2a", synthetic, sender, content, timestamp, keys=keys,
                                      jsonrpc_id=jsonrpc_id, envelope=envelope, flow=flow))
        if binding.protocol == "mcp" and sender == "server" and not is_error:
            events.extend(self._input_requests(ex, payload, timestamp, flow))
        return events

    def _input_scope(self, ex: _Exchange) -> str:
        """Where the embedded requests of `ex`'s traffic are correlated (`mcp.input_requests`): its session,
        else — the stateless revision, whose client may open a connection per request — its agent's route (the
        client's host to the endpoint)."""
        if not ex.scope.startswith("x|"):
            return f"{ex.scope}|input"
        endpoint = ex.endpoint
        return f"input|{ex.client.rpartition(':')[0]}>{endpoint.host}:{endpoint.port}{endpoint.path}"

    def _input_requests(self, ex: _Exchange, result: Any, timestamp: float, flow: str | None) -> list[ObservedEvent]:
        """The requests a server's result embeds (MCP 2026-07-28, `mcp.input_requests`), each an event of its
        method sent by the server, as if sent on its own; remembered until the retry answers them."""
        events = []
        for request in mcp.input_requests(result):
            self._pending.register(self._input_scope(ex), mcp.input_id(request.key, result),
                                   Pending(request.method, request.params, flow or ""))
            events.append(self._event(ex, "mcp", request.method, "server", request.params, timestamp,
                                      envelope=request.message, flow=flow))
        self._report_evictions(ex)
        return events

    def _input_answers(self, ex: _Exchange, binding: _Binding, params: Any, timestamp: float,
                       flow: str) -> list[ObservedEvent]:
        """The client's answers to embedded requests, carried by its retried request (`mcp.input_responses`):
        each the event of the request it answers, sent by the client, in the retried request's flow."""
        events: list[ObservedEvent] = []
        for key, response in mcp.input_responses(params):
            pending = self._pending.pop(self._input_scope(ex), mcp.input_id(key, params))
            if pending is None:
                self._diagnose("uncorrelated_response", ex, f"inputResponses[{key!r}] answers no input request seen: "
                               "not inspected", "client")
                continue
            events.extend(self._answer(ex, binding, pending._replace(flow=flow), response, "client", False, False,
                                       timestamp, None, response))
        return events

    def _report_evictions(self, ex: _Exchange) -> None:
        if self._pending.evicted != self._evicted_reported:
            self._evicted_reported = self._pending.evicted
            self._diagnose("evicted", ex, f"more than {self.config.max_pending} outstanding requests: "
                                          "the oldest will not be correlated")

    # --- A2A HTTP+JSON/REST ---------------------------------------------------------------------------------------

    def _rest_request(self, ex: _Exchange, route: a2a_rest.Route, body: _Body, timestamp: float) -> list[ObservedEvent]:
        """A REST call's request, as the JSON-RPC request it stands for (`a2a_rest`)."""
        value = self._parse(ex, body.buffer, "request body", "client", quiet=False) if body.buffer else None
        if body.buffer and value is None:
            return []
        binding = _BINDINGS["a2a"]
        content = binding.request_content(a2a_rest.request_params(route, value, parse_qsl(urlsplit(ex.url).query)))
        return [self._event(ex, "a2a", route.event, "client", content, timestamp,
                            keys=binding.request_keys(route.event, content), envelope=value)]

    def _rest_answer(self, ex: _Exchange, route: a2a_rest.Route, value: Any, is_error: bool, in_stream: bool,
                     timestamp: float) -> list[ObservedEvent]:
        """A REST call's response body or SSE event, as the JSON-RPC result (or error) it stands for."""
        payload = a2a_rest.error(value) if is_error else a2a_rest.result(route, value)
        return self._answer(ex, _BINDINGS["a2a"], Pending(route.event, {}), payload, "server", is_error, in_stream,
                            timestamp, None, value)

    # --- SSE streams -------------------------------------------------------------------------------------------

    def _sse_event(self, ex: _Exchange, sse_event: SSEEvent, timestamp: float) -> list[ObservedEvent]:
        """One dispatched SSE event. An event with empty data carries no message: MCP 2025-11-25 (Streamable
        HTTP, "Resumability and Redelivery") has a server open each stream with an event made of an event ID
        and an empty `data` field, to prime the client to reconnect. It is valid: skipped, no diagnostic."""
        if not sse_event.data:
            return []
        if sse_event.event == mcp.ENDPOINT_EVENT and ex.proto in (None, "mcp"):
            self._legacy_stream(ex, sse_event.data)
            return []
        value = self._parse(ex, sse_event.data, "SSE event data", "server", quiet=ex.proto is None)
        if value is None:
            return []
        if ex.rest is not None:
            return self._rest_answer(ex, ex.rest, value, sse_event.event == "error", True, timestamp)
        if ex.proto == "ag_ui" or (ex.proto is None and ag_ui.event_name(value, known_only=True)):
            ex.proto = "ag_ui"
            return self._ag_ui_event(ex, value, timestamp)
        if looks_like_jsonrpc(value):
            return self._jsonrpc(ex, value, "server", True, timestamp)
        return []

    def _legacy_stream(self, ex: _Exchange, data: str) -> None:
        endpoint = mcp.legacy_endpoint(ex.url, data)
        if endpoint is None:
            self._diagnose("invalid_jsonrpc", ex, f"MCP endpoint event with an unusable URI {data[:200]!r}")
            return
        self._decide(ex, "mcp")
        ex.scope = f"mcp-legacy|{endpoint.host}:{endpoint.port}|{endpoint.target}"
        ex.keys = {**ex.keys, "mcp_session": endpoint.session_id}
        key = (endpoint.host, endpoint.port, endpoint.target)
        self._legacy[key] = (ex.scope, endpoint.session_id)
        if len(self._legacy) > self.config.max_sessions:
            self._legacy.popitem(last=False)

    def _forget_legacy(self, scope: str) -> None:
        for key, (known_scope, _session) in list(self._legacy.items()):
            if known_scope == scope:
                del self._legacy[key]

    # --- AG-UI -----------------------------------------------------------------------------------------------

    def _run_agent_input(self, ex: _Exchange, value: dict[str, Any], timestamp: float) -> list[ObservedEvent]:
        self._decide(ex, "ag_ui")
        thread, run = ag_ui.thread_id(value), ag_ui.run_id(value)
        ex.keys = {**ex.keys, "ag_ui_thread": thread, "ag_ui_run": run}
        events = [self._event(ex, "ag_ui", "run_agent_input", "client", value, timestamp, envelope=value)]
        for call_id, content in ag_ui.tool_results(value):
            name = self._tool_calls.pop((thread, call_id), None)
            if name is not None:
                events.append(self._event(ex, "ag_ui", "tool_call_result", "client",
                                          {**content, "toolCallName": name}, timestamp, envelope=value))
        return events

    def _ag_ui_event(self, ex: _Exchange, value: Any, timestamp: float) -> list[ObservedEvent]:
        name = ag_ui.event_name(value)
        if name is None:
            self._diagnose("invalid_json", ex, "AG-UI SSE event without a string `type`")
            return []
        content = value
        call_id = value.get("toolCallId")
        if name in ("run_started", "run_finished"):
            found = {key: field for key, field in (("ag_ui_thread", ag_ui.thread_id(value)),
                                                   ("ag_ui_run", ag_ui.run_id(value))) if isinstance(field, str)}
            if found.items() - ex.keys.items():
                ex.keys = {**ex.keys, **found}
        if isinstance(call_id, str):
            thread = ex.keys.get("ag_ui_thread", "")
            tool_name = value.get("toolCallName")
            if name == "tool_call_start" and isinstance(tool_name, str):
                if len(ex.tool_names) < self.config.max_pending:
                    ex.tool_names[call_id] = tool_name
                self._tool_calls[(thread, call_id)] = tool_name
                if len(self._tool_calls) > self.config.max_sessions:
                    self._tool_calls.popitem(last=False)
            elif tool_name is None and call_id in ex.tool_names:
                content = {**value, "toolCallName": ex.tool_names[call_id]}
            if name == "tool_call_result":
                self._tool_calls.pop((thread, call_id), None)
        return [self._event(ex, "ag_ui", name, "server", content, timestamp, envelope=value)]

    # --- events and diagnostics ------------------------------------------------------------------------------

    def _event(self, ex: _Exchange, protocol: Protocol, name: str, sender: Side, content: Any, timestamp: float, *,
               keys: dict[str, str] | None = None, jsonrpc_id: JsonRpcId | None = None, is_error: bool = False,
               envelope: Any = None, flow: str | None = None) -> ObservedEvent:
        """An event sent by `sender` in flow `flow` (default: its exchange's); its `direction` is the format spec
        §6.1 reading (`oatf_engine.events`)."""
        self._seq += 1
        ex.events += 1
        event = ObservedEvent(
            protocol=protocol, event_type=name, direction=DIRECTION[sender], sender=sender, content=content,
            flow_id=flow or ex.id, seq=self._seq, timestamp=timestamp, endpoint=ex.endpoint, client=ex.client,
            session_keys={**ex.keys, **keys} if keys else ex.keys, jsonrpc_id=jsonrpc_id,
            is_error=is_error, envelope=envelope,
        )
        if ex.method != _STREAM:  # a message stream's requests are flows of their own, which never end
            if sender == "client":
                if awaits_answer(event) and len(ex.unanswered) < self.config.max_pending:
                    ex.unanswered[jsonrpc_id] = None
            elif (ex.unanswered or self._legacy_waiting) and may_answer(event):
                if ex.unanswered:
                    ex.unanswered.pop(jsonrpc_id, None)
                waiting = self._legacy_waiting.get(ex.scope) if self._legacy_waiting else None
                if waiting:
                    waiting.pop(jsonrpc_id, None)
        return event

    def _diagnose(self, code: str, ex: _Exchange, message: str, sender: Side | None = None,
                  keys: dict[str, str] | None = None) -> None:
        """Tell `on_diagnostic`; an `UNINSPECTED` one (`sender`: who sent what was not inspected; `keys`: the
        session keys it carries, beyond its exchange's) is marked too."""
        if self._on_diagnostic is not None:
            self._on_diagnostic(Diagnostic(code, ex.id, message))
        if sender is not None and code in UNINSPECTED:
            self._unseen.append((ex, code, message, sender, keys or {}))
            if sender == "client":
                ex.unread = True

    def _marks(self) -> list[ObservedEvent]:
        """An `UNINSPECTED_EVENT` for each thing the call under way did not inspect (`_marking_unseen`), so that
        the runs of its session cannot read `resisted` for want of it. Made once the call is done, when what it
        decoded may have decided the exchange's protocol; else the protocol is the one its headers or endpoint
        suggest (`_hint`). An open exchange with none of these (a first, oversize request to an endpoint not seen
        before, without a protocol's headers) waits for its answer's shape (`_answering_protocol`), and is marked
        then, at the answer's time; one that ends undecided is told by its diagnostic only."""
        marks, undecided = [], []
        for ex, code, message, sender, keys in self._unseen:
            protocol = ex.proto or self._hint(ex)
            if protocol is None and ex.id in self._exchanges:
                undecided.append((ex, code, message, sender, keys))  # its answer may tell (`_answering_protocol`)
            elif protocol is not None:
                self._seq += 1
                marks.append(ObservedEvent(
                    protocol=protocol, event_type=UNINSPECTED_EVENT, direction=DIRECTION[sender], sender=sender,
                    content=_mark_content(code, message, protocol, ex.unread_method if sender == "client" else None),
                    flow_id=ex.id, seq=self._seq, timestamp=self._at,
                    endpoint=ex.endpoint, client=ex.client, session_keys={**ex.keys, **keys} if keys else ex.keys))
        self._unseen = undecided
        return marks


def _mark_content(code: str, message: str, protocol: Protocol, method: str | None) -> dict[str, str]:
    """An `UNINSPECTED_EVENT`'s content: the diagnostic's code and message, and the event (`method`, named in
    `protocol`'s binding) of the request not inspected when its first bytes named its method."""
    content = {"code": code, "message": message}
    if method is not None and protocol in _BINDINGS:
        content["method"] = _BINDINGS[protocol].event_name(method)
    return content


def _answering_protocol(items: list[Message | Invalid]) -> Protocol | None:
    """The protocol of answers whose request was not inspected, at an endpoint of no protocol yet, by their shape:
    A2A's when one is a Task, Message or update naming its context or task (`a2a.session_keys`), else unknown."""
    for item in items:
        if isinstance(item, Message) and item.kind is not Kind.ERROR and a2a.session_keys(
                a2a.result_content("", item.payload)):
            return "a2a"
    return None


def _answer_keys(binding: _Binding, payload: Any) -> dict[str, str]:
    """The session keys an answer's content carries (A2A: the `contextId` and task id of its Task or Message,
    `a2a.session_keys`), read without the request it answers (`unread_answer`)."""
    return binding.session_keys(binding.response_content("", payload, None))


def _kept(headers: Headers) -> Mapping[str, str]:
    """The request/response headers the decoder reads, by lower-case name (see `Headers`); read only (the
    mapping of raw fields is shared: `_kept_fields`)."""
    fields = getattr(headers, "fields", None)  # mitmproxy's `Headers`: its raw fields, not its (slow) mapping
    if fields is None:
        fields = headers.items() if isinstance(headers, Mapping) else headers
    if type(fields) is tuple:  # raw fields (mitmproxy's, a recording's): a session's messages repeat them
        try:
            return _kept_fields(fields)
        except TypeError:  # an unhashable field
            pass
    return _kept_of(fields)


@functools.lru_cache(maxsize=1024)
def _kept_fields(fields: tuple[tuple[Any, Any], ...]) -> Mapping[str, str]:
    """`_kept_of(fields)`, remembered (shared by every message with these fields: never altered)."""
    return _kept_of(fields)


def _kept_of(fields: Iterable[tuple[Any, Any]]) -> dict[str, str]:
    kept: dict[str, str] = {}
    for name, value in fields:
        # A field's name and value are both text or both bytes (see `Headers`).
        text: str
        if type(name) is bytes:
            key = _KEPT_RAW_HEADERS.get(name.lower())
            if key is None:
                continue
            text = cast(bytes, value).decode("utf-8", "surrogateescape")
        else:
            key = cast(str, name).lower()
            if key not in _KEPT_HEADERS:
                continue
            text = cast(str, value)
        kept[key] = f"{kept[key]}, {text}" if key in kept else text
    return kept


@functools.lru_cache(maxsize=4096)
def _endpoint(url: str) -> tuple[Endpoint, str]:
    """The endpoint of an absolute URL, and its target (path and query); cached, URLs repeat."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    path = parts.path or "/"
    return Endpoint(parts.hostname or "", port, path), f"{path}?{parts.query}" if parts.query else path
