"""Plain YAML-form mappings → typed model values (SDK spec §3.1 step 2 "map YAML nodes to core types").

Strict where the type system is: a string where an integer belongs, or an unknown non-`x-` field, is a
`ParseError` of kind `type_mismatch` naming the field's dot-path (an unknown field with code `unknown_field`
and the closest allowed name). Lenient where the conformance fixtures
expect `validate` to speak instead: unknown closed-enum values are kept as strings (V-005), missing
`oatf`/`attack`/`execution` are left None (V-001/V-003/V-004), and unknown keys at the document root are
recorded for `validate` (the validate fixture VAL-020a has one next to its alias) while
parse/invalid/unknown-fields.yaml still fails on the unknown keys it has below the root.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from .errors import UNKNOWN_FIELD, OATFParseError, ParseError, ParseErrorKind, did_you_mean, echo
from .model import (
    CONDITION_OPERATORS,
    PATTERN_SHORTHAND_OPERATORS,
    Action,
    Actor,
    Attack,
    AttackResult,
    AttackVerdict,
    Category,
    Classification,
    Correlation,
    CorrelationLogic,
    Direction,
    Document,
    EvaluationSummary,
    Execution,
    ExpressionMatch,
    Extractor,
    ExtractorSource,
    ExtractorType,
    FrameworkMapping,
    Impact,
    Indicator,
    IndicatorMethod,
    IndicatorResult,
    IndicatorVerdict,
    MatchCondition,
    PatternMatch,
    Phase,
    ProtocolEvent,
    Reference,
    Relationship,
    SemanticExamples,
    SemanticIntentClass,
    SemanticMatch,
    Severity,
    SeverityLevel,
    SourceInfo,
    Status,
    Tier,
    Trigger,
)
from .yaml_source import YamlSource, child_path

E = TypeVar("E", bound=StrEnum)
T = TypeVar("T")

_ROOT_KEYS = ("oatf", "$schema", "attack")


_MEMBERS: dict[type[StrEnum], dict[str, StrEnum]] = {}
"""Each closed enum's members by value (a lookup, where calling the enum costs a few frames per value)."""


def _member[M: StrEnum](enum: type[M], value: str) -> M | str:
    """The member of `enum` whose value is `value` (`enum(value)`), else `value` itself."""
    members = _MEMBERS.get(enum)
    if members is None:
        members = _MEMBERS[enum] = {member.value: member for member in enum}
    return members.get(value, value)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "sequence"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


class ModelBuilder:
    """Builds model values, collecting every ParseError instead of stopping at the first."""

    def __init__(self, source: YamlSource | None = None):
        self.positions = source.positions if source else {}
        self.key_positions = source.key_positions if source else {}
        self.errors: list[ParseError] = []

    # --- reporting ---------------------------------------------------------------------------------
    def fail(self, path: str, message: str, kind: ParseErrorKind = ParseErrorKind.TYPE_MISMATCH,
             key: bool = False) -> None:
        line, column = (self.key_positions if key else self.positions).get(path, (None, None))
        self.errors.append(ParseError(kind, message, path, line, column))

    def raise_if_failed(self) -> None:
        if self.errors:
            self.errors.sort(key=lambda e: (e.line or 0, e.column or 0, e.path or ""))
            raise OATFParseError(self.errors)

    # --- primitives --------------------------------------------------------------------------------
    def mapping(self, raw: Any, path: str, allowed: tuple[str, ...], extensions: bool,
                what: str) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        """The known fields of a mapping and its `x-` extensions; unknown fields are errors."""
        if not isinstance(raw, dict):
            self.fail(path, f"{what} must be a mapping, got {_type_name(raw)}")
            return None
        known: dict[str, Any] = {}
        ext: dict[str, Any] = {}
        for key, value in raw.items():
            if key in allowed:
                known[key] = value
            elif extensions and isinstance(key, str) and key.startswith("x-"):
                ext[key] = value
            else:
                self.unknown_field(child_path(path, key), key, what, allowed, extensions)
        return known, (ext or None)

    def unknown_field(self, path: str, key: object, what: str, allowed: tuple[str, ...], extensions: bool) -> None:
        """SDK spec §3.1 step 3: a non-`x-` field the type does not define fails parsing (code
        `UNKNOWN_FIELD`), located at its key, with the closest allowed name, else the allowed names."""
        hint = did_you_mean(key, allowed) or f" (allowed: {', '.join(allowed)}{', x-*' if extensions else ''})"
        line, column = self.key_positions.get(path, (None, None))
        self.errors.append(ParseError(ParseErrorKind.TYPE_MISMATCH, f"unknown field {echo(key)} in {what}{hint}",
                                      path, line, column, UNKNOWN_FIELD))

    def string(self, raw: dict[str, Any], key: str, path: str) -> str | None:
        value = raw.get(key)
        if value is None or isinstance(value, str):
            return value
        self.fail(child_path(path, key), f"{key} must be a string, got {_type_name(value)}")
        return None

    def integer(self, raw: dict[str, Any], key: str, path: str) -> int | None:
        value = raw.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        self.fail(child_path(path, key), f"{key} must be an integer, got {_type_name(value)}")
        return None

    def number(self, raw: dict[str, Any], key: str, path: str) -> float | int | None:
        value = raw.get(key)
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            return value
        self.fail(child_path(path, key), f"{key} must be a number, got {_type_name(value)}")
        return None

    def boolean(self, raw: dict[str, Any], key: str, path: str) -> bool | None:
        value = raw.get(key)
        if value is None or isinstance(value, bool):
            return value
        self.fail(child_path(path, key), f"{key} must be a boolean, got {_type_name(value)}")
        return None

    def enum(self, enum: type[E], raw: dict[str, Any], key: str, path: str) -> E | str | None:
        """A closed enum member; an unknown string is kept as-is for `validate` (V-005)."""
        value = self.string(raw, key, path)
        return None if value is None else _member(enum, value)

    def sequence(self, raw: dict[str, Any], key: str, path: str,
                 item: Callable[[Any, str], T | None]) -> tuple[T, ...] | None:
        value = raw.get(key)
        if value is None:
            return None
        here = child_path(path, key)
        if not isinstance(value, list):
            self.fail(here, f"{key} must be a sequence, got {_type_name(value)}")
            return None
        built = [item(v, child_path(here, i)) for i, v in enumerate(value)]
        return tuple(b for b in built if b is not None)

    def strings(self, raw: dict[str, Any], key: str, path: str) -> tuple[str, ...] | None:
        def one(value: Any, at: str) -> str | None:
            if isinstance(value, str):
                return value
            self.fail(at, f"{key} entries must be strings, got {_type_name(value)}")
            return None
        return self.sequence(raw, key, path, one)

    def string_map(self, raw: dict[str, Any], key: str, path: str) -> dict[str, str] | None:
        value = raw.get(key)
        if value is None:
            return None
        here = child_path(path, key)
        if not isinstance(value, dict):
            self.fail(here, f"{key} must be a mapping, got {_type_name(value)}")
            return None
        for k, v in value.items():
            if not isinstance(v, str):
                self.fail(child_path(here, k), f"{key} values must be strings, got {_type_name(v)}")
        return dict(value)

    # --- core types --------------------------------------------------------------------------------
    def document(self, source: YamlSource) -> Document:
        raw = source.value
        if not isinstance(raw, dict):
            self.fail("", f"the document root must be a mapping, got {_type_name(raw)}")
            self.raise_if_failed()
        shape: list[tuple[str, str]] = [
            (key, f"unknown top-level field {echo(key)}"
                  f"{did_you_mean(key, _ROOT_KEYS) or ' (allowed: oatf, $schema, attack)'}")
            for key in raw if key not in _ROOT_KEYS
        ]
        oatf = raw.get("oatf")
        if oatf is not None and not isinstance(oatf, str):
            # An unquoted `oatf: 0.1` is a YAML number; V-001 reports it with the right rule.
            shape.append(("oatf", f"oatf must be the string \"0.1\", got {_type_name(oatf)} {echo(oatf)}"))
            oatf = None
        attack = None
        if "attack" in raw:
            if isinstance(raw["attack"], dict):
                attack = self.attack(raw["attack"], "attack")
            else:
                shape.append(("attack", f"attack must be a single mapping, got {_type_name(raw['attack'])}"))
        document = Document(
            oatf=oatf,
            schema=self.string(raw, "$schema", ""),
            attack=attack,
            source=SourceInfo(
                positions=source.positions,
                key_positions=source.key_positions,
                key_order=tuple(str(k) for k in raw),
                yaml_features=tuple(source.yaml_features),
                shape_errors=tuple(shape),
            ),
        )
        self.raise_if_failed()
        return document

    def attack(self, raw: Any, path: str) -> Attack | None:
        fields = self.mapping(raw, path, (
            "id", "name", "version", "status", "created", "modified", "author", "description",
            "grace_period", "severity", "impact", "classification", "references", "execution",
            "indicators", "correlation"), True, "attack")
        if fields is None:
            return None
        f, ext = fields
        return Attack(
            id=self.string(f, "id", path),
            name=self.string(f, "name", path),
            version=self.integer(f, "version", path),
            status=self.enum(Status, f, "status", path),
            created=self.string(f, "created", path),
            modified=self.string(f, "modified", path),
            author=self.string(f, "author", path),
            description=self.string(f, "description", path),
            grace_period=self.string(f, "grace_period", path),
            severity=self.severity(f.get("severity"), child_path(path, "severity")),
            impact=self.sequence(f, "impact", path, lambda v, at: self._enum_item(Impact, v, at, "impact")),
            classification=self.classification(f.get("classification"), child_path(path, "classification")),
            references=self.sequence(f, "references", path, self.reference),
            execution=self.execution(f.get("execution"), child_path(path, "execution")),
            indicators=self.sequence(f, "indicators", path, self.indicator),
            correlation=self.correlation(f.get("correlation"), child_path(path, "correlation")),
            extensions=ext,
        )

    def _enum_item(self, enum: type[E], value: Any, at: str, what: str) -> E | str | None:
        if not isinstance(value, str):
            self.fail(at, f"{what} entries must be strings, got {_type_name(value)}")
            return None
        return _member(enum, value)

    def severity(self, raw: Any, path: str) -> Severity | None:
        """Scalar (`high`) or object form (SDK spec §2.4); the scalar form is kept as `confidence=None`."""
        if raw is None:
            return None
        if isinstance(raw, str):
            return Severity(level=self._enum_item(SeverityLevel, raw, path, "severity"))
        fields = self.mapping(raw, path, ("level", "confidence"), False, "severity")
        if fields is None:
            return None
        f, _ = fields
        if "level" not in f:
            self.fail(path, "severity requires level")
        return Severity(level=self.enum(SeverityLevel, f, "level", path),
                        confidence=self.integer(f, "confidence", path))

    def classification(self, raw: Any, path: str) -> Classification | None:
        if raw is None:
            return None
        fields = self.mapping(raw, path, ("category", "mappings", "tags"), False, "classification")
        if fields is None:
            return None
        f, _ = fields
        return Classification(
            category=self.enum(Category, f, "category", path),
            mappings=self.sequence(f, "mappings", path, self.framework_mapping),
            tags=self.strings(f, "tags", path),
        )

    def framework_mapping(self, raw: Any, path: str) -> FrameworkMapping | None:
        fields = self.mapping(raw, path, ("framework", "id", "name", "url", "relationship"), False, "mapping")
        if fields is None:
            return None
        f, _ = fields
        for key in ("framework", "id"):
            if key not in f:
                self.fail(path, f"mapping requires {key}")
        return FrameworkMapping(
            framework=self.string(f, "framework", path),
            id=self.string(f, "id", path),
            name=self.string(f, "name", path),
            url=self.string(f, "url", path),
            relationship=self.enum(Relationship, f, "relationship", path),
        )

    def reference(self, raw: Any, path: str) -> Reference | None:
        fields = self.mapping(raw, path, ("url", "title", "description"), False, "reference")
        if fields is None:
            return None
        f, _ = fields
        if "url" not in f:
            self.fail(path, "reference requires url")
        return Reference(url=self.string(f, "url", path), title=self.string(f, "title", path),
                         description=self.string(f, "description", path))

    def correlation(self, raw: Any, path: str) -> Correlation | None:
        if raw is None:
            return None
        fields = self.mapping(raw, path, ("logic",), False, "correlation")
        if fields is None:
            return None
        return Correlation(logic=self.enum(CorrelationLogic, fields[0], "logic", path))

    def execution(self, raw: Any, path: str) -> Execution | None:
        if raw is None:
            return None
        fields = self.mapping(raw, path, ("mode", "state", "phases", "actors"), True, "execution")
        if fields is None:
            return None
        f, ext = fields
        return Execution(
            mode=self.string(f, "mode", path),
            state=f.get("state"),
            phases=self.sequence(f, "phases", path, self.phase),
            actors=self.sequence(f, "actors", path, self.actor),
            extensions=ext,
        )

    def actor(self, raw: Any, path: str) -> Actor | None:
        fields = self.mapping(raw, path, ("name", "mode", "phases"), True, "actor")
        if fields is None:
            return None
        f, ext = fields
        return Actor(name=self.string(f, "name", path), mode=self.string(f, "mode", path),
                     phases=self.sequence(f, "phases", path, self.phase) or (), extensions=ext)

    def phase(self, raw: Any, path: str) -> Phase | None:
        fields = self.mapping(raw, path, (
            "name", "description", "mode", "state", "extractors", "on_enter", "trigger"), True, "phase")
        if fields is None:
            return None
        f, ext = fields
        return Phase(
            name=self.string(f, "name", path),
            description=self.string(f, "description", path),
            mode=self.string(f, "mode", path),
            state=f.get("state"),
            extractors=self.sequence(f, "extractors", path, self.extractor),
            on_enter=self.sequence(f, "on_enter", path, self.action),
            trigger=self.trigger(f.get("trigger"), child_path(path, "trigger")) if "trigger" in f else None,
            extensions=ext,
        )

    def extractor(self, raw: Any, path: str) -> Extractor | None:
        fields = self.mapping(raw, path, ("name", "source", "type", "selector"), False, "extractor")
        if fields is None:
            return None
        f, _ = fields
        for key in ("name", "source", "type", "selector"):
            if key not in f:
                self.fail(path, f"extractor requires {key}")
        return Extractor(name=self.string(f, "name", path), source=self.enum(ExtractorSource, f, "source", path),
                         type=self.enum(ExtractorType, f, "type", path),
                         selector=self.string(f, "selector", path))

    def action(self, raw: Any, path: str) -> Action | None:
        """SDK spec §2.7a: known (`send`, `log`) and binding-specific actions, `x-` keys alongside."""
        if not isinstance(raw, dict):
            self.fail(path, f"action must be a mapping, got {_type_name(raw)}")
            return None
        entries = tuple((k, v) for k, v in raw.items() if not (isinstance(k, str) and k.startswith("x-")))
        ext = {k: v for k, v in raw.items() if isinstance(k, str) and k.startswith("x-")} or None
        for key, value in entries:
            here = child_path(path, key)
            if key == "send":
                sent = self.mapping(value, here, ("method", "params"), False, "send")
                if sent is not None:
                    if "method" not in sent[0]:
                        self.fail(here, "send requires method")
                    self.string(sent[0], "method", here)
            elif key == "log":
                logged = self.mapping(value, here, ("message", "level"), False, "log")
                if logged is not None:
                    if "message" not in logged[0]:
                        self.fail(here, "log requires message")
                    self.string(logged[0], "message", here)
                    self.string(logged[0], "level", here)
        return Action(entries=entries, extensions=ext)

    def trigger(self, raw: Any, path: str) -> Trigger | None:
        if raw is None:
            return Trigger()
        fields = self.mapping(raw, path, ("event", "count", "match", "after"), False, "trigger")
        if fields is None:
            return None
        f, _ = fields
        return Trigger(event=self.string(f, "event", path), count=self.integer(f, "count", path),
                       match=self.predicate(f.get("match"), child_path(path, "match")),
                       after=self.string(f, "after", path))

    def predicate(self, raw: Any, path: str) -> dict[str, Any] | None:
        """SDK spec §2.10: a flat mapping of simple dot-paths to conditions."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            self.fail(path, f"match must be a mapping, got {_type_name(raw)}")
            return None
        return {str(k): self.condition(v, child_path(path, str(k))) for k, v in raw.items()}

    def condition(self, raw: Any, path: str) -> Any:
        """SDK spec §2.13: a mapping with an operator key is a MatchCondition; anything else is a bare
        value for deep equality (format spec §6.2)."""
        if isinstance(raw, dict) and any(k in raw for k in CONDITION_OPERATORS):
            fields = self.mapping(raw, path, CONDITION_OPERATORS, False, "condition")
            return self.match_condition(fields[0] if fields else {}, path)
        return raw

    def match_condition(self, f: dict[str, Any], path: str) -> MatchCondition:
        any_of = f.get("any_of")
        if any_of is not None and not isinstance(any_of, list):
            self.fail(child_path(path, "any_of"), f"any_of must be a sequence, got {_type_name(any_of)}")
            any_of = None
        return MatchCondition(
            contains=self.string(f, "contains", path),
            starts_with=self.string(f, "starts_with", path),
            ends_with=self.string(f, "ends_with", path),
            regex=self.string(f, "regex", path),
            any_of=tuple(any_of) if any_of is not None else None,
            gt=self.number(f, "gt", path),
            lt=self.number(f, "lt", path),
            gte=self.number(f, "gte", path),
            lte=self.number(f, "lte", path),
            exists=self.boolean(f, "exists", path),
        )

    def indicator(self, raw: Any, path: str) -> Indicator | None:
        fields = self.mapping(raw, path, (
            "id", "protocol", "surface", "target", "actor", "direction", "method", "description",
            "pattern", "expression", "semantic", "confidence", "severity", "tier", "false_positives"),
            True, "indicator")
        if fields is None:
            return None
        f, ext = fields
        return Indicator(
            id=self.string(f, "id", path),
            protocol=self.string(f, "protocol", path),
            surface=self.string(f, "surface", path),
            target=self.string(f, "target", path),
            actor=self.string(f, "actor", path),
            direction=self.enum(Direction, f, "direction", path),
            method=self.enum(IndicatorMethod, f, "method", path),
            description=self.string(f, "description", path),
            pattern=self.pattern(f["pattern"], child_path(path, "pattern")) if "pattern" in f else None,
            expression=self.expression(f.get("expression"), child_path(path, "expression")),
            semantic=self.semantic(f.get("semantic"), child_path(path, "semantic")),
            confidence=self.integer(f, "confidence", path),
            severity=self.enum(SeverityLevel, f, "severity", path),
            tier=self.enum(Tier, f, "tier", path),
            false_positives=self.strings(f, "false_positives", path),
            extensions=ext,
        )

    def pattern(self, raw: Any, path: str) -> PatternMatch | None:
        """Standard form (`target`, `condition`) or shorthand (operator keys directly on the pattern)."""
        if raw is None:
            return PatternMatch()
        fields = self.mapping(raw, path, ("target", "condition", *PATTERN_SHORTHAND_OPERATORS), False, "pattern")
        if fields is None:
            return None
        f, _ = fields
        operators = {k: v for k, v in f.items() if k in PATTERN_SHORTHAND_OPERATORS}
        return PatternMatch(
            target=self.string(f, "target", path),
            condition=self.condition(f["condition"], child_path(path, "condition")) if "condition" in f else None,
            shorthand=self.match_condition(operators, path) if operators else None,
        )

    def expression(self, raw: Any, path: str) -> ExpressionMatch | None:
        if raw is None:
            return None
        fields = self.mapping(raw, path, ("cel", "variables"), False, "expression")
        if fields is None:
            return None
        f, _ = fields
        if "cel" not in f:
            self.fail(path, "expression requires cel")
        return ExpressionMatch(cel=self.string(f, "cel", path), variables=self.string_map(f, "variables", path))

    def semantic(self, raw: Any, path: str) -> SemanticMatch | None:
        if raw is None:
            return None
        fields = self.mapping(raw, path, ("target", "intent", "intent_class", "threshold", "examples"),
                              False, "semantic")
        if fields is None:
            return None
        f, _ = fields
        if "intent" not in f:
            self.fail(path, "semantic requires intent")
        examples = None
        if f.get("examples") is not None:
            here = child_path(path, "examples")
            ex = self.mapping(f["examples"], here, ("positive", "negative"), False, "examples")
            if ex is not None:
                examples = SemanticExamples(positive=self.strings(ex[0], "positive", here),
                                            negative=self.strings(ex[0], "negative", here))
        return SemanticMatch(
            target=self.string(f, "target", path),
            intent=self.string(f, "intent", path),
            intent_class=self.enum(SemanticIntentClass, f, "intent_class", path),
            threshold=self.number(f, "threshold", path),
            examples=examples,
        )


    # --- output types (SDK spec §2.8a, §2.19): built by tools and test runners from their plain form ----
    def protocol_event(self, raw: Any, path: str) -> ProtocolEvent | None:
        fields = self.mapping(raw, path, ("event_type", "content"), False, "protocol event")
        if fields is None:
            return None
        f, _ = fields
        if "event_type" not in f:
            self.fail(path, "protocol event requires event_type")
        return ProtocolEvent(event_type=self.string(f, "event_type", path) or "", content=f.get("content"))

    def evaluation_summary(self, raw: Any, path: str) -> EvaluationSummary | None:
        keys = ("matched", "not_matched", "error", "skipped")
        fields = self.mapping(raw, path, keys, False, "evaluation summary")
        if fields is None:
            return None
        return EvaluationSummary(**{k: self.integer(fields[0], k, path) or 0 for k in keys})

    def indicator_verdict(self, raw: Any, path: str) -> IndicatorVerdict | None:
        fields = self.mapping(raw, path, ("indicator_id", "result", "timestamp", "evidence", "source"), False,
                              "indicator verdict")
        if fields is None:
            return None
        f, _ = fields
        result = self.enum(IndicatorResult, f, "result", path)
        if not isinstance(result, IndicatorResult):
            self.fail(child_path(path, "result"), f"result must be one of: {', '.join(IndicatorResult)}",
                      ParseErrorKind.UNKNOWN_VARIANT)
            return None
        return IndicatorVerdict(indicator_id=self.string(f, "indicator_id", path) or "", result=result,
                                timestamp=self.string(f, "timestamp", path), evidence=self.string(f, "evidence", path),
                                source=self.string(f, "source", path))

    def attack_verdict(self, raw: Any, path: str) -> AttackVerdict | None:
        fields = self.mapping(raw, path, ("attack_id", "result", "indicator_verdicts", "evaluation_summary",
                                          "timestamp", "source", "max_tier"), False, "attack verdict")
        if fields is None:
            return None
        f, _ = fields
        result = self.enum(AttackResult, f, "result", path)
        tier = self.enum(Tier, f, "max_tier", path)
        if not isinstance(result, AttackResult) or (tier is not None and not isinstance(tier, Tier)):
            self.fail(path, "result or max_tier is not a known value", ParseErrorKind.UNKNOWN_VARIANT)
            return None
        summary = self.evaluation_summary(f.get("evaluation_summary", {}), child_path(path, "evaluation_summary"))
        return AttackVerdict(
            attack_id=self.string(f, "attack_id", path), result=result,
            indicator_verdicts=self.sequence(f, "indicator_verdicts", path, self.indicator_verdict) or (),
            evaluation_summary=summary or EvaluationSummary(), timestamp=self.string(f, "timestamp", path),
            source=self.string(f, "source", path), max_tier=tier)


BUILDERS: dict[type, Callable[[ModelBuilder, Any, str], Any]] = {
    ProtocolEvent: ModelBuilder.protocol_event,
    EvaluationSummary: ModelBuilder.evaluation_summary,
    IndicatorVerdict: ModelBuilder.indicator_verdict,
    AttackVerdict: ModelBuilder.attack_verdict,
    Attack: ModelBuilder.attack,
    Severity: ModelBuilder.severity,
    Classification: ModelBuilder.classification,
    FrameworkMapping: ModelBuilder.framework_mapping,
    Reference: ModelBuilder.reference,
    Correlation: ModelBuilder.correlation,
    Execution: ModelBuilder.execution,
    Actor: ModelBuilder.actor,
    Phase: ModelBuilder.phase,
    Extractor: ModelBuilder.extractor,
    Action: ModelBuilder.action,
    Trigger: ModelBuilder.trigger,
    Indicator: ModelBuilder.indicator,
    PatternMatch: ModelBuilder.pattern,
    ExpressionMatch: ModelBuilder.expression,
    SemanticMatch: ModelBuilder.semantic,
}


def build[M](cls: type[M], raw: Any, path: str = "") -> M:
    """Build a model value of type `cls` from its plain YAML-form mapping; raise OATFParseError."""
    builder = ModelBuilder()
    if cls is MatchCondition:
        fields = builder.mapping(raw, path, CONDITION_OPERATORS, False, "condition")
        value: Any = builder.match_condition(fields[0] if fields else {}, path)
    elif cls is Document:
        value = builder.document(YamlSource(value=raw))
    elif cls is SemanticExamples:
        fields = builder.mapping(raw, path, ("positive", "negative"), False, "examples")
        value = SemanticExamples(positive=builder.strings(fields[0], "positive", path),
                                 negative=builder.strings(fields[0], "negative", path)) if fields else None
    else:
        value = BUILDERS[cls](builder, raw, path)
    builder.raise_if_failed()
    return value
