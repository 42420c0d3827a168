"""A2A onto the OATF A2A binding (format spec §7.2.2 events, §7.2.3 content): both wire versions in use.

Event names are the binding's (A2A v0.3.0 JSON-RPC method names plus the synthetic `agent_card/get`,
`task/status`, `task/artifact`). A2A 1.0 method names are mapped onto them (`METHODS_1_0`).

Content Value: the binding is written against the v0.3.0 schema (`message.status.state == "completed"`,
`result.kind == "status-update"`), so every A2A content Value is given in the **v0.3 shape, whichever version
was on the wire**, and one document matches both. For 0.3 traffic that is the message as sent. A2A 1.0 is
converted (`to_v03`), without touching the envelope (kept as sent in `ObservedEvent.envelope`):
- results wrapped as `{"task": …}`, `{"message": …}`, `{"statusUpdate": …}`, `{"artifactUpdate": …}` are
  unwrapped, and `kind` is added (`task`, `message`, `status-update`, `artifact-update`); a bare Task (an
  object with `id` and `status`: 1.0's `tasks/get`, and `fasta2a`'s answer to `message/send`) is a `task`;
- roles `ROLE_USER` / `ROLE_AGENT` become `user` / `agent`; task states `TASK_STATE_INPUT_REQUIRED` become
  `input-required` (lower case, `-` for `_`; `TASK_STATE_UNSPECIFIED` is `unknown`);
- parts get their `kind`: `{text}` → `{kind: text, text}`, `{data}` → `{kind: data, data}`, `{url | raw,
  mediaType, filename}` → `{kind: file, file: {uri | bytes, mimeType, name}}`;
- a status update gets 0.3's `final` when 1.0 leaves it out: true for a terminal or interrupted state
  (completed, canceled, failed, rejected, input-required, auth-required), which is when 0.3 servers end the
  stream; an artifact update gets `append` / `lastChunk` false when absent (proto3 JSON omits false).
Everything else (the Agent Card, push-notification configs, `configuration`, `metadata`) is passed through
as sent: the card's `name`, `description`, `skills` and `capabilities` sit at the same paths in both
versions, while 0.3's `url` / `preferredTransport` and 1.0's `supportedInterfaces` differ and are not mapped.
Conversion is idempotent (0.3 objects, which carry `kind`, are returned unchanged), never raises, and works
on any JSON value: unexpected shapes are passed through.
"""

from __future__ import annotations

from typing import Any

METHODS_1_0: dict[str, str] = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "ListTasks": "tasks/list",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
    "CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
    "GetTaskPushNotificationConfig": "tasks/pushNotificationConfig/get",
    "ListTaskPushNotificationConfigs": "tasks/pushNotificationConfig/list",
    "DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
    "GetExtendedAgentCard": "agent/getAuthenticatedExtendedCard",
}
"""A2A 1.0 JSON-RPC method → the binding's (v0.3.0) event name."""

CARD_PATHS: frozenset[str] = frozenset({"/.well-known/agent-card.json", "/.well-known/agent.json"})
"""Agent Card locations: A2A 0.3/1.0 and the legacy (pre-0.3) path; a GET there is `agent_card/get`."""

STREAM_EVENTS: dict[str, str] = {"status-update": "task/status", "artifact-update": "task/artifact"}
"""A streamed result's `kind` → the synthetic event it also fires (format spec §7.2.2)."""

_TASK_RESULTS = frozenset({"tasks/get", "tasks/cancel"})  # methods whose result is a bare Task in 1.0
_ROLES = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}
FINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected", "input-required", "auth-required"})
"""Task states after which an A2A agent stops working on a task until it is told more: terminal (completed,
canceled, failed, rejected) or interrupted (input-required, auth-required)."""


def event_name(method: str) -> str:
    """The binding's event name for a JSON-RPC method of either version."""
    return METHODS_1_0.get(method, method)


def request_content(params: Any) -> Any:
    """A request's content Value: its params, with a 1.0 `message` in the v0.3 shape."""
    if isinstance(params, dict) and isinstance(params.get("message"), dict):
        return {**params, "message": _message(params["message"])}
    return params


def result_content(event: str, result: Any) -> Any:
    """A result's content Value in the v0.3 shape (see the module docstring)."""
    if not isinstance(result, dict) or "kind" in result:
        return result
    if len(result) == 1:
        (key, value), = result.items()
        if isinstance(value, dict):
            if key == "task":
                return _task(value)
            if key == "message":
                return _message(value)
            if key == "statusUpdate":
                return _status_update(value)
            if key == "artifactUpdate":
                return {"kind": "artifact-update", "append": False, "lastChunk": False, **value,
                        "artifact": _artifact(value.get("artifact"))}
    if event in _TASK_RESULTS or ("status" in result and "id" in result):  # a bare Task (`fasta2a` answers so)
        return _task(result)
    if event == "tasks/list" and isinstance(result.get("tasks"), list):
        return {**result, "tasks": [_task(task) for task in result["tasks"]]}
    return result


def session_keys(content: Any) -> dict[str, str]:
    """`a2a_context` / `a2a_task` found on a content Value (a Task, Message, update, or request params)."""
    if not isinstance(content, dict):
        return {}
    message = content.get("message")
    source = message if isinstance(message, dict) else content
    keys = {}
    if isinstance(source.get("contextId"), str):
        keys["a2a_context"] = source["contextId"]
    task_id = source.get("taskId", content.get("id") if content.get("kind") == "task" else None)
    if isinstance(task_id, str):
        keys["a2a_task"] = task_id
    return keys


_TASK_ID_PARAMS = frozenset({"tasks/get", "tasks/cancel", "tasks/resubscribe"})
"""Methods whose params name their task `id` (0.3 `TaskQueryParams`, `TaskIdParams`; 1.0 `GetTaskRequest`,
`CancelTaskRequest`, `SubscribeToTaskRequest`)."""


def request_keys(event: str, content: Any) -> dict[str, str]:
    """The session keys of a request's content (`session_keys`), and the task a task method's `id` names (a
    `fasta2a` caller polls `tasks/get` with it): its session is the task's even when no answer is read."""
    keys = session_keys(content)
    if event in _TASK_ID_PARAMS and isinstance(content, dict) and isinstance(content.get("id"), str):
        keys.setdefault("a2a_task", content["id"])
    return keys


def jsonrpc_urls(card: Any) -> list[str]:
    """The URLs where an Agent Card says its agent answers A2A over JSON-RPC: 0.3's `url` (under
    `preferredTransport` JSONRPC, its default) and `additionalInterfaces`, 1.0's `supportedInterfaces` (under
    `protocolBinding` JSONRPC). Any JSON value: what is not such a URL is left out."""
    if not isinstance(card, dict):
        return []
    interfaces = [{"url": card.get("url"), "transport": card.get("preferredTransport", "JSONRPC")}]
    for name in ("additionalInterfaces", "supportedInterfaces"):
        if isinstance(listed := card.get(name), list):
            interfaces += (i for i in listed if isinstance(i, dict))
    return [i["url"] for i in interfaces
            if isinstance(i.get("url"), str) and i.get("transport", i.get("protocolBinding")) == "JSONRPC"]


# --- 1.0 → 0.3 shapes -------------------------------------------------------------------------------------


def _message(message: Any) -> Any:
    if not isinstance(message, dict) or "kind" in message:
        return message
    out = {"kind": "message", **message}
    role = message.get("role")
    if isinstance(role, str):
        out["role"] = _ROLES.get(role, role)
    if isinstance(message.get("parts"), list):
        out["parts"] = [_part(part) for part in message["parts"]]
    return out


def _part(part: Any) -> Any:
    if not isinstance(part, dict) or "kind" in part:
        return part
    if "text" in part:
        return {"kind": "text", **part}
    if "data" in part:
        return {"kind": "data", **part}
    if "url" in part or "raw" in part:
        rest = {k: v for k, v in part.items() if k not in ("url", "raw", "mediaType", "filename")}
        file: dict[str, Any] = {"uri": part["url"]} if "url" in part else {"bytes": part["raw"]}
        if "mediaType" in part:
            file["mimeType"] = part["mediaType"]
        if "filename" in part:
            file["name"] = part["filename"]
        return {"kind": "file", **rest, "file": file}
    return part


def _artifact(artifact: Any) -> Any:
    if isinstance(artifact, dict) and isinstance(artifact.get("parts"), list):
        return {**artifact, "parts": [_part(part) for part in artifact["parts"]]}
    return artifact


def _state(state: Any) -> Any:
    if isinstance(state, str) and state.startswith("TASK_STATE_"):
        name = state.removeprefix("TASK_STATE_")
        return "unknown" if name == "UNSPECIFIED" else name.lower().replace("_", "-")
    return state


def _status(status: Any) -> Any:
    if not isinstance(status, dict):
        return status
    out = {**status, "state": _state(status.get("state"))} if "state" in status else dict(status)
    if "message" in status:
        out["message"] = _message(status["message"])
    return out


def _task(task: Any) -> Any:
    if not isinstance(task, dict) or "kind" in task:
        return task
    out = {"kind": "task", **task}
    if "status" in task:
        out["status"] = _status(task["status"])
    if isinstance(task.get("history"), list):
        out["history"] = [_message(message) for message in task["history"]]
    if isinstance(task.get("artifacts"), list):
        out["artifacts"] = [_artifact(artifact) for artifact in task["artifacts"]]
    return out


def _status_update(update: dict[str, Any]) -> dict[str, Any]:
    status = _status(update.get("status"))
    out = {"kind": "status-update", **update, "status": status}
    if "final" not in update:
        out["final"] = isinstance(status, dict) and status.get("state") in FINAL_STATES
    return out
