"""A2A push notifications of an `a2a_server` actor (format spec §7.2.6 "Entry Actions (A2A)": `send_push_notification`
"delivers a webhook-style HTTP POST to a push notification endpoint previously configured via
`tasks/pushNotificationConfig/*`"; its `payload` is A2A's `StreamResponse`, "a wrapper containing exactly one of
`task`, `message`, `statusUpdate`, or `artifactUpdate`").

- The agent's configurations (`tasks/pushNotificationConfig/set`, or `configuration.pushNotificationConfig` of a
  message) are kept in the a2a-sdk's `InMemoryPushNotificationConfigStore` (`Registrations`), which answers
  `get`, `list` and `delete`.
- `push_event` reads a payload: A2A 1.0 `StreamResponse` JSON, or, as the documents are written against A2A 0.3,
  its wrapped object in 0.3 JSON (converted with the SDK's `a2a.compat.v0_3`); `Unplayable` names the field.
- `Registrations.send` POSTs it with the SDK's own `BasePushNotificationSender` (the body it writes is the 1.0
  `StreamResponse`; the `X-A2A-Notification-Token` and `Authorization` headers are those the agent registered for
  that URL and the payload's task). The action's `url` given, there; empty, to every URL the agent registered
  for the payload's task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pydantic
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.server.context import ServerCallContext
from a2a.server.tasks import BasePushNotificationSender, InMemoryPushNotificationConfigStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseDict, ParseError

from oatf_engine.text import printable

from .state import Unplayable

ACTION = "send_push_notification"
_V03: dict[str, tuple[type[pydantic.BaseModel], Callable[[Any], Any]]] = {
    "task": (types_v03.Task, conversions.to_core_task),
    "message": (types_v03.Message, conversions.to_core_message),
    "statusUpdate": (types_v03.TaskStatusUpdateEvent, conversions.to_core_task_status_update_event),
    "artifactUpdate": (types_v03.TaskArtifactUpdateEvent, conversions.to_core_task_artifact_update_event),
}
"""The `StreamResponse` wrapper's keys, each with its 0.3 type and the SDK's conversion to 1.0."""
Pushed = PushNotificationEvent | a2a_pb2.Message


def push_event(payload: Any, where: str = f"on_enter.{ACTION}.payload") -> Pushed:
    """The event a `send_push_notification` payload carries (see the module docstring)."""
    if not isinstance(payload, Mapping) or len(payload) != 1 or next(iter(payload)) not in _V03:
        raise Unplayable(f"{where}: not an A2A StreamResponse (an object with exactly one of "
                         f"{', '.join(_V03)})")
    (key, value), = payload.items()
    try:
        response = ParseDict(dict(payload), a2a_pb2.StreamResponse())
        event: Pushed = getattr(response, response.WhichOneof("payload") or "task")
        return event
    except (ParseError, TypeError, ValueError):
        pass
    compat_type, to_core = _V03[key]
    try:
        converted: Pushed = to_core(compat_type.model_validate(value))
        return converted
    except (pydantic.ValidationError, TypeError, ValueError) as exc:
        detail = exc.errors()[0] if isinstance(exc, pydantic.ValidationError) else None
        message = f"{'.'.join(map(str, detail['loc']))}: {detail['msg']}" if detail else str(exc)
        raise Unplayable(f"{where}.{key}: not an A2A {compat_type.__name__} (1.0 or 0.3 JSON) the a2a-sdk can "
                         f"send: {printable(message, 200)}") from None


def task_of(event: Pushed) -> str:
    """The id of the task an event is about (a Message: its `taskId`, possibly empty)."""
    return event.id if isinstance(event, a2a_pb2.Task) else event.task_id


class Registrations:
    """The push-notification configurations the agent registered, and the sending (see the module docstring)."""

    def __init__(self) -> None:
        self.store = InMemoryPushNotificationConfigStore()

    async def send(self, http: httpx.AsyncClient, url: str, event: Pushed) -> list[str]:
        """POST `event` to `url` (empty: to the URLs registered for its task) with the SDK's push sender; the
        URLs it went to (the sender logs a failed delivery itself)."""
        task = task_of(event)
        registered = await self.store.get_info_for_dispatch(task) if task else []
        chosen = [config for config in registered if config.url == url] if url else registered
        if url and not chosen:
            chosen = [a2a_pb2.TaskPushNotificationConfig(url=url)]
        if not chosen:
            return []
        once = InMemoryPushNotificationConfigStore()
        for config in chosen:
            await once.set_info(task, config, ServerCallContext())
        await BasePushNotificationSender(http, once).send_notification(task, event)
        return [config.url for config in chosen]
