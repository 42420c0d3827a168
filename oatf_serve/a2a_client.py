"""An `a2a_client` actor driven against the agent's A2A endpoint (`--agent URL`, the agent's base URL; format
spec §7.2.5 "Execution State (A2A Client)"): the attacker plays a client agent, with the official `a2a-sdk`
client (its card resolver, `ClientFactory` and JSON-RPC transports, A2A 1.0 or 0.3 as the agent's card
says), every byte through the actor's tap (`oatf_serve.client`).

Each phase entered sends its `actions`, one at a time, each awaited to its end: `method` and `params` as
written in A2A 0.3 JSON (rendered: `{{extractor}}`, `{{actor.extractor}}`), converted with the SDK's
`a2a.compat.v0_3` (what its types cannot carry is named at start by `oatf_serve.playable`). The methods the
SDK's client sends (`CALLS`): `agent_card/get` (the card, from the agent's well-known path), `message/send`,
`message/stream` (the stream read to its end), `tasks/get`, `tasks/cancel`, `tasks/resubscribe`,
`agent/getAuthenticatedExtendedCard`. The client needs the agent's card to choose its transport: the first
action fetches it when it is not `agent_card/get` itself (that fetch is then the action); an agent whose card
says it does not stream gets `message/stream` unstreamed (the SDK client's choice, said at the time). An error answer is
said and the next action goes on; once a trigger has entered another phase, the rest are not sent. The
agent's answers and streamed events (`task/status`, `task/artifact`) are the actor's events (§7.2.2).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pydantic
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.types import a2a_pb2
from a2a.utils.errors import A2AError
from google.protobuf.message import Message

from oatf_engine.text import printable

from .client import TIMEOUT, ClientActor
from .player import Entered
from .state import Unplayable

CARD = "agent_card/get"
STREAMED = frozenset({"message/stream", "tasks/resubscribe"})
"""The methods whose answer is a stream (SSE), read to its end."""


@dataclass(frozen=True)
class Call:
    """How one 0.3 method is sent with the SDK's client."""

    request_type: type[pydantic.BaseModel]
    """The 0.3 JSON-RPC request, which reads the document's params."""
    to_core: Callable[[Any], Message]
    """Its conversion to the SDK's 1.0 request."""
    to_compat: Callable[[Any, int], pydantic.BaseModel]
    """And back (to name what the conversion lost)."""
    invoke: Callable[[Client, Any], Awaitable[Any]]
    """Sends it with the SDK's client and reads the answer to its end (the tap decodes it as it passes)."""


async def _drain(answers: AsyncIterator[Any]) -> None:
    async for _ in answers:
        pass


CALLS = {
    "message/send": Call(types_v03.SendMessageRequest, conversions.to_core_send_message_request,
                         conversions.to_compat_send_message_request,
                         lambda client, request: _drain(client.send_message(request))),
    "message/stream": Call(types_v03.SendStreamingMessageRequest, conversions.to_core_send_message_request,
                           conversions.to_compat_send_message_request,
                           lambda client, request: _drain(client.send_message(request))),
    "tasks/get": Call(types_v03.GetTaskRequest, conversions.to_core_get_task_request,
                      conversions.to_compat_get_task_request, lambda client, request: client.get_task(request)),
    "tasks/cancel": Call(types_v03.CancelTaskRequest, conversions.to_core_cancel_task_request,
                         conversions.to_compat_cancel_task_request,
                         lambda client, request: client.cancel_task(request)),
    "tasks/resubscribe": Call(types_v03.TaskResubscriptionRequest, conversions.to_core_subscribe_to_task_request,
                              conversions.to_compat_subscribe_to_task_request,
                              lambda client, request: _drain(client.subscribe(request))),
    "agent/getAuthenticatedExtendedCard": Call(
        types_v03.GetAuthenticatedExtendedCardRequest, conversions.to_core_get_extended_agent_card_request,
        conversions.to_compat_get_extended_agent_card_request,
        lambda client, request: client.get_extended_agent_card(request)),
}
"""The 0.3 methods the SDK's client sends (see the module docstring); `message/stream` and
`tasks/resubscribe` with the streaming client."""


def core_request(method: str, params: Any) -> Message:
    """The SDK's request for `method` with the document's 0.3 `params`; `Unplayable` when the SDK's client
    does not send the method or its types do not take the params."""
    if method not in CALLS:
        raise Unplayable(f"{method} is not a method the a2a-sdk client sends "
                         f"(it sends {', '.join([CARD, *CALLS])})")
    call = CALLS[method]
    try:
        read = call.request_type.model_validate({"jsonrpc": "2.0", "id": 0, "method": method,
                                                 "params": params if params is not None else {}})
        return call.to_core(read)
    except (pydantic.ValidationError, ValueError, TypeError) as exc:
        detail = exc.errors()[0] if isinstance(exc, pydantic.ValidationError) else None
        message = f"{'.'.join(map(str, detail['loc']))}: {detail['msg']}" if detail else str(exc)
        raise Unplayable(f"not {method} params the a2a-sdk can send: {printable(message, 200)}") from None


def sent_params(method: str, core: Message) -> Any:
    """The params the SDK sends for `core` (0.3 JSON): what of the document's is carried."""
    compat = CALLS[method].to_compat(core, 0)
    return compat.model_dump(by_alias=True, exclude_none=True, mode="json").get("params", {})


class A2aClientActor(ClientActor):
    """One `a2a_client` actor run against the agent (see the module docstring)."""

    http: httpx.AsyncClient
    card: a2a_pb2.AgentCard
    clients: dict[bool, Client]
    """The SDK's clients made from the agent's card, by whether they stream."""

    async def run(self) -> None:
        """Play every phase."""
        self.clients = {}
        async with httpx.AsyncClient(transport=self.tap, timeout=TIMEOUT, trust_env=False) as self.http:
            try:
                await self.play_phases()
            finally:
                for client in self.clients.values():
                    await client.close()

    async def play(self, entered: list[Entered]) -> None:
        index = self.player.machine.index
        actions = self.requests().get("actions")
        for number, action in enumerate(actions if isinstance(actions, list) else ()):
            if self.left(index):
                return
            if isinstance(action, Mapping) and isinstance(action.get("method"), str):
                rendered = self.player.render(action)
                await self._send(rendered["method"], rendered.get("params"), f"state.actions[{number}]")

    async def _card(self) -> None:
        """Fetch the agent's card (an exchange of its own), and make the SDK's clients from it."""
        self.card = await A2ACardResolver(self.http, self.agent).get_agent_card()
        for streaming in (False, True):
            self.clients[streaming] = ClientFactory(ClientConfig(httpx_client=self.http, streaming=streaming)) \
                .create(self.card)

    async def _send(self, method: str, params: Any, where: str) -> None:
        try:
            if method == CARD:
                await self._card()
                return
            request = core_request(method, params)
            if not self.clients:
                await self._card()
            if method in STREAMED and not self.card.capabilities.streaming:
                self.say(f"actor {self.player.name}: the agent's card says it does not stream: the a2a-sdk client "
                         f"sends {method} unstreamed")
            await CALLS[method].invoke(self.clients[method in STREAMED], request)
        except Unplayable as exc:
            self.say(f"actor {self.player.name}, phase {printable(self.player.phase, 60)}: {where}: not sent: {exc}")
        except (A2AError, A2AClientError, httpx.HTTPError, ValueError) as exc:  # the judge saw the answer
            self.say(f"actor {self.player.name}: {printable(method, 60)} failed: "
                     f"{printable(str(exc) or type(exc).__name__, 200)}")
