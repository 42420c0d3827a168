"""Layers 5–6 (§4) through provider interfaces, against a stub OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from attest_engine.assertions import Providers
from attest_engine.config import EngineConfig
from attest_engine.providers import OpenAICompatible

from .conftest import (
    INITIALIZE,
    StubProvider,
    assertion,
    bag_of_words_vector,
    batch,
    cosine,
    refund_trace,
    request,
    run_engine,
)

REFERENCE = "Your refund has been processed and you will see it in 3 business days."


def providers_for(stub: StubProvider, embedding: bool = True, judge: bool = True, **overrides: Any) -> Providers:
    return Providers(
        embedding=OpenAICompatible(stub.provider_config(**overrides), "embedding") if embedding else None,
        judge=OpenAICompatible(stub.provider_config(**overrides), "llm_judge") if judge else None,
    )


def run(
    stub: StubProvider | None, *assertions: dict[str, Any], config: EngineConfig | None = None, **overrides: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(initialize result, evaluate_batch response) for one batch on the refund trace."""
    providers = providers_for(stub, **overrides) if stub is not None else None
    responses = run_engine(
        [request(0, "initialize", INITIALIZE), batch(1, refund_trace(), *assertions)], config, providers
    )
    return responses[0]["result"], responses[1]


def only(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" in response, response
    (result,) = response["result"]["results"]
    return result


def judge(**spec: Any) -> dict[str, Any]:
    return assertion("j", "llm_judge", **spec)


def embedding(**spec: Any) -> dict[str, Any]:
    return assertion("e", "embedding", **{"target": "output.message", "reference": REFERENCE, **spec})


# ---------------------------------------------------------------------------------------- no provider


def test_without_providers_layers_5_6_are_not_claimed_and_never_pass() -> None:
    for item, key in ((embedding(), "embedding"), (judge(rubric="helpfulness"), "llm_judge")):
        initialized, response = run(None, item)
        assert "layers_5_6" not in initialized["capabilities"]
        assert "result" not in response
        error = response["error"]
        assert error["code"] == 1002 and error["data"]["error_type"] == "ASSERTION_ERROR"
        assert error["message"] == (
            f"assertion '{item['assertion_id']}' failed: {item['type']} assertions need capability layers_5_6, "
            f"and this engine has no {key} provider configured"
        )
        assert f"providers.{key}" in error["data"]["detail"]


def test_requiring_layers_5_6_without_providers_is_incompatible() -> None:
    responses = run_engine([request(0, "initialize", {**INITIALIZE, "required_capabilities": ["layers_5_6"]})])
    assert responses[0]["result"]["compatible"] is False
    assert responses[0]["result"]["missing"] == ["layers_5_6"]


def test_one_provider_is_not_enough_to_claim_layers_5_6(stub: StubProvider) -> None:
    initialized, response = run(stub, embedding(threshold=0.5), judge=False)
    assert "layers_5_6" not in initialized["capabilities"]
    assert only(response)["status"] == "pass"
    _, response = run(stub, judge(rubric="tone"), judge=False)
    assert response["error"]["code"] == 1002


# ------------------------------------------------------------------------------------------ layer 5


def test_embedding_similarity_passes(stub: StubProvider) -> None:
    initialized, response = run(stub, embedding(threshold=0.5), input_cost_per_1k_tokens=0.002)
    assert "layers_5_6" in initialized["capabilities"]
    result = only(response)
    message = refund_trace()["output"]["message"]
    expected = cosine(bag_of_words_vector(REFERENCE), bag_of_words_vector(message))
    assert result["status"] == "pass"
    assert result["score"] == pytest.approx(expected)
    assert result["explanation"] == (
        f"Cosine similarity {expected:.4f} between output.message and reference text meets threshold 0.5."
    )
    assert result["cost"] == pytest.approx(10 * 0.002 / 1000)
    assert response["result"]["total_cost"] == result["cost"]
    path, body = stub.requests[0]
    assert path == "/v1/embeddings"
    assert body == {"model": "stub-model", "input": [REFERENCE, message]}


def test_embedding_below_threshold(stub: StubProvider) -> None:
    far = embedding(reference="Quantum chromodynamics of gluon fields", model="other-embed")
    result = only(run(stub, far)[1])
    assert result["status"] == "hard_fail"
    assert "is below threshold 0.8" in result["explanation"]  # the default threshold
    assert stub.requests[0][1]["model"] == "other-embed"
    assert only(run(stub, {**far, "spec": {**far["spec"], "soft": True}})[1])["status"] == "soft_fail"


@pytest.mark.parametrize("threshold", ["dynamic", 1.5, -0.1, True])
def test_embedding_threshold_must_be_a_number_in_range(stub: StubProvider, threshold: Any) -> None:
    _, response = run(stub, embedding(threshold=threshold))
    assert response["error"]["code"] == 1002
    assert "spec.threshold must be a number from 0.0 to 1.0" in response["error"]["message"]
    assert stub.requests == []


def test_embedding_spec_errors(stub: StubProvider) -> None:
    _, response = run(stub, assertion("e", "embedding", target="output.message"))
    assert response["error"]["message"] == "assertion 'e' failed: spec.reference is required"


# ------------------------------------------------------------------------------------------ layer 6


def test_judge_with_a_builtin_rubric(stub: StubProvider) -> None:
    stub.judge_score = 0.91
    result = only(
        run(
            stub,
            judge(rubric="helpfulness", threshold=0.75, model="gpt-4.1"),
            input_cost_per_1k_tokens=0.01,
            output_cost_per_1k_tokens=0.03,
        )[1]
    )
    assert result["status"] == "pass" and result["score"] == 0.91
    assert result["explanation"] == "Stub judge. Judge score 0.91 for output.message meets threshold 0.75."
    assert result["cost"] == pytest.approx((100 * 0.01 + 20 * 0.03) / 1000)
    path, body = stub.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "gpt-4.1" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    user = body["messages"][1]["content"]
    assert "Does the output directly address the user's request" in user
    assert "I want a refund for order ORD-123" in user and "Refund ID: RFD-001" in user


def test_judge_failure_and_default_threshold(stub: StubProvider) -> None:
    stub.judge_score = 0.69
    result = only(run(stub, judge(rubric="safety"))[1])
    assert result["status"] == "hard_fail" and result["score"] == 0.69
    assert result["explanation"].endswith("is below threshold 0.7.")
    assert only(run(stub, judge(rubric="safety", soft=True))[1])["status"] == "soft_fail"


def test_judge_custom_prompt_placeholders(stub: StubProvider) -> None:
    prompt = "Asked: {{input}}. Answered: {{output}}. Return JSON with score and reason."
    only(run(stub, judge(prompt=prompt, rubric="tone"))[1])
    user = stub.requests[0][1]["messages"][1]["content"]
    assert user == (
        "Asked: I want a refund for order ORD-123. Answered: "
        + refund_trace()["output"]["message"]
        + ". Return JSON with score and reason."
    )


def test_judge_faithfulness_sees_the_retrieved_context(stub: StubProvider) -> None:
    only(run(stub, judge(rubric="faithfulness"))[1])
    user = stub.requests[0][1]["messages"][1]["content"]
    assert "Retrieved context:" in user and '[lookup_order] {"amount":89.99' in user


def test_judge_sdk_criteria(stub: StubProvider) -> None:
    """attest-ai's passes_judge sends rubric "default" with free-text criteria and model null."""
    spec = {
        "target": "output.message",
        "criteria": "Mentions the refund ID",
        "rubric": "default",
        "threshold": 0.8,
        "model": None,
        "soft": False,
    }
    result = only(run(stub, assertion("j", "llm_judge", **spec))[1])
    assert result["status"] == "pass"
    body = stub.requests[0][1]
    assert body["model"] == "stub-model"
    assert "Criterion: Mentions the refund ID" in body["messages"][1]["content"]


def test_judge_spec_errors(stub: StubProvider) -> None:
    _, response = run(stub, judge(rubric="brilliance"))
    assert response["error"]["message"] == "assertion 'j' failed: unknown rubric 'brilliance'"
    _, response = run(stub, judge(threshold=0.5))
    assert response["error"]["message"] == "assertion 'j' failed: llm_judge needs spec.rubric or spec.prompt"
    assert stub.requests == []


@pytest.mark.parametrize(
    "reply",
    ["I think it is great", '{"score": 7, "reason": "out of ten"}', '{"reason": "no score"}', '{"score": "high"}'],
)
def test_judge_reply_must_be_json_with_a_score(stub: StubProvider, reply: str) -> None:
    stub.judge_reply = reply
    _, response = run(stub, judge(rubric="tone"))
    error = response["error"]
    assert error["code"] == 2001 and error["data"]["error_type"] == "PROVIDER_ERROR"
    assert error["data"]["retryable"] is True
    assert error["message"].startswith("judge reply is not JSON with a score from 0.0 to 1.0")


def test_judge_reply_in_a_code_fence_is_accepted(stub: StubProvider) -> None:
    stub.judge_reply = 'Sure:\n```json\n{"score": 0.8, "reason": "Fine."}\n```'
    assert only(run(stub, judge(rubric="tone"))[1])["score"] == 0.8


# ------------------------------------------------------------------------------------- provider errors


def test_transient_failures_are_retried(stub: StubProvider) -> None:
    stub.failures = [429, 500]
    assert only(run(stub, judge(rubric="tone"))[1])["status"] == "pass"
    assert len(stub.requests) == 3


def test_persistent_failures_surface_after_three_attempts(stub: StubProvider) -> None:
    stub.failures = [503, 503, 503]
    _, response = run(stub, embedding())
    error = response["error"]
    assert error["code"] == 2001 and error["data"]["retryable"] is True
    assert error["message"] == f"embedding provider at {stub.base_url} returned HTTP 503: Service Unavailable"
    assert "exponential backoff internally up to 3 attempts" in error["data"]["detail"]
    assert len(stub.requests) == 3


def test_client_errors_are_not_retried(stub: StubProvider) -> None:
    stub.failures = [401]
    _, response = run(stub, judge(rubric="tone"))
    assert response["error"]["code"] == 2001
    assert "HTTP 401" in response["error"]["message"] and "API key" in response["error"]["data"]["detail"]
    assert len(stub.requests) == 1


def test_unreachable_provider(stub: StubProvider) -> None:
    stub.close()
    _, response = run(stub, judge(rubric="tone"))
    assert response["error"]["code"] == 2001
    assert "unreachable" in response["error"]["message"]


def test_provider_timeout_is_retried_then_reported(stub: StubProvider) -> None:
    stub.delay_s = 0.5
    _, response = run(stub, judge(rubric="tone"), timeout_s=0.1, max_attempts=2)
    assert response["error"]["code"] == 2001
    assert response["error"]["message"] == f"llm_judge provider at {stub.base_url} timed out after 0.1s"


def test_evaluation_timeout(stub: StubProvider) -> None:
    stub.delay_s = 2.0
    _, response = run(stub, judge(rubric="tone"), config=EngineConfig(eval_timeout_s=0.3))
    error = response["error"]
    assert error["code"] == 3002 and error["message"] == "evaluation timed out after 300ms"
    assert error["data"]["error_type"] == "TIMEOUT" and error["data"]["retryable"] is True
    assert "--eval-timeout" in error["data"]["detail"]


# ------------------------------------------------------------------------------- ordering and caching


def test_short_circuit_skips_provider_layers_after_a_hard_failure(stub: StubProvider) -> None:
    failing = assertion("c", "content", target="output.message", check="contains", value="apology")
    _, response = run(stub, failing, judge(rubric="tone", soft=True), config=EngineConfig(short_circuit=True))
    by_id = {item["assertion_id"]: item for item in response["result"]["results"]}
    assert by_id["j"] == {
        "assertion_id": "j",
        "status": "soft_fail",
        "score": 0.0,
        "explanation": "Not evaluated: short_circuit is on and assertion 'c' (layer 4) hard-failed.",
        "cost": 0.0,
        "duration_ms": 0,
        "type": "llm_judge",
        "layer": 6,
        "skipped": True,
    }
    assert stub.requests == []
    # Off by default: every layer runs.
    _, response = run(stub, failing, judge(rubric="tone"))
    assert [item["status"] for item in response["result"]["results"]] == ["hard_fail", "pass"]


def test_layers_run_in_order_and_results_keep_request_order(stub: StubProvider) -> None:
    items = [
        judge(rubric="tone"),
        embedding(threshold=0.1),
        assertion("s", "schema", target="output", schema={"type": "object"}),
    ]
    _, response = run(stub, *items)
    assert [item["assertion_id"] for item in response["result"]["results"]] == ["j", "e", "s"]
    assert [path for path, _ in stub.requests] == ["/v1/embeddings", "/v1/chat/completions"]


def test_provider_results_are_cached_by_request_id(stub: StubProvider) -> None:
    item = {**judge(rubric="tone"), "request_id": "req_judge"}
    twin = {**item, "assertion_id": "j2"}
    providers = providers_for(stub)
    responses = run_engine(
        [request(0, "initialize", INITIALIZE), batch(1, refund_trace(), item, twin), batch(2, refund_trace(), item)],
        None,
        providers,
        sequential=True,
    )
    first, repeat = responses[1]["result"]["results"]
    assert first["cost"] == 0.0 and "cached" not in first
    assert repeat["cached"] is True and repeat["assertion_id"] == "j2"
    assert responses[2]["result"]["results"][0]["cached"] is True
    assert len(stub.requests) == 1


def test_a_retried_batch_reuses_finished_results(stub: StubProvider) -> None:
    """Results are cached as they finish: after a provider error, a retry re-runs only what failed."""
    good = {**embedding(threshold=0.1), "request_id": "r_embed"}
    bad = {**judge(rubric="tone"), "request_id": "r_judge"}
    stub.judge_reply = "not json"
    outcomes: list[str] = []

    class Switch(OpenAICompatible):
        async def complete(self, *args: Any) -> Any:
            completion = await super().complete(*args)
            stub.judge_reply = None  # the judge recovers after its first bad reply
            outcomes.append(completion.text)
            return completion

    providers = Providers(
        embedding=OpenAICompatible(stub.provider_config(), "embedding"),
        judge=Switch(stub.provider_config(), "llm_judge"),
    )
    responses = run_engine(
        [
            request(0, "initialize", INITIALIZE),
            batch(1, refund_trace(), good, bad),
            batch(2, refund_trace(), good, bad),
        ],
        None,
        providers,
        sequential=True,
    )
    assert responses[1]["error"]["code"] == 2001
    embedded, judged = responses[2]["result"]["results"]
    assert embedded["cached"] is True and "cached" not in judged and judged["status"] == "pass"
    assert [path for path, _ in stub.requests] == ["/v1/embeddings", "/v1/chat/completions", "/v1/chat/completions"]
    assert len(outcomes) == 2


def test_short_circuit_between_provider_layers(stub: StubProvider) -> None:
    far = embedding(reference="Quantum chromodynamics of gluon fields")
    _, response = run(stub, far, judge(rubric="tone"), config=EngineConfig(short_circuit=True))
    statuses = [(item["status"], item.get("skipped", False)) for item in response["result"]["results"]]
    assert statuses == [("hard_fail", False), ("hard_fail", True)]
    assert [path for path, _ in stub.requests] == ["/v1/embeddings"]
