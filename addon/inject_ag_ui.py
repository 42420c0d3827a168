"""Inject mode for AG-UI (`addon.inject`; format spec §7.3 "AG-UI Binding", §7.3.4 execution state): between
the agent's real frontend (its AG-UI client) and the agent, the proxy plays the documents' `ag_ui_client`
actors into the run input the frontend posts, so that an agent used through its real frontend meets the
attack (a compromised or malicious frontend: injected history, tools, context, state).

Each thread (the AG-UI endpoint and the `threadId`) gets, for every `ag_ui_client` actor of every document,
the phase player `oatf serve` uses; the players observe the events the tap decodes from the thread's runs
(the run input as the agent received it, then the agent's events), so phases advance on the agent's
answers as the judge sees them, and each run the frontend posts gets the current phase's `run_agent_input`
overlaid on it (rendered: `{{extractor}}`, `{{actor.extractor}}`):
- `messages`: a document message with the `id` of one the frontend sent replaces it in place; the others are
  added after the frontend's, in the document's order (the document's conversation goes on from the real one);
- `tools` (by `name`) and `context` (by `description`): the document's entries replace the frontend's of the
  same name, the others are added;
- `state` and `forwardedProps`: the document's keys are merged into the frontend's object (the document's
  value wins; a value that is not an object replaces the frontend's);
- `threadId`, `runId` and `parentRunId` stay the frontend's (the run it waits for), and any other field the
  document gives replaces the frontend's. `synthesize` is not played (`oatf_serve.playable` says so).
The request body is rewritten before the tap decodes it: the engine judges the run input the agent received.
Request bodies the client streams (no Content-Length) pass unaltered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mitmproxy import http

from oatf_engine.events import ObservedEvent
from oatf_engine.wire.ag_ui import is_run_agent_input, thread_id
from oatf_serve.state import mapping

from .inject_players import Actors, Bounded, Note, Played, json_message, new_players, say
from .sse_frames import json_bytes

MAX_THREADS = 10_000
"""AG-UI threads played at once; the least recently active is forgotten beyond."""
MAX_FLOWS = 10_000
"""Runs whose events the players still observe (a run's events come until its stream ends)."""
KEPT = frozenset({"threadId", "thread_id", "runId", "run_id", "parentRunId", "parent_run_id", "synthesize"})
"""Run input fields the document does not overlay (see the module docstring)."""
KEYED = {"messages": "id", "tools": "name", "context": "description"}
"""The run input's lists, and the field naming an entry."""
MERGED = frozenset({"state", "forwardedProps"})
"""The run input's objects, merged key by key."""


class AgUiInject:
    """The `ag_ui_client` actors of `oatf_inject` played into AG-UI run inputs (see the module docstring)."""

    def __init__(self, note: Note) -> None:
        self.note = note
        self.actors: Actors = []
        self.threads: Bounded[str, list[Played]] = Bounded(MAX_THREADS)
        self.flows: Bounded[str, list[Played]] = Bounded(MAX_FLOWS)

    def configure(self, actors: Actors) -> None:
        self.actors = actors
        self.threads.clear()
        self.flows.clear()

    def request(self, flow: http.HTTPFlow) -> None:
        """A run input posted to the agent: the thread's current phases overlaid on it."""
        request = flow.request
        if not self.actors or request.method != "POST" or not request.raw_content:
            return
        body = json_message(request)
        if not is_run_agent_input(body):
            return
        key = f"{request.host}:{request.port}{request.path.split('?', 1)[0]}#{thread_id(body)}"
        players = self.threads.get(key)
        if players is None:
            players = self.threads[key] = new_players(self.actors)
        else:
            self.threads.move_to_end(key)
        notes: list[str] = []
        for played in players:
            for phase in played.player.tick():
                played.player.narrate(phase, say)
            document = mapping(played.player.state()).get("run_agent_input")
            if isinstance(document, Mapping):
                body = overlay(body, played.player.render(document), played.where(), notes)
        self.flows[flow.id] = players
        if notes:
            request.content = json_bytes(body)
            self.note(flow, "run_agent_input", notes, sender="client")

    def observe(self, event: ObservedEvent) -> None:
        """An AG-UI event of a run whose input was played: the thread's players observe it."""
        if event.protocol != "ag_ui":
            return
        for played in self.flows.get(event.flow_id, ()):
            for phase in played.player.observe(event):
                played.player.narrate(phase, say)


def overlay(run: dict[str, Any], document: Mapping[str, Any], where: str, notes: list[str]) -> dict[str, Any]:
    """The run input `run` with the document's `run_agent_input` overlaid (see the module docstring); what
    changed is appended to `notes`."""
    run = dict(run)
    for name, value in document.items():
        if name in KEPT:
            continue
        field = name if name in run or _snake(name) not in run else _snake(name)
        real = run.get(field)
        if name in KEYED and isinstance(value, list):
            run[field], changes = _entries(real if isinstance(real, list) else [], value, KEYED[name])
        elif name in MERGED and isinstance(value, Mapping) and isinstance(real, Mapping):
            changes = [f"{key!r}" for key in value if real.get(key) != value[key]]
            run[field] = {**real, **value}
        else:
            changes = [] if real == value else ["replaced"]
            run[field] = value
        if changes:
            notes.append(f"{where}: run_agent_input.{name}: {', '.join(changes)}")
    return run


def _entries(real: list[Any], document: list[Any], key: str) -> tuple[list[Any], list[str]]:
    entries, changes = list(real), []
    for entry in document:
        name = entry.get(key) if isinstance(entry, Mapping) else None
        at = next((i for i, e in enumerate(entries) if name is not None and isinstance(e, Mapping)
                   and e.get(key) == name), None)
        if at is None:
            entries.append(entry)
            changes.append(f"added {name!r}")
        elif entries[at] != entry:
            entries[at] = entry
            changes.append(f"replaced {name!r}")
    return entries, changes


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)

