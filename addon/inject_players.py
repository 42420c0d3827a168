"""The actors inject mode plays (`addon.inject`), each with `oatf serve`'s phase player
(`oatf_serve.player.ActorPlayer`): what the protocol parts of inject mode (`addon.inject`, `addon.inject_a2a`,
`addon.inject_ag_ui`) share."""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mitmproxy import http

import oatf
from oatf_serve.player import ActorPlayer, SharedExtractors
from oatf_serve.state import Render

log = logging.getLogger("oatf.inject")

Actors = Sequence[tuple[str, oatf.Actor]]
"""(attack key, actor) of the actors played."""


class Note(Protocol):
    """Logs and keeps what was injected into a flow's message (its event name, the lines, its sender):
    `Inject.note`."""

    def __call__(self, flow: http.HTTPFlow, method: str, notes: list[str], sender: str = "server") -> None: ...


Failed = Callable[[str, http.HTTPFlow, Exception], None]
"""Logs a failure of inject mode on a flow (once per place and kind): `Inject.failed`."""


@dataclass
class Played:
    """One actor of one document, played for one session (MCP), server (A2A) or thread (AG-UI)."""

    attack: str
    player: ActorPlayer

    def render(self, request: Any) -> Render:
        return lambda value: self.player.render(value, request)

    def where(self) -> str:
        return f"{self.attack} actor {self.player.name} phase {self.player.phase}"

    def state_at(self, index: int) -> Any:
        """The effective state of phase `index` (SDK spec §5.10), e.g. the phase a request arrived in."""
        return oatf.compute_effective_state(self.player.machine.actor.phases, index)


def new_players(actors: Actors) -> list[Played]:
    """A player for each actor; the actors of one document share their extractors (format spec §5.5)."""
    shared: dict[str, SharedExtractors] = {}
    return [Played(key, ActorPlayer(actor, shared.setdefault(key, SharedExtractors()))) for key, actor in actors]


class Bounded[K, V](OrderedDict[K, V]):
    """A mapping that forgets its least recently set entries beyond `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


def json_message(message: http.Message) -> Any:
    """The JSON value a buffered body carries, or None."""
    try:
        return json.loads(message.get_content(strict=False) or b"")
    except ValueError:
        return None


def answers(message: Any, request_id: Any) -> bool:
    """Whether `message` is the JSON-RPC answer to the request `request_id`."""
    return (isinstance(message, dict) and "method" not in message and message.get("id") == request_id
            and ("result" in message or "error" in message))


def say(line: str) -> None:
    """What a player narrates (a phase entered, its `log` actions), logged."""
    log.info("oatf inject: %s", line)
