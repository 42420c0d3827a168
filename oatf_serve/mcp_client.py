"""An `mcp_client` actor driven against the agent's MCP server endpoint (`--agent URL`, Streamable HTTP; format
spec §7.1.5 "Execution State (MCP Client)"): the attacker plays an MCP client, with the official `mcp` SDK's
`ClientSession` over `streamable_http_client`, every byte through the actor's tap (`oatf_serve.client`).

- **Connection.** `initialize` carries the first phase's `client_info` and `capabilities` as the document
  gives them (§7.1.5 defaults: `{name: oatf-client, version: 1.0.0}`, `{roots: {listChanged: true}}`), so
  the agent sees exactly the capabilities the attack declares, whatever callbacks the session has.
- **Requests.** Each phase entered sends its `on_enter` `send` messages (§7.1.6), then its `actions`
  (§7.1.5), one at a time, each awaited: `method` and `params` as written (rendered: `{{extractor}}`,
  `{{actor.extractor}}`), any method — a `notifications/…` method is sent as a notification. An error answer
  is said and the next action goes on; once a trigger has entered another phase, the rest are not sent.
- **The agent's requests.** `sampling/createMessage`, `elicitation/create` and `roots/list` are answered from
  the state of the phase they arrived in: the entry of `sampling_responses` / `elicitation_responses` whose
  `when` matches the request params (§7.0.1), its `content` pass-through (an elicitation's `action` defaults
  to `accept`); `roots` verbatim. No entry, or one with only `synthesize`: a JSON-RPC error naming the field.
- The actor's events are the agent's answers (under the method of the request they answer), its
  notifications and its requests (§7.1.2), decoded by the actor's own decoder as the judge decodes them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import httpx2
import pydantic
from mcp import ClientSession, types
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from oatf_engine.text import printable

from .client import TIMEOUT, ClientActor
from .player import Entered
from .state import INTERNAL_ERROR, Unplayable, dispatch, mapping

DEFAULT_CLIENT_INFO = {"name": "oatf-client", "version": "1.0.0"}
DEFAULT_CAPABILITIES: dict[str, Any] = {"roots": {"listChanged": True}}
"""§7.1.5: `client_info` and `capabilities` when the state has none."""
REQUEST_TIMEOUT = 300.0
"""How long an action waits for the agent's answer, in seconds (an agent's tool may think for minutes)."""


class _Request(types.Request[dict[str, Any] | None, str]):
    """Any request, as the document writes it (the SDK's typed requests would refuse unknown methods)."""


class _Notification(types.Notification[dict[str, Any] | None, str]):
    """Any notification, as the document writes it."""


class _Session(ClientSession):
    """The SDK's session, whose `initialize` declares the document's identity (see the module docstring)."""

    def __init__(self, actor: McpClientActor, read: Any, write: Any) -> None:
        super().__init__(read, write, sampling_callback=actor.sample,
                         elicitation_callback=actor.elicit, list_roots_callback=actor.roots)
        self.actor = actor

    async def initialize(self) -> types.InitializeResult:
        state = mapping(self.actor.player.state())
        info = state.get("client_info")
        capabilities = state.get("capabilities")
        params = {"protocolVersion": types.LATEST_PROTOCOL_VERSION,
                  "capabilities": self.actor.player.render(capabilities) if isinstance(capabilities, Mapping)
                  else DEFAULT_CAPABILITIES,
                  "clientInfo": self.actor.player.render(info) if isinstance(info, Mapping) else DEFAULT_CLIENT_INFO}
        result = await self.send_request(_Request(method="initialize", params=params), types.InitializeResult)
        self.adopt(result)
        await self.send_notification(types.InitializedNotification())
        return result


class _Httpx2Tap(httpx2.AsyncBaseTransport):
    """The actor's tap (an httpx transport) under the `mcp` SDK's client, which speaks `httpx2`."""

    def __init__(self, tap: httpx.AsyncBaseTransport) -> None:
        self.tap = tap

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.tap.handle_async_request(httpx.Request(
            request.method, str(request.url), headers=request.headers.raw, content=await request.aread(),
            extensions=request.extensions))
        return httpx2.Response(response.status_code, headers=response.headers.raw, stream=_Httpx2Stream(response),
                               extensions=response.extensions)

    async def aclose(self) -> None:
        await self.tap.aclose()


class _Httpx2Stream(httpx2.AsyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        await self.response.aclose()


class McpClientActor(ClientActor):
    """One `mcp_client` actor run against the agent (see the module docstring)."""

    answered = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})

    session: ClientSession

    async def run(self) -> None:
        """Connect, play every phase, close the session."""
        timeout = httpx2.Timeout(TIMEOUT.connect, read=TIMEOUT.read)
        async with httpx2.AsyncClient(transport=_Httpx2Tap(self.tap), timeout=timeout, trust_env=False) as http, \
                streamable_http_client(self.agent, http_client=http) as (read, write), \
                _Session(self, read, write) as self.session:
            await self.session.initialize()
            await self.play_phases()

    async def play(self, entered: list[Entered]) -> None:
        index = self.player.machine.index
        messages = [value for phase in entered for key, value in phase.actions if key == "send"]
        actions = self.requests().get("actions")
        messages += [self.player.render(action) for action in actions or () if isinstance(action, Mapping)] \
            if isinstance(actions, list) else []
        for message in messages:
            if self.left(index):
                return
            if isinstance(message, Mapping) and isinstance(message.get("method"), str):
                await self._send(message["method"], message.get("params"))

    async def _send(self, method: str, params: Any) -> None:
        """One JSON-RPC message as the document writes it; a request's answer is awaited (see the module
        docstring)."""
        try:
            if method.startswith("notifications/"):
                await self.session.send_notification(_Notification(method=method, params=params))  # type: ignore[arg-type]
                return
            await self.session.send_request(_Request(method=method, params=params), types.Result,
                                            request_read_timeout_seconds=REQUEST_TIMEOUT)
        except MCPError as exc:  # the judge saw the answer
            self.say(f"actor {self.player.name}: {printable(method, 60)} answered with an error: "
                     f"{printable(exc.error.message, 200)}")
        except pydantic.ValidationError as exc:
            self.say(f"actor {self.player.name}: {printable(method, 60)}: not sent: "
                     f"{printable(exc.errors()[0].get('msg', exc), 200)}")

    # --- the agent's requests ----------------------------------------------------------------------------

    def _answer(self, method: str, key: str, context: ClientRequestContext, params: Any) -> dict[str, Any]:
        """The `content` of the `key` entry answering the agent's `method` request (see the module docstring);
        raises `Unplayable` naming the field when none does."""
        request = params.model_dump(by_alias=True, mode="json", exclude_unset=True) if params is not None else {}
        state = self.state_for(method, context.request_id)
        chosen = dispatch(mapping(state).get(key), request, f"state.{key}")
        if chosen is None:
            raise Unplayable(f"state.{key}: no entry answers this {method} request")
        answer = dict(self.player.render(chosen, request))
        answer.pop("when", None)
        return answer

    def _refused(self, method: str, exc: Unplayable | pydantic.ValidationError) -> types.ErrorData:
        """The JSON-RPC error answering the agent's `method` request that the state cannot answer."""
        message = str(exc) if isinstance(exc, Unplayable) else \
            f"the state's answer to {method} is not one the mcp SDK can send: " \
            f"{printable(exc.errors()[0].get('msg', exc), 200)}"
        self.say(f"actor {self.player.name}, phase {printable(self.player.phase, 60)}: {message}")
        return types.ErrorData(code=INTERNAL_ERROR, message=message)

    async def sample(self, context: ClientRequestContext,
                     params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        try:
            answer = self._answer("sampling/createMessage", "sampling_responses", context, params)
            return types.CreateMessageResult.model_validate(answer.get("content"))
        except (Unplayable, pydantic.ValidationError) as exc:
            return self._refused("sampling/createMessage", exc)

    async def elicit(self, context: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        try:
            answer = self._answer("elicitation/create", "elicitation_responses", context, params)
            result = {"action": answer.get("action", "accept")}
            if "content" in answer:
                result["content"] = answer["content"]
            return types.ElicitResult.model_validate(result)
        except (Unplayable, pydantic.ValidationError) as exc:
            return self._refused("elicitation/create", exc)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        state = self.state_for("roots/list", context.request_id)
        roots = mapping(state).get("roots")
        try:
            return types.ListRootsResult.model_validate({"roots": self.player.render(roots) if roots else []})
        except pydantic.ValidationError as exc:
            return self._refused("roots/list", exc)
