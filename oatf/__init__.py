"""OATF SDK for Python: the Open Agent Threat Format, as the OATF SDK specification v0.1 names it.

The spec is the index of this package: each name below is the spec's name for the operation or type.
"""

from .errors import (
    Diagnostic,
    DiagnosticSeverity,
    EvaluationError,
    EvaluationErrorKind,
    GenerationError,
    GenerationErrorKind,
    OATFError,
    OATFLoadError,
    OATFParseError,
    ParseError,
    ParseErrorKind,
    ValidationError,
)
from .model import (
    Action,
    Actor,
    Attack,
    AttackResult,
    AttackVerdict,
    Category,
    Classification,
    Condition,
    Correlation,
    CorrelationLogic,
    Direction,
    Document,
    ElicitationMode,
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
    LogLevel,
    MatchCondition,
    MatchPredicate,
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
    Status,
    Tier,
    Trigger,
    Value,
)
from .normalize import normalize
from .parse import parse
from .protocols import extract_protocol
from .serialize import serialize

__all__ = [
    "Action", "Actor", "Attack", "AttackResult", "AttackVerdict", "Category", "Classification", "Condition",
    "Correlation", "CorrelationLogic", "Diagnostic", "DiagnosticSeverity", "Direction", "Document",
    "ElicitationMode", "EvaluationError", "EvaluationErrorKind", "EvaluationSummary", "Execution",
    "ExpressionMatch", "Extractor", "ExtractorSource", "ExtractorType", "FrameworkMapping",
    "GenerationError", "GenerationErrorKind", "Impact", "Indicator", "IndicatorMethod", "IndicatorResult",
    "IndicatorVerdict", "LogLevel", "MatchCondition", "MatchPredicate", "OATFError", "OATFLoadError",
    "OATFParseError", "ParseError", "ParseErrorKind", "PatternMatch", "Phase", "ProtocolEvent", "Reference",
    "Relationship", "SemanticExamples", "SemanticIntentClass", "SemanticMatch", "Severity", "SeverityLevel",
    "Status", "Tier", "Trigger", "ValidationError", "Value", "extract_protocol", "normalize", "parse",
    "serialize",
]
