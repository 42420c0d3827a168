"""An `ag_ui_client` actor driven against the agent's AG-UI endpoint (`--agent URL`; format spec §7.3 "AG-UI
Binding"): the attacker plays the frontend.

Each phase whose state has a `run_agent_input` POSTs it (rendered: `{{extractor}}`, `{{actor.extractor}}`)
when the phase is entered — the first phase once the document's server actors are accepting connections
(§5.1 readiness) — and reads the agent's SSE answer to its end. The body is sent as the document gives it
(pass-through); one that AG-UI's `RunAgentInput` type (`ag-ui-protocol`) does not accept is sent anyway,
with a note. The actor is done when its phase is terminal, or when no event can advance it any more (its
trigger waits for an event and no run is under way); an `after` trigger is waited for.

`ClientTap` is the httpx transport under the actor's client: every byte of the exchange goes, as it passes,
to the `Judge` (the run is judged with the document's other actors) and to a `WireDecoder` of the actor's
own, whose events (`run_agent_input`, then each SSE event in snake_case, tool call events enriched with
their `toolCallName`, §7.3.2) advance the player exactly as the judge sees them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
import pydantic
from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder

import oatf
from oatf_engine.events import ObservedEvent
from oatf_engine.text import printable
from oatf_engine.wire import DecoderConfig, WireDecoder

from .judge import Judge
from .player import ActorPlayer, SharedExtractors
from .state import mapping

TICK_SECONDS = 0.5
RUN_TIMEOUT = httpx.Timeout(30.0, read=300.0)
"""An agent may think for minutes between events; a run that says nothing for five is abandoned."""


class ClientTap(httpx.AsyncBaseTransport):
    """httpx's transport, with every exchange fed to the judge and to the player's decoder (see the module
    docstring)."""

    def __init__(self, judge: Judge, key: int, decoder: WireDecoder, observe: Callable[[ObservedEvent], None]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.judge = judge
        self.key = key
        self.decoder = decoder
        self.observe = observe

    def _feed(self, step: str, *args: Any) -> None:
        self.judge.put(self.key, getattr(self.judge.decoder, step), *args)
        for event in getattr(self.decoder, step)(*args):
            self.observe(event)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = self.judge.exchange_id()
        body = await request.aread()
        self._feed("request_headers", exchange, request.method, str(request.url), request.headers.raw, "",
                   time.time())
        if body:
            self._feed("request_data", exchange, body, time.time())
        self._feed("request_end", exchange, time.time())
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException:
            self._feed("abort", exchange, time.time())
            raise
        self._feed("response_headers", exchange, response.status_code, response.headers.raw, time.time())
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_TappedStream(self, exchange, response), extensions=response.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TappedStream(httpx.AsyncByteStream):
    def __init__(self, tap: ClientTap, exchange: str, response: httpx.Response) -> None:
        self.tap = tap
        self.exchange = exchange
        self.response = response
        self.ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.aiter_raw():
            self.tap._feed("response_data", self.exchange, chunk, time.time())
            yield chunk
        self.ended = True
        self.tap._feed("response_end", self.exchange, time.time())

    async def aclose(self) -> None:
        if not self.ended:
            self.ended = True
            self.tap._feed("abort", self.exchange, time.time())
        await self.response.aclose()


class AgUiActor:
    """One `ag_ui_client` actor run against the agent (see the module docstring)."""

    def __init__(self, actor: oatf.Actor, agent: str, judge: Judge, key: int, decoder: DecoderConfig,
                 shared: SharedExtractors | None = None, say: Callable[[str], None] = lambda _line: None) -> None:
        self.player = ActorPlayer(actor, shared)
        self.agent = agent
        self.say = say
        self.tap = ClientTap(judge, key, WireDecoder(decoder), self._observe)
        self.runs = 0

    def _observe(self, event: ObservedEvent) -> None:
        for phase in self.player.observe(event):
            self.player.narrate(phase, self.say)

    async def run(self) -> None:
        """Play every phase (see the module docstring)."""
        async with httpx.AsyncClient(transport=self.tap, timeout=RUN_TIMEOUT, trust_env=False) as client:
            index = -1
            while True:
                if self.player.machine.index != index:
                    index = self.player.machine.index
                    body = mapping(self.player.state()).get("run_agent_input")
                    if isinstance(body, Mapping):
                        rendered = self.player.render(body)
                        await self._post(client, {k: v for k, v in rendered.items() if k != "synthesize"})
                    continue  # the run may have entered a further phase
                trigger = self.player.machine.phase.trigger
                if trigger is None or trigger.after is None:
                    if trigger is not None:
                        self.say(f"actor {self.player.name}: phase {printable(self.player.phase, 60)} waits for "
                                 f"{printable(trigger.event or '', 60)}, which no run brought: done")
                    return
                await asyncio.sleep(TICK_SECONDS)
                for phase in self.player.tick():
                    self.player.narrate(phase, self.say)

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> None:
        try:
            RunAgentInput.model_validate(body)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            self.say(f"actor {self.player.name}, phase {printable(self.player.phase, 60)}: run_agent_input is not "
                     f"an AG-UI RunAgentInput ({printable('.'.join(map(str, error['loc'])), 80)}: "
                     f"{printable(error['msg'], 120)}); sent as written")
        self.runs += 1
        try:
            async with client.stream("POST", self.agent, json=body,
                                     headers={"accept": EventEncoder().get_content_type()}) as response:
                async for _ in response.aiter_raw():
                    pass  # the tap decodes the stream as it passes
                if response.status_code >= 400:
                    self.say(f"actor {self.player.name}: the agent answered the run with HTTP {response.status_code}")
        except httpx.HTTPError as exc:
            self.say(f"actor {self.player.name}: the run failed: {printable(str(exc) or type(exc).__name__, 200)}")
