"""One actor played for one agent session: the document's phases, advanced by the agent's traffic (format spec
§5.2 phases, §5.3 triggers, §5.5 extractors, §5.6 templates; SDK spec §5.5–§5.10). Sans-I/O.

The phase machine is the engine's own `ActorMachine` (the one the judge follows), fed the same kind of
events, so what is played and what is judged advance alike. What the player adds:

- **State.** `state()` is the effective state of the current phase (SDK spec §5.10 `compute_effective_state`);
  `render(value, request)` interpolates a piece of it for the message being built (SDK §5.5a
  `interpolate_value`: `{{extractor}}`, `{{actor.extractor}}`, `{{request.…}}`), lazily, as §5.6 says.
- **Exchanges.** `exchange(event_type, request, response)` is called once a request was answered (or a
  notification arrived: `response` None). The request is observed first (its extractors, then its trigger),
  then the response (its extractors): the answer to the request that fires a trigger is still built from the
  phase that was current when it arrived, so "two honest calls, then the swap" serves two honest answers.
- **Phase entry.** Each phase entered (by an exchange or by `tick`, §5.3 `after`) is returned with its
  `on_enter` actions rendered eagerly (§5.6: "resolved eagerly at phase entry time") for the front door to
  send.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import oatf
from oatf_engine.events import Endpoint, ObservedEvent, Protocol
from oatf_engine.monitor.actors import ActorMachine
from oatf_engine.text import printable

_SEQ = itertools.count(1)


@dataclass(frozen=True)
class Entered:
    """A phase the actor entered, and its `on_enter` actions (key, rendered parameters) in document order."""

    phase: str
    actions: tuple[tuple[str, Any], ...]


class SharedExtractors:
    """The extracted values of every actor of one document, for cross-actor references (format spec §5.5
    `{{actor_name.extractor_name}}`); last write wins."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}


class ActorPlayer:
    """One actor of a document, played for one agent session (see the module docstring)."""

    def __init__(self, actor: oatf.Actor, shared: SharedExtractors | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.machine = ActorMachine(actor, clock())
        self.shared = shared if shared is not None else SharedExtractors()
        self.protocol: Protocol = self.machine.protocol  # type: ignore[assignment]
        self._endpoint = Endpoint("oatf-serve", 0, "/")

    @property
    def name(self) -> str:
        return self.machine.name

    @property
    def phase(self) -> str:
        """The current phase's name (positional when unnamed, format spec §5.2)."""
        return self.machine.phases_reached[-1]

    def state(self) -> Any:
        """The effective state of the current phase (SDK spec §5.10)."""
        return oatf.compute_effective_state(self.machine.actor.phases, self.machine.index)

    def extractors(self) -> dict[str, str]:
        """The values templates see: this actor's by name, every actor's as `actor.name` (format spec §5.6)."""
        return {**self.shared.values, **self.machine.extracted}

    def render(self, value: Any, request: Any = None, response: Any = None) -> Any:
        """`value` with its templates resolved for the message at hand (SDK spec §5.5a); undefined references
        become "" (their W-004 warnings are not repeated per message: `validate` reports them once)."""
        rendered, _ = oatf.interpolate_value(value, self.extractors(), request, response)
        return rendered

    def exchange(self, event_type: str, request: Any, response: Any = None,
                 response_is_error: bool = False) -> list[Entered]:
        """The agent's request (or notification) `event_type` with content `request` was answered with
        `response` (None: no answer): extractors and trigger as the module docstring says; the phases entered."""
        now = self.clock()
        entered = self._observe(event_type, "client", request, now)
        if response is not None:
            self._observe(event_type, "server", response, now, response_is_error)
        return entered

    def tick(self) -> list[Entered]:
        """Fire an elapsed `after` timer (format spec §5.3): the phases entered."""
        change = self.machine.tick(self.clock())
        return [self.entered()] if change is not None else []

    def narrate(self, phase: Entered, say: Callable[[str], None]) -> None:
        """Say that `phase` was entered, and its `on_enter` `log` messages (format spec §2.7a)."""
        say(f"actor {self.name}: phase {printable(phase.phase, 60)} entered")
        for key, value in phase.actions:
            if key == "log" and isinstance(value, Mapping):
                say(f"actor {self.name}: log: {printable(value.get('message', ''), 300)}")

    def observe(self, event: ObservedEvent) -> list[Entered]:
        """One event of the actor's own traffic (its extractors, then its trigger): the phases entered."""
        before = dict(self.machine.extracted)
        change = self.machine.observe(event)
        self._share(before)
        return [self.entered()] if change is not None else []

    def _observe(self, event_type: str, sender: str, content: Any, now: float,
                 is_error: bool = False) -> list[Entered]:
        return self.observe(ObservedEvent(
            self.protocol, event_type, "request" if sender == "client" else "response", sender, content, "serve",  # type: ignore[arg-type]
            next(_SEQ), now, self._endpoint, "agent", is_error=is_error))

    def _share(self, before: Mapping[str, str]) -> None:
        for name, value in self.machine.extracted.items():
            if before.get(name) != value:
                self.shared.values[f"{self.name}.{name}"] = value

    def entered(self) -> Entered:
        """The current phase, with its `on_enter` actions rendered now (format spec §5.6: eagerly)."""
        phase = self.machine.phase
        actions = tuple((action.key or "", self.render(action.value)) for action in phase.on_enter or ())
        return Entered(self.phase, actions)
