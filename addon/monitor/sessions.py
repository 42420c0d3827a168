"""Which session an event belongs to, including the messages that carry no session key of their own.

Under the `auto` and protocol session keys, some messages carry no key: MCP's `initialize` request (the
server assigns `Mcp-Session-Id` in its answer), an A2A Agent Card fetch or `tasks/get`, the first
`message/send` before the server assigns a `contextId`. Keying them by connection would split one agent
session into several runs. So a keyless event is held (up to `HOLD_SECONDS` of event time, `HOLD_EVENTS`
events) until the next keyed event from the same client host to the same server and protocol, and joins
that session, in its original order. If none comes in time it joins the session last seen from that client
host to that server, or else its connection's run.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..events import ObservedEvent
from .options import SessionKey, session_of

Route = tuple[str, str, int, str]
"""(client host, server host, server port, protocol): who talks to whom, whatever the TCP connection."""

HOLD_SECONDS = 2.0
HOLD_EVENTS = 200
MAX_ROUTES = 10_000


@dataclass
class _Held:
    since: float
    events: list[ObservedEvent] = field(default_factory=list)


def _route(event: ObservedEvent) -> Route:
    return (event.client.rpartition(":")[0] or event.client, event.endpoint.host, event.endpoint.port,
            event.protocol)


class SessionResolver:
    """Assigns each event its run key; holds keyless events briefly (see the module docstring)."""

    def __init__(self, policy: SessionKey) -> None:
        self.policy = policy
        self.held: OrderedDict[Route, _Held] = OrderedDict()
        """Held events by route, oldest hold first (holds start at the resolver's monotonic clock)."""
        self.last_session: OrderedDict[Route, str] = OrderedDict()
        self._clock = float("-inf")

    def _keyed(self, event: ObservedEvent) -> bool:
        return not session_of(event, self.policy).startswith("connection:")

    def resolve(self, event: ObservedEvent) -> list[tuple[ObservedEvent, str]]:
        """The events that can be placed now (this one and any it releases), with their session."""
        if self.policy in (SessionKey.GLOBAL, SessionKey.CONNECTION):
            return [(event, session_of(event, self.policy))]
        route = _route(event)
        self._clock = max(self._clock, event.timestamp)
        if not self._keyed(event):
            held = self.held.get(route)
            if held is None:
                held = self.held[route] = _Held(self._clock)
            held.events.append(event)
            released = self.expire(self._clock, force_route=route if len(held.events) >= HOLD_EVENTS else None)
            return released
        session = session_of(event, self.policy)
        self.last_session[route] = session
        self.last_session.move_to_end(route)
        while len(self.last_session) > MAX_ROUTES:
            self.last_session.popitem(last=False)
        held = self.held.pop(route, None)
        placed = [(e, session) for e in held.events] if held else []
        return [*placed, (event, session)]

    def place(self, event: ObservedEvent) -> list[tuple[ObservedEvent, str]]:
        """The events that can be placed once `event` is seen, in order: held events whose hold the clock
        (the latest event time) has passed, then `event` and any held events it releases."""
        self._clock = max(self._clock, event.timestamp)
        released = self.expire(self._clock) if self.next_release() <= self._clock else []
        return released + self.resolve(event)

    def next_release(self) -> float:
        """When the oldest hold expires (infinity when nothing is held)."""
        for held in self.held.values():
            return held.since + HOLD_SECONDS
        return float("inf")

    def expire(self, now: float, force_route: Route | None = None) -> list[tuple[ObservedEvent, str]]:
        """Release held events older than HOLD_SECONDS (and the route `force_route`)."""
        released: list[tuple[ObservedEvent, str]] = []
        if force_route is not None and force_route in self.held:
            released.extend(self._fallback(force_route, self.held.pop(force_route)))
        while self.held:
            route, held = next(iter(self.held.items()))
            if now < held.since + HOLD_SECONDS:
                break
            del self.held[route]
            released.extend(self._fallback(route, held))
        return released

    def flush(self) -> list[tuple[ObservedEvent, str]]:
        """Release everything held (shutdown, end of a recording)."""
        released = [pair for route, held in self.held.items() for pair in self._fallback(route, held)]
        self.held.clear()
        return released

    def _fallback(self, route: Route, held: _Held) -> list[tuple[ObservedEvent, str]]:
        session = self.last_session.get(route)
        return [(e, session or session_of(e, self.policy)) for e in held.events]
