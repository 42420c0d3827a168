"""Inject mode (`--set oatf_inject=PATH,…`, issue 19): in front of the agent's real MCP servers, A2A servers and
AG-UI agents, the proxy plays the documents' `mcp_server`, `a2a_server` and `ag_ui_client` actors *into* the
real traffic, so that an agent working with its own servers (and frontend) meets the attack. Off by default:
while `oatf_inject` is empty no hook touches a flow, and the tap's guarantee stands (not one byte altered).
This module owns the option, the MCP part, and what every part shares (the notes, `tag`); A2A is
`addon.inject_a2a`, AG-UI `addon.inject_ag_ui`.

Each MCP session (its `Mcp-Session-Id`; without one, its endpoint, where each `initialize` starts over) gets,
for every `mcp_server` actor of every document, the phase player `oatf serve` uses
(`oatf_serve.player.ActorPlayer`), and the current phase's state is turned into MCP answers by
`oatf_serve.mcp_state`, as `oatf serve` serves it:
- listings (`tools/list`, `resources/list`, `resources/templates/list`, `prompts/list`; their first page): the
  state's entries replace the real server's entries of the same name (URI) and the others are added; a listing
  the real server refused (it has no such capability) is answered with the state's entries;
- `initialize`: the capabilities of the listings the state has are declared (with `listChanged`), and the
  state's `instructions` replace the server's;
- `tools/call`, `prompts/get` and `resources/read` of an entry the state defines are answered in the `request`
  hook from the document's `responses` (`when` dispatch, templates): never forwarded to the real server;
- every exchange (with the answer as the agent received it) advances the players, and the notifications a phase
  entry sends (`on_enter` `send`, `list_changed` for a changed listing: `mcp_state.entry_messages`) are pushed
  at once into the session's standalone GET stream when it runs (`addon.inject_push`), between the server's
  whole events; else they go ahead of the next JSON-RPC answer of the session that travels in an SSE stream: a
  rewritten POST response stream, or an injected answer (made an SSE stream for them when the client accepts
  one). JSON-RPC requests an `on_enter` sends are not injected (the agent's answer would go to the real
  server): logged.

Bodies: a JSON response is rewritten at `response`; a `text/event-stream` response is rewritten as it streams,
whole event by whole event (`addon.sse_frames`): events not rewritten pass byte for byte, a partial event waits
for its end, so the framing stays correct. Compressed streamed responses, request bodies the client streams and
JSON-RPC batches pass unaltered. `OatfAddon` calls these hooks before its tap's, so the engine judges what the
agent received.

Every alteration is logged (printable, bounded), kept in `flow.metadata["oatf_injected"]` (the altered
message's event name, its sender when it is the client, and the lines), and carried on that message's event
(`ObservedEvent.injected`, live and when a recording is replayed: `addon.recordings`) into the run's report
(`execution_summary.injections`). No exception escapes a hook or a stream function: the flow goes on as it is.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mitmproxy import ctx, exceptions, http

import oatf
from oatf_engine.events import ObservedEvent
from oatf_engine.monitor import load_library
from oatf_engine.text import Once, describe, printable
from oatf_engine.wire.mcp import SESSION_HEADER, VERSION_HEADER, result_for
from oatf_engine.wire.recognition import protocol_of_method
from oatf_serve import mcp_state
from oatf_serve.a2a_push import ACTION as PUSH_ACTION
from oatf_serve.agents import AgentUrls
from oatf_serve.playable import limitations
from oatf_serve.player import Entered

from .inject_a2a import A2aInject
from .inject_ag_ui import AgUiInject
from .inject_players import Played, answers, json_message, new_players
from .inject_push import push
from .inject_tags import METADATA_KEY, tagged
from .sse_frames import EventRewriter, event_data, json_bytes, sse_event, with_data

log = logging.getLogger("oatf.inject")

MAX_SESSIONS = 10_000
"""MCP sessions played at once; the least recently active is forgotten beyond."""
MAX_NOTED_FLOWS = 10_000
"""Flows whose alterations are kept for tagging their events."""
MAX_NOTES = 50
"""Alterations kept per flow."""
MAX_QUEUED = 100
"""Notifications waiting per session."""
LISTINGS = {"tools/list": ("tools", "tools", "name"), "resources/list": ("resources", "resources", "uri"),
            "resources/templates/list": ("resource_templates", "resourceTemplates", "uriTemplate"),
            "prompts/list": ("prompts", "prompts", "name")}
"""Each listing method: the state's key, the result's field, and the field naming an entry."""
CAPABILITIES = {"tools": "tools", "resources": "resources", "resource_templates": "resources", "prompts": "prompts"}
"""The server capability each listed state key needs."""
ANSWERS: dict[str, Callable[[Any, Mapping[str, Any], mcp_state.Render], dict[str, Any]]] = {
    "tools/call": mcp_state.call_tool, "prompts/get": mcp_state.get_prompt,
    "resources/read": mcp_state.read_resource}
"""The requests the state answers itself when it defines the entry asked for."""
NOT_INJECTED = {"elicitations": "elicitation requests are not sent in inject mode",
                "server_info": "the real server's identity is kept in inject mode",
                "protocol_version": "the real server negotiates the version in inject mode"}
"""State keys inject mode does not play (beyond what `oatf serve` does not play: `oatf_serve.playable`)."""
PLAYED_MODES = {"mcp_server": "MCP", "a2a_server": "A2A", "ag_ui_client": "AG-UI"}
"""The actor modes inject mode plays, and the traffic they are played into."""


@dataclass
class _Session:
    """The players of one MCP session, and the notifications waiting for an SSE stream to the agent."""

    players: list[Played]
    queued: list[dict[str, Any]] = field(default_factory=list)
    stream: http.HTTPFlow | None = None
    """The session's standalone GET stream, while it runs (`addon.inject_push`)."""
    pushing: list[dict[str, Any]] = field(default_factory=list)
    """Notifications being pushed into `stream`."""


@dataclass
class _Exchange:
    """An MCP request forwarded to the real server, whose answer is overlaid and played."""

    request_id: Any
    method: str
    params: dict[str, Any]
    session: _Session
    key: str
    streamed: bool = False
    rewriter: EventRewriter | None = None


class Inject:
    """The `oatf_inject` option and the hooks that play its documents into the traffic (module docstring).
    Owned by `OatfAddon`, which forwards its hooks before the tap's."""

    def __init__(self) -> None:
        self.on = False
        """Whether any actor is played (inject mode is on)."""
        self.actors: list[tuple[str, oatf.Actor]] = []
        """(attack key, actor) of every `mcp_server` actor played."""
        self.a2a = A2aInject(self.note, self.failed)
        self.ag_ui = AgUiInject(self.note)
        self.sessions: OrderedDict[str, _Session] = OrderedDict()
        self.exchanges: dict[str, _Exchange] = {}
        self.notes: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Flow id → what was injected into it (the `flow.metadata` entry), for `tag`."""
        self.once = Once()

    # --- the option ---------------------------------------------------------------------------------------

    def load(self, loader: Any) -> None:
        loader.add_option("oatf_inject", str, "", "Inject mode: OATF documents whose mcp_server, a2a_server and "
                          "ag_ui_client actors are played into the agent's traffic with its real MCP servers, "
                          "A2A servers and AG-UI frontends (files or directories, comma-separated; they are "
                          "evaluated too). Empty: off, no byte altered.")

    def configure(self, updated: set[str]) -> None:
        """Load the `oatf_inject` documents; a bad value is an OptionsError (the previous ones stay)."""
        if "oatf_inject" not in updated:
            return
        paths = inject_paths()
        actors: list[tuple[str, oatf.Actor]] = []
        if paths:
            library = load_library(paths, long_lived=True)
            if library.problems:
                raise exceptions.OptionsError("oatf_inject: " + "; ".join(str(p) for p in library.problems[:3]))
            for loaded in library.attacks:
                for line in _limitations(loaded.path, loaded.document):
                    log.warning("oatf inject: %s", printable(line, 500))
                execution = loaded.attack.execution
                assert execution is not None
                actors += [(loaded.key, actor) for actor in execution.actors or () if actor.mode in PLAYED_MODES]
            if not actors:
                raise exceptions.OptionsError(f"oatf_inject: no {', '.join(PLAYED_MODES)} actor in "
                                              f"{', '.join(paths)} (inject mode plays those)")
        self.actors = [(key, actor) for key, actor in actors if actor.mode == "mcp_server"]
        self.a2a.configure([(key, actor) for key, actor in actors if actor.mode == "a2a_server"])
        self.ag_ui.configure([(key, actor) for key, actor in actors if actor.mode == "ag_ui_client"])
        self.on = bool(actors)
        self.sessions.clear()
        self.exchanges.clear()
        for mode in PLAYED_MODES:
            played = sorted({key for key, actor in actors if actor.mode == mode})
            if played:
                log.warning("oatf inject: ON: %d %s actor(s) of %s are played into %s traffic",
                            sum(actor.mode == mode for _, actor in actors), mode, printable(", ".join(played), 300),
                            PLAYED_MODES[mode])

    # --- hooks --------------------------------------------------------------------------------------------

    def request(self, flow: http.HTTPFlow) -> None:
        """Play the agent's MCP request (answer it here when the state defines what it asks for); note an A2A
        request whose answer is rewritten; rewrite an AG-UI run input."""
        if self.on:
            self._guarded("request", flow, lambda: self._request(flow))
            self._guarded("a2a request", flow, lambda: self.a2a.request(flow))
            self._guarded("ag_ui request", flow, lambda: self.ag_ui.request(flow))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """A session's first answer names it; an SSE answer is rewritten as it streams; a session's standalone
        GET stream carries its notifications."""
        if self.actors and flow.id in self.exchanges:
            self._guarded("responseheaders", flow, lambda: self._responseheaders(flow))
        elif self.actors and flow.request.method == "GET":
            self._guarded("responseheaders", flow, lambda: self._standalone_stream(flow))
        if self.on:
            self._guarded("a2a responseheaders", flow, lambda: self.a2a.responseheaders(flow))

    def response(self, flow: http.HTTPFlow) -> None:
        """A JSON answer is rewritten whole."""
        exchange = self.exchanges.pop(flow.id, None)
        if exchange is not None and not exchange.streamed:
            self._guarded("response", flow, lambda: self._response(flow, exchange))
        if self.on:
            self._guarded("a2a response", flow, lambda: self.a2a.response(flow))

    def error(self, flow: http.HTTPFlow) -> None:
        self.exchanges.pop(flow.id, None)
        self.a2a.error(flow)

    def tag(self, event: ObservedEvent) -> ObservedEvent:
        """`event` with what was injected into its flow, when it is the flow's answer (`tagged`); the A2A and
        AG-UI players observe it first (they advance on the traffic as the judge sees it)."""
        if self.on:
            try:
                self.a2a.observe(event)
                self.ag_ui.observe(event)
            except Exception as exc:  # the event goes on to the judge
                if self.once.first("observe", type(exc).__name__):
                    log.error("oatf inject: playing an event of flow %s failed (logged once per kind): %s",
                              event.flow_id, describe(exc))
        return tagged(event, self.notes.get(event.flow_id))

    # --- internals ----------------------------------------------------------------------------------------

    def _request(self, flow: http.HTTPFlow) -> None:
        message = _mcp_message(flow.request)
        if message is None:
            return
        method = message["method"]
        params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
        key = _session_key(flow, flow.request.headers.get(SESSION_HEADER))
        session = self._new_session() if method == "initialize" else self._session(key)
        for played in session.players:
            before = played.player.state()
            self._entered(session, played, played.player.tick(), before)
        self._push(session)
        if "id" not in message:
            self._play(session, method, params, None, False)
        elif not (method in ANSWERS and self._answer(flow, session, message["id"], method, params)):
            self.exchanges[flow.id] = _Exchange(message["id"], method, params, session, key)

    def _answer(self, flow: http.HTTPFlow, session: _Session, request_id: Any, method: str,
                params: dict[str, Any]) -> bool:
        """Answer a request for an entry a player's state defines, in place of the real server."""
        for played in session.players:
            state = played.player.state()
            if not mcp_state.defines(state, method, params):
                continue
            where = played.where()
            try:
                answer, is_error = ANSWERS[method](state, params, played.render(params)), False
            except mcp_state.Refusal as refusal:
                answer, is_error = {"code": refusal.code, "message": str(refusal)}, True
            result = answer if is_error else result_for(answer, flow.request.headers.get(VERSION_HEADER))
            reply = {"jsonrpc": "2.0", "id": request_id, "error" if is_error else "result": result}
            self._play(session, method, params, answer, is_error)
            asked = params.get("name", params.get("uri"))
            notes = [f"{where}: answered {method} {asked!r} (not forwarded to the server)"]
            if session.queued and "text/event-stream" in flow.request.headers.get("accept", ""):
                notes.append(self._queued_note(session))
                body = b"".join(sse_event(m) for m in [*session.queued, reply])
                session.queued = []
                content_type = "text/event-stream"
            else:
                body, content_type = json_bytes(reply), "application/json"
            flow.response = http.Response.make(200, body, {"content-type": content_type})
            self.note(flow, method, notes)
            return True
        return False

    def _responseheaders(self, flow: http.HTTPFlow) -> None:
        exchange = self.exchanges[flow.id]
        response = flow.response
        assert response is not None
        if exchange.method == "initialize":  # the session's players, under the id the server gave it
            self._register(_session_key(flow, response.headers.get(SESSION_HEADER)), exchange.session)
        if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return
        exchange.streamed = True
        if response.headers.get("content-encoding", "identity").lower() not in ("", "identity"):
            self.exchanges.pop(flow.id)
            log.warning("oatf inject: flow %s: a compressed SSE answer to %s passes unaltered", flow.id,
                        printable(exchange.method, 60))
            return
        exchange.rewriter = EventRewriter(flow.id, response.stream, lambda raw: self._event(flow, exchange, raw))
        response.stream = exchange.rewriter

    def _response(self, flow: http.HTTPFlow, exchange: _Exchange) -> None:
        response = flow.response
        message = json_message(response) if response is not None else None
        if response is None or not answers(message, exchange.request_id):
            return
        assert isinstance(message, dict)
        rewritten, notes = self._overlay(exchange, message)
        if rewritten is not message:
            response.content = json_bytes(rewritten)
        self.note(flow, exchange.method, notes)

    def _event(self, flow: http.HTTPFlow, exchange: _Exchange, raw: bytes) -> bytes:
        """One whole SSE event of an answer stream: the answer overlaid, the session's notifications ahead of
        it; the rest (and everything after the answer) as it came."""
        try:
            message = event_data(raw)
            if not answers(message, exchange.request_id):
                return raw
            rewriter = exchange.rewriter
            assert rewriter is not None
            rewriter.passing = True
            rewritten, notes = self._overlay(exchange, message)
            session = exchange.session
            head = b""
            if session.queued:
                notes.append(self._queued_note(session))
                head = b"".join(sse_event(m) for m in session.queued)
                session.queued = []
            self.note(flow, exchange.method, notes)
            return head + (with_data(raw, json_bytes(rewritten)) if rewritten is not message else raw)
        except Exception as exc:  # this event passes as it came
            self.failed("stream", flow, exc)
            return raw

    def _overlay(self, exchange: _Exchange, message: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The answer with the players' states overlaid (the same object when nothing changed), what changed;
        then the exchange, as the agent receives it, is played."""
        notes: list[str] = []
        if exchange.method in LISTINGS and not exchange.params.get("cursor"):
            message = self._listing(exchange, message, notes)
        elif exchange.method == "initialize" and isinstance(message.get("result"), dict):
            message = self._initialize(exchange, message, notes)
        is_error = "error" in message
        self._play(exchange.session, exchange.method, exchange.params,
                   message.get("error") if is_error else message.get("result"), is_error)
        return message, notes

    def _listing(self, exchange: _Exchange, message: dict[str, Any], notes: list[str]) -> dict[str, Any]:
        key, result_field, name = LISTINGS[exchange.method]
        result: dict[str, Any] = message["result"] if isinstance(message.get("result"), dict) else {}
        listed = result.get(result_field)
        entries = list(listed) if isinstance(listed, list) else []
        for played in exchange.session.players:
            for entry in mcp_state.listing(played.player.state(), key, played.render(exchange.params)):
                at = next((i for i, e in enumerate(entries) if isinstance(e, dict) and e.get(name) == entry.get(name)),
                          None)
                if at is None:
                    entries.append(entry)
                else:
                    entries[at] = entry
                notes.append(f"{played.where()}: {'added' if at is None else 'replaced'} {key} entry "
                             f"{entry.get(name)!r} in {exchange.method}")
        if not notes:
            return message
        rewritten = {k: v for k, v in message.items() if k != "error"}
        rewritten["result"] = {**result, result_field: entries}
        if "error" in message:
            notes.append(f"the server's error answer to {exchange.method} replaced")
        return rewritten

    def _initialize(self, exchange: _Exchange, message: dict[str, Any], notes: list[str]) -> dict[str, Any]:
        result = dict(message["result"])
        capabilities = dict(result.get("capabilities") or {})
        for played in exchange.session.players:
            state = played.player.state()
            for key, capability in CAPABILITIES.items():
                declared = capabilities.get(capability)
                declared = declared if isinstance(declared, dict) else {}
                if mcp_state.listing(state, key, played.render(exchange.params)) and not declared.get("listChanged"):
                    capabilities[capability] = {**declared, "listChanged": True}
                    notes.append(f"{played.where()}: declared the {capability} capability (listChanged)")
            _, instructions, _ = mcp_state.server_identity(state, played.render(exchange.params))
            if instructions is not None:
                result["instructions"] = instructions
                notes.append(f"{played.where()}: replaced the server's instructions")
        if not notes:
            return message
        result["capabilities"] = capabilities
        return {**message, "result": result}

    def _standalone_stream(self, flow: http.HTTPFlow) -> None:
        """A session's standalone GET stream (MCP Streamable HTTP: server messages outside any answer): the
        session's notifications are sent on it between the server's events, at once (`addon.inject_push`)."""
        response = flow.response
        session_id = flow.request.headers.get(SESSION_HEADER)
        if (response is None or response.status_code != 200 or not session_id
                or not response.headers.get("content-type", "").lower().startswith("text/event-stream")
                or response.headers.get("content-encoding", "identity").lower() not in ("", "identity")):
            return
        session = self._session(_session_key(flow, session_id))
        response.stream = EventRewriter(flow.id, response.stream, lambda raw: raw,
                                        waiting=lambda: self._flush(flow, session))
        session.stream = flow
        self._push(session)

    def _flush(self, flow: http.HTTPFlow, session: _Session) -> bytes:
        """The notifications waiting for the agent, as SSE events on the standalone stream `flow`."""
        waiting = [*session.pushing, *session.queued]
        if not waiting:
            return b""
        session.pushing, session.queued = [], []
        sent = [m["method"] for m in waiting]
        self.note(flow, sent[0], [f"sent {', '.join(sent)} on the standalone GET stream"])
        return b"".join(sse_event(m) for m in waiting)

    def _push(self, session: _Session) -> None:
        """Send the session's waiting notifications on its standalone GET stream now, if it runs; else they
        wait for it, or for the session's next SSE answer."""
        stream = session.stream
        if not session.queued or stream is None:
            return
        if push(stream, lambda: self._unpushed(session, stream)):
            session.pushing += session.queued
            session.queued = []
        else:
            session.stream = None

    @staticmethod
    def _unpushed(session: _Session, stream: http.HTTPFlow) -> None:
        """The stream ended before the notifications were pushed: they wait again."""
        if session.stream is stream:
            session.stream = None
        session.queued[:0] = session.pushing
        session.pushing = []

    def _play(self, session: _Session, method: str, params: Any, answer: Any, is_error: bool) -> None:
        for played in session.players:
            before = played.player.state()
            self._entered(session, played, played.player.exchange(method, params, answer, is_error), before)
        self._push(session)

    def _entered(self, session: _Session, played: Played, entered: list[Entered], before: Any) -> None:
        """Phases entered: their `log` actions logged, the notifications they send queued for the agent."""
        for phase in entered:
            log.info("oatf inject: %s entered", printable(played.where(), 200))
            for key, value in phase.actions:
                if key == "log" and isinstance(value, Mapping):
                    log.info("oatf inject: %s: log: %s", printable(played.attack, 60),
                             printable(value.get("message", ""), 300))
            for method, params in mcp_state.entry_messages(phase.actions, before, played.player.state()):
                if not method.startswith("notifications/"):
                    log.warning("oatf inject: %s: on_enter request %s not injected (its answer would go to the "
                                "real server)", printable(played.where(), 200), printable(method, 60))
                elif len(session.queued) < MAX_QUEUED:
                    session.queued.append({"jsonrpc": "2.0", "method": method,
                                           **({"params": params} if params is not None else {})})
            before = played.player.state()

    @staticmethod
    def _queued_note(session: _Session) -> str:
        return f"sent {', '.join(m['method'] for m in session.queued)} ahead of the answer"

    def note(self, flow: http.HTTPFlow, method: str, notes: list[str], sender: str = "server") -> None:
        """Log each alteration of `flow`'s message `method` sent by `sender` (the server's answer, or the
        client's request); keep them for its events and the saved flow."""
        if not notes:
            return
        noted = self.notes.setdefault(flow.id, {"method": method, "injected": []})
        if sender != "server":
            noted["sender"] = sender
        self.notes.move_to_end(flow.id)
        while len(self.notes) > MAX_NOTED_FLOWS:
            self.notes.popitem(last=False)
        for note in notes:
            line = printable(note, 300)
            log.info("oatf inject: flow %s: %s", flow.id, line)
            if len(noted["injected"]) < MAX_NOTES:
                noted["injected"].append(line)
        flow.metadata[METADATA_KEY] = {**noted, "injected": list(noted["injected"])}

    def _new_session(self) -> _Session:
        return _Session(new_players(self.actors))

    def _session(self, key: str) -> _Session:
        session = self.sessions.get(key)
        if session is None:
            session = self._new_session()
            self._register(key, session)
        else:
            self.sessions.move_to_end(key)
        return session

    def _register(self, key: str, session: _Session) -> None:
        self.sessions[key] = session
        self.sessions.move_to_end(key)
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)

    def _guarded(self, place: str, flow: http.HTTPFlow, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:  # the flow goes on as it is
            self.exchanges.pop(flow.id, None)
            self.failed(place, flow, exc)

    def failed(self, place: str, flow: http.HTTPFlow, exc: Exception) -> None:
        if self.once.first(place, type(exc).__name__):
            log.error("oatf inject: %s failed on flow %s (logged once per kind): %s", place, flow.id, describe(exc))


def inject_paths() -> list[str]:
    """The files and directories `oatf_inject` names."""
    return [p.strip() for p in ctx.options.oatf_inject.split(",") if p.strip()]


def _limitations(path: str, document: oatf.Document) -> Iterator[str]:
    """What of a document inject mode does not play (`oatf_serve.playable`; the actors of other modes, the keys
    of `NOT_INJECTED`, push notifications)."""
    for limitation in limitations(path, document, AgentUrls("the agent's own traffic")):
        if limitation.field == "state.agent_card.url":
            limitation = dataclasses.replace(limitation, message=(
                "the real server's endpoint fields stay (url, supportedInterfaces, preferredTransport, "
                "additionalInterfaces, protocolVersion): the agent keeps reaching the real server"))
        yield ("not injected: " if limitation.fatal else "injected without: ") + str(limitation)
    assert document.attack is not None and document.attack.execution is not None
    for actor in document.attack.execution.actors or ():
        if actor.mode not in PLAYED_MODES:
            yield (f"not injected: {path}: actor {actor.name or 'default'}: mode: {actor.mode} is not played in "
                   f"inject mode (it plays {', '.join(PLAYED_MODES)}; oatf serve --agent drives it)")
            continue
        for index, phase in enumerate(actor.phases):
            where = f"{path}: actor {actor.name or 'default'}, phase {phase.name or f'phase-{index + 1}'}"
            state = phase.state if isinstance(phase.state, Mapping) and actor.mode == "mcp_server" else {}
            for key in NOT_INJECTED.keys() & state.keys():
                yield f"injected without: {where}: state.{key}: {NOT_INJECTED[key]}"
            if actor.mode == "a2a_server" and any(action.key == PUSH_ACTION for action in phase.on_enter or ()):
                yield (f"injected without: {where}: on_enter.{PUSH_ACTION}: push notifications are not sent in "
                       "inject mode (the agent registers its push URLs with its real server)")


def _mcp_message(request: http.Request) -> dict[str, Any] | None:
    """The MCP JSON-RPC request or notification a buffered POST carries, else None (batches included)."""
    if request.method != "POST" or not request.raw_content:
        return None
    value = json_message(request)
    if (isinstance(value, dict) and value.get("jsonrpc") == "2.0" and isinstance(value.get("method"), str)
            and protocol_of_method(value["method"]) == "mcp"):
        return value
    return None


def _session_key(flow: http.HTTPFlow, session_id: str | None) -> str:
    request = flow.request
    endpoint = f"{request.host}:{request.port}{request.path.split('?', 1)[0]}"
    return f"{endpoint}#{session_id}" if session_id else endpoint


__all__ = ["METADATA_KEY", "Inject", "inject_paths", "tagged"]
