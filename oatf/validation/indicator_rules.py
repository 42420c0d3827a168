"""Rules on indicators (format spec §6, §11.1.9–§11.1.11, §11.1.27–§11.1.28)."""

from __future__ import annotations

import re

from ..bindings import SURFACES, known_protocols
from ..cel import cel_syntax_error
from ..errors import echo
from ..model import (
    Attack,
    Direction,
    Indicator,
    IndicatorMethod,
    MatchCondition,
    SemanticIntentClass,
    SeverityLevel,
    Tier,
)
from ..paths import is_simple_path, is_wildcard_path
from ..protocols import extract_protocol
from .document_rules import bad_enum, enum_message
from .execution_rules import actor_sites, check_condition_regex
from .report import Report

PROTOCOL = re.compile(r"^[a-z][a-z0-9_]*$")
INDICATOR_ID = re.compile(r"^[A-Z][A-Z0-9-]*-[0-9]{3,}-[0-9]{2,}$")
CEL_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


def check_indicators(attack: Attack, report: Report) -> None:
    """V-006, V-010 and every per-indicator rule; W-005 for protocols no actor speaks."""
    indicators = attack.indicators
    if indicators is None:
        return
    if not indicators:
        report.error("V-006", "attack.indicators", "indicators, when present, must contain at least one indicator")
    execution = attack.execution
    sites = list(actor_sites(execution)) if execution is not None else []
    actor_names = {s.name for s in sites if s.name is not None}
    actor_protocols = {extract_protocol(s.mode) for s in sites if s.mode is not None}
    execution_mode = execution.mode if execution is not None else None
    seen_ids: set[str] = set()
    for i, indicator in enumerate(indicators):
        path = f"attack.indicators[{i}]"
        if indicator.id is not None:
            if indicator.id in seen_ids:
                report.error("V-010", f"{path}.id", f"indicator id {echo(indicator.id)} is used twice")
            seen_ids.add(indicator.id)
            check_indicator_id(indicator.id, attack.id, f"{path}.id", report)
        check_indicator(indicator, path, report)
        if indicator.protocol is None and execution_mode is None:
            report.error("V-028", f"{path}.protocol",
                         "without execution.mode every indicator must declare its protocol")
        protocol = indicator_protocol(indicator, execution_mode)
        check_surface(indicator, protocol, path, report)
        if protocol is not None and actor_protocols and protocol not in actor_protocols:
            report.warn("W-005", f"{path}.protocol", f"no actor of this attack speaks protocol {echo(protocol)}")
        if indicator.actor is not None and indicator.actor not in actor_names:
            report.error("V-048", f"{path}.actor", f"indicator.actor {echo(indicator.actor)} names no actor "
                         f"(actors: {', '.join(sorted(actor_names)) or 'none'})")


def indicator_protocol(indicator: Indicator, execution_mode: str | None) -> str | None:
    """Format spec §6.1 `indicator.protocol`: as declared, else the protocol of `execution.mode` (N-004)."""
    if indicator.protocol is not None or execution_mode is None:
        return indicator.protocol
    return extract_protocol(execution_mode)


def check_indicator_id(indicator_id: str, attack_id: str | None, path: str, report: Report) -> None:
    """V-024: with an attack id, indicator ids are `{attack.id}-NN`."""
    if attack_id is None:
        return
    if not INDICATOR_ID.match(indicator_id) or indicator_id.rsplit("-", 1)[0] != attack_id:
        report.error("V-024", path, f"indicator id {echo(indicator_id)} must be {echo(attack_id)} followed by -NN "
                     "(two or more digits)")


def check_indicator(indicator: Indicator, path: str, report: Report) -> None:
    """V-012, V-049, V-021, V-013, V-014, V-026, V-039, V-022, V-025, V-034, V-005; W-003, W-007."""
    keys = indicator.detection_keys
    if len(keys) != 1:
        found = ", ".join(keys) if keys else "none"
        report.error("V-012", path, f"an indicator has exactly one of pattern, expression, semantic (found: {found})")
    if bad_enum(indicator.method, IndicatorMethod):
        report.error("V-005", f"{path}.method", enum_message("method", indicator.method, IndicatorMethod))
    elif indicator.method is not None and indicator.method not in keys:
        report.error("V-049", f"{path}.method", f"method {indicator.method!s} needs a `{indicator.method!s}` block")
    for field, enum in (("direction", Direction), ("severity", SeverityLevel), ("tier", Tier)):
        if bad_enum(getattr(indicator, field), enum):
            report.error("V-005", f"{path}.{field}", enum_message(field, getattr(indicator, field), enum))
    if indicator.protocol is not None:
        if not PROTOCOL.match(indicator.protocol):
            report.error("V-034", f"{path}.protocol", f"protocol {echo(indicator.protocol)} must match [a-z][a-z0-9_]*")
        elif indicator.protocol not in known_protocols():
            report.warn("W-003", f"{path}.protocol", f"protocol {echo(indicator.protocol)} is not defined by an "
                        f"included binding (known: {', '.join(sorted(known_protocols()))}); is it a typo?")
    if indicator.target is None:
        report.error("V-021", f"{path}.target", "indicator.target is required (\"\" targets the whole message)")
    else:
        check_target(indicator.target, f"{path}.target", report)
    if indicator.confidence is not None and not 0 <= indicator.confidence <= 100:
        report.error("V-025", f"{path}.confidence", f"confidence must be within 0–100, got {indicator.confidence}")
    if indicator.pattern is not None:
        pattern = indicator.pattern
        if pattern.target is not None:
            check_target(pattern.target, f"{path}.pattern.target", report)
        if pattern.shorthand is not None:
            check_condition_regex(pattern.shorthand, f"{path}.pattern", report)
        if isinstance(pattern.condition, MatchCondition):
            check_condition_regex(pattern.condition, f"{path}.pattern.condition", report)
        if pattern.condition is None and pattern.shorthand is None:
            report.error("V-012", f"{path}.pattern", "pattern needs a condition (or a shorthand operator)")
    if indicator.expression is not None:
        check_expression(indicator, path, report)
    if indicator.semantic is not None:
        semantic = indicator.semantic
        report.warn("W-007", f"{path}.semantic", "semantic indicators are experimental and model-dependent; "
                    "results are not reproducible across tools")
        if semantic.target is not None:
            check_target(semantic.target, f"{path}.semantic.target", report)
        if semantic.threshold is not None and not 0.0 <= semantic.threshold <= 1.0:
            report.error("V-022", f"{path}.semantic.threshold",
                         f"semantic.threshold must be within 0.0–1.0, got {semantic.threshold}")
        if bad_enum(semantic.intent_class, SemanticIntentClass):
            report.error("V-005", f"{path}.semantic.intent_class",
                         enum_message("intent_class", semantic.intent_class, SemanticIntentClass))


def check_target(target: str, path: str, report: Report) -> None:
    """V-021: a wildcard dot-path (segments of [A-Za-z0-9_-], optional `[*]`; "" is the root)."""
    if not is_wildcard_path(target):
        report.error("V-021", path, f"target {echo(target)} is not a valid dot-path (segments of letters, digits, "
                     "`_` or `-`, each optionally followed by [*]; no numeric indices, no empty segments)")


def check_expression(indicator: Indicator, path: str, report: Report) -> None:
    """V-014 (CEL syntax), V-039 (variable names), V-026 (variable paths)."""
    expression = indicator.expression
    assert expression is not None
    if expression.cel is not None and (reason := cel_syntax_error(expression.cel)):
        report.error("V-014", f"{path}.expression.cel", f"invalid CEL expression: {reason}")
    for name, variable_path in (expression.variables or {}).items():
        here = f"{path}.expression.variables.{name}"
        if not CEL_IDENTIFIER.match(name):
            report.error("V-039", here, f"variable name {echo(name)} is not a CEL identifier ([_a-zA-Z][_a-zA-Z0-9]*)",
                         key=True)
        if not isinstance(variable_path, str) or not is_simple_path(variable_path):
            report.error("V-026", here, f"variable path {echo(variable_path)} must be a simple dot-path "
                         "(no wildcards or indices)")


def check_surface(indicator: Indicator, protocol: str | None, path: str, report: Report) -> None:
    """V-018 (warning): a surface the indicator's recognized binding does not define."""
    if indicator.surface is None or protocol not in SURFACES:
        return
    if indicator.surface not in SURFACES[protocol]:
        report.warn("V-018", f"{path}.surface",
                    f"surface {echo(indicator.surface)} is not an operation of the {protocol} binding")
