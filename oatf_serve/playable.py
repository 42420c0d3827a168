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

from . import a2a_client, a2a_push, a2a_state
from .agents import CLIENT_MODES, AgentUrls
from .state import Unplayable, as_is

PLAYED_MODES = ("mcp_server", "a2a_server", "ag_ui_client", "mcp_client", "a2a_client")
"""The modes `oatf serve` plays (format spec §7.x.1)."""
NEEDS_AGENT = CLIENT_MODES
"""The modes played only against an agent's endpoint (`--agent [ACTOR=]URL`: `oatf_serve.agents`)."""

STRUCTURAL_KEYS = {
    "mcp_server": frozenset({"protocol_version", "server_info", "instructions", "capabilities", "tools",
                             "resources", "resource_templates", "prompts", "elicitations"}),
    "a2a_server": frozenset({"agent_card", "task_responses"}),
    "ag_ui_client": frozenset({"run_agent_input", "tool_responses"}),
    "mcp_client": frozenset({"client_info", "capabilities", "actions", "sampling_responses", "elicitation_responses",
                             "roots"}),
    "a2a_client": frozenset({"actions"}),
}
"""§7.1.4, §7.1.5, §7.2.4, §7.2.5, §7.3.4 structural keys of each mode's state."""
SERVER_INFO_PLAYED = frozenset({"name", "version", "websiteUrl", "icons"})
"""The `server_info` fields the mcp SDK's `initialize` answer carries."""
ACTIONS_PLAYED = {"mcp_server": ("send", "log"), "a2a_server": ("log", a2a_push.ACTION), "ag_ui_client": ("log",),
                  "mcp_client": ("send", "log"), "a2a_client": ("log",)}
"""§7.1.6, §7.2.6 / §5.2 `on_enter` actions each mode plays."""


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


def limitations(path: str, document: oatf.Document, agents: AgentUrls | None = None) -> list[Limitation]:
    """Every limitation of a normalized document's actors, played with the agent's endpoints `agents` (see the
    module docstring)."""
    assert document.attack is not None and document.attack.execution is not None
    found: list[Limitation] = []
    for actor in document.attack.execution.actors or ():
        name = actor.name or "default"
        mode = actor.mode or ""
        if mode not in PLAYED_MODES:
            found.append(Limitation(path, name, "", "mode", f"{mode or 'no mode'} is not played by oatf serve "
                                    f"(it plays {', '.join(PLAYED_MODES)})", fatal=True))
            continue
        if mode in NEEDS_AGENT and not (agents and agents.url(name, mode)):
            found.append(Limitation(path, name, "", "mode", f"{mode} is played against the agent's endpoint: give "
                                    f"it with --agent URL (or --agent {name}=URL)", fatal=True))
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
        elif key == a2a_push.ACTION:
            yield from _push_limitations(action.value)
    state = phase.state
    if not isinstance(state, Mapping):
        return
    for key in state:
        if key not in STRUCTURAL_KEYS[mode]:
            yield f"state.{key}", f"not a structural key of {mode}'s state (format spec §7): not served"
    if mode == "mcp_server":
        yield from _mcp_limitations(state)
    elif mode == "a2a_server":
        yield from _a2a_limitations(state)
    elif mode == "mcp_client":
        for key in ("sampling_responses", "elicitation_responses"):
            yield from _synthesized(f"state.{key}", state.get(key))
    elif mode == "a2a_client":
        yield from _a2a_client_limitations(state)
    else:
        yield from _ag_ui_limitations(state)


def _mcp_limitations(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if "protocol_version" in state:
        yield ("state.protocol_version", "not forced: the mcp SDK answers `initialize` with the version the client "
               "asked for when it supports it, else its latest")
    info = state.get("server_info")
    if isinstance(info, Mapping):
        for key in info:
            if key not in SERVER_INFO_PLAYED:
                yield f"state.server_info.{key}", "not carried by the mcp SDK's `initialize` answer"
    for key in ("tools", "prompts"):
        for index, entry in enumerate(state.get(key) or ()):
            if isinstance(entry, Mapping):
                yield from _synthesized(f"state.{key}[{index}].responses", entry.get("responses"))


def _a2a_limitations(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    card = state.get("agent_card")
    if isinstance(card, Mapping):
        if "url" in card or "supportedInterfaces" in card:
            yield ("state.agent_card.url", "served as the endpoint's own URL (and so is every "
                   "`supportedInterfaces` URL), so that clients reach the attacker")
        try:
            served = a2a_state.served_card(a2a_state.document_card(state, "http://oatf-serve/", as_is))
        except Unplayable as exc:
            yield "state.agent_card", str(exc)
        else:
            for path in a2a_state.dropped(card, served, "state.agent_card"):
                yield path, "not carried by the a2a-sdk's Agent Card: not served"
    for index, entry in enumerate(state.get("task_responses") or ()):
        content = entry.get("content") if isinstance(entry, Mapping) else None
        if not isinstance(content, Mapping):
            continue
        where = f"state.task_responses[{index}].content"
        try:
            answer = a2a_state.to_core(content, where)
        except Unplayable as exc:
            yield where, f"{exc} (the request gets a JSON-RPC error)"
        else:
            for path in a2a_state.dropped(content, a2a_state.to_v03(answer), where):
                yield path, "not carried by the a2a-sdk's Task and Message: not sent"
    yield from _synthesized("state.task_responses", state.get("task_responses"))


def _push_limitations(action: Any) -> Iterator[tuple[str, str]]:
    where = f"on_enter.{a2a_push.ACTION}"
    if not isinstance(action, Mapping) or not isinstance(action.get("url"), str):
        yield f"{where}.url", "not a string: the push notification is not sent"
        return
    try:
        a2a_push.push_event(action.get("payload"), "payload")
    except Unplayable as exc:
        yield f"{where}.payload", f"{exc}: the push notification is not sent"


def _a2a_client_limitations(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    actions = state.get("actions")
    for index, action in enumerate(actions if isinstance(actions, list) else ()):
        method = action.get("method") if isinstance(action, Mapping) else None
        if method == a2a_client.CARD or not isinstance(method, str):
            continue
        where = f"state.actions[{index}]"
        try:
            core = a2a_client.core_request(method, action.get("params"))
        except Unplayable as exc:
            yield (f"{where}.method" if method not in a2a_client.CALLS else f"{where}.params",
                   f"{exc} (the action is not sent)")
        else:
            for path in a2a_state.dropped(action.get("params"), a2a_client.sent_params(method, core),
                                          f"{where}.params"):
                yield path, "not carried by the a2a-sdk's request types: not sent"


def _ag_ui_limitations(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if "tool_responses" in state:
        yield ("state.tool_responses", "the agent's calls to the frontend's tools are not answered with a new run "
               "(a later phase's run_agent_input, carrying the tool message, is sent on its trigger)")
    run_input = state.get("run_agent_input")
    if isinstance(run_input, Mapping) and "synthesize" in run_input:
        yield ("state.run_agent_input.synthesize", "LLM synthesis is not supported (format spec §7.4: reserved "
               "in v0.1): the run input is sent without it")


def _synthesized(where: str, candidates: Any) -> Iterator[tuple[str, str]]:
    """The `synthesize` entries of a response list found at `where`."""
    for number, response in enumerate(candidates if isinstance(candidates, list | tuple) else ()):
        if isinstance(response, Mapping) and "synthesize" in response:
            yield (f"{where}[{number}].synthesize",
                   "LLM synthesis is not supported (format spec §7.4: reserved in v0.1): the entry's "
                   "`content` is served when it has one, else the request gets a JSON-RPC error")

