"""An `mcp_server` actor served over MCP Streamable HTTP (MCP 2025-11-25 "Transports") with the official `mcp`
SDK's low-level `Server` and `StreamableHTTPSessionManager` (format spec §7.1 "MCP Binding").

Each MCP session the agent opens gets its own `ActorPlayer`: phases advance on that session's traffic only
(format spec §5.3: "a trigger on an actor matches only events observed on that actor's own protocol
connection"). The answers come from `oatf_serve.mcp_state`; the requests are registered as raw handlers (no
input validation against a tool's `inputSchema`: an attacker's server takes whatever it is sent).

After each request is answered (and on each notification), the exchange goes to the player, and the phases it
enters run their `on_enter` actions (§7.1.6): `send` writes the JSON-RPC message as given (a notification,
or a request whose answer the judge sees but nobody waits for), `log` goes to the console. A phase whose
listing of tools, resources or prompts differs from the previous one also announces it with the matching
`notifications/*/list_changed` when its `on_enter` does not already send it, so that clients which cache
listings see a rug pull. `after` timers are fired by `tick`, called by the front door every so often.

**Stateless endpoints** (`oatf serve --stateless`: no `Mcp-Session-Id`, every request its own MCP session, as
`fastmcp`'s `stateless_http`) have no session to follow the phases, so `StatelessPlayers` keeps one player per
*agent episode*, keyed as the engine keys the runs of such traffic (`oatf_engine.monitor.sessions` rule 3): the
agent is the HTTP client's host (`CLIENT_HOST`, set by the front door for each request), and its episode lasts
while it keeps talking — after `idle_gap` seconds without a request from that host, its next request starts a
new episode at the first phase. Two agents (two hosts) never advance each other's phases, and what the judge
reports as one run (`agent:<host>>…#n`) is what one player played. Such an endpoint has no stream for the
messages the server sends on its own: `on_enter` `send` actions and `list_changed` notifications are not sent,
and an elicitation's answer (a request of its own) cannot reach the request that asked.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from datetime import timedelta
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import pydantic
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.shared.session import RequestResponder

import oatf
from oatf_engine.monitor.episodes import remember
from oatf_engine.text import printable

from . import mcp_state
from .player import ActorPlayer, Entered, SharedExtractors
from .state import Refusal

log = logging.getLogger("oatf.serve")

ELICITATION_TIMEOUT = timedelta(seconds=60)
"""How long a tool call waits for the agent's answer to its elicitation before answering anyway."""

_RESULTS: dict[type, tuple[type[pydantic.BaseModel], Callable[[Any, Mapping[str, Any], Any], dict[str, Any]]]] = {
    types.ListToolsRequest: (types.ListToolsResult, lambda s, _p, r: mcp_state.list_result(s, "tools/list", r)),
    types.CallToolRequest: (types.CallToolResult, mcp_state.call_tool),
    types.ListResourcesRequest: (types.ListResourcesResult,
                                 lambda s, _p, r: mcp_state.list_result(s, "resources/list", r)),
    types.ListResourceTemplatesRequest: (
        types.ListResourceTemplatesResult, lambda s, _p, r: mcp_state.list_result(s, "resources/templates/list", r)),
    types.ReadResourceRequest: (types.ReadResourceResult, mcp_state.read_resource),
    types.ListPromptsRequest: (types.ListPromptsResult, lambda s, _p, r: mcp_state.list_result(s, "prompts/list", r)),
    types.GetPromptRequest: (types.GetPromptResult, mcp_state.get_prompt),
    types.SubscribeRequest: (types.EmptyResult, lambda _s, _p, _r: {}),
    types.UnsubscribeRequest: (types.EmptyResult, lambda _s, _p, _r: {}),
    types.SetLevelRequest: (types.EmptyResult, lambda _s, _p, _r: {}),
    types.CompleteRequest: (types.CompleteResult, lambda _s, _p, _r: {"completion": {"values": []}}),
}
"""Each request the actor answers: the SDK result type, and how its result is built from the state."""
_ELICITING = (types.CallToolRequest, types.GetPromptRequest)
"""Requests during which the state's `elicitations` are sent (§7.1.4)."""
CLIENT_HOST: ContextVar[str] = ContextVar("oatf_serve_client_host", default="")
"""The HTTP client's host of the request being handled (set by the front door; read on stateless endpoints)."""
MAX_EPISODES = 10_000
"""Agent episodes of a stateless endpoint kept at once; the least recently active is forgotten beyond."""


def params_of(request: pydantic.BaseModel) -> dict[str, Any]:
    """A request's or notification's `params` as the agent sent them (the content root, format spec §5.3)."""
    params = getattr(request, "params", None)
    return params.model_dump(by_alias=True, mode="json", exclude_unset=True) if params is not None else {}


class StatelessPlayers:
    """The players of a stateless endpoint, one per agent episode (see the module docstring)."""

    def __init__(self, make: Callable[[], ActorPlayer], idle_gap: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.make = make
        self.idle_gap = idle_gap
        self.clock = clock
        self.episodes: OrderedDict[str, tuple[ActorPlayer, float]] = OrderedDict()
        """Each agent's (client host's) current episode: its player and when it last sent a request."""

    def player(self, host: str) -> ActorPlayer:
        """The player of `host`'s current episode (a new one after `idle_gap` of silence)."""
        now = self.clock()
        episode = self.episodes.get(host)
        player = episode[0] if episode is not None and now - episode[1] <= self.idle_gap else self.make()
        remember(self.episodes, host, (player, now), MAX_EPISODES)
        return player

    def players(self) -> list[ActorPlayer]:
        return [player for player, _ in self.episodes.values()]


class ActorServer(Server[Any, Any]):
    """The low-level server playing one `mcp_server` actor (see the module docstring); `idle_gap` given: a
    stateless endpoint's (`StatelessPlayers`)."""

    def __init__(self, actor: oatf.Actor, shared: SharedExtractors | None = None,
                 say: Callable[[str], None] = lambda _line: None, idle_gap: float | None = None) -> None:
        super().__init__("oatf-server")
        self.actor = actor
        self.shared = shared if shared is not None else SharedExtractors()
        self.say = say
        self.players: WeakKeyDictionary[ServerSession, ActorPlayer] = WeakKeyDictionary()
        self.stateless = StatelessPlayers(lambda: ActorPlayer(actor, self.shared), idle_gap) \
            if idle_gap is not None else None
        self._answers: dict[tuple[int, types.RequestId], tuple[Any, bool]] = {}
        self._ids = itertools.count(1)
        for request_type in _RESULTS:
            self.request_handlers[request_type] = self._handler(request_type)

    def player(self, session: ServerSession) -> ActorPlayer:
        """The player of one MCP session (created at its first message); on a stateless endpoint, its agent
        episode's."""
        player = self.players.get(session)
        if player is None:
            player = self.players[session] = self.stateless.player(CLIENT_HOST.get()) if self.stateless \
                else ActorPlayer(self.actor, self.shared)
        return player

    def create_initialization_options(self, *_args: Any, **_kwargs: Any) -> InitializationOptions:
        """The `initialize` answer of a new session: its first phase's identity (§7.1.4 "First-phase
        capabilities are sent during handshake")."""
        first = oatf.compute_effective_state(self.actor.phases, 0)
        render = ActorPlayer(self.actor, self.shared).render
        info, instructions, capabilities = mcp_state.server_identity(first, render)
        return InitializationOptions(
            server_name=str(info.get("name", "")), server_version=str(info.get("version", "")),
            capabilities=types.ServerCapabilities.model_validate(capabilities), instructions=instructions,
            website_url=info.get("websiteUrl"), icons=info.get("icons"))

    def _handler(self, request_type: type) -> Callable[[Any], Any]:
        result_type, build = _RESULTS[request_type]

        async def handle(request: Any) -> types.ServerResult:
            context = self.request_context
            player = self.player(context.session)
            params = params_of(request)
            key = (id(context.session), context.request_id)
            try:
                answer = build(player.state(), params, lambda value: player.render(value, params))
                result = result_type.model_validate(answer)
            except Refusal as refusal:
                self._answers[key] = ({"code": refusal.code, "message": str(refusal)}, True)
                raise McpError(types.ErrorData(code=refusal.code, message=str(refusal))) from None
            except pydantic.ValidationError as exc:
                message = f"the state's answer to {request.method} is not one the mcp SDK can send: " \
                          f"{printable(exc.errors()[0].get('msg', exc), 200)}"
                self.say(f"actor {player.name}, phase {player.phase}: {message}")
                self._answers[key] = ({"code": -32603, "message": message}, True)
                raise McpError(types.ErrorData(code=-32603, message=message)) from None
            if request_type in _ELICITING:
                await self._elicit(context.session, context.request_id, player, params)
            self._answers[key] = (answer, False)
            return types.ServerResult(result)  # type: ignore[arg-type]

        return handle

    async def _elicit(self, session: ServerSession, request_id: types.RequestId, player: ActorPlayer,
                      params: Mapping[str, Any]) -> None:
        """Send the state's elicitation for this request, if any, and wait for the agent's answer (§7.1.4)."""
        elicitation = mcp_state.elicitation(player.state(), params, lambda value: player.render(value, params))
        if elicitation is None:
            return
        try:
            request = types.ElicitRequest.model_validate({"method": "elicitation/create", "params": elicitation})
            answer = await session.send_request(
                types.ServerRequest(request), types.ElicitResult, request_read_timeout_seconds=ELICITATION_TIMEOUT,
                metadata=ServerMessageMetadata(related_request_id=request_id))
        except pydantic.ValidationError as exc:
            self.say(f"actor {player.name}, phase {player.phase}: state.elicitations: not sent: "
                     f"{printable(exc.errors()[0].get('msg', exc), 200)}")
            return
        except McpError as exc:  # declined, unsupported, timed out: the judge saw what happened
            log.info("elicitation not answered: %s", printable(exc.error.message))
            return
        entered = player.exchange("elicitation/create", answer.model_dump(by_alias=True, mode="json",
                                                                           exclude_unset=True))
        await self.enter(session, player, entered)

    async def _handle_message(self, message: Any, session: ServerSession, lifespan_context: Any,
                              raise_exceptions: bool = False) -> None:
        """The SDK's dispatch (answers the request), then the exchange is played (see the module docstring)."""
        await super()._handle_message(message, session, lifespan_context, raise_exceptions)
        if isinstance(message, RequestResponder):
            request = message.request.root
            answer, is_error = self._answers.pop((id(session), message.request_id), (None, False))
        elif isinstance(message, types.ClientNotification):
            request, answer, is_error = message.root, None, False
        else:
            return
        player = self.player(session)
        before = player.state()
        entered = player.exchange(request.method, params_of(request), answer, is_error)
        await self.enter(session, player, entered, before)

    async def tick(self) -> None:
        """Fire the elapsed `after` timers of every session (format spec §5.3); on a stateless endpoint, of
        every agent episode (with no stream to send their `on_enter` messages on)."""
        if self.stateless is not None:
            for player in self.stateless.players():
                for phase in player.tick():
                    player.narrate(phase, self.say)
            return
        for session, player in list(self.players.items()):
            before = player.state()
            entered = player.tick()
            if entered:
                await self.enter(session, player, entered, before)

    async def enter(self, session: ServerSession, player: ActorPlayer, entered: list[Entered],
                    before: Any = None) -> None:
        """Run the `on_enter` actions of the phases entered, and announce changed listings."""
        for phase in entered:
            player.narrate(phase, self.say)
            for method, params in mcp_state.entry_messages(phase.actions, before, player.state()):
                await self._send(session, method, params)
            before = player.state()

    async def _send(self, session: ServerSession, method: str, params: Any) -> None:
        """One JSON-RPC message to the agent, as the document gives it (on the session's standalone stream)."""
        fields: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            fields["params"] = params
        message: types.JSONRPCNotification | types.JSONRPCRequest = (
            types.JSONRPCNotification(**fields) if method.startswith("notifications/")
            else types.JSONRPCRequest(id=f"oatf-{next(self._ids)}", **fields))
        try:
            await session.send_message(SessionMessage(types.JSONRPCMessage(message)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.info("%s not sent: the session is closed", method)
