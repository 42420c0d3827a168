"""What every played mode shares to read a phase state (format spec §7.0.1 response dispatch): the structural
keys' entries, the refusals an answer can turn into, and `synthesize`, which is not played. Sans-I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import oatf

Render = Callable[[Any], Any]
"""Resolves the templates of a piece of state for the message being built (`ActorPlayer.render`)."""

INVALID_PARAMS, INTERNAL_ERROR = -32602, -32603


class Refusal(Exception):
    """A request the state cannot answer: a JSON-RPC error (code, message) for the agent."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Unplayable(Refusal):
    """The state asks for something this runtime cannot produce (e.g. `synthesize`); the message names the field."""

    def __init__(self, message: str) -> None:
        super().__init__(INTERNAL_ERROR, message)


def mapping(state: Any) -> Mapping[str, Any]:
    return state if isinstance(state, Mapping) else {}


def entries(state: Any, key: str) -> list[Mapping[str, Any]]:
    """The mappings listed under a structural key (anything else there is ignored)."""
    value = mapping(state).get(key)
    return [entry for entry in value if isinstance(entry, Mapping)] if isinstance(value, list | tuple) else []


def dispatch(candidates: Any, request: Any, where: str) -> dict[str, Any] | None:
    """§7.0.1 / SDK spec §5.7 `select_response` over a `responses`-like list; `synthesize` is refused (LLM
    synthesis is reserved in v0.1, §7.4, and no provider is configured) naming the entry."""
    if not isinstance(candidates, list | tuple):
        return None
    chosen = oatf.select_response([e for e in candidates if isinstance(e, Mapping)], request)
    if chosen is not None and "synthesize" in chosen and "content" not in chosen and "messages" not in chosen:
        raise Unplayable(f"{where}: the entry selected has only `synthesize`, and LLM synthesis is not "
                         "supported (format spec §7.4: reserved in v0.1)")
    return chosen


def as_is(value: Any) -> Any:
    """The renderer that leaves a value's templates alone (to compare states, not to serve them)."""
    return value
