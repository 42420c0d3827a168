"""Phase triggers (SDK spec §5.8 `evaluate_trigger`; types of §2.8a–c; format spec §5.3 "Triggers")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import ClassVar

from .conditions import evaluate_predicate
from .durations import parse_duration
from .model import ProtocolEvent, Trigger


class AdvanceReason(StrEnum):
    """SDK spec §2.8b `AdvanceReason`: why a phase advanced."""

    EVENT_MATCHED = "event_matched"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class TriggerResult:
    """SDK spec §2.8b `TriggerResult`: `Advanced { reason }` is `advanced=True` with its `reason`;
    `NotAdvanced` is `advanced=False`, `reason=None`. The three possible values are the class constants
    `NOT_ADVANCED`, `EVENT_MATCHED` and `TIMEOUT`."""

    advanced: bool
    reason: AdvanceReason | None = None

    NOT_ADVANCED: ClassVar[TriggerResult]
    EVENT_MATCHED: ClassVar[TriggerResult]
    TIMEOUT: ClassVar[TriggerResult]


TriggerResult.NOT_ADVANCED = TriggerResult(advanced=False)
TriggerResult.EVENT_MATCHED = TriggerResult(advanced=True, reason=AdvanceReason.EVENT_MATCHED)
TriggerResult.TIMEOUT = TriggerResult(advanced=True, reason=AdvanceReason.TIMEOUT)


@dataclass(slots=True)
class TriggerState:
    """SDK spec §2.8c `TriggerState`: per actor and phase; create a fresh one on phase entry and pass it
    to every `evaluate_trigger` call of that phase. Only `evaluate_trigger` changes it."""

    event_count: int = 0


def evaluate_trigger(
    trigger: Trigger, event: ProtocolEvent | None, elapsed: timedelta, state: TriggerState
) -> TriggerResult:
    """SDK spec §5.8 `evaluate_trigger`: whether the phase `trigger` guards advances now.

    1. `after` present and `elapsed` ≥ it: advanced, `timeout` (checked first, before any event).
    2. `event` present and an event given: a different `event_type` or a failing `match` predicate (on
       the event's `content`) leaves the state alone; otherwise `state.event_count` goes up by one, and
       reaching `count` (default 1) advances with `event_matched`.
    3. Otherwise not advanced.

    `trigger.after` is the duration as written (parsed through `parse_duration`'s cache); one that is
    not a valid duration (V-rule in `validate`) raises `OATFParseError`."""
    if trigger.after is not None and elapsed >= parse_duration(trigger.after):
        return TriggerResult.TIMEOUT
    if trigger.event is not None and event is not None:
        if event.event_type != trigger.event:
            return TriggerResult.NOT_ADVANCED
        if trigger.match is not None and not evaluate_predicate(trigger.match, event.content):
            return TriggerResult.NOT_ADVANCED
        state.event_count += 1
        if state.event_count >= (1 if trigger.count is None else trigger.count):
            return TriggerResult.EVENT_MATCHED
    return TriggerResult.NOT_ADVANCED
