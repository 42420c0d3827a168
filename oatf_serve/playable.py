"""What of a document `oatf serve` cannot play, said before anything is served (issue 19: "features a
document uses that cannot be played get a clear message naming the field; nothing is silently skipped").

Each `Limitation` names the file, the actor, the phase and the field. A limitation is `fatal` when the actor
cannot be played at all (a mode without a player); the others are played without the feature named.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import oatf

PLAYED_MODES = ("mcp_server",)
"""The modes `oatf serve` plays (format spec §7.x.1)."""

MCP_SERVER_KEYS = frozenset({"protocol_version", "server_info", "instructions", "capabilities", "tools",
                             "resources", "resource_templates", "prompts", "elicitations"})
"""§7.1.4 structural keys."""
SERVER_INFO_PLAYED = frozenset({"name", "version", "websiteUrl", "icons"})
"""The `server_info` fields the mcp SDK's `initialize` answer carries."""
ACTIONS_PLAYED = {"mcp_server": ("send", "log")}
"""§7.1.6 / §5.2 `on_enter` actions each mode plays."""


@dataclass(frozen=True)
class Limitation:
    """Something of a document that is not played (see the module docstring)."""

    path: str
    actor: str
    phase: str
    field: str
    message: str
    fatal: bool = False

    def __str__(self) -> str:
        where = f"actor {self.actor}" + (f", phase {self.phase}" if self.phase else "")
        return f"{self.path}: {where}: {self.field}: {self.message}"


def limitations(path: str, document: oatf.Document) -> list[Limitation]:
    """Every limitation of a normalized document's actors (see the module docstring)."""
    assert document.attack is not None and document.attack.execution is not None
    found: list[Limitation] = []
    for actor in document.attack.execution.actors or ():
        name = actor.name or "default"
        mode = actor.mode or ""
        if mode not in PLAYED_MODES:
            found.append(Limitation(path, name, "", "mode", f"{mode or 'no mode'} is not played by oatf serve "
                                    f"(it plays {', '.join(PLAYED_MODES)})", fatal=True))
            continue
        for index, phase in enumerate(actor.phases):
            phase_name = phase.name or f"phase-{index + 1}"
            found += [Limitation(path, name, phase_name, field, message)
                      for field, message in _phase_limitations(mode, phase)]
    return found


def _phase_limitations(mode: str, phase: oatf.Phase) -> Iterator[tuple[str, str]]:
    for action in phase.on_enter or ():
        key = action.key or "/".join(k for k, _ in action.entries)
        if key not in ACTIONS_PLAYED[mode]:
            yield f"on_enter.{key}", f"this action is not played in {mode} (played: {', '.join(ACTIONS_PLAYED[mode])})"
    state = phase.state
    if not isinstance(state, Mapping):
        return
    for key in state:
        if key not in MCP_SERVER_KEYS:
            yield f"state.{key}", "not a structural key of the MCP binding (format spec §7.1.4): not served"
    if "protocol_version" in state:
        yield ("state.protocol_version", "not forced: the mcp SDK answers `initialize` with the version the client "
               "asked for when it supports it, else its latest")
    info = state.get("server_info")
    if isinstance(info, Mapping):
        for key in info:
            if key not in SERVER_INFO_PLAYED:
                yield f"state.server_info.{key}", "not carried by the mcp SDK's `initialize` answer"
    yield from _synthesized(state)


def _synthesized(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key in ("tools", "prompts"):
        for index, entry in enumerate(state.get(key) or ()):
            responses = entry.get("responses") if isinstance(entry, Mapping) else None
            for number, response in enumerate(responses or ()):
                if isinstance(response, Mapping) and "synthesize" in response:
                    yield (f"state.{key}[{index}].responses[{number}].synthesize",
                           "LLM synthesis is not supported (format spec §7.4: reserved in v0.1): the entry's "
                           "`content` is served when it has one, else the request gets a JSON-RPC error")
