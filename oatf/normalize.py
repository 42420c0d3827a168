"""`normalize` (SDK spec §3.3): the canonical, fully-expanded form of a validated document.

Steps N-001…N-008 are small functions named after their rule. The result is a new document (the input is
untouched: the model is immutable) and `normalize(normalize(d)) == normalize(d)`. Phase states and other
`Value` payloads are shared with the input, not copied: they are never mutated.
"""

from __future__ import annotations

from typing import Any

from .model import (
    Actor,
    Attack,
    Classification,
    Correlation,
    CorrelationLogic,
    Document,
    Execution,
    Indicator,
    PatternMatch,
    Phase,
    Relationship,
    Severity,
    Status,
    Trigger,
)
from .protocols import extract_protocol

DEFAULT_ATTACK_NAME = "Untitled"
DEFAULT_ACTOR_NAME = "default"
DEFAULT_SEVERITY_CONFIDENCE = 50


def replace[M](value: M, **changes: Any) -> M:
    """`dataclasses.replace` for the model's frozen dataclasses, which have neither `__post_init__` nor fields
    outside `__init__`: a copy with `changes`, without calling `__init__` (which sets every field through
    `object.__setattr__`: half of normalizing a document)."""
    state = vars(value)
    if not changes.keys() <= state.keys():
        raise TypeError(f"{type(value).__name__} has no field {', '.join(sorted(changes.keys() - state.keys()))}")
    copy = object.__new__(type(value))
    vars(copy).update(state, **changes)
    return copy


def normalize(document: Document) -> Document:
    """SDK spec §3.3. Precondition: `document` passed `validate` (an invalid one is normalized as far as
    its shape allows)."""
    attack = document.attack
    if attack is None:
        return document
    execution_mode = attack.execution.mode if attack.execution is not None else None
    attack = replace(
        attack,
        name=attack.name if attack.name is not None else DEFAULT_ATTACK_NAME,  # N-001
        version=attack.version if attack.version is not None else 1,  # N-001
        status=attack.status if attack.status is not None else Status.DRAFT,  # N-001
        severity=n002_expand_severity(attack.severity),
        classification=n008_normalize_classification(attack.classification),
        execution=n006_n007_to_actors(attack.execution),
        indicators=_normalize_indicators(attack, execution_mode),
        correlation=n001_correlation(attack),
    )
    return replace(document, attack=attack)


def n002_expand_severity(severity: Severity | None) -> Severity | None:
    """N-002 (and N-001 `severity.confidence` → 50): severity always in object form."""
    if severity is None or severity.confidence is not None:
        return severity
    return replace(severity, confidence=DEFAULT_SEVERITY_CONFIDENCE)


def n008_normalize_classification(classification: Classification | None) -> Classification | None:
    """N-008 tags lowercase and hyphen-delimited; N-001 `mapping.relationship` → primary."""
    if classification is None:
        return None
    mappings = classification.mappings
    if mappings is not None:
        mappings = tuple(m if m.relationship is not None else replace(m, relationship=Relationship.PRIMARY)
                         for m in mappings)
    tags = classification.tags
    if tags is not None:
        tags = tuple(normalize_tag(t) for t in tags)
    return replace(classification, mappings=mappings, tags=tags)


def normalize_tag(tag: str) -> str:
    """N-008: `Rug_Pull` → `rug-pull`."""
    return tag.lower().replace("_", "-").replace(" ", "-")


def n006_n007_to_actors(execution: Execution | None) -> Execution | None:
    """N-006 (single-phase) and N-007 (multi-phase) → multi-actor form; then N-001 phase defaults."""
    if execution is None:
        return None
    actors = execution.actors
    if actors is None and execution.phases is not None:
        mode = execution.mode
        if mode is None and execution.phases:
            mode = execution.phases[0].mode  # N-007: mode-less multi-phase form
        actors = (Actor(name=DEFAULT_ACTOR_NAME, mode=mode, phases=execution.phases),)
    elif actors is None and execution.state is not None:
        phase = Phase(name="phase-1", state=execution.state)
        actors = (Actor(name=DEFAULT_ACTOR_NAME, mode=execution.mode, phases=(phase,)),)
    if actors is None:
        return execution
    return Execution(actors=tuple(_normalize_actor(a) for a in actors), extensions=execution.extensions)


def _normalize_actor(actor: Actor) -> Actor:
    return replace(actor, phases=tuple(n001_phase_defaults(p, i, actor.mode) for i, p in enumerate(actor.phases)))


def n001_phase_defaults(phase: Phase, index: int, actor_mode: str | None) -> Phase:
    """N-001: `phase.name` → `phase-{N}`, `phase.mode` → actor mode, `trigger.count` → 1 with an event."""
    return replace(
        phase,
        name=phase.name if phase.name is not None else f"phase-{index + 1}",
        mode=phase.mode if phase.mode is not None else actor_mode,
        trigger=n001_trigger_count(phase.trigger),
    )


def n001_trigger_count(trigger: Trigger | None) -> Trigger | None:
    """N-001: a trigger with an `event` and no `count` counts 1."""
    if trigger is None or trigger.event is None or trigger.count is not None:
        return trigger
    return replace(trigger, count=1)


def n001_correlation(attack: Attack) -> Correlation | None:
    """N-001: `correlation.logic` → any, when indicators are present."""
    if attack.indicators is None:
        return attack.correlation
    if attack.correlation is None or attack.correlation.logic is None:
        return Correlation(logic=CorrelationLogic.ANY)
    return attack.correlation


def _normalize_indicators(attack: Attack, execution_mode: str | None) -> tuple[Indicator, ...] | None:
    if attack.indicators is None:
        return None
    return tuple(
        n005_expand_pattern(n004_method_targets(n001_indicator_protocol(
            n003_indicator_id(indicator, index, attack.id), execution_mode)))
        for index, indicator in enumerate(attack.indicators)
    )


def n003_indicator_id(indicator: Indicator, index: int, attack_id: str | None) -> Indicator:
    """N-003: `{attack.id}-{NN}`, or `indicator-{NN}` without an attack id (NN: 1-based, zero-padded)."""
    if indicator.id is not None:
        return indicator
    prefix = attack_id if attack_id is not None else "indicator"
    return replace(indicator, id=f"{prefix}-{index + 1:02d}")


def n001_indicator_protocol(indicator: Indicator, execution_mode: str | None) -> Indicator:
    """N-001/N-004: `indicator.protocol` → the protocol component of `execution.mode`."""
    if indicator.protocol is not None or execution_mode is None:
        return indicator
    return replace(indicator, protocol=extract_protocol(execution_mode))


def n004_method_targets(indicator: Indicator) -> Indicator:
    """N-004: `pattern.target` / `semantic.target` materialized from the indicator-level `target`."""
    if indicator.pattern is not None and indicator.pattern.target is None:
        indicator = replace(indicator, pattern=replace(indicator.pattern, target=indicator.target))
    if indicator.semantic is not None and indicator.semantic.target is None:
        indicator = replace(indicator, semantic=replace(indicator.semantic, target=indicator.target))
    return indicator


def n005_expand_pattern(indicator: Indicator) -> Indicator:
    """N-005: shorthand operator keys move into an explicit `condition` (a MatchCondition)."""
    pattern = indicator.pattern
    if pattern is None or pattern.shorthand is None:
        return indicator
    condition = pattern.shorthand if pattern.condition is None else pattern.condition
    return replace(indicator, pattern=PatternMatch(target=pattern.target, condition=condition))


