"""Extension points (SDK spec §6): interfaces the SDK declares and consuming tools implement.

Python renders the spec's interfaces as `typing.Protocol`s (SDK spec §8.1): any object with a matching
method conforms, no subclassing needed. The spec's `Result<T, E>` is the return value `T | E`: an
implementation returns its error as an `EvaluationError` / `GenerationError` value (SDK spec §6.1-§6.3:
errors "MUST be returned ..., not thrown"). The SDK still treats an exception escaping an implementation
as that implementation's error: `evaluate_indicator` turns it into an `error` verdict.

The SDK ships one implementation, `oatf.cel.DefaultCelEvaluator`. It ships no `SemanticEvaluator` and no
`GenerationProvider` (SDK spec §6.2, §6.3: both are model- and deployment-specific).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from oatf.errors import EvaluationError, GenerationError
from oatf.model import SemanticExamples, SemanticIntentClass, Value

__all__ = ["CelEvaluator", "GenerationProvider", "SemanticEvaluator"]


class CelEvaluator(Protocol):
    """SDK spec §6.1 `CelEvaluator`.

    Contract: support the CEL standard functions `size`, `contains`, `startsWith`, `endsWith`, `matches`,
    `exists`, `all`, `filter`, `map` (or return `EvaluationError(kind=unsupported_method)` for those it
    lacks); be side-effect-free; SHOULD enforce a time limit (100 ms RECOMMENDED); return
    `EvaluationError(kind=type_error)`, not crash, when the expression yields a non-boolean."""

    def evaluate(self, expression: str, context: Mapping[str, Value]) -> Value | EvaluationError:
        """Evaluate the CEL `expression` with the named variables of `context` bound; a boolean, or an
        `EvaluationError`."""
        ...


class SemanticEvaluator(Protocol):
    """SDK spec §6.2 `SemanticEvaluator` (experimental): scores how well `text` matches `intent`.

    Contract: return a score in [0.0, 1.0] or an `EvaluationError` (model unavailable, timeout, malformed
    response); handle `intent_class` None by relying on `intent` and `examples`; MAY calibrate with
    `examples`. The SDK compares the score with `threshold`, or 0.7 when it is None."""

    def evaluate(
        self,
        text: str,
        intent: str,
        intent_class: SemanticIntentClass | str | None,
        threshold: float | None,
        examples: SemanticExamples | None,
    ) -> float | EvaluationError:
        """The confidence (0.0-1.0) that `text` expresses `intent`, or an `EvaluationError`."""
        ...


class GenerationProvider(Protocol):
    """SDK spec §6.3 `GenerationProvider` (experimental): produces protocol-conformant content for
    `synthesize` blocks (format spec §7.4).

    Contract: `prompt` is already interpolated; `protocol` names the binding the output must conform to
    (`mcp`, `a2a`, `ag_ui`); `response_context` carries protocol-specific shaping metadata defined by the
    consuming tool. Return the generated `Value` or a `GenerationError`; the consuming tool validates the
    value against the binding before injecting it."""

    def generate(self, prompt: str, protocol: str, response_context: Value) -> Value | GenerationError:
        """The generated protocol payload, or a `GenerationError`."""
        ...
