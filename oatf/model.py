"""The OATF document model (SDK spec §2): immutable values that compare structurally with `==`.

Every core type is a frozen dataclass whose attribute names are the YAML keys (`trigger.match`,
`extractor.type`), except `Document.schema` (YAML `$schema`) and `extensions` (the `x-` keys). Lists are
tuples. `Value` payloads (phase `state`, action parameters, bare conditions) are plain JSON trees
(dict/list/str/int/float/bool/None) owned by the document: treat them as read-only.

Closed enumerations are `StrEnum`s. Where the conformance fixtures require a document with an unknown
closed-enum value to *parse* and fail *validation* with V-005 (validate/suite.yaml VAL-005b/e/g), the raw
string is kept in the field instead of the enum member; SDK spec §2.20 says such values are rejected at
parse time (`unknown_variant`) — the fixtures win, and `validate` reports them.

`Cls.from_dict(mapping)` builds a value from the plain mapping of its YAML form (raising
`OATFParseError` on a type mismatch) and `obj.to_dict()` turns it back into one, in spec field order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Self

Value = Any
"""SDK spec §2.1 `Value`: a JSON-like tree."""


class SeverityLevel(StrEnum):
    INFORMATIONAL = "informational"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Impact(StrEnum):
    BEHAVIOR_MANIPULATION = "behavior_manipulation"
    DATA_EXFILTRATION = "data_exfiltration"
    DATA_TAMPERING = "data_tampering"
    UNAUTHORIZED_ACTIONS = "unauthorized_actions"
    INFORMATION_DISCLOSURE = "information_disclosure"
    CREDENTIAL_THEFT = "credential_theft"
    SERVICE_DISRUPTION = "service_disruption"
    PRIVILEGE_ESCALATION = "privilege_escalation"


class Category(StrEnum):
    CAPABILITY_POISONING = "capability_poisoning"
    RESPONSE_FABRICATION = "response_fabrication"
    CONTEXT_MANIPULATION = "context_manipulation"
    OVERSIGHT_BYPASS = "oversight_bypass"
    TEMPORAL_MANIPULATION = "temporal_manipulation"
    AVAILABILITY_DISRUPTION = "availability_disruption"
    CROSS_PROTOCOL_CHAIN = "cross_protocol_chain"


class Status(StrEnum):
    DRAFT = "draft"
    EXPERIMENTAL = "experimental"
    STABLE = "stable"
    DEPRECATED = "deprecated"


class CorrelationLogic(StrEnum):
    ANY = "any"
    ALL = "all"


class IndicatorResult(StrEnum):
    MATCHED = "matched"
    NOT_MATCHED = "not_matched"
    ERROR = "error"
    SKIPPED = "skipped"


class AttackResult(StrEnum):
    EXPLOITED = "exploited"
    NOT_EXPLOITED = "not_exploited"
    PARTIAL = "partial"
    ERROR = "error"


class ExtractorSource(StrEnum):
    REQUEST = "request"
    RESPONSE = "response"


class ExtractorType(StrEnum):
    JSON_PATH = "json_path"
    REGEX = "regex"


class SemanticIntentClass(StrEnum):
    PROMPT_INJECTION = "prompt_injection"
    DATA_EXFILTRATION = "data_exfiltration"
    PRIVILEGE_ESCALATION = "privilege_escalation"
    SOCIAL_ENGINEERING = "social_engineering"
    INSTRUCTION_OVERRIDE = "instruction_override"


class Relationship(StrEnum):
    PRIMARY = "primary"
    RELATED = "related"


class LogLevel(StrEnum):
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class ElicitationMode(StrEnum):
    FORM = "form"
    URL = "url"


class Direction(StrEnum):
    REQUEST = "request"
    RESPONSE = "response"


class IndicatorMethod(StrEnum):
    PATTERN = "pattern"
    EXPRESSION = "expression"
    SEMANTIC = "semantic"


class Tier(StrEnum):
    """Indicator tier (newest evaluation seed): how far an exploit got. Ordered ingested < local_action <
    boundary_breach; compare with `Tier.rank`."""

    INGESTED = "ingested"
    LOCAL_ACTION = "local_action"
    BOUNDARY_BREACH = "boundary_breach"

    @property
    def rank(self) -> int:
        return _TIER_ORDER.index(self)


_TIER_ORDER = (Tier.INGESTED, Tier.LOCAL_ACTION, Tier.BOUNDARY_BREACH)

KNOWN_FRAMEWORKS = ("atlas", "mitre_attack", "owasp_llm", "owasp_mcp", "owasp_agentic", "cwe", "other")
"""SDK spec §2.20 `Framework` (open string): the v0.1 values."""

CONDITION_OPERATORS = (
    "contains", "starts_with", "ends_with", "regex", "any_of", "gt", "lt", "gte", "lte", "exists",
)
"""SDK spec §2.11: the MatchCondition operator keys, in spec order."""

PATTERN_SHORTHAND_OPERATORS = CONDITION_OPERATORS[:-1]
"""Format spec §6.2: operators allowed as direct keys of `pattern` (shorthand form; no `exists`)."""


def _plain_enum(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


class YamlForm:
    """Conversion between a model value and the plain mapping of its YAML form."""

    __slots__ = ()

    @classmethod
    def from_dict(cls, raw: Any) -> Self:
        """Build from the plain YAML-form mapping; raise `OATFParseError` on a type mismatch."""
        from .build import build

        return build(cls, raw)

    def to_dict(self) -> Any:
        """The plain YAML-form mapping (spec field order, absent fields omitted)."""
        from .plain import to_plain

        return to_plain(self)


@dataclass(frozen=True)
class Severity(YamlForm):
    """SDK spec §2.4."""

    level: SeverityLevel | str | None = None
    confidence: int | None = None


@dataclass(frozen=True)
class FrameworkMapping(YamlForm):
    """SDK spec §2.18."""

    framework: str | None = None
    id: str | None = None
    name: str | None = None
    url: str | None = None
    relationship: Relationship | str | None = None


@dataclass(frozen=True)
class Classification(YamlForm):
    """SDK spec §2.5."""

    category: Category | str | None = None
    mappings: tuple[FrameworkMapping, ...] | None = None
    tags: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Reference(YamlForm):
    """SDK spec §2.17."""

    url: str | None = None
    title: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class Correlation(YamlForm):
    """SDK spec §2.3a."""

    logic: CorrelationLogic | str | None = None


@dataclass(frozen=True)
class MatchCondition(YamlForm):
    """SDK spec §2.11: operators combined with AND; `None` means the operator is absent."""

    contains: str | None = None
    starts_with: str | None = None
    ends_with: str | None = None
    regex: str | None = None
    any_of: tuple[Value, ...] | None = None
    gt: float | None = None
    lt: float | None = None
    gte: float | None = None
    lte: float | None = None
    exists: bool | None = None


Condition = MatchCondition | Value
"""SDK spec §2.13: a MatchCondition, or a bare value compared by deep equality."""

MatchPredicate = dict[str, Condition]
"""SDK spec §2.10: simple dot-path → Condition, combined with AND."""


@dataclass(frozen=True)
class Trigger(YamlForm):
    """SDK spec §2.8. `after` keeps the duration as written; `parse_duration` reads it."""

    event: str | None = None
    count: int | None = None
    match: MatchPredicate | None = None
    after: str | None = None


@dataclass(frozen=True)
class Extractor(YamlForm):
    """SDK spec §2.9."""

    name: str | None = None
    source: ExtractorSource | str | None = None
    type: ExtractorType | str | None = None
    selector: str | None = None


@dataclass(frozen=True)
class Action(YamlForm):
    """SDK spec §2.7a: one action key (`send`, `log`, or a binding-specific key) and its value.

    Known actions keep their parameters as the mapping written (`{"method": ..., "params": ...}` for
    `send`, `{"message": ..., "level": ...}` for `log`); binding-specific values are kept as written.
    A document with several non-`x-` keys (V-041) keeps them all in `entries`, in document order."""

    entries: tuple[tuple[str, Value], ...] = ()
    extensions: dict[str, Value] | None = None

    @property
    def key(self) -> str | None:
        """The action key, or None when the object has none (or several: V-041)."""
        return self.entries[0][0] if len(self.entries) == 1 else None

    @property
    def value(self) -> Value:
        return self.entries[0][1] if len(self.entries) == 1 else None


@dataclass(frozen=True)
class Phase(YamlForm):
    """SDK spec §2.7."""

    name: str | None = None
    description: str | None = None
    mode: str | None = None
    state: Value = None
    extractors: tuple[Extractor, ...] | None = None
    on_enter: tuple[Action, ...] | None = None
    trigger: Trigger | None = None
    extensions: dict[str, Value] | None = None


@dataclass(frozen=True)
class Actor(YamlForm):
    """SDK spec §2.6a. `name`/`mode` are None only in invalid documents (V-031)."""

    name: str | None = None
    mode: str | None = None
    phases: tuple[Phase, ...] = ()
    extensions: dict[str, Value] | None = None


@dataclass(frozen=True)
class Execution(YamlForm):
    """SDK spec §2.6: exactly one of `state`, `phases`, `actors` in a valid document (V-030)."""

    mode: str | None = None
    state: Value = None
    phases: tuple[Phase, ...] | None = None
    actors: tuple[Actor, ...] | None = None
    extensions: dict[str, Value] | None = None


@dataclass(frozen=True)
class PatternMatch(YamlForm):
    """SDK spec §2.13. In shorthand form `condition` is None and `shorthand` holds the operator keys
    written directly on the pattern (N-005 moves them into `condition`)."""

    target: str | None = None
    condition: Condition = None
    shorthand: MatchCondition | None = None


@dataclass(frozen=True)
class ExpressionMatch(YamlForm):
    """SDK spec §2.14."""

    cel: str | None = None
    variables: dict[str, str] | None = None


@dataclass(frozen=True)
class SemanticExamples(YamlForm):
    """SDK spec §2.16."""

    positive: tuple[str, ...] | None = None
    negative: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SemanticMatch(YamlForm):
    """SDK spec §2.15."""

    target: str | None = None
    intent: str | None = None
    intent_class: SemanticIntentClass | str | None = None
    threshold: float | None = None
    examples: SemanticExamples | None = None


@dataclass(frozen=True)
class Indicator(YamlForm):
    """SDK spec §2.12, plus `tier` from the newest evaluation seed."""

    id: str | None = None
    protocol: str | None = None
    surface: str | None = None
    target: str | None = None
    actor: str | None = None
    direction: Direction | str | None = None
    method: IndicatorMethod | str | None = None
    description: str | None = None
    pattern: PatternMatch | None = None
    expression: ExpressionMatch | None = None
    semantic: SemanticMatch | None = None
    confidence: int | None = None
    severity: SeverityLevel | str | None = None
    tier: Tier | str | None = None
    false_positives: tuple[str, ...] | None = None
    extensions: dict[str, Value] | None = None

    @property
    def detection_keys(self) -> tuple[str, ...]:
        """The detection keys present (`pattern`, `expression`, `semantic`); exactly one when valid."""
        return tuple(k for k in ("pattern", "expression", "semantic") if getattr(self, k) is not None)


@dataclass(frozen=True)
class Attack(YamlForm):
    """SDK spec §2.3. `execution` is None only in invalid documents (V-004)."""

    id: str | None = None
    name: str | None = None
    version: int | None = None
    status: Status | str | None = None
    created: str | None = None
    modified: str | None = None
    author: str | None = None
    description: str | None = None
    grace_period: str | None = None
    severity: Severity | None = None
    impact: tuple[Impact | str, ...] | None = None
    classification: Classification | None = None
    references: tuple[Reference, ...] | None = None
    execution: Execution | None = None
    indicators: tuple[Indicator, ...] | None = None
    correlation: Correlation | None = None
    extensions: dict[str, Value] | None = None


@dataclass(frozen=True)
class SourceInfo:
    """Where a parsed document came from: positions of its nodes and YAML features `validate` checks.

    Not part of the document's value: two documents with equal content are `==` whatever their source."""

    positions: dict[str, tuple[int, int]]
    """dot-path → (line, column), 1-based, of every node (a scalar's value, a collection's key)."""
    key_positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    """dot-path → (line, column) of the mapping key naming the node (for errors about the key itself)."""
    key_order: tuple[str, ...] = ()
    """The document's top-level keys in source order (W-001 / V-002)."""
    yaml_features: tuple[tuple[str, str], ...] = ()
    """(dot-path, description) of anchors, aliases, merge keys and custom tags (V-020)."""
    shape_errors: tuple[tuple[str, str], ...] = ()
    """(dot-path, description) of structural problems parse tolerates for `validate` (V-003)."""

    def locate(self, path: str, key: bool = False) -> tuple[int, int] | None:
        """The position of `path` (of its key, with `key=True`), or of its nearest located ancestor."""
        if key and path in self.key_positions:
            return self.key_positions[path]
        while True:
            if path in self.positions:
                return self.positions[path]
            cut = max(path.rfind("."), path.rfind("["))
            if cut <= 0:
                return self.positions.get(path[:cut]) if cut == 0 else self.positions.get("")
            path = path[:cut]


@dataclass(frozen=True)
class Document(YamlForm):
    """SDK spec §2.2. `oatf`/`attack` are None only in invalid documents (V-001, V-003)."""

    oatf: str | None = None
    schema: str | None = None
    attack: Attack | None = None
    source: SourceInfo | None = field(default=None, compare=False, repr=False)


# --- Runtime and verdict types (SDK spec §2.8a–c, §2.19) ---------------------------------------------


@dataclass(frozen=True)
class ProtocolEvent(YamlForm):
    """SDK spec §2.8a: an observed protocol event, matched by `evaluate_trigger`."""

    event_type: str
    content: Value = None


@dataclass(frozen=True)
class EvaluationSummary(YamlForm):
    """SDK spec §2.19: counts of each indicator result; they sum to the number of indicators."""

    matched: int = 0
    not_matched: int = 0
    error: int = 0
    skipped: int = 0

    def to_dict(self) -> dict[str, int]:
        """The plain form (as `YamlForm.to_dict`, written out: verdicts are serialized once per run)."""
        return {"matched": self.matched, "not_matched": self.not_matched, "error": self.error,
                "skipped": self.skipped}


@dataclass(frozen=True)
class IndicatorVerdict(YamlForm):
    """SDK spec §2.19."""

    indicator_id: str
    result: IndicatorResult
    timestamp: str | None = None
    evidence: str | None = None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plain form (as `YamlForm.to_dict`, written out: verdicts are serialized once per run)."""
        out: dict[str, Any] = {"indicator_id": self.indicator_id, "result": _plain_enum(self.result)}
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        if self.evidence is not None:
            out["evidence"] = self.evidence
        if self.source is not None:
            out["source"] = self.source
        return out


@dataclass(frozen=True)
class AttackVerdict(YamlForm):
    """SDK spec §2.19, plus `max_tier` from the newest evaluation seed."""

    attack_id: str | None
    result: AttackResult
    indicator_verdicts: tuple[IndicatorVerdict, ...]
    evaluation_summary: EvaluationSummary
    timestamp: str | None = None
    source: str | None = None
    max_tier: Tier | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plain form (as `YamlForm.to_dict`, written out: verdicts are serialized once per run)."""
        out: dict[str, Any] = {} if self.attack_id is None else {"attack_id": self.attack_id}
        out["result"] = _plain_enum(self.result)
        out["indicator_verdicts"] = [v.to_dict() for v in self.indicator_verdicts]
        out["evaluation_summary"] = self.evaluation_summary.to_dict()
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        if self.source is not None:
            out["source"] = self.source
        if self.max_tier is not None:
            out["max_tier"] = _plain_enum(self.max_tier)
        return out
