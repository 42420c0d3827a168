"""How the monitor groups traffic into runs and binds actors to endpoints (documented in the README)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..events import ObservedEvent
from .episodes import AgentName


class SessionKey(StrEnum):
    """Which key groups observed events into one AttackRun per attack.

    - `auto` (default): the protocol's own session — MCP `Mcp-Session-Id`, A2A `contextId`, AG-UI
      `threadId`; a message without one joins its HTTP exchange's session, else its route's (`sessions`).
    - `mcp_session`, `a2a_context`, `ag_ui_thread`: that key only (the same rules when absent).
    - `connection`: the HTTP client's address.
    - `global`: one run per attack for all traffic.
    """

    AUTO = "auto"
    MCP_SESSION = "mcp_session"
    A2A_CONTEXT = "a2a_context"
    AG_UI_THREAD = "ag_ui_thread"
    CONNECTION = "connection"
    GLOBAL = "global"


DEFAULT_IDLE_GAP = 120.0
"""Seconds without traffic on a keyless route after which the agent's next message starts a new episode."""

_AUTO_KEYS = {"mcp": "mcp_session", "a2a": "a2a_context", "ag_ui": "ag_ui_thread"}


def session_of(event: ObservedEvent, policy: SessionKey) -> str:
    """The run key of `event` under `policy`."""
    if policy is SessionKey.GLOBAL:
        return "global"
    if policy is SessionKey.CONNECTION:
        return f"connection:{event.client}"
    name = _grouping(event.protocol, policy)
    value = event.session_keys.get(name)
    return f"{name}:{value}" if value else f"connection:{event.client}"


def session_named(protocol: str, name: str, value: str, policy: SessionKey) -> str | None:
    """The run key of the session whose key `name` (`mcp_session`, …: `ObservedEvent.session_keys`) is `value`
    on `protocol` traffic under `policy`; None when `policy` does not group runs by that key."""
    if policy in (SessionKey.GLOBAL, SessionKey.CONNECTION) or _grouping(protocol, policy) != name:
        return None
    return f"{name}:{value}"


def _grouping(protocol: str, policy: SessionKey) -> str:
    """The session key that groups `protocol` traffic under a keyed `policy`."""
    return _AUTO_KEYS[protocol] if policy is SessionKey.AUTO else policy.value


@dataclass(frozen=True)
class ActorBinding:
    """Restricts an actor to traffic for one host (and optionally a path prefix): `name=host[:port][/path]`."""

    actor: str
    host: str
    port: int | None = None
    path_prefix: str = ""

    @classmethod
    def parse(cls, text: str) -> ActorBinding:
        actor, sep, target = text.partition("=")
        if not sep or not actor.strip() or not target.strip():
            raise ValueError(f"actor binding {text!r} must look like name=host[:port][/path]")
        hostport, slash, path = target.strip().partition("/")
        host, colon, port = hostport.partition(":")
        if colon and not port.isdigit():
            raise ValueError(f"actor binding {text!r}: port {port!r} is not a number")
        return cls(actor.strip(), host, int(port) if colon else None, f"/{path}" if slash else "")

    def accepts(self, event: ObservedEvent) -> bool:
        endpoint = event.endpoint
        return (endpoint.host == self.host and (self.port is None or endpoint.port == self.port)
                and endpoint.path.startswith(self.path_prefix))


@dataclass(frozen=True)
class MonitorOptions:
    """The monitor's knobs; the addon maps its `oatf_*` options onto these."""

    session_key: SessionKey = SessionKey.AUTO
    grace_period: float = 10.0
    """Seconds of quiet after every actor is terminal before the verdict (`attack.grace_period` wins)."""
    max_run_lifetime: float = 3600.0
    """A run still open this long after it started is concluded with status `timed_out`."""
    max_runs: int = 100_000
    """Live runs kept at once; beyond it the least recently active run is concluded (status `evicted`)."""
    bindings: tuple[ActorBinding, ...] = field(default_factory=tuple)
    idle_gap: float = DEFAULT_IDLE_GAP
    """Seconds without traffic after which a keyless route's next message starts a new agent episode
    (`sessions` rule 3), and an AG-UI run whose stream never ended stops gathering its agent's traffic
    (`episodes`)."""
    agents: tuple[AgentName, ...] = ()
    """The agents behind the proxy, by endpoint (`episodes`); empty: an agent is a host."""
