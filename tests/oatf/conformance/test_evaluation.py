"""Conformance: indicator evaluation and verdicts (SDK spec §4.2-§4.5) against `evaluate/*.yaml` and
`verdict/*.yaml` (FIXTURE-SCHEMA.md §B "Evaluation Tests", "Verdict Tests")."""

from __future__ import annotations

from typing import Any

import pytest

from oatf.cel import DefaultCelEvaluator
from oatf.errors import EvaluationError
from oatf.evaluation import evaluate_expression, evaluate_indicator
from oatf.model import (
    AttackResult,
    EvaluationSummary,
    Indicator,
    IndicatorResult,
    IndicatorVerdict,
    SemanticExamples,
    SemanticIntentClass,
)
from oatf.verdict import compute_verdict
from tests.oatf.conformance.fixtures import suite_cases


class MockSemanticEvaluator:
    """FIXTURE-SCHEMA.md: "the test runner configures its SemanticEvaluator mock to return the specified
    mock_score". It records each call, so the tests can check what the SDK passed."""

    def __init__(self, score: float):
        self.score = score
        self.calls: list[tuple[str, str, SemanticIntentClass | str | None, float | None, SemanticExamples | None]] = []

    def evaluate(
        self,
        text: str,
        intent: str,
        intent_class: SemanticIntentClass | str | None,
        threshold: float | None,
        examples: SemanticExamples | None,
    ) -> float:
        self.calls.append((text, intent, intent_class, threshold, examples))
        return self.score


@pytest.mark.parametrize("case", suite_cases("evaluate/pattern.yaml"))
def test_evaluate_pattern(case: dict[str, Any]) -> None:
    verdict = evaluate_indicator(Indicator.from_dict(case["input"]["indicator"]), case["input"]["message"])
    assert verdict.result == IndicatorResult(case["expected"]), verdict.evidence
    if verdict.result is IndicatorResult.MATCHED:
        assert verdict.evidence  # says what matched, and where


@pytest.mark.parametrize("case", suite_cases("evaluate/expression.yaml"))
def test_evaluate_expression(case: dict[str, Any]) -> None:
    indicator = Indicator.from_dict(case["input"]["indicator"])
    evaluator = DefaultCelEvaluator() if case["input"]["cel_evaluator"] == "present" else None
    verdict = evaluate_indicator(indicator, case["input"]["message"], cel_evaluator=evaluator)
    assert verdict.result == IndicatorResult(case["expected"]), verdict.evidence
    if "expected_error_kind" in case:
        assert indicator.expression is not None
        error = evaluate_expression(indicator.expression, case["input"]["message"], evaluator)
        assert isinstance(error, EvaluationError)
        assert error.kind == case["expected_error_kind"]
        assert verdict.evidence is not None and verdict.evidence.startswith(case["expected_error_kind"])


@pytest.mark.parametrize("case", suite_cases("evaluate/semantic.yaml"))
def test_evaluate_semantic(case: dict[str, Any]) -> None:
    indicator = Indicator.from_dict(case["input"]["indicator"])
    settings = case["input"]["semantic_evaluator"]
    evaluator = MockSemanticEvaluator(settings["mock_score"]) if settings["present"] else None
    verdict = evaluate_indicator(indicator, case["input"]["message"], semantic_evaluator=evaluator)
    assert verdict.result == IndicatorResult(case["expected"]), verdict.evidence
    if evaluator is not None and verdict.result is not IndicatorResult.NOT_MATCHED:
        assert indicator.semantic is not None
        # SDK spec §4.4 step 1b: the indicator's own threshold (None when absent) is passed through.
        assert {call[3] for call in evaluator.calls} == {indicator.semantic.threshold}


@pytest.mark.parametrize("case", suite_cases("verdict/any.yaml", "verdict/all.yaml"))
def test_compute_verdict(case: dict[str, Any]) -> None:
    given = case["input"]
    indicators = [Indicator.from_dict(raw) for raw in given["indicators"]]
    verdicts = {
        raw["indicator_id"]: IndicatorVerdict(
            indicator_id=raw["indicator_id"], result=IndicatorResult(raw["result"]), timestamp=raw.get("timestamp")
        )
        for raw in given["verdicts"]
    }
    verdict = compute_verdict(indicators, verdicts, logic=given["correlation_logic"])
    assert verdict.result == AttackResult(case["expected"]["result"])
    assert verdict.evaluation_summary == EvaluationSummary(**case["expected"]["evaluation_summary"])
    assert [v.indicator_id for v in verdict.indicator_verdicts] == [i.id for i in indicators]
