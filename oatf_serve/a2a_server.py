"""An `a2a_server` actor served with the official `a2a-sdk` (format spec §7.2 "A2A Binding"): the Agent Card at
`/.well-known/agent-card.json` (and the legacy `/.well-known/agent.json`), JSON-RPC at `/` for A2A 1.0 and
0.3 clients alike (the SDK's JSON-RPC routes with its v0.3 compatibility on), `message/stream` as SSE.

`ActorHandler` is the SDK's `RequestHandler` interface played from the state (`oatf_serve.a2a_state`): a
message gets the selected task response, `tasks/get` and `tasks/cancel` the tasks served so far,
`agent/getAuthenticatedExtendedCard` the card; `tasks/pushNotificationConfig/*` keep the agent's push
configurations for the tasks served (`oatf_serve.a2a_push`), to which a phase's `on_enter`
`send_push_notification` POSTs; task subscriptions are answered with the SDK's "unsupported operation" error.
A2A has no session the card fetch and the messages share, so one player follows the actor's phases for every
client of the endpoint.

Each request, once answered, goes to the player (in the binding's 0.3 shapes, `oatf_engine.wire.a2a`), whose
trigger may enter the next phase; its `on_enter` `log` actions go to the console, and its
`send_push_notification` POSTs are sent (the POST is the agent's webhook traffic, not judged).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import httpx
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.types import a2a_pb2
from a2a.utils.errors import (
    A2AError,
    InternalError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from starlette.routing import Route

import oatf
from oatf_engine.text import printable
from oatf_engine.wire.a2a import request_content

from . import a2a_push, a2a_state
from .player import ActorPlayer, Entered, SharedExtractors
from .state import Unplayable, as_is

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
RPC_PATH = "/"
MAX_TASKS = 1000
"""Tasks kept for `tasks/get` (the oldest are forgotten first)."""
PUSH_TIMEOUT = 30.0
"""Seconds a push notification's POST may take."""


def _json(message: Any) -> Any:
    return MessageToDict(message, preserving_proto_field_name=False)


class ActorHandler(RequestHandler):
    """The SDK's request handler playing one `a2a_server` actor (see the module docstring)."""

    def __init__(self, actor: oatf.Actor, url: str, shared: SharedExtractors | None = None,
                 say: Callable[[str], None] = lambda _line: None) -> None:
        self.player = ActorPlayer(actor, shared)
        self.url = url
        self.say = say
        self.tasks: OrderedDict[str, a2a_pb2.Task] = OrderedDict()
        self._messages = itertools.count(1)
        self.push = a2a_push.Registrations()
        self._pushing: set[asyncio.Task[None]] = set()

    def routes(self) -> list[Route]:
        """The card routes and the JSON-RPC route, as the SDK builds them."""
        placeholder = a2a_state.core_card(a2a_state.document_card({}, self.url, as_is))
        card_routes = [route for path in CARD_PATHS
                       for route in create_agent_card_routes(placeholder, card_modifier=self._card, card_url=path)]
        return card_routes + create_jsonrpc_routes(self, RPC_PATH, enable_v0_3_compat=True)

    # --- the card ----------------------------------------------------------------------------------------

    def _current_card(self, event: str) -> a2a_pb2.AgentCard:
        card = a2a_state.document_card(self.player.state(), self.url, self.player.render)
        try:
            core = a2a_state.core_card(card)
        except Unplayable as exc:
            self._exchange(event, {}, {"code": exc.code, "message": str(exc)}, True)
            raise InternalError(message=str(exc)) from None
        self._exchange(event, {}, agent_card_to_dict(core))
        return core

    async def _card(self, _card: a2a_pb2.AgentCard) -> a2a_pb2.AgentCard:
        return self._current_card("agent_card/get")

    async def on_get_extended_agent_card(self, params: a2a_pb2.GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> a2a_pb2.AgentCard:
        return self._current_card("agent/getAuthenticatedExtendedCard")

    # --- messages ----------------------------------------------------------------------------------------

    def _answer(self, params: a2a_pb2.SendMessageRequest, event: str) -> tuple[a2a_state.Answer, Any]:
        request = request_content(_json(params))
        try:
            content, where = a2a_state.task_response(self.player.state(), request,
                                                     lambda value: self.player.render(value, request))
            answer = a2a_state.to_core(content, where)
        except Unplayable as exc:
            self.say(f"actor {self.player.name}, phase {self.player.phase}: {exc}")
            self._exchange(event, request, {"code": exc.code, "message": str(exc)}, True)
            raise InternalError(message=str(exc)) from None
        if isinstance(answer, a2a_pb2.Task):
            self.tasks[answer.id] = answer
            self.tasks.move_to_end(answer.id)
            while len(self.tasks) > MAX_TASKS:
                self.tasks.popitem(last=False)
        return answer, request

    async def on_message_send(self, params: a2a_pb2.SendMessageRequest,
                              context: ServerCallContext) -> a2a_pb2.Task | a2a_pb2.Message:
        answer, request = self._answer(params, "message/send")
        await self._register_sent(params, answer, context)
        self._exchange("message/send", request, a2a_state.to_v03(answer))
        return answer

    async def on_message_send_stream(self, params: a2a_pb2.SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Event]:
        answer, request = self._answer(params, "message/stream")
        await self._register_sent(params, answer, context)
        for item in a2a_state.stream_items(answer):
            yield item
        self._exchange("message/stream", request, a2a_state.to_v03(answer))

    # --- tasks -------------------------------------------------------------------------------------------

    async def on_get_task(self, params: a2a_pb2.GetTaskRequest, context: ServerCallContext) -> a2a_pb2.Task | None:
        task = self.tasks.get(params.id)
        if task is None:
            raise self._error("tasks/get", params, TaskNotFoundError())
        self._exchange("tasks/get", _json(params), a2a_state.to_v03(task))
        return task

    async def on_cancel_task(self, params: a2a_pb2.CancelTaskRequest,
                             context: ServerCallContext) -> a2a_pb2.Task | None:
        """The tasks served are final: none can be canceled."""
        error = TaskNotCancelableError() if params.id in self.tasks else TaskNotFoundError()
        raise self._error("tasks/cancel", params, error)

    async def on_list_tasks(self, params: a2a_pb2.ListTasksRequest,
                            context: ServerCallContext) -> a2a_pb2.ListTasksResponse:
        tasks = list(reversed(self.tasks.values()))
        self._exchange("tasks/list", _json(params), {"tasks": [a2a_state.to_v03(t) for t in tasks]})
        return a2a_pb2.ListTasksResponse(tasks=tasks)

    # --- what is not played: the SDK's "unsupported operation" -------------------------------------------

    def _error(self, event: str, params: Any, error: A2AError) -> A2AError:
        """`error`, once the player saw the request it answers."""
        self._exchange(event, _json(params), {"message": error.message}, True)
        return error

    def _unsupported(self, event: str, params: Any) -> A2AError:
        return self._error(event, params, UnsupportedOperationError())

    async def on_subscribe_to_task(self, params: a2a_pb2.SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Event]:
        raise self._unsupported("tasks/resubscribe", params)
        yield  # an async generator, as the interface declares  # pragma: no cover

    # --- push notifications (`oatf_serve.a2a_push`) -------------------------------------------------------

    async def _register_sent(self, params: a2a_pb2.SendMessageRequest, answer: a2a_state.Answer,
                             context: ServerCallContext) -> None:
        """The push configuration a message carries, kept for the task answering it."""
        config = params.configuration.task_push_notification_config
        if isinstance(answer, a2a_pb2.Task) and params.configuration.HasField("task_push_notification_config") \
                and config.url:
            await self.push.store.set_info(answer.id, config, context)

    async def on_create_task_push_notification_config(self, params: a2a_pb2.TaskPushNotificationConfig,
                                                      context: ServerCallContext) -> a2a_pb2.TaskPushNotificationConfig:
        event = "tasks/pushNotificationConfig/set"
        if params.task_id not in self.tasks:
            raise self._error(event, params, TaskNotFoundError())
        stored = await self.push.store.set_info(params.task_id, params, context)
        self._exchange(event, _json(params), _json(stored))
        return stored

    async def on_get_task_push_notification_config(
            self, params: a2a_pb2.GetTaskPushNotificationConfigRequest,
            context: ServerCallContext) -> a2a_pb2.TaskPushNotificationConfig:
        event = "tasks/pushNotificationConfig/get"
        found = [c for c in await self.push.store.get_info(params.task_id, context) if c.id == params.id]
        if not found:
            raise self._error(event, params, TaskNotFoundError(message="Push notification config not found"))
        self._exchange(event, _json(params), _json(found[0]))
        return found[0]

    async def on_list_task_push_notification_configs(
            self, params: a2a_pb2.ListTaskPushNotificationConfigsRequest,
            context: ServerCallContext) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        listed = a2a_pb2.ListTaskPushNotificationConfigsResponse(
            configs=await self.push.store.get_info(params.task_id, context))
        self._exchange("tasks/pushNotificationConfig/list", _json(params), _json(listed))
        return listed

    async def on_delete_task_push_notification_config(
            self, params: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext) -> None:
        await self.push.store.delete_info(params.task_id, context, params.id)
        self._exchange("tasks/pushNotificationConfig/delete", _json(params), {})

    async def _send_push(self, action: Any) -> None:
        """One `send_push_notification` action (format spec §7.2.6), said on the console."""
        where = f"actor {self.player.name}, phase {printable(self.player.phase, 60)}: on_enter.{a2a_push.ACTION}"
        url = action.get("url") if isinstance(action, Mapping) else None
        try:
            if not isinstance(url, str):
                raise Unplayable("url: not a string")
            event = a2a_push.push_event(action.get("payload"), "payload")
            async with httpx.AsyncClient(trust_env=False, timeout=PUSH_TIMEOUT) as http:
                sent = await self.push.send(http, url, event)
        except Unplayable as exc:
            self.say(f"{where}: not sent: {exc}")
            return
        if sent:
            self.say(f"{where}: POSTed to {printable(', '.join(sent), 300)}")
        else:
            self.say(f"{where}: not sent: no url, and the agent registered none for task "
                     f"{printable(a2a_push.task_of(event), 60)!r}")

    # --- the phases --------------------------------------------------------------------------------------

    def _exchange(self, event: str, request: Any, response: Any, is_error: bool = False) -> None:
        self.enter(self.player.exchange(event, request, response, is_error))

    async def tick(self) -> None:
        """Fire an elapsed `after` timer (format spec §5.3)."""
        self.enter(self.player.tick())

    def enter(self, entered: list[Entered]) -> None:
        for phase in entered:
            self.player.narrate(phase, self.say)
            for key, value in phase.actions:
                if key == a2a_push.ACTION:
                    task = asyncio.get_running_loop().create_task(self._send_push(value))
                    self._pushing.add(task)
                    task.add_done_callback(self._pushing.discard)
