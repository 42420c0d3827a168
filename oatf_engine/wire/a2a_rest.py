"""A2A's HTTP+JSON/REST binding onto the OATF A2A binding (format spec §7.2.2 events, §7.2.3 content). Sans-I/O.

A2A 1.0 §11 (HTTP+JSON/REST transport binding) and A2A 0.3.0 §3.2.3 (HTTP+JSON/REST) carry the JSON-RPC
methods as HTTP routes, relative to the agent interface's URL (a2a-sdk 1.3 `server/routes/rest_routes.py`,
`compat/v0_3/rest_adapter.py`): `POST /message:send`, `POST /message:stream` (SSE), `GET /tasks/{id}`,
`GET /tasks`, `POST /tasks/{id}:cancel`, `GET|POST /tasks/{id}:subscribe` (SSE), the push-notification configs
under `/tasks/{id}/pushNotificationConfigs[/{configId}]` and `GET /extendedAgentCard`; optionally behind a
`/{tenant}` segment. A2A 0.3 puts every route under `/v1` and has `GET /v1/card` for the extended card.

Each route is decoded as the JSON-RPC method it stands for (`ROUTES`), with the same content Value the
JSON-RPC binding gives (`oatf_engine.wire.a2a`): the request content is the JSON-RPC `params` the route carries (its
body, plus the ids and query parameters in the URL: `GET /tasks/t1?historyLength=2` is `tasks/get` with
`{"id": "t1", "historyLength": 2}`), and the response body (or each SSE event's data) is the JSON-RPC `result`.
A2A 1.0 bodies are the JSON-RPC 1.0 shapes already. A2A 0.3 bodies are the protobuf JSON of the 0.3 `.proto`
(field names in snake_case in a2a-sdk's requests, Message `content` for `parts`, TaskStatus `update` for
`message`, `SendMessageRequest.request` for `message`, `{file: {fileWithUri, mimeType}}` and `{data: {data}}`
parts, `TASK_STATE_CANCELLED`): `from_v03_proto` maps them onto the 1.0 shapes first. An error is a non-2xx
status (or an SSE `error` event) with a `google.rpc.Status` body; its content is the `error` object.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_SEGMENT = r"[^/:]+"
_ROUTES: tuple[tuple[frozenset[str], str, str, bool], ...] = (
    (frozenset({"POST"}), "/message:send", "message/send", True),
    (frozenset({"POST"}), "/message:stream", "message/stream", True),
    (frozenset({"POST"}), f"/tasks/(?P<task>{_SEGMENT}):cancel", "tasks/cancel", True),
    (frozenset({"GET", "POST"}), f"/tasks/(?P<task>{_SEGMENT}):subscribe", "tasks/resubscribe", True),
    (frozenset({"POST"}), f"/tasks/(?P<task>{_SEGMENT})/pushNotificationConfigs",
     "tasks/pushNotificationConfig/set", True),
    (frozenset({"GET"}), f"/tasks/(?P<task>{_SEGMENT})/pushNotificationConfigs",
     "tasks/pushNotificationConfig/list", True),
    (frozenset({"GET"}), f"/tasks/(?P<task>{_SEGMENT})/pushNotificationConfigs/(?P<push>{_SEGMENT})",
     "tasks/pushNotificationConfig/get", True),
    (frozenset({"DELETE"}), f"/tasks/(?P<task>{_SEGMENT})/pushNotificationConfigs/(?P<push>{_SEGMENT})",
     "tasks/pushNotificationConfig/delete", True),
    (frozenset({"GET"}), f"/tasks/(?P<task>{_SEGMENT})", "tasks/get", False),
    (frozenset({"GET"}), "/tasks", "tasks/list", False),
    (frozenset({"GET"}), "/extendedAgentCard", "agent/getAuthenticatedExtendedCard", True),
    (frozenset({"GET"}), "(?<=/v1)/card", "agent/getAuthenticatedExtendedCard", False),  # 0.3 only
)
ROUTES: tuple[tuple[frozenset[str], re.Pattern[str], str, bool], ...] = tuple(
    (methods, re.compile(f"(?P<base>.*?){pattern}"), event, distinctive)
    for methods, pattern, event, distinctive in _ROUTES)
"""(HTTP methods, path pattern, the binding's event name, whether the path alone says A2A). A path that could
belong to any REST API (`GET /tasks/{id}`, `GET /tasks`, `GET /v1/card`) is only A2A with more evidence."""

_QUERY_INTS = frozenset({"historyLength", "pageSize"})
_QUERY_BOOLS = frozenset({"includeArtifacts"})


@dataclass(frozen=True, slots=True)
class Route:
    """An HTTP request recognised as a route of the REST binding."""

    event: str
    """The binding's event name (the JSON-RPC method the route stands for)."""
    base: str
    """The interface path the route is relative to (`/` at the root, `/v1` for 0.3 at the root)."""
    distinctive: bool
    """Whether the path alone identifies A2A (else the caller needs more evidence)."""
    v03: bool
    """An A2A 0.3 route (under `/v1`): bodies are 0.3 protobuf JSON."""
    ids: dict[str, str]
    """The ids in the path, under their JSON-RPC `params` names."""


@functools.lru_cache(maxsize=4096)
def match(method: str, path: str) -> Route | None:
    """The REST route of a request (method, path without query), or None (remembered: an endpoint's requests
    repeat their method and path; a `Route` is never altered)."""
    for methods, pattern, event, distinctive in ROUTES:
        found = pattern.fullmatch(path) if method in methods else None
        if found is None:
            continue
        groups = found.groupdict()
        base = groups["base"] or "/"
        ids = {"taskId" if event.startswith("tasks/pushNotificationConfig/") else "id": groups["task"]} \
            if groups.get("task") else {}
        if groups.get("push"):
            ids["id"] = groups["push"]
        return Route(event, base, distinctive, base.endswith("/v1"), ids)
    return None


def request_params(route: Route, body: Any, query: list[tuple[str, str]]) -> Any:
    """The JSON-RPC `params` a REST request stands for: its body (mapped from 0.3 protobuf JSON), query and path
    ids; a non-object body is returned as sent."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        return body
    if route.v03:
        body = _v03_send_request(body) if route.event in ("message/send", "message/stream") else _camel_keys(body)
    params: dict[str, Any] = {**body}
    for name, value in query:
        key = _camel(name)
        if key in _QUERY_INTS and value.lstrip("-").isdigit():
            params[key] = int(value)
        elif key in _QUERY_BOOLS and value in ("true", "false"):
            params[key] = value == "true"
        else:
            params[key] = value
    return {**params, **route.ids}


def result(route: Route, body: Any) -> Any:
    """The JSON-RPC `result` a REST response body (or SSE event data) stands for (1.0 shapes)."""
    return from_v03_proto(body) if route.v03 else body


def error(body: Any) -> Any:
    """The error object of a REST error body (`google.rpc.Status`: `{"error": {...}}`), else the body."""
    return body["error"] if isinstance(body, dict) and isinstance(body.get("error"), dict) else body


# --- A2A 0.3 protobuf JSON → A2A 1.0 JSON ----------------------------------------------------------------------


def from_v03_proto(value: Any) -> Any:
    """A 0.3 protobuf JSON response (SendMessageResponse, StreamResponse, Task) in the 1.0 shape; other values
    (push configs, cards) with camelCase keys."""
    if not isinstance(value, dict):
        return value
    value = _camel_keys(value)
    if len(value) == 1:
        (key, inner), = value.items()
        convert = _WRAPPED.get(key)
        if convert is not None:
            return {key: convert(inner)}
    if "status" in value and "id" in value:
        return _task(value)
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _camel_keys(value: dict[str, Any]) -> dict[str, Any]:
    return {_camel(key): item for key, item in value.items()}


def _object(convert: dict[str, Callable[[Any], Any]], renames: dict[str, str] | None = None
            ) -> Callable[[Any], Any]:
    """A converter of one protobuf message: keys to camelCase, renamed, and the listed fields converted."""

    def run(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            key = _camel(key)
            key = renames.get(key, key) if renames else key
            out[key] = convert[key](item) if key in convert else item
        return out

    return run


def _each(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda items: [convert(item) for item in items] if isinstance(items, list) else items


def _part(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    part = _camel_keys(part)
    file, data = part.get("file"), part.get("data")
    if isinstance(file, dict):
        file = _camel_keys(file)
        out = {k: v for k, v in part.items() if k != "file"}
        for old, new in (("fileWithUri", "url"), ("fileWithBytes", "raw"), ("mimeType", "mediaType"),
                         ("name", "filename")):
            if old in file:
                out[new] = file[old]
        return out
    if isinstance(data, dict) and set(data) == {"data"}:
        return {**part, "data": data["data"]}
    return part


def _state(state: Any) -> Any:
    return "TASK_STATE_CANCELED" if state == "TASK_STATE_CANCELLED" else state


_message = _object({"parts": _each(_part)}, {"content": "parts"})
_status = _object({"message": _message, "state": _state}, {"update": "message"})
_artifact = _object({"parts": _each(_part)})
_task = _object({"status": _status, "history": _each(_message), "artifacts": _each(_artifact)})
_v03_send_request = _object({"message": _message, "configuration": _object({})}, {"request": "message"})
_WRAPPED: dict[str, Callable[[Any], Any]] = {
    "task": _task, "message": _message,
    "statusUpdate": _object({"status": _status}), "artifactUpdate": _object({"artifact": _artifact}),
}
