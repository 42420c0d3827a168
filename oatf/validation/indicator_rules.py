"""Rules on indicators (format spec §6, §11.1.9–§11.1.11, §11.1.27–§11.1.28)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..bindings import SURFACES, known_protocols
from ..cel import cel_syntax_error
from ..errors import did_you_mean, echo
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
from .document_rules import v005_enum_value
from .execution_rules import PROTOCOL, actor_sites, condition_regex, v013_regex_syntax, v034_mode_protocol_pattern
from .report import Issue, Report

INDICATOR_ID = re.compile(r"^[A-Z][A-Z0-9-]*-[0-9]{3,}-[0-9]{2,}$")
CEL_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


def check_indicators(attack: Attack, report: Report) -> None:
    """The driver for indicators: list-wide rules, then every indicator (paths below `attack.indicators[i]`)."""
    report.add("attack", v006_indicators_present(attack))
    report.add("attack", v010_unique_indicator_ids(attack))
    execution = attack.execution
    sites = list(actor_sites(execution)) if execution is not None else []
    actor_names = {s.name for s in sites if s.name is not None}
    actor_protocols = {extract_protocol(s.mode) for s in sites if s.mode is not None}
    execution_mode = execution.mode if execution is not None else None
    for i, indicator in enumerate(attack.indicators or ()):
        path = f"attack.indicators[{i}]"
        protocol = indicator_protocol(indicator, execution_mode)
        for rule in (v012_one_detection_method, v049_method_block, v034_mode_protocol_pattern, w003_unknown_protocol,
                     v021_indicator_targets, v025_indicator_confidence, v014_cel_syntax, v039_cel_variable_names,
                     v026_cel_variable_paths, w007_semantic_experimental, v022_semantic_threshold):
            report.add(path, rule(indicator))
        report.add(path, v024_indicator_id_format(indicator, attack.id))
        report.add(path, v018_surface_known(indicator, protocol))
        report.add(path, w005_protocol_has_actor(protocol, actor_protocols))
        report.add(path, v048_indicator_actor(indicator, actor_names))
        for field, value, enum in (("method", indicator.method, IndicatorMethod),
                                   ("direction", indicator.direction, Direction),
                                   ("severity", indicator.severity, SeverityLevel), ("tier", indicator.tier, Tier)):
            report.add(f"{path}.{field}", v005_enum_value(value, enum, field))
        pattern = indicator.pattern
        if pattern is not None:
            report.add(f"{path}.pattern.regex", v013_regex_syntax(condition_regex(pattern.shorthand)))
            if isinstance(pattern.condition, MatchCondition):
                report.add(f"{path}.pattern.condition.regex", v013_regex_syntax(pattern.condition.regex))
        if indicator.semantic is not None:
            report.add(f"{path}.semantic.intent_class",
                       v005_enum_value(indicator.semantic.intent_class, SemanticIntentClass, "intent_class"))


def indicator_protocol(indicator: Indicator, execution_mode: str | None) -> str | None:
    """Format spec §6.1 `indicator.protocol`: as declared, else the protocol of `execution.mode` (N-004)."""
    if indicator.protocol is not None or execution_mode is None:
        return indicator.protocol
    return extract_protocol(execution_mode)


# --- list-wide rules (paths relative to the attack) ----------------------------------------------------------


def v006_indicators_present(attack: Attack) -> Iterator[Issue]:
    """V-006 (§11.1.9): `indicators`, when present, holds at least one indicator."""
    if attack.indicators is not None and not attack.indicators:
        yield Issue("V-006", "indicators", "indicators, when present, must contain at least one indicator")


def v010_unique_indicator_ids(attack: Attack) -> Iterator[Issue]:
    """V-010 (§11.1.10): indicator ids are unique."""
    seen: set[str] = set()
    for i, indicator in enumerate(attack.indicators or ()):
        if indicator.id is None:
            continue
        if indicator.id in seen:
            yield Issue("V-010", f"indicators[{i}].id", f"indicator id {echo(indicator.id)} is used twice")
        seen.add(indicator.id)


# --- per-indicator rules (paths relative to the indicator) ---------------------------------------------------


def v012_one_detection_method(indicator: Indicator) -> Iterator[Issue]:
    """V-012 (§11.1.11): exactly one of pattern, expression, semantic; a pattern has a condition."""
    keys = indicator.detection_keys
    if len(keys) != 1:
        found = ", ".join(keys) if keys else "none"
        yield Issue("V-012", "", f"an indicator has exactly one of pattern, expression, semantic (found: {found})")
    pattern = indicator.pattern
    if pattern is not None and pattern.condition is None and pattern.shorthand is None:
        yield Issue("V-012", "pattern", "pattern needs a condition (or a shorthand operator)")


def v014_cel_syntax(indicator: Indicator) -> Iterator[Issue]:
    """V-014 (§6.3): `expression.cel` is valid CEL."""
    expression = indicator.expression
    if expression is not None and expression.cel is not None and (reason := cel_syntax_error(expression.cel)):
        yield Issue("V-014", "expression.cel", f"invalid CEL expression: {reason}")


def v018_surface_known(indicator: Indicator, protocol: str | None) -> Iterator[Issue]:
    """V-018 (§7), a warning: `surface` is an operation of the indicator's recognized protocol binding."""
    if indicator.surface is None or protocol not in SURFACES:
        return
    if indicator.surface not in SURFACES[protocol]:
        yield Issue("V-018", "surface", f"surface {echo(indicator.surface)} is not an operation of the {protocol} "
                    f"binding{did_you_mean(indicator.surface, SURFACES[protocol])}", warning=True)


def v021_indicator_targets(indicator: Indicator) -> Iterator[Issue]:
    """V-021 (§6.1): `target` is present, and it and the pattern/semantic overrides are wildcard dot-paths
    (segments of [A-Za-z0-9_-], optional `[*]`; "" is the root)."""
    if indicator.target is None:
        yield Issue("V-021", "target", "indicator.target is required (\"\" targets the whole message)")
    targets = (("target", indicator.target),
               ("pattern.target", indicator.pattern.target if indicator.pattern is not None else None),
               ("semantic.target", indicator.semantic.target if indicator.semantic is not None else None))
    for path, target in targets:
        if target is not None and not is_wildcard_path(target):
            yield Issue("V-021", path, f"target {echo(target)} is not a valid dot-path (segments of letters, digits, "
                        "`_` or `-`, each optionally followed by [*]; no numeric indices, no empty segments)")


def v022_semantic_threshold(indicator: Indicator) -> Iterator[Issue]:
    """V-022 (§6.4): `semantic.threshold` is within 0.0–1.0."""
    threshold = indicator.semantic.threshold if indicator.semantic is not None else None
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        yield Issue("V-022", "semantic.threshold", f"semantic.threshold must be within 0.0–1.0, got {threshold}")


def v024_indicator_id_format(indicator: Indicator, attack_id: str | None) -> Iterator[Issue]:
    """V-024 (§6.1): with an attack id, indicator ids are `{attack.id}-NN`."""
    if indicator.id is None or attack_id is None:
        return
    if not INDICATOR_ID.match(indicator.id) or indicator.id.rsplit("-", 1)[0] != attack_id:
        yield Issue("V-024", "id", f"indicator id {echo(indicator.id)} must be {echo(attack_id)} followed by -NN "
                    "(two or more digits)")


def v025_indicator_confidence(indicator: Indicator) -> Iterator[Issue]:
    """V-025 (§6.1): `confidence` is within 0–100."""
    if indicator.confidence is not None and not 0 <= indicator.confidence <= 100:
        yield Issue("V-025", "confidence", f"confidence must be within 0–100, got {indicator.confidence}")


def v026_cel_variable_paths(indicator: Indicator) -> Iterator[Issue]:
    """V-026 (§6.3): `expression.variables` paths are simple dot-paths."""
    variables = indicator.expression.variables if indicator.expression is not None else None
    for name, variable_path in (variables or {}).items():
        if not isinstance(variable_path, str) or not is_simple_path(variable_path):
            yield Issue("V-026", f"expression.variables.{name}", f"variable path {echo(variable_path)} must be a "
                        "simple dot-path (no wildcards or indices)")


def v039_cel_variable_names(indicator: Indicator) -> Iterator[Issue]:
    """V-039 (§11.1.15): `expression.variables` names are CEL identifiers."""
    variables = indicator.expression.variables if indicator.expression is not None else None
    for name in variables or {}:
        if not CEL_IDENTIFIER.match(name):
            yield Issue("V-039", f"expression.variables.{name}",
                        f"variable name {echo(name)} is not a CEL identifier ([_a-zA-Z][_a-zA-Z0-9]*)", key=True)


def v048_indicator_actor(indicator: Indicator, actor_names: set[str]) -> Iterator[Issue]:
    """V-048 (§6.1): `indicator.actor` names an actor of the execution profile."""
    if indicator.actor is not None and indicator.actor not in actor_names:
        yield Issue("V-048", "actor", f"indicator.actor {echo(indicator.actor)} names no actor "
                    f"(actors: {', '.join(sorted(actor_names)) or 'none'})")


def v049_method_block(indicator: Indicator) -> Iterator[Issue]:
    """V-049 (§6.1): a (valid) `method` has its detection block."""
    method = indicator.method
    if isinstance(method, IndicatorMethod) and method not in indicator.detection_keys:
        yield Issue("V-049", "method", f"method {method!s} needs a `{method!s}` block")


def w003_unknown_protocol(indicator: Indicator) -> Iterator[Issue]:
    """W-003 (SDK spec §3.2): a protocol that passes V-034 but no included binding defines; likely a typo (the
    closest known protocol is suggested)."""
    protocol = indicator.protocol
    if protocol is not None and PROTOCOL.match(protocol) and protocol not in known_protocols():
        yield Issue("W-003", "protocol", f"protocol {echo(protocol)} is not defined by an included binding "
                    f"(known: {', '.join(sorted(known_protocols()))})"
                    f"{did_you_mean(protocol, known_protocols()) or '; is it a typo?'}", warning=True)


def w005_protocol_has_actor(protocol: str | None, actor_protocols: set[str]) -> Iterator[Issue]:
    """W-005 (SDK spec §7.0): the indicator's protocol is spoken by some actor."""
    if protocol is not None and actor_protocols and protocol not in actor_protocols:
        yield Issue("W-005", "protocol", f"no actor of this attack speaks protocol {echo(protocol)}", warning=True)


def w007_semantic_experimental(indicator: Indicator) -> Iterator[Issue]:
    """W-007 (SDK spec §7.0): semantic indicators are experimental and model-dependent."""
    if indicator.semantic is not None:
        yield Issue("W-007", "semantic", "semantic indicators are experimental and model-dependent; results are not "
                    "reproducible across tools", warning=True)
