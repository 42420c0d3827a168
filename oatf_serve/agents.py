"""Where `oatf serve` drives the agent for each client actor (`--agent [ACTOR=]URL`, repeatable; issue 19: client
actors "send their requests" against "the agent's endpoint", and a document's client actors may speak different
protocols, e.g. an `ag_ui_client` and an `a2a_client`, each needing its own endpoint).

`--agent URL` is the endpoint of every client actor; `--agent NAME=URL` that of the actor named NAME, or of
every actor of the client mode NAME (`ag_ui_client`, `mcp_client`, `a2a_client`). An actor's name wins over
its mode, and its mode over the bare URL. A value that is not an http(s) URL, a second bare URL, a NAME given
twice and a NAME that names no client actor of the documents are usage errors (`AgentError`), said before
anything is served.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import oatf

CLIENT_MODES = ("ag_ui_client", "mcp_client", "a2a_client")
_NAME = re.compile(r"[^\s=:/]+")
"""An actor name or mode before `=` (a URL's own `=` comes after its `://`)."""


class AgentError(ValueError):
    """A usage error of `--agent` (see the module docstring)."""


@dataclass(frozen=True)
class AgentUrls:
    """The agent's endpoints, by client actor (see the module docstring)."""

    default: str | None = None
    named: Mapping[str, str] = field(default_factory=dict)
    """Actor name or client mode → URL."""

    def url(self, actor: str, mode: str) -> str | None:
        """The endpoint the actor `actor` of mode `mode` drives, or None."""
        return self.named.get(actor, self.named.get(mode, self.default))


def parse_agents(values: Sequence[str] | None) -> AgentUrls:
    """The `--agent` values (see the module docstring)."""
    default: str | None = None
    named: dict[str, str] = {}
    for value in values or ():
        name, sep, url = value.partition("=")
        if not (sep and _NAME.fullmatch(name)):
            name, url = "", value
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise AgentError(f"--agent {value}: not an http(s) URL (--agent URL, or --agent ACTOR=URL)")
        if not name:
            if default is not None:
                raise AgentError(f"--agent {value}: a second URL for every client actor (the first: {default}); "
                                 "name the actor or its mode: --agent ACTOR=URL")
            default = url
        elif name in named:
            raise AgentError(f"--agent {value}: {name} is given twice (first: {named[name]})")
        else:
            named[name] = url
    return AgentUrls(default, named)


def check_names(agents: AgentUrls, documents: Iterable[oatf.Document]) -> None:
    """`AgentError` when a NAME of `--agent NAME=URL` is neither a client actor of `documents` nor a client
    mode."""
    actors = sorted({actor.name or "default" for document in documents
                     if document.attack is not None and document.attack.execution is not None
                     for actor in document.attack.execution.actors or () if actor.mode in CLIENT_MODES})
    for name in agents.named:
        if name not in actors and name not in CLIENT_MODES:
            raise AgentError(f"--agent {name}=…: no client actor is named {name} "
                             f"(client actors: {', '.join(actors) or 'none'}; modes: {', '.join(CLIENT_MODES)})")
