"""An `mcp_server` actor served over MCP Streamable HTTP (MCP 2025-11-25 and 2026-07-28 "Transports") with the
official `mcp` 2 SDK's low-level `Server` and `StreamableHTTPSessionManager` (format spec §7.1 "MCP Binding").

Each MCP session the agent opens gets its own `ActorPlayer`: phases advance on that session's traffic only
(format spec §5.3: "a trigger on an actor matches only events observed on that actor's own protocol
connection"). The SDK builds a `ServerSession` per request; the session a player follows is the connection it
wraps. The answers come from `oatf_serve.mcp_state`; the requests are registered as raw handlers (the params
as the agent sent them; no input validation against a tool's `inputSchema`: an attacker's server takes
whatever it is sent).

Each request is answered, then the exchange goes to the player (`_played`, the server's middleware; on each
notification too; the handshake's `initialize` and `server/discover`, answered from the server's identity,
are not played), and the phases it enters run their `on_enter` actions (§7.1.6), right after the answer:
`send` writes the JSON-RPC message as given (a notification, or a request whose answer the judge sees but
nobody waits for), `log` goes to the console. A phase whose listing of tools, resources or prompts differs
from the previous one also announces it with the matching `notifications/*/list_changed` when its `on_enter`
does not already send it, so that clients which cache listings see a rug pull. `after` timers are fired by
`tick`, called by the front door every so often.

**Sessionless traffic** — a stateless endpoint's (`oatf serve --stateless`: no `Mcp-Session-Id`, every request
its own MCP session, as `fastmcp`'s `stateless_http`), and the requests of the stateless revision 2026-07-28
on any endpoint (`server/discover`, no `initialize`: what `fastmcp` 4's client, and so `pydantic-ai`'s,
negotiates by default) — has no session to follow the phases, so `StatelessPlayers` keeps one player per
*agent episode*, keyed as the engine keys the runs of such traffic (`oatf_engine.monitor.sessions` rule 3): the
agent is the HTTP client's host (`CLIENT_HOST`, set by the front door for each request), and its episode lasts
while it keeps talking — after `idle_gap` seconds without a request from that host, its next request starts a
new episode at the first phase. Two agents (two hosts) never advance each other's phases, and what the judge
reports as one run (`agent:<host>>…#n`) is what one player played. Such traffic has no stream for the
messages the server sends on its own: `on_enter` `send` actions and `list_changed` notifications are not sent.
The stateless revision asks its elicitations in the result instead (`_ask_in_result`: multi round-trip
requests); on a `--stateless` endpoint spoken to with the `initialize` handshake, an elicitation's answer (a
request of its own) cannot reach the request that asked.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from contextvars import ContextVar
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import pydantic
from mcp import types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

import oatf
from oatf_engine.monitor.episodes import remember
from oatf_engine.text import printable

from . import mcp_state
from .player import ActorPlayer, Entered, SharedExtractors
from .state import Refusal

log = logging.getLogger("oatf.serve")

ELICITATION_TIMEOUT = 60.0
"""How long a tool call waits for the agent's answer to its elicitation before answering anyway (seconds)."""

_Build = Callable[[Any, Mapping[str, Any], Any], dict[str, Any]]
_RESULTS: dict[str, tuple[type[pydantic.BaseModel], type[pydantic.BaseModel], _Build]] = {
    "tools/list": (types.PaginatedRequestParams, types.ListToolsResult,
                   lambda s, _p, r: mcp_state.list_result(s, "tools/list", r)),
    "tools/call": (types.CallToolRequestParams, types.CallToolResult, mcp_state.call_tool),
    "resources/list": (types.PaginatedRequestParams, types.ListResourcesResult,
                       lambda s, _p, r: mcp_state.list_result(s, "resources/list", r)),
    "resources/templates/list": (types.PaginatedRequestParams, types.ListResourceTemplatesResult,
                                 lambda s, _p, r: mcp_state.list_result(s, "resources/templates/list", r)),
    "resources/read": (types.ReadResourceRequestParams, types.ReadResourceResult, mcp_state.read_resource),
    "prompts/list": (types.PaginatedRequestParams, types.ListPromptsResult,
                     lambda s, _p, r: mcp_state.list_result(s, "prompts/list", r)),
    "prompts/get": (types.GetPromptRequestParams, types.GetPromptResult, mcp_state.get_prompt),
    "resources/subscribe": (types.SubscribeRequestParams, types.EmptyResult, lambda _s, _p, _r: {}),
    "resources/unsubscribe": (types.UnsubscribeRequestParams, types.EmptyResult, lambda _s, _p, _r: {}),
    "logging/setLevel": (types.SetLevelRequestParams, types.EmptyResult, lambda _s, _p, _r: {}),
    "completion/complete": (types.CompleteRequestParams, types.CompleteResult,
                            lambda _s, _p, _r: {"completion": {"values": []}}),
}
"""Each request the actor answers: the SDK's params and result types, and how its result is built from the
state."""
_ELICITING = ("tools/call", "prompts/get")
"""Requests during which the state's `elicitations` are sent (§7.1.4)."""
INPUT_KEY = "oatf-elicitation"
"""The key under which a request of the stateless revision is asked the state's elicitation in its result."""
_HANDSHAKE = ("initialize", "server/discover")
"""Requests the SDK answers from the server's identity, which the player does not see (as with mcp 1)."""
CLIENT_HOST: ContextVar[str] = ContextVar("oatf_serve_client_host", default="")
"""The HTTP client's host of the request being handled (set by the front door; read for sessionless traffic)."""
MAX_EPISODES = 10_000
"""Agent episodes of sessionless traffic kept at once; the least recently active is forgotten beyond."""


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


class ActorServer(Server[Any]):
    """The low-level server playing one `mcp_server` actor (see the module docstring): a stateless endpoint's
    when `stateless`; `idle_gap` splits the agent episodes of sessionless traffic (`StatelessPlayers`)."""

    def __init__(self, actor: oatf.Actor, shared: SharedExtractors, say: Callable[[str], None], idle_gap: float,
                 stateless: bool = False) -> None:
        self.actor = actor
        self.shared = shared
        first = oatf.compute_effective_state(actor.phases, 0)
        info, instructions, capabilities = mcp_state.server_identity(first, ActorPlayer(actor, self.shared).render)
        super().__init__(str(info.get("name", "")), version=str(info.get("version", "")), instructions=instructions,
                         website_url=info.get("websiteUrl"), icons=info.get("icons"))
        self.capabilities = types.ServerCapabilities.model_validate(capabilities)
        self.say = say
        self.players: WeakKeyDictionary[Connection, ActorPlayer] = WeakKeyDictionary()
        self.sessionless = StatelessPlayers(lambda: ActorPlayer(actor, self.shared), idle_gap)
        self.stateless = stateless
        self._answers: dict[tuple[int, types.RequestId], tuple[Any, bool]] = {}
        self._ids = itertools.count(1)
        self._pending: set[asyncio.Task[None]] = set()
        for method, (params_type, result_type, build) in _RESULTS.items():
            self.add_request_handler(method, params_type, self._handler(result_type, build))
        self.middleware.append(self._played)

    def player(self, session: ServerSession) -> ActorPlayer:
        """The player of one MCP session (created at its first message); on a stateless endpoint and for
        requests of a sessionless revision (2026-07-28), its agent episode's."""
        connection = _connection(session)
        player = self.players.get(connection)
        if player is None:
            sessionless = self.stateless or session.protocol_version in MODERN_PROTOCOL_VERSIONS
            player = self.players[connection] = self.sessionless.player(CLIENT_HOST.get()) if sessionless \
                else ActorPlayer(self.actor, self.shared)
        return player

    def create_initialization_options(self, *_args: Any, **_kwargs: Any) -> InitializationOptions:
        """The `initialize` answer of a new session: its first phase's identity (§7.1.4 "First-phase
        capabilities are sent during handshake")."""
        return InitializationOptions(
            server_name=self.name, server_version=self.version, capabilities=self.capabilities,
            instructions=self.instructions, website_url=self.website_url, icons=self.icons)

    def get_capabilities(self, *_args: Any, **_kwargs: Any) -> types.ServerCapabilities:
        """The first phase's capabilities as the document declares them, in `initialize` and `server/discover`
        answers alike (not derived from the handlers registered)."""
        return self.capabilities

    def _handler(self, result_type: type[pydantic.BaseModel], build: _Build) -> Callable[..., Any]:
        async def handle(context: ServerRequestContext[Any], _params: Any) -> pydantic.BaseModel:
            player = self.player(context.session)
            params = dict(context.params or {})
            key = (id(_connection(context.session)), context.request_id or "")
            in_result = context.method in _ELICITING and context.session.protocol_version in MODERN_PROTOCOL_VERSIONS
            if in_result:
                asked = await self._ask_in_result(context.session, player, params)
                if asked is not None:
                    self._answers[key] = (asked, False)
                    return types.InputRequiredResult.model_validate(asked)
            try:
                answer = build(player.state(), params, lambda value: player.render(value, params))
                result = result_type.model_validate(answer)
            except Refusal as refusal:
                self._answers[key] = ({"code": refusal.code, "message": str(refusal)}, True)
                raise MCPError(code=refusal.code, message=str(refusal)) from None
            except pydantic.ValidationError as exc:
                message = f"the state's answer to {context.method} is not one the mcp SDK can send: " \
                          f"{printable(exc.errors()[0].get('msg', exc), 200)}"
                self.say(f"actor {player.name}, phase {player.phase}: {message}")
                self._answers[key] = ({"code": -32603, "message": message}, True)
                raise MCPError(code=-32603, message=message) from None
            if context.method in _ELICITING and context.request_id is not None and not in_result:
                await self._elicit(context.session, context.request_id, player, params)
            self._answers[key] = (answer, False)
            return result

        return handle

    def _elicitation(self, player: ActorPlayer, params: Mapping[str, Any]) -> types.ElicitRequest | None:
        """The state's elicitation for a request with `params`, if any and one the SDK can send (§7.1.4)."""
        elicitation = mcp_state.elicitation(player.state(), params, lambda value: player.render(value, params))
        if elicitation is None:
            return None
        try:
            return types.ElicitRequest.model_validate({"method": "elicitation/create", "params": elicitation})
        except pydantic.ValidationError as exc:
            self.say(f"actor {player.name}, phase {player.phase}: state.elicitations: not sent: "
                     f"{printable(exc.errors()[0].get('msg', exc), 200)}")
            return None

    async def _ask_in_result(self, session: ServerSession, player: ActorPlayer,
                             params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The stateless revision 2026-07-28 has no stream for the server's own requests: the state's
        elicitation for a request of that revision is asked in its result (an `InputRequiredResult` under key
        `INPUT_KEY`: multi round-trip requests, SEP-2322), returned here; the agent's retry carries the answer
        in `inputResponses`, played as the elicitation's exchange before the retried request is answered (None:
        answer it)."""
        responses = params.get("inputResponses")
        answer = responses.get(INPUT_KEY) if isinstance(responses, dict) else None
        if answer is not None:
            await self.enter(session, player, player.exchange("elicitation/create", answer))
            return None
        request = self._elicitation(player, params)
        if request is None:
            return None
        asked = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {"resultType": "input_required", "inputRequests": {INPUT_KEY: asked},
                "requestState": f"oatf-{next(self._ids)}"}

    async def _elicit(self, session: ServerSession, request_id: types.RequestId, player: ActorPlayer,
                      params: Mapping[str, Any]) -> None:
        """Send the state's elicitation for this request, if any, and wait for the agent's answer (§7.1.4)."""
        request = self._elicitation(player, params)
        if request is None:
            return
        try:
            answer = await session.send_request(
                request, types.ElicitResult, request_read_timeout_seconds=ELICITATION_TIMEOUT,
                metadata=ServerMessageMetadata(related_request_id=request_id))
        except MCPError as exc:  # declined, unsupported, timed out, no back-channel: the judge saw what happened
            log.info("elicitation not answered: %s", printable(exc.error.message))
            return
        entered = player.exchange("elicitation/create", answer.model_dump(by_alias=True, mode="json",
                                                                           exclude_unset=True))
        await self.enter(session, player, entered)

    async def _played(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """The server middleware: the SDK's dispatch answers the message, then the exchange is played (see the
        module docstring)."""
        try:
            return await call_next(ctx)
        finally:
            if ctx.request_id is None or ctx.method not in _HANDSHAKE:
                key = (id(_connection(ctx.session)), ctx.request_id or "")
                answer, is_error = self._answers.pop(key, (None, False))
                player = self.player(ctx.session)
                before = player.state()
                entered = player.exchange(ctx.method, dict(ctx.params or {}), answer, is_error)
                if entered:
                    self._soon(self.enter(ctx.session, player, entered, before))

    def _soon(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` once the answer being built has gone out (the messages of the phases it entered follow
        it, as they followed it with mcp 1)."""
        task = asyncio.get_running_loop().create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def tick(self) -> None:
        """Fire the elapsed `after` timers of every session (format spec §5.3) and of every agent episode of
        sessionless traffic (with no stream to send their `on_enter` messages on)."""
        for player in self.sessionless.players():
            for phase in player.tick():
                player.narrate(phase, self.say)
        sessions = {id(player) for player in self.sessionless.players()}
        for connection, player in list(self.players.items()):
            if id(player) in sessions:
                continue
            before = player.state()
            entered = player.tick()
            if entered:
                await self._enter(connection, player, entered, before)

    async def enter(self, session: ServerSession, player: ActorPlayer, entered: list[Entered],
                    before: Any = None) -> None:
        await self._enter(_connection(session), player, entered, before)

    async def _enter(self, connection: Connection, player: ActorPlayer, entered: list[Entered],
                     before: Any = None) -> None:
        """Run the `on_enter` actions of the phases entered, and announce changed listings."""
        for phase in entered:
            player.narrate(phase, self.say)
            for method, params in mcp_state.entry_messages(phase.actions, before, player.state()):
                await self._send(connection, method, params)
            before = player.state()

    async def _send(self, connection: Connection, method: str, params: Any) -> None:
        """One JSON-RPC message to the agent, as the document gives it, on the session's standalone stream (a
        request's answer is the judge's, nobody waits for it here)."""
        if not connection.has_standalone_channel or connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
            log.info("%s not sent: the connection has no stream for it", method)
            return
        if method.startswith("notifications/"):
            await connection.notify(method, params)
            return
        self._soon(self._request(connection, f"oatf-{next(self._ids)}", method, params))

    @staticmethod
    async def _request(connection: Connection, label: str, method: str, params: Any) -> None:
        try:
            await connection.send_raw_request(method, params, {"timeout": ELICITATION_TIMEOUT})
        except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            log.info("%s %s: %s", label, method, printable(str(exc), 200))


def _connection(session: ServerSession) -> Connection:
    """The MCP connection (session) a request arrived on. mcp 2 builds a `ServerSession` per request; the
    connection object it wraps is the one that lives as long as the MCP session (one per request on a
    stateless endpoint and in the 2026-07-28 revision)."""
    connection: Connection = session._connection  # the SDK exposes it to handlers through the session only
    return connection
