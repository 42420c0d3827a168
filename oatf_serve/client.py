"""What every client-mode actor (`ag_ui_client`, `mcp_client`, `a2a_client`) shares: the tap its SDK client
sends through, and the loop that plays its phases against the agent (`--agent URL`).

`ClientTap` is the httpx transport under the actor's SDK client: every byte of every exchange goes, as it
passes, to the `Judge` (the run is judged with the document's other actors) and to a `WireDecoder` of the
actor's own, whose events advance the actor's player exactly as the judge sees them (format spec §5.3: a
client-mode actor's triggers see the agent's responses, its streamed events and its server-initiated
requests). A message is observed before the SDK reads it, so when a server-initiated request fires a trigger,
the actor still knows the phase it arrived in (`ClientActor.arrived`).

`ClientActor.play_phases` is the phase loop (format spec §5.2): each phase entered is played once (`play`:
the mode's requests, in document order) — the first phase once the document's server actors accept
connections (§5.1 readiness); a phase entered while an earlier one is being played is played next, and what
the earlier one had still to send is not sent. A phase sends the requests its own `state` declares
(`requests`): one without `state` inherits its predecessor's answers to the agent's requests (§5.2), not its
requests, whose sending would repeat an earlier step of the attack (OW-051's terminal `done`). The actor
is done when its phase is terminal, or when nothing can advance it any more (its trigger waits for an event
and no request of its own is under way); an `after` trigger is waited for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx

import oatf
from oatf_engine.events import ObservedEvent
from oatf_engine.text import printable
from oatf_engine.wire import DecoderConfig, WireDecoder

from .judge import Judge
from .player import ActorPlayer, Entered, SharedExtractors

TICK_SECONDS = 0.5
TIMEOUT = httpx.Timeout(30.0, read=300.0)
"""An agent may think for minutes before it answers; an exchange that says nothing for five is abandoned."""


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
            if isinstance(event, ObservedEvent):  # an exchange's end (`ExchangeEnded`) moves no player
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


class ClientActor:
    """One client-mode actor played against the agent (see the module docstring); a mode's subclass sends what
    a phase says (`play`) with its protocol's SDK client over `self.tap`."""

    answered: frozenset[str] = frozenset()
    """The agent's requests the mode answers from its state (`state_for`)."""

    def __init__(self, actor: oatf.Actor, agent: str, judge: Judge, key: int, decoder: DecoderConfig,
                 shared: SharedExtractors | None = None, say: Callable[[str], None] = lambda _line: None) -> None:
        self.player = ActorPlayer(actor, shared)
        self.agent = agent
        self.say = say
        self.tap = ClientTap(judge, key, WireDecoder(decoder), self.observe)
        self.entered: list[Entered] = []
        """The phases entered and not yet played, with their rendered `on_enter` actions."""
        self.arrived: dict[tuple[str, Any], Any] = {}
        """The phase state each server-initiated request (method, JSON-RPC id) arrived in, until answered."""
        self._entered([self.player.entered()])  # the first phase (its `on_enter` `log` said too)

    def observe(self, event: ObservedEvent) -> None:
        """One event of the actor's own traffic (see the module docstring)."""
        if event.event_type in self.answered and event.sender == "server" and event.jsonrpc_id is not None:
            self.arrived[event.event_type, event.jsonrpc_id] = self.player.state()
        self._entered(self.player.observe(event))

    def _entered(self, phases: list[Entered]) -> None:
        for phase in phases:
            self.player.narrate(phase, self.say)
            self.entered.append(phase)

    def state_for(self, method: str, request_id: Any) -> Any:
        """The phase state that answers the agent's request `method` with id `request_id`: the one it arrived in
        (a request that fires a trigger is still answered by the phase it arrived in, as a server actor's)."""
        key = (method, request_id)
        return self.arrived.pop(key) if key in self.arrived else self.player.state()

    def requests(self) -> Mapping[str, Any]:
        """The current phase's own `state` (see the module docstring): what it sends."""
        state = self.player.machine.phase.state
        return state if isinstance(state, Mapping) else {}

    def left(self, index: int) -> bool:
        """Whether the actor left the phase at `index` (its remaining messages are then not sent)."""
        return self.player.machine.index != index

    async def run(self) -> None:
        """Connect to the agent with the mode's SDK client over `self.tap`, and `play_phases`."""
        raise NotImplementedError

    async def play(self, entered: list[Entered]) -> None:
        """Send what the current phase says, `entered` being the phases entered since the last call."""
        raise NotImplementedError

    async def play_phases(self) -> None:
        """Play every phase (see the module docstring)."""
        while True:
            if self.entered:
                entered, self.entered = self.entered, []
                await self.play(entered)
                continue  # the exchanges may have entered a further phase
            trigger = self.player.machine.phase.trigger
            if trigger is None or trigger.after is None:
                if trigger is not None:
                    self.say(f"actor {self.player.name}: phase {printable(self.player.phase, 60)} waits for "
                             f"{printable(trigger.event or '', 60)}, which no exchange brought: done")
                return
            await asyncio.sleep(TICK_SECONDS)
            self._entered(self.player.tick())
