"""AG-UI onto the OATF AG-UI binding (format spec §7.3.2 events, §7.3.3 content), HTTP POST + SSE transport.

- The POSTed `RunAgentInput` is the synthetic event `run_agent_input`; its content is the whole input object.
- Each SSE event of the answer is its `type` in snake_case (`TOOL_CALL_START` → `tool_call_start`); its
  content is the event object (AG-UI events are flat, §7.3.3).
- §7.3.2 "Correlated tool call events": an event carrying a `toolCallId` but no `toolCallName`
  (`TOOL_CALL_ARGS`, `TOOL_CALL_END`, `TOOL_CALL_RESULT`) gets the name of that call's `TOOL_CALL_START` in
  the same stream added to its content.
- `tool_call_result` is client-originated (§7.3.2): over HTTP the client sends the result back as a `tool`
  message in its next `RunAgentInput`. A `tool` message answering a tool call seen on an earlier stream of the
  same thread is reported as a `tool_call_result` event, shaped like AG-UI's `TOOL_CALL_RESULT` event
  (`type`, `messageId`, `toolCallId`, `toolCallName`, `content`, `role`).
- The answer is read as `@ag-ui/client`'s `HttpAgent` reads it: as SSE whatever its type, except the binary
  (protobuf) encoding's (`PROTOBUF_MEDIA_TYPE`), which is not decoded — such an answer is marked not inspected
  (`binary_encoding`). WebSocket transports are not decoded.
"""

from __future__ import annotations

from typing import Any

from oatf.bindings import SURFACES

_KNOWN_EVENTS = SURFACES["ag_ui"]

PROTOBUF_MEDIA_TYPE = "application/vnd.ag-ui.event+proto"
"""The media type of AG-UI's binary encoding (`ag_ui.encoder.AGUI_MEDIA_TYPE`): the one answer type `HttpAgent`
does not read as SSE."""


def is_run_agent_input(value: Any) -> bool:
    """Whether a JSON body is a RunAgentInput: an object with string `threadId` and `runId` (the fields the
    binding requires, §7.3.4), camelCase or snake_case."""
    return isinstance(value, dict) and isinstance(thread_id(value), str) and isinstance(run_id(value), str)


def thread_id(value: dict[str, Any]) -> Any:
    """The `threadId` of an input or event (camelCase or snake_case)."""
    return value.get("threadId", value.get("thread_id"))


def run_id(value: dict[str, Any]) -> Any:
    """The `runId` of an input or event (camelCase or snake_case)."""
    return value.get("runId", value.get("run_id"))


def event_name(value: Any, known_only: bool = False) -> str | None:
    """The snake_case event name of a decoded SSE event object, or None when it has no string `type`. With
    `known_only`, only the binding's event types count (used to recognize a stream nobody has claimed)."""
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(kind, str) or not kind:
        return None
    name = kind.lower()
    return name if not known_only or name in _KNOWN_EVENTS else None


def tool_results(value: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(toolCallId, TOOL_CALL_RESULT-shaped content) for each `tool` message of a RunAgentInput."""
    messages = value.get("messages")
    results = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "tool":
            continue
        call_id = message.get("toolCallId", message.get("tool_call_id"))
        if isinstance(call_id, str):
            content = {"type": "TOOL_CALL_RESULT", "messageId": message.get("id"), "toolCallId": call_id,
                       "content": message.get("content"), "role": "tool"}
            results.append((call_id, content))
    return results
