"""Which protocol an exchange speaks: from its JSON-RPC method names (format spec §7.1.2, §7.2.2 vocabularies
in `oatf.bindings.SURFACES`), and from user overrides that pin a host/path to a protocol.

Method recognition uses the binding vocabularies, so it never disagrees with the validator: a method only
one binding names belongs to that binding; an unknown method belongs to the binding that alone uses its
family (the part before the first `/`: `notifications/...` is MCP, `message/...` is A2A); a name both use
(`tasks/get`, `tasks/cancel`) is told by its params when they are given (MCP names the task `taskId`, A2A
`id`); a name no one knows, or a shared one without such params, is undecided, and the caller falls back to
header hints, the protocol already seen on the endpoint, then MCP. A2A 1.0 method names (`SendMessage`, …) are
mapped to their 0.3 names first (`oatf_engine.wire.a2a.METHODS_1_0`). A2A's HTTP+JSON/REST routes are recognised
by their paths (`oatf_engine.wire.a2a_rest.ROUTES`).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

from oatf.bindings import SURFACES
from oatf_engine.events import Protocol

from .a2a import METHODS_1_0


def _families(protocol: str) -> frozenset[str]:
    return frozenset(name.split("/", 1)[0] for name in SURFACES[protocol])


_MCP_ONLY = SURFACES["mcp"] - SURFACES["a2a"]
_A2A_ONLY = SURFACES["a2a"] - SURFACES["mcp"]
_SHARED = SURFACES["mcp"] & SURFACES["a2a"]
_MCP_FAMILIES = _families("mcp") - _families("a2a")
_A2A_FAMILIES = _families("a2a") - _families("mcp")


def protocol_of_method(method: str, params: Any = None) -> Protocol | None:
    """The JSON-RPC protocol a method name (with its request's `params`, for a name both use) belongs to, or None
    when they do not decide it."""
    if method in METHODS_1_0 or method in _A2A_ONLY:
        return "a2a"
    if method in _MCP_ONLY:
        return "mcp"
    if method in _SHARED:
        return _task_params(params)
    family = method.split("/", 1)[0]
    if family in _MCP_FAMILIES:
        return "mcp"
    if family in _A2A_FAMILIES:
        return "a2a"
    return None


def _task_params(params: Any) -> Protocol | None:
    """Whose `tasks/get` / `tasks/cancel` params these are: MCP's name the task `taskId` (MCP 2025-11-25
    `GetTaskRequest`), A2A's `id` (A2A 0.3 `TaskQueryParams`, `TaskIdParams`)."""
    if not isinstance(params, dict):
        return None
    if "taskId" in params:
        return "mcp"
    return "a2a" if "id" in params else None


PROTOCOL_NAMES: frozenset[str] = frozenset({"mcp", "a2a", "ag_ui"})
IGNORE = "ignore"


@dataclass(frozen=True, slots=True)
class Override:
    """Traffic to `host` (an fnmatch pattern on `host` or `host:port`) under `path_prefix` is `protocol`;
    the protocol `ignore` leaves such traffic undecoded."""

    host: str
    path_prefix: str
    protocol: str

    def matches(self, host: str, port: int, path: str) -> bool:
        """Whether an exchange to host:port/path falls under this override."""
        if not path.startswith(self.path_prefix):
            return False
        return fnmatch.fnmatchcase(host, self.host) or fnmatch.fnmatchcase(f"{host}:{port}", self.host)


def parse_overrides(spec: str) -> tuple[Override, ...]:
    """Parse `HOST[:PORT][/PATH]=PROTOCOL` entries separated by commas or whitespace, e.g.
    `api.example.com/mcp=mcp, *:9999=a2a, cdn.example.com=ignore`. Raises ValueError naming the bad entry."""
    overrides = []
    for entry in spec.replace(",", " ").split():
        target, eq, protocol = entry.rpartition("=")
        if not eq or not target or protocol not in PROTOCOL_NAMES | {IGNORE}:
            raise ValueError(f"bad protocol override {entry!r}: expected HOST[:PORT][/PATH]=mcp|a2a|ag_ui|ignore")
        host, slash, path = target.partition("/")
        overrides.append(Override(host.lower() or "*", slash + path if slash else "/", protocol))
    return tuple(overrides)


def find_override(overrides: tuple[Override, ...], host: str, port: int, path: str) -> str | None:
    """The protocol (or `ignore`) of the first override matching host:port/path, else None."""
    for override in overrides:
        if override.matches(host.lower(), port, path):
            return override.protocol
    return None
