"""What inject mode (`addon.inject`) noted on a flow, and the event it tags: shared by the live addon and offline
replay (`addon.recordings`), which must not import inject mode's players (`oatf_serve`, the A2A SDK: seconds
before `oatf evaluate` reads anything)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from oatf_engine.events import ObservedEvent

METADATA_KEY = "oatf_injected"
"""`flow.metadata` key of what was injected into a flow (a list of lines)."""


def tagged(event: ObservedEvent, noted: Any) -> ObservedEvent:
    """`event` carrying what was injected into its flow (`noted`: the flow's `oatf_injected` metadata entry,
    live or recorded) when it is the message altered: named `method`, sent by `sender` (the server unless
    said: an AG-UI run input is the client's)."""
    if (isinstance(noted, Mapping) and event.sender == noted.get("sender", "server")
            and event.event_type == noted.get("method")):
        return dataclasses.replace(event, injected=tuple(map(str, noted.get("injected") or ())))
    return event


__all__ = ["METADATA_KEY", "tagged"]
