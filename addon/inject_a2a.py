"""Inject mode for A2A (`addon.inject`; format spec §7.2 "A2A Binding", §7.2.4 execution state): in front of the
agent's real A2A servers, the proxy plays the documents' `a2a_server` actors into their answers, so that an
orchestrating agent working with its real remote agents meets the attack.

Each A2A server (`host:port`) gets, for every `a2a_server` actor of every document, the phase player
`oatf serve` uses; as when `oatf serve` plays it, A2A has no session the card fetch and the messages share,
so the players follow the actor's phases for every client of that server. The players observe the events
the tap decodes from the server's traffic (what the agent received, as the judge sees it), so phases
advance on the agent's traffic; an answer is built from the phase its request arrived in, and its
templates see the request (`{{request.…}}`):
- the Agent Card (GET `/.well-known/agent-card.json`, `/.well-known/agent.json`) and the extended card
  (`agent/getAuthenticatedExtendedCard`, A2A 1.0 `GetExtendedAgentCard`): the state's `agent_card` fields
  replace the server's, except where the agent reaches the server (`ENDPOINT_FIELDS`: the server's stay,
  so the agent keeps talking to the real server, in a version it speaks);
- `message/send` (1.0 `SendMessage`): the server's answer (or error) is replaced by the state's
  `task_responses` entry `oatf_serve.a2a_state` selects (`when`), in the JSON-RPC version of the request
  (0.3 results, or 1.0's `{"task": …}` / `{"message": …}`), made with the a2a-sdk's own conversions;
- `message/stream` (1.0 `SendStreamingMessage`): the server's first streamed answer is replaced by the
  state's answer as `oatf serve` streams it (the Task, its artifacts, its status: `a2a_state.stream_items`),
  one SSE event each, and the server's later answers on that stream are dropped.
The ids in the state's answer are the real server's (its task id and `contextId`, else the request's), so
the agent's follow-ups (`tasks/get`, the next message of the conversation) stay consistent with the server,
and its runs are told apart by their own `contextId`. A state without `agent_card` (or `task_responses`)
leaves the server's card (answers) as they are.

The HTTP+JSON/REST binding (`oatf_engine.wire.a2a_rest`: A2A 1.0 routes, and 0.3's under `/v1`) is played
alike: `POST …/message:send` and `…/message:stream` (SSE, each event's data one `StreamResponse`) get the
state's answer as the body the a2a-sdk's REST handlers write (1.0 `SendMessageResponse`/`StreamResponse` JSON,
or 0.3's protobuf JSON), with status 200 in place of a server's error status; `GET …/extendedAgentCard` is
overlaid as the card. The card itself is fetched at the well-known path in both bindings.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import proto_utils as proto_utils_v03
from a2a.types import a2a_pb2
from a2a.utils import proto_utils
from google.protobuf.json_format import MessageToDict
from mitmproxy import http

from oatf_engine.events import ObservedEvent
from oatf_engine.text import printable
from oatf_engine.wire import a2a_rest
from oatf_engine.wire.a2a import CARD_PATHS, METHODS_1_0, event_name, request_content, result_content
from oatf_serve import a2a_state
from oatf_serve.state import Refusal, entries, mapping

from .inject_players import Actors, Bounded, Failed, Note, Played, answers, json_message, new_players, say
from .sse_frames import EventRewriter, event_data, json_bytes, with_data

log = logging.getLogger("oatf.inject")

MAX_SERVERS = 1000
"""A2A servers played at once; the least recently used is forgotten beyond."""
ENDPOINT_FIELDS = frozenset({"url", "preferredTransport", "additionalInterfaces", "supportedInterfaces",
                             "protocolVersion"})
"""Agent Card fields (0.3 and 1.0) saying where and how the agent reaches the server: the real server's stay."""
CARD_EVENTS = frozenset({"agent_card/get", "agent/getAuthenticatedExtendedCard"})
ANSWERED_EVENTS = frozenset({"agent/getAuthenticatedExtendedCard", "message/send", "message/stream"})
"""The JSON-RPC requests (by the binding's event name) whose answers the state rewrites."""


@dataclass
class _Exchange:
    """A request to an A2A server whose answer is rewritten, and the phase each player was in when it came."""

    event: str
    request_id: Any
    version_1: bool
    request: Any
    states: list[tuple[Played, Any, str]] = field(default_factory=list)
    """(player, the state of its phase then, where: document, actor and phase)."""
    replaced: bool | None = None
    """Whether the first streamed answer was replaced (None: not come yet); if so, the later ones are dropped."""
    rest: a2a_rest.Route | None = None
    """The REST route of the request (None: JSON-RPC or the card)."""


class A2aInject:
    """The `a2a_server` actors of `oatf_inject` played into A2A traffic (see the module docstring)."""

    def __init__(self, note: Note, failed: Failed) -> None:
        self.note = note
        self.failed = failed
        self.actors: Actors = []
        self.servers: Bounded[str, list[Played]] = Bounded(MAX_SERVERS)
        self.exchanges: dict[str, _Exchange] = {}

    def configure(self, actors: Actors) -> None:
        self.actors = actors
        self.servers.clear()
        self.exchanges.clear()

    # --- hooks (`Inject` calls them when its actors include `a2a_server` ones) ------------------------------

    def request(self, flow: http.HTTPFlow) -> None:
        exchange = _exchange(flow.request) if self.actors else None
        if exchange is None:
            return
        for played in self._players(f"{flow.request.host}:{flow.request.port}"):
            for phase in played.player.tick():
                played.player.narrate(phase, say)
            exchange.states.append((played, played.player.state(), played.where()))
        self.exchanges[flow.id] = exchange

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        exchange = self.exchanges.get(flow.id)
        response = flow.response
        if exchange is None or response is None or exchange.event != "message/stream":
            return
        if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return
        self.exchanges.pop(flow.id)
        if response.headers.get("content-encoding", "identity").lower() not in ("", "identity"):
            log.warning("oatf inject: flow %s: a compressed A2A stream passes unaltered", flow.id)
            return
        response.stream = EventRewriter(flow.id, response.stream, lambda raw: self._stream_event(flow, exchange, raw))

    def response(self, flow: http.HTTPFlow) -> None:
        exchange = self.exchanges.pop(flow.id, None)
        response = flow.response
        if exchange is None or response is None:
            return
        body = json_message(response)
        if exchange.rest is not None:
            self._rest_response(flow, exchange, body)
            return
        if exchange.event == "agent_card/get":
            if isinstance(body, dict) and response.status_code == 200:
                card, notes = self._card(exchange, body)
                if notes:
                    response.content = json_bytes(card)
                    self.note(flow, exchange.event, notes)
            return
        if not answers(body, exchange.request_id):
            return
        if exchange.event in CARD_EVENTS:
            if isinstance(body.get("result"), dict):
                card, notes = self._card(exchange, body["result"])
                if notes:
                    response.content = json_bytes({**body, "result": card})
                    self.note(flow, exchange.event, notes)
            return
        replaced = self._answer(exchange, body.get("result"), "error" in body)
        if replaced is not None:
            answer, notes = replaced
            result = _send_result(answer, exchange.version_1)
            response.content = json_bytes({"jsonrpc": "2.0", "id": exchange.request_id, "result": result})
            self.note(flow, exchange.event, notes)

    def error(self, flow: http.HTTPFlow) -> None:
        self.exchanges.pop(flow.id, None)

    def observe(self, event: ObservedEvent) -> None:
        """An A2A event the tap decoded: the players of its server observe it (they advance on it)."""
        if event.protocol != "a2a" or not self.actors:
            return
        for played in self._players(f"{event.endpoint.host}:{event.endpoint.port}"):
            for phase in played.player.observe(event):
                played.player.narrate(phase, say)

    # --- internals ------------------------------------------------------------------------------------------

    def _players(self, server: str) -> list[Played]:
        players = self.servers.get(server)
        if players is None:
            players = self.servers[server] = new_players(self.actors)
        else:
            self.servers.move_to_end(server)
        return players

    def _card(self, exchange: _Exchange, card: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The server's card with the states' `agent_card` fields, and what changed."""
        notes: list[str] = []
        for played, state, where in exchange.states:
            document = mapping(state).get("agent_card")
            if not isinstance(document, Mapping):
                continue
            rendered = played.render(None)(document)
            fields = sorted(k for k, v in rendered.items() if k not in ENDPOINT_FIELDS and card.get(k) != v)
            candidate = {**card, **{k: v for k, v in rendered.items() if k not in ENDPOINT_FIELDS}}
            try:
                a2a_state.core_card(candidate)
            except Refusal as exc:
                log.warning("oatf inject: %s: %s: the card passes without it", printable(where, 200), exc)
                continue
            card = candidate
            if fields:
                notes.append(f"{where}: replaced the Agent Card's {', '.join(fields)} in {exchange.event} (the "
                             "server's endpoint kept)")
        return card, notes

    def _rest_response(self, flow: http.HTTPFlow, exchange: _Exchange, body: Any) -> None:
        """A REST answer (not streamed): the card overlaid, or a message's answer replaced."""
        response = flow.response
        assert response is not None and exchange.rest is not None
        ok = 200 <= response.status_code < 300
        if exchange.event in CARD_EVENTS:
            if ok and isinstance(body, dict):
                card, notes = self._card(exchange, body)
                if notes:
                    response.content = json_bytes(card)
                    self.note(flow, exchange.event, notes)
            return
        replaced = self._answer(exchange, a2a_rest.result(exchange.rest, body) if ok else None, not ok)
        if replaced is not None:
            answer, notes = replaced
            if not ok:
                notes.append(f"the server's HTTP status {response.status_code} replaced by 200")
                response.status_code = 200
            response.headers["content-type"] = "application/json"
            response.content = json_bytes(_rest_result(answer, exchange.rest.v03))
            self.note(flow, exchange.event, notes)

    def _answer(self, exchange: _Exchange, result: Any, is_error: bool) -> tuple[a2a_state.Answer, list[str]] | None:
        """The first state's answer to the request (answered with `result`, or an error), with the real
        server's ids, and what was replaced."""
        real = mapping(exchange.request).get("message") if is_error else result_content(exchange.event, result)
        for played, state, where in exchange.states:
            if not entries(state, "task_responses"):
                continue
            try:
                content, source = a2a_state.task_response(state, exchange.request, played.render(exchange.request))
                answer = a2a_state.to_core(content, source)
            except Refusal as exc:
                log.warning("oatf inject: %s: %s: the server's answer passes", printable(where, 200), exc)
                continue
            _keep_ids(answer, mapping(real))
            what = "error answer" if is_error else "answer"
            return answer, [f"{where}: replaced the server's {what} to {exchange.event} with {source}"]
        return None

    def _stream_event(self, flow: http.HTTPFlow, exchange: _Exchange, raw: bytes) -> bytes:
        """One whole SSE event of a `message/stream` answer: the first answer replaced by the state's stream,
        the server's later answers dropped, anything else as it came."""
        try:
            message = event_data(raw)
            route = exchange.rest
            if not (isinstance(message, dict) if route is not None else answers(message, exchange.request_id)):
                return raw
            assert isinstance(message, dict)
            if exchange.replaced is not None:
                return b"" if exchange.replaced else raw
            is_error = _is_error_event(raw)
            if route is not None:
                replaced = self._answer(exchange, None if is_error else a2a_rest.result(route, message), is_error)
            else:
                replaced = self._answer(exchange, message.get("result"), "error" in message)
            exchange.replaced = replaced is not None
            if replaced is None:
                return raw
            answer, notes = replaced
            self.note(flow, exchange.event, [*notes, "the server's later answers on that stream are dropped"])
            if route is not None:  # an error event's name is not kept
                return b"".join(b"data: " + json_bytes(r) + b"\n\n" if is_error else with_data(raw, json_bytes(r))
                                for r in _rest_stream_results(answer, route.v03))
            return b"".join(with_data(raw, json_bytes({"jsonrpc": "2.0", "id": exchange.request_id, "result": r}))
                            for r in _stream_results(answer, exchange.version_1, exchange.request_id))
        except Exception as exc:  # this event passes as it came
            self.failed("a2a stream", flow, exc)
            return raw


def _exchange(request: http.Request) -> _Exchange | None:
    """The exchange a request starts when its answer may be rewritten: a card fetch, or an A2A JSON-RPC
    request of `ANSWERED_EVENTS`."""
    if request.method == "GET" and request.path.split("?", 1)[0] in CARD_PATHS:
        return _Exchange("agent_card/get", None, False, {})
    path = request.path.split("?", 1)[0]
    route = a2a_rest.match(request.method, path)
    if route is not None and route.distinctive and route.event in ANSWERED_EVENTS:
        body = json_message(request) if request.raw_content else None
        params = a2a_rest.request_params(route, body, list(request.query.items(multi=True)))
        return _Exchange(route.event, None, not route.v03, request_content(params), rest=route)
    if request.method != "POST" or not request.raw_content:
        return None
    message = json_message(request)
    method = message.get("method") if isinstance(message, dict) else None
    if not isinstance(method, str) or event_name(method) not in ANSWERED_EVENTS or "id" not in message:
        return None
    return _Exchange(event_name(method), message["id"], method in METHODS_1_0, request_content(message.get("params")))


def _keep_ids(answer: a2a_state.Answer, real: Mapping[str, Any]) -> None:
    """The real server's task id and `contextId` (0.3 shape: a Task, Message or update) on `answer`."""
    context = real.get("contextId")
    task = real.get("id") if real.get("kind") == "task" else real.get("taskId")
    if isinstance(answer, a2a_pb2.Task):
        if isinstance(task, str) and task:
            answer.id = task
        if isinstance(context, str) and context:
            answer.context_id = context
        if answer.status.HasField("message"):
            answer.status.message.task_id, answer.status.message.context_id = answer.id, answer.context_id
        return
    if isinstance(context, str) and context:
        answer.context_id = context
    if isinstance(task, str) and task:
        answer.task_id = task


def _send_result(answer: a2a_state.Answer, version_1: bool) -> dict[str, Any]:
    """The JSON-RPC result answering `message/send` with `answer`, as the a2a-sdk server writes it."""
    if not version_1:
        return a2a_state.to_v03(answer)
    response = (a2a_pb2.SendMessageResponse(task=answer) if isinstance(answer, a2a_pb2.Task)
                else a2a_pb2.SendMessageResponse(message=answer))
    return MessageToDict(response, preserving_proto_field_name=False)


def _is_error_event(raw: bytes) -> bool:
    """Whether an SSE event is named `error` (the REST binding's error event)."""
    return any(line.strip() in (b"event: error", b"event:error") for line in raw.splitlines())


def _rest_result(answer: a2a_state.Answer, v03: bool) -> dict[str, Any]:
    """The REST body answering `message:send` with `answer`, as the a2a-sdk's REST handlers write it (1.0, or
    0.3's protobuf JSON)."""
    if not v03:
        return _send_result(answer, True)
    compat = (conversions.to_compat_task(answer) if isinstance(answer, a2a_pb2.Task)
              else conversions.to_compat_message(answer))
    return MessageToDict(proto_utils_v03.ToProto.task_or_message(compat))


def _rest_stream_results(answer: a2a_state.Answer, v03: bool) -> list[dict[str, Any]]:
    """The SSE event data streaming `answer` over REST (`a2a_state.stream_items`), as the a2a-sdk writes them."""
    results = []
    for item in a2a_state.stream_items(answer):
        response = proto_utils.to_stream_response(item)
        if v03:
            compat = conversions.to_compat_stream_response(response).result
            results.append(MessageToDict(proto_utils_v03.ToProto.stream_response(compat)))
        else:
            results.append(MessageToDict(response, preserving_proto_field_name=False))
    return results


def _stream_results(answer: a2a_state.Answer, version_1: bool, request_id: Any) -> list[dict[str, Any]]:
    """The JSON-RPC results streaming `answer` (`a2a_state.stream_items`), as the a2a-sdk server writes them."""
    results = []
    for item in a2a_state.stream_items(answer):
        response = proto_utils.to_stream_response(item)
        if version_1:
            results.append(MessageToDict(response, preserving_proto_field_name=False))
        else:
            compat = conversions.to_compat_stream_response(response, request_id)
            results.append(json.loads(compat.model_dump_json(by_alias=True, exclude_none=True))["result"])
    return results

