"""What an `a2a_server` actor's phase state answers (format spec §7.2.4 "Execution State (A2A Server)",
§7.0.1 response dispatch). Sans-I/O: the state, the request's content and a renderer in, A2A objects out.

The documents are written against A2A 0.3 JSON (the binding's version); the a2a-sdk speaks A2A 1.0
protobufs and converts them back to 0.3 for 0.3 clients. So the state's objects are converted with the SDK's
own compatibility layer (`a2a.compat.v0_3`, and the card parser its client uses for 0.3 cards): what the
SDK's types cannot carry is lost on the way, and `dropped` names it (said at start by `oatf_serve.playable`).

- `agent_card` is served on `agent_card/get` and `agent/getAuthenticatedExtendedCard`; its `url` (0.3) and
  `supportedInterfaces[*].url` (1.0) are the served endpoint's, so clients reach it; without a card, a
  minimal one (`DEFAULT_CARD`).
- `task_responses` answer `message/send` and `message/stream`: the first entry whose `when` matches the
  request params (in the 0.3 shape); its `content` is a Task (`kind: task`, or a `status`) or a Message.
  Without `task_responses`, an empty completed task.
- A stream (`stream_items`) is the Task without its artifacts, one artifact update per artifact, then a status
  update with the task's status (a terminal status ends 0.3 clients' streams, so it comes last); a Message is
  the stream's single item.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pydantic
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseError

from oatf_engine.text import printable

from .state import Render, Unplayable, dispatch, entries, mapping

DEFAULT_CARD: dict[str, Any] = {
    "protocolVersion": "0.3.0", "name": "oatf-agent", "description": "An A2A agent.", "version": "1.0.0",
    "capabilities": {"streaming": True}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
    "skills": [],
}
"""§7.2.4: "When `agent_card` is omitted, the runtime SHOULD use a minimal valid Agent Card"."""

Answer = a2a_pb2.Task | a2a_pb2.Message
StreamItem = a2a_pb2.Task | a2a_pb2.Message | a2a_pb2.TaskStatusUpdateEvent | a2a_pb2.TaskArtifactUpdateEvent


def document_card(state: Any, url: str, render: Render) -> dict[str, Any]:
    """The phase's Agent Card as the document gives it (0.3 JSON), rendered, with the served endpoint's URL."""
    card = mapping(state).get("agent_card")
    served = dict(render(card)) if isinstance(card, Mapping) else copy.deepcopy(DEFAULT_CARD)
    if "supportedInterfaces" not in served or "url" in served:
        served["url"] = url
    interfaces = served.get("supportedInterfaces")
    if isinstance(interfaces, list):
        served["supportedInterfaces"] = [{**i, "url": url} if isinstance(i, Mapping) else i for i in interfaces]
    return served


def core_card(card: Mapping[str, Any]) -> a2a_pb2.AgentCard:
    """A card (0.3 or 1.0 JSON) as the SDK's 1.0 AgentCard, parsed as the SDK's client parses cards."""
    try:
        return parse_agent_card(copy.deepcopy(dict(card)))
    except (ParseError, TypeError, ValueError) as exc:
        raise Unplayable(f"state.agent_card: not an Agent Card the a2a-sdk can serve: {printable(str(exc), 200)}") \
            from None


def served_card(card: Mapping[str, Any]) -> dict[str, Any]:
    """The card JSON the SDK serves for `card` (1.0 fields with the 0.3 ones merged in)."""
    return agent_card_to_dict(core_card(card))


def task_response(state: Any, request: Any, render: Render) -> tuple[dict[str, Any], str]:
    """The content answering `message/send` / `message/stream` with params `request` (0.3 shape), rendered,
    and where it comes from (for messages naming the field)."""
    candidates = mapping(state).get("task_responses")
    chosen = dispatch(candidates, request, "state.task_responses")
    if chosen is None:
        return empty_task(request), "the empty completed task (no task_responses)"
    content = chosen.get("content")
    index = next(i for i, entry in enumerate(entries(state, "task_responses")) if entry.get("content") is content)
    where = f"state.task_responses[{index}].content"
    if not isinstance(content, Mapping):
        raise Unplayable(f"{where}: not an A2A Task or Message (an object): the a2a-sdk cannot send it")
    return dict(render(content)), where


def empty_task(request: Any) -> dict[str, Any]:
    """§7.2.4: "When `task_responses` is omitted, the server returns an empty completed task"."""
    message = mapping(mapping(request).get("message"))
    context = message.get("contextId")
    return {"kind": "task", "id": f"task-{uuid.uuid4().hex[:12]}",
            "contextId": context if isinstance(context, str) and context else f"ctx-{uuid.uuid4().hex[:12]}",
            "status": {"state": "completed"}}


def is_task(content: Mapping[str, Any]) -> bool:
    return content.get("kind") == "task" or (content.get("kind") is None and "status" in content)


def to_core(content: Mapping[str, Any], where: str) -> Answer:
    """A Task or Message (0.3 JSON) as the SDK's 1.0 object; content the SDK cannot carry is refused, naming
    `where`."""
    try:
        if is_task(content):
            return conversions.to_core_task(types_v03.Task.model_validate(content))
        return conversions.to_core_message(types_v03.Message.model_validate(content))
    except (pydantic.ValidationError, ValueError, TypeError) as exc:
        kind = "Task" if is_task(content) else "Message"
        raise Unplayable(f"{where}: not an A2A {kind} the a2a-sdk can send: {_first_error(exc)}") from None


def to_v03(answer: Answer) -> dict[str, Any]:
    """What a 0.3 client receives for `answer` (the content the player observes)."""
    compat = (conversions.to_compat_task(answer) if isinstance(answer, a2a_pb2.Task)
              else conversions.to_compat_message(answer))
    return compat.model_dump(by_alias=True, exclude_none=True, mode="json")


def stream_items(answer: Answer) -> Iterator[StreamItem]:
    """The stream of `message/stream` for `answer` (see the module docstring)."""
    if isinstance(answer, a2a_pb2.Message):
        yield answer
        return
    head = a2a_pb2.Task()
    head.CopyFrom(answer)
    del head.artifacts[:]
    yield head
    for artifact in answer.artifacts:
        yield a2a_pb2.TaskArtifactUpdateEvent(task_id=answer.id, context_id=answer.context_id, artifact=artifact,
                                              last_chunk=True)
    yield a2a_pb2.TaskStatusUpdateEvent(task_id=answer.id, context_id=answer.context_id, status=answer.status)


def dropped(document: Any, served: Any, path: str) -> Iterator[str]:
    """The paths of `document`'s object keys that `served` (its conversion) no longer has."""
    if isinstance(document, Mapping) and isinstance(served, Mapping):
        for key, value in document.items():
            if key not in served:
                yield f"{path}.{key}"
            else:
                yield from dropped(value, served[key], f"{path}.{key}")
    elif isinstance(document, list) and isinstance(served, list):
        for index, (value, kept) in enumerate(zip(document, served, strict=False)):
            yield from dropped(value, kept, f"{path}[{index}]")


def _first_error(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        error = exc.errors()[0]
        return printable(f"{'.'.join(map(str, error.get('loc', ())))}: {error.get('msg', '')}", 200)
    return printable(str(exc), 200)
