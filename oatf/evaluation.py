"""Indicator evaluation (SDK spec §4.1-§4.4; format spec §6 "Indicators").

`evaluate_pattern` and `evaluate_expression` return a `bool` or an `EvaluationError` value (the spec's
`Result<Boolean, EvaluationError>`; errors are values, see `oatf.errors`). `evaluate_indicator` wraps
either in an `IndicatorVerdict` and never raises: whatever the message holds (100,000 nesting levels,
50 MB strings, huge arrays, NaN, objects JSON cannot express) and whatever a plugged-in evaluator does,
the outcome is a verdict, `error` with the diagnostic as evidence when evaluation could not conclude.

Evaluators are explicit, as SDK spec §4.4 says: without a `cel_evaluator` an expression indicator is
`skipped`, without a `semantic_evaluator` a semantic indicator is `skipped`. The SDK's CEL evaluator is
opt-in: `evaluate_indicator(indicator, message, cel_evaluator=oatf.cel.DefaultCelEvaluator())`.

Evidence says what matched and where: the target path (with "value i of n" when a wildcard resolved to
several values), the condition, and an excerpt of at most `EXCERPT_LIMIT` characters around the match;
every evidence string is at most `EVIDENCE_LIMIT` characters.

Bounds (format spec §5.7 "Sandboxing and Resource Limits"): a target resolving to more than
`MAX_RESOLVED_VALUES` values is an `error` verdict, not minutes of matching; a value a string operator must
read as JSON but that JSON cannot express (nesting beyond the interpreter's limit, a non-JSON Python
object) is an `error` verdict rather than a silent `not_matched`, so a payload cannot evade a pattern by
being unserializable. Strings of any length are matched in linear time (substring search, RE2).

Speed (a proxy evaluates every message): a pattern's condition and target path are compiled once and
cached (`oatf.conditions.compile_condition`, `oatf.paths.compile_wildcard_path`), the resolved values are
tested in one loop that stops at the first match, and evidence is built only for a match. A `regex`
without empty-width assertions rules out three or more resolved strings with one search of their joined
text (`CompiledCondition.screen`); only a hit there sends them through the value-by-value search.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from json.encoder import encode_basestring as _encode_json_string
from typing import Any, Final

from oatf.conditions import SCREEN_SEPARATOR, CompiledCondition, compile_condition
from oatf.errors import EvaluationError, EvaluationErrorKind, echo
from oatf.extension_points import CelEvaluator, SemanticEvaluator
from oatf.model import (
    ExpressionMatch,
    Indicator,
    IndicatorResult,
    IndicatorVerdict,
    PatternMatch,
    SemanticMatch,
    Value,
)
from oatf.paths import NOT_FOUND, compile_wildcard_path, resolve_simple_path, resolve_wildcard_path
from oatf.regex import RegexSyntaxError, match_start
from oatf.values import compact_json

__all__ = [
    "DEFAULT_SEMANTIC_THRESHOLD",
    "EVIDENCE_LIMIT",
    "EXCERPT_LIMIT",
    "MAX_RESOLVED_VALUES",
    "compile_indicator",
    "evaluate_expression",
    "evaluate_indicator",
    "evaluate_pattern",
    "evidence_parts",
    "judge_indicator",
    "timestamp_at",
    "timestamp_now",
]

DEFAULT_SEMANTIC_THRESHOLD: Final = 0.7
"""Format spec §6.4: the threshold applied when `semantic.threshold` is absent."""

MAX_RESOLVED_VALUES: Final = 100_000
"""Most values a pattern or semantic target may resolve to before evaluation gives up with an error."""

EXCERPT_LIMIT: Final = 160
"""Longest excerpt of a matched value quoted in evidence, in characters."""

EVIDENCE_LIMIT: Final = 400
"""Longest evidence string, in characters."""


# --- small helpers --------------------------------------------------------------------------------------


_second_stamp: tuple[int, str] = (-1, "")
_millisecond_stamp: tuple[int, str] = (-1, "")


def timestamp_now() -> str:
    """The current UTC time as an ISO 8601 string with millisecond precision (`2026-01-31T12:00:00.000Z`),
    the form verdict timestamps take. The date-time part is formatted once per second, the whole string
    once per millisecond."""
    global _second_stamp, _millisecond_stamp
    milliseconds = time.time_ns() // 1_000_000
    cached_milliseconds, stamp = _millisecond_stamp
    if milliseconds == cached_milliseconds:
        return stamp
    second, millisecond = divmod(milliseconds, 1000)
    cached_second, prefix = _second_stamp
    if second != cached_second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_stamp = (second, prefix)
    stamp = f"{prefix}.{millisecond:03d}Z"
    _millisecond_stamp = (milliseconds, stamp)
    return stamp


@lru_cache(maxsize=4096)
def timestamp_at(seconds: float) -> str:
    """`seconds` since the epoch in the form of `timestamp_now` (ISO 8601, UTC, milliseconds). Evaluators
    that follow an event clock (replay of a recording) stamp verdicts with it, so the same traffic gives
    the same verdicts whenever it is evaluated. Remembered for the last few thousand times (a monitor
    stamps the many runs that end together with the same few)."""
    milliseconds = round(seconds * 1000)
    second, millisecond = divmod(milliseconds, 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(second))}.{millisecond:03d}Z"


def _bounded(text: str, limit: int = EVIDENCE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NEEDS_ESCAPING: Final = re.compile(r'["\\\x00-\x1f\x7f\u2028\u2029]')


def _quote(text: str) -> str:
    """`text` as a one-line JSON string literal (newlines and control characters escaped), as
    `json.dumps(text, ensure_ascii=False)` writes it."""
    if _NEEDS_ESCAPING.search(text) is None:
        return f'"{text}"'
    return _encode_json_string(text)


def _describe(value: Any) -> str:
    """A short, safe rendering of any value for evidence (never raises, whatever the value)."""
    if isinstance(value, str):
        return _quote(_bounded(value, EXCERPT_LIMIT))
    try:
        return _bounded(compact_json(value), EXCERPT_LIMIT)
    except Exception:  # no JSON form (too deep, not JSON), or a value whose methods raise
        return f"<{type(value).__name__}>"


def _where(target: str, index: int, count: int) -> str:
    path = target if target else "(message root)"
    return path if count == 1 else f"{path} (value {index + 1} of {count})"


QUOTED_VALUE: Final = re.compile(r'(?P<lead> matched | for )(?P<value>"(?:[^"\\]|\\.)*"?|[\[{].*)$', re.S)
"""The traffic value a match's evidence quotes last: a pattern's `matched "…"` (or the JSON of a non-string
value, or a literal cut short by `EVIDENCE_LIMIT`), a semantic score's `for "…"`."""


def evidence_parts(evidence: str) -> tuple[str | None, str | None]:
    """(where, excerpt) of the evidence of a pattern or semantic match, as this module writes it (`{where}:
    … matched "{excerpt}"`): the target path (with "value i of n") and the quoted traffic text, unquoted (a
    non-string value as its JSON). None for what the evidence does not hold (a CEL match names no path)."""
    if evidence.startswith("CEL expression is true:"):
        return None, None
    where = evidence.split(": ", 1)[0] if ": " in evidence else None
    found = QUOTED_VALUE.search(evidence)
    if found is None:
        return where, None
    value = found.group("value")
    return where, unquote(value) if value.startswith('"') else value


def unquote(literal: str) -> str:
    """The text of a JSON string literal as evidence quotes it, which the evidence limit may have cut short
    (no closing quote, or cut inside an escape)."""
    for text in (literal, literal + '"'):
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, str):
            return value
    return literal.strip('"')


def _error_evidence(error: EvaluationError) -> str:
    return _bounded(f"{error.kind}: {' '.join(str(error.message).split())}")


def _text_of(value: Any) -> str:
    """A resolved value as text: strings as they are, anything else as compact JSON with sorted keys
    (SDK spec §5.3 "Type coercion for string operators"). Raises for a value JSON cannot express."""
    return value if isinstance(value, str) else compact_json(value, sort_keys=True)


def _serialization_error(value: Any, where: str) -> EvaluationError | None:
    """An error when `value` has no compact JSON form (too deep, or not JSON), else None."""
    if isinstance(value, str | int | float | bool) or value is None:
        return None
    try:
        compact_json(value, sort_keys=True)
    except RecursionError:
        reason = "is nested too deeply to serialize"
    except (TypeError, ValueError) as exc:
        reason = f"is not expressible as JSON ({exc})"
    else:
        return None
    return EvaluationError(EvaluationErrorKind.TYPE_ERROR, f"the value at {where} {reason}")


def _failure(kind: EvaluationErrorKind, what: str, exc: Exception) -> EvaluationError:
    """An exception raised by `what` (a plugged-in evaluator, a hostile message) as an error value."""
    if isinstance(exc, RecursionError):
        detail = "nested too deeply"
    else:
        try:
            detail = _bounded(str(exc), 200)
        except Exception:  # an exception whose __str__ raises
            detail = "(no description)"
    return EvaluationError(kind, f"{what} raised {type(exc).__name__}: {detail}")


def _too_many(target: str, count: int) -> EvaluationError:
    return EvaluationError(
        EvaluationErrorKind.PATH_RESOLUTION,
        f"target {echo(target)} resolved to {count} values, over the limit of {MAX_RESOLVED_VALUES}",
    )


# --- pattern (SDK spec §4.2) ----------------------------------------------------------------------------


def _match_offset(operators: dict[str, Any], text: str) -> int:
    """Where in `text` the condition matched (for the excerpt); 0 when it has no position."""
    if isinstance(operators.get("contains"), str):
        return max(text.find(operators["contains"]), 0)
    if isinstance(operators.get("regex"), str):
        start = match_start(operators["regex"], text)
        if start is not None:
            return start
    if isinstance(operators.get("ends_with"), str):
        return max(len(text) - len(operators["ends_with"]), 0)
    return 0


def _excerpt_around(text: str, offset: int) -> str:
    start = max(offset - EXCERPT_LIMIT // 4, 0)
    end = start + EXCERPT_LIMIT
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def _pattern_evidence(compiled: CompiledCondition, value: Any, where: str) -> str:
    operators = compiled.operators
    if operators is None:
        summary = f"equals {_describe(compiled.expected)}"
    else:
        summary = " and ".join(f"{name} {_describe(operand)}" for name, operand in operators.items())
        summary = summary or "a condition without operators"
    if operators is not None and compiled.reads_text:
        text = _text_of(value)
        excerpt = _quote(_excerpt_around(text, _match_offset(operators, text)))
    else:
        excerpt = _describe(value)
    return _bounded(f"{where}: {summary} matched {excerpt}")


_SCREEN_MIN_VALUES: Final = 3
_SCREEN_MAX_CHARACTERS: Final = 1 << 20
_STR_ONLY: Final = frozenset((str,))


def _screened_out(screen: Callable[[str], bool], values: list[Any]) -> bool:
    """Whether `screen` (a `CompiledCondition.screen`) proves that none of `values` matches: they must all be
    strings, of moderate total size (the joined copy is one more string to hold)."""
    try:
        if not set(map(type, values)) <= _STR_ONLY:
            return False
    except TypeError:  # a type whose metaclass makes it unhashable: certainly not `str`
        return False
    if sum(map(len, values)) > _SCREEN_MAX_CHARACTERS:
        return False
    return not screen(SCREEN_SEPARATOR.join(values))


Outcome = str | EvaluationError | None
"""Evidence when a pattern matches, None when it does not, or the error that stopped it."""


def _pattern_matcher(pattern: PatternMatch, target: str | None) -> Callable[[Value], Outcome]:
    """`pattern` against `target`, compiled into a function of the message (SDK spec §4.2).

    The condition and the target path are compiled once (and cached), the values are tested in document
    order, and the first match ends the search; evidence is built only then."""
    if not isinstance(target, str):
        return _constant(EvaluationError(EvaluationErrorKind.PATH_RESOLUTION, "the pattern has no target path"))
    condition = pattern.condition if pattern.condition is not None else pattern.shorthand
    if condition is None:
        return _constant(EvaluationError(EvaluationErrorKind.TYPE_ERROR, "the pattern has no condition"))
    compiled = compile_condition(condition)
    resolve = compile_wildcard_path(target)
    test, find, reads_text, screen = compiled.test, compiled.find, compiled.reads_text, compiled.screen

    def match(message: Value) -> Outcome:
        try:
            values = resolve(message)
        except Exception as exc:  # a message whose mappings raise
            return _failure(EvaluationErrorKind.PATH_RESOLUTION, f"resolving {echo(target)}", exc)
        count = len(values)
        if count > MAX_RESOLVED_VALUES:
            return _too_many(target, count)
        if compiled.exists_only:
            # SDK spec §4.2 step 1: `exists` alone is decided by resolution, not by evaluate_condition.
            assert compiled.operators is not None
            if bool(compiled.operators["exists"]) != (count > 0):
                return None
            if count == 0:
                return f"{target or '(message root)'}: resolved to nothing, as exists: false requires"
            return _bounded(f"{_where(target, 0, count)}: exists, value {_describe(values[0])}")
        if count == 0:
            return None
        try:
            if screen is not None and count >= _SCREEN_MIN_VALUES and _screened_out(screen, values):
                return None
            index = find(values, 0)
            while index < count:
                value = values[index]
                # `find` stopped at a match, or (string operators) at a value not of type `str`, untested
                if not reads_text or type(value) is str or test(value):
                    return _pattern_evidence(compiled, value, _where(target, index, count))
                if not isinstance(value, str):
                    # A value a string operator must read as JSON but cannot is an error, not a mismatch (it
                    # cannot have matched: every string operator fails on it).
                    unreadable = _serialization_error(value, _where(target, index, count))
                    if unreadable is not None:
                        return unreadable
                index = find(values, index + 1)
        except RegexSyntaxError as exc:
            return EvaluationError(EvaluationErrorKind.UNSUPPORTED_METHOD, str(exc))
        except Exception as exc:  # a resolved value whose methods raise
            return _failure(EvaluationErrorKind.TYPE_ERROR, f"matching the value at {echo(target)}", exc)
        return None

    return match


def _constant[T](value: T) -> Callable[..., T]:
    return lambda *_: value


def evaluate_pattern(pattern: PatternMatch, message: Value) -> bool | EvaluationError:
    """SDK spec §4.2 `evaluate_pattern`: whether any value `pattern.target` resolves to satisfies
    `pattern.condition` (an `exists`-only condition is decided by whether the target resolves at all).

    Returns an `EvaluationError` when matching cannot conclude: no target, too many resolved values, a
    message whose mappings raise (`path_resolution`), a regex outside RE2 (`unsupported_method`), a value a
    string operator must read that has no JSON form (`type_error`). Never raises."""
    outcome = _pattern_matcher(pattern, pattern.target)(message)
    if isinstance(outcome, EvaluationError):
        return outcome
    return outcome is not None


# --- expression (SDK spec §4.3) -------------------------------------------------------------------------


def evaluate_expression(
    expression: ExpressionMatch, message: Value, cel_evaluator: CelEvaluator | None
) -> bool | EvaluationError:
    """SDK spec §4.3 `evaluate_expression`: evaluate `expression.cel` with `message` bound as `message`
    and each of `expression.variables` bound to `resolve_simple_path(path, message)` (null when the path
    does not resolve).

    Returns the boolean, or an `EvaluationError`: the evaluator's own (or `cel_error` if it raises),
    `type_error` for a non-boolean result (never coerced), `unsupported_method` when `cel_evaluator` is
    None. Never raises."""
    if cel_evaluator is None:
        return EvaluationError(
            EvaluationErrorKind.UNSUPPORTED_METHOD, "CEL evaluation is not available: no CelEvaluator configured"
        )
    if not isinstance(expression.cel, str):
        return EvaluationError(EvaluationErrorKind.CEL_ERROR, "the expression has no CEL text")
    context: dict[str, Value] = {"message": message}
    for name, path in (expression.variables or {}).items():
        try:
            resolved = resolve_simple_path(path, message)
        except Exception as exc:  # a non-string path, or a message whose mappings raise
            return _failure(EvaluationErrorKind.PATH_RESOLUTION, f"resolving variable {echo(name)} ({echo(path)})", exc)
        context[name] = None if resolved is NOT_FOUND else resolved  # an unresolved variable is null
    try:
        result = cel_evaluator.evaluate(expression.cel, context)
    except Exception as exc:  # SDK spec §6.1 wants errors returned; a raising evaluator still yields one
        return _failure(EvaluationErrorKind.CEL_ERROR, "the CEL evaluator", exc)
    if isinstance(result, EvaluationError) or result is True or result is False:
        return result
    return EvaluationError(
        EvaluationErrorKind.TYPE_ERROR, f"the CEL expression evaluated to {_describe(result)}, not a boolean"
    )


# --- semantic (SDK spec §4.4 step 1, `semantic`) ---------------------------------------------------------


def _match_semantic(
    semantic: SemanticMatch, target: str | None, message: Value, evaluator: SemanticEvaluator
) -> tuple[bool, str] | EvaluationError:
    if not isinstance(target, str):
        return EvaluationError(EvaluationErrorKind.PATH_RESOLUTION, "the semantic indicator has no target path")
    if not isinstance(semantic.intent, str):
        return EvaluationError(EvaluationErrorKind.SEMANTIC_ERROR, "the semantic indicator has no intent")
    try:
        values = resolve_wildcard_path(target, message)
    except Exception as exc:  # a message whose mappings raise
        return _failure(EvaluationErrorKind.PATH_RESOLUTION, f"resolving {echo(target)}", exc)
    count = len(values)
    if count == 0:
        return False, f"{target or '(message root)'}: resolved to nothing"
    if count > MAX_RESOLVED_VALUES:
        return _too_many(target, count)
    threshold = DEFAULT_SEMANTIC_THRESHOLD if semantic.threshold is None else semantic.threshold
    best: tuple[float, int, str] | None = None
    for index, value in enumerate(values):
        if isinstance(value, str):
            text = value
        else:
            unreadable = _serialization_error(value, _where(target, index, count))
            if unreadable is not None:
                return unreadable
            text = compact_json(value)
        try:
            score = evaluator.evaluate(
                text, semantic.intent, semantic.intent_class, semantic.threshold, semantic.examples
            )
        except Exception as exc:  # SDK spec §6.2 wants errors returned; a raising evaluator still yields one
            return _failure(EvaluationErrorKind.SEMANTIC_ERROR, "the semantic evaluator", exc)
        if isinstance(score, EvaluationError):
            return score
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= score <= 1.0:
            return EvaluationError(
                EvaluationErrorKind.SEMANTIC_ERROR,
                f"the semantic evaluator returned {_describe(score)}, not a score in [0.0, 1.0]",
            )
        if best is None or score > best[0]:
            best = (float(score), index, text)
    assert best is not None  # count > 0
    score, index, text = best
    matched = score >= threshold
    relation = "≥" if matched else "<"
    default = " (default)" if semantic.threshold is None else ""
    evidence = (
        f"{_where(target, index, count)}: highest score {score:g} {relation} threshold {threshold:g}{default} "
        f"for {_quote(_excerpt_around(text, 0))}"
    )
    return matched, _bounded(evidence)


# --- indicator (SDK spec §4.4) --------------------------------------------------------------------------

_CEL_UNAVAILABLE: Final = (
    "CEL evaluation unavailable: no CelEvaluator configured "
    "(pass cel_evaluator=oatf.cel.DefaultCelEvaluator() to use the SDK's)"
)
_SEMANTIC_UNAVAILABLE: Final = (
    "semantic evaluation unavailable: no SemanticEvaluator configured (the SDK ships none, SDK spec §6.2)"
)


Judgement = tuple[IndicatorResult, str | None]
"""An indicator's result on one message and its evidence: an `IndicatorVerdict` without id or timestamp."""


def _from_outcome(outcome: str | EvaluationError | None) -> Judgement:
    if isinstance(outcome, EvaluationError):
        return IndicatorResult.ERROR, _error_evidence(outcome)
    if outcome is None:
        return IndicatorResult.NOT_MATCHED, None
    return IndicatorResult.MATCHED, outcome


Judge = Callable[[Value, CelEvaluator | None, SemanticEvaluator | None], Judgement]
"""An indicator compiled by `compile_indicator`: (message, cel_evaluator, semantic_evaluator) → Judgement."""

_JUDGE_CACHE_SIZE: Final = 4096
_judges: dict[int, tuple[Indicator, Judge]] = {}


def compile_indicator(indicator: Indicator) -> Judge:
    """`indicator` compiled into its `Judge` (SDK spec §4.4 dispatch on the detection key, done once):
    `compile_indicator(i)(message, cel, semantic)` is `judge_indicator(i, message, cel, semantic)`.
    Cached by identity (indicators are immutable). Never raises; the judge raises only where
    `judge_indicator` would report an unforeseen error."""
    cached = _judges.get(id(indicator))
    if cached is not None and cached[0] is indicator:
        return cached[1]
    judge = _compile_judge(indicator)
    if len(_judges) >= _JUDGE_CACHE_SIZE:
        _judges.clear()
    _judges[id(indicator)] = (indicator, judge)  # the entry keeps `indicator` alive: its id stays its own
    return judge


def _compile_judge(indicator: Indicator) -> Judge:
    pattern, expression, semantic = indicator.pattern, indicator.expression, indicator.semantic
    if (pattern is not None) + (expression is not None) + (semantic is not None) != 1:
        present = [key for key in ("pattern", "expression", "semantic") if getattr(indicator, key) is not None]
        what = "no detection key" if not present else f"several detection keys ({', '.join(present)})"
        error = EvaluationError(
            EvaluationErrorKind.UNSUPPORTED_METHOD, f"the indicator has {what}; exactly one is required"
        )
        return _constant((IndicatorResult.ERROR, _error_evidence(error)))
    if pattern is not None:
        # An un-normalized indicator falls back to the indicator-level target (N-004).
        match = _pattern_matcher(pattern, pattern.target if pattern.target is not None else indicator.target)
        return lambda message, _cel, _semantic: _from_outcome(match(message))
    if expression is not None:
        return lambda message, cel, _semantic: _judge_expression(expression, message, cel)
    assert semantic is not None
    target = semantic.target if semantic.target is not None else indicator.target
    return lambda message, _cel, evaluator: _judge_semantic(semantic, target, message, evaluator)


def _judge_expression(expression: ExpressionMatch, message: Value, cel_evaluator: CelEvaluator | None) -> Judgement:
    if cel_evaluator is None:
        return IndicatorResult.SKIPPED, _CEL_UNAVAILABLE
    outcome = evaluate_expression(expression, message, cel_evaluator)
    if isinstance(outcome, EvaluationError):
        return IndicatorResult.ERROR, _error_evidence(outcome)
    if outcome:
        return IndicatorResult.MATCHED, _bounded(f"CEL expression is true: {' '.join(str(expression.cel).split())}")
    return IndicatorResult.NOT_MATCHED, None


def _judge_semantic(semantic: SemanticMatch, target: str | None, message: Value,
                    evaluator: SemanticEvaluator | None) -> Judgement:
    if evaluator is None:
        return IndicatorResult.SKIPPED, _SEMANTIC_UNAVAILABLE
    judged = _match_semantic(semantic, target, message, evaluator)
    if isinstance(judged, EvaluationError):
        return IndicatorResult.ERROR, _error_evidence(judged)
    matched, evidence = judged
    return IndicatorResult.MATCHED if matched else IndicatorResult.NOT_MATCHED, evidence


def judge_indicator(
    indicator: Indicator,
    message: Value,
    cel_evaluator: CelEvaluator | None = None,
    semantic_evaluator: SemanticEvaluator | None = None,
) -> Judgement:
    """`evaluate_indicator` (SDK spec §4.4) for a tool that evaluates many messages and keeps few verdicts:
    the result and evidence only, no `IndicatorVerdict` built and no clock read. `indicator` must be an
    `Indicator` (normalized). Never raises."""
    try:
        return compile_indicator(indicator)(message, cel_evaluator, semantic_evaluator)
    except Exception as exc:  # anything unforeseen: still a judgement
        return _unforeseen(exc)


def _unforeseen(exc: Exception) -> Judgement:
    return IndicatorResult.ERROR, _error_evidence(_failure(EvaluationErrorKind.TYPE_ERROR, "evaluation", exc))


def evaluate_indicator(
    indicator: Indicator | Mapping[str, Any],
    message: Value,
    cel_evaluator: CelEvaluator | None = None,
    semantic_evaluator: SemanticEvaluator | None = None,
) -> IndicatorVerdict:
    """SDK spec §4.4 `evaluate_indicator`: evaluate one indicator against one message.

    Dispatches on the indicator's detection key: `pattern` → `evaluate_pattern`; `expression` →
    `evaluate_expression`, `skipped` without `cel_evaluator`; `semantic` → the highest score of
    `semantic_evaluator` over the values `semantic.target` resolves to, compared with `semantic.threshold`
    (0.7 when absent), `not_matched` when nothing resolves, `skipped` without `semantic_evaluator`.
    `indicator` should be normalized (`oatf.normalize`); a plain mapping in YAML form is accepted too.

    Never raises: any failure is an `error` verdict whose evidence is the diagnostic. `timestamp` is the
    current UTC time (ISO 8601); `source` is left for the consuming tool."""
    indicator_id = ""
    try:
        if not isinstance(indicator, Indicator):
            if isinstance(indicator, Mapping) and isinstance(indicator.get("id"), str):
                indicator_id = indicator["id"]
            indicator = Indicator.from_dict(indicator)
        indicator_id = indicator.id if isinstance(indicator.id, str) else ""
    except Exception as exc:  # a malformed indicator: still a verdict
        result, evidence = _unforeseen(exc)
    else:
        result, evidence = judge_indicator(indicator, message, cel_evaluator, semantic_evaluator)
    return IndicatorVerdict(indicator_id=indicator_id, result=result, timestamp=timestamp_now(), evidence=evidence)
