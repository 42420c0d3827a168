"""Assertion objects of an `evaluate_batch` request (Attest protocol v1 §2.2, §4, §5 ASSERTION_ERROR, §6 rule 4).

`compile_assertions` checks each assertion object (`assertion_id`, `type`, `spec`, optional `request_id`)
and compiles its spec with the layer module for its type, before anything is evaluated. Any problem is an
ASSERTION_ERROR (1002) for the whole request, naming the assertion, as in the §5 example: an invalid
regex, a malformed JSON Schema, an unsupported target expression, an unknown assertion type, a missing or
mistyped spec field, an `assertion_id` used twice, or a layer 5–6 assertion when no provider for it is
configured (the engine then does not claim `layers_5_6`, and never fabricates a result).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .checks import DeterministicCheck, ProviderCheck, SpecError, show
from .errors import RpcError, assertion_error, invalid_params
from .idempotency import fingerprint
from .layer_constraint import compile_constraint
from .layer_content import compile_content
from .layer_embedding import compile_embedding
from .layer_judge import compile_judge
from .layer_schema import compile_schema
from .layer_trace import compile_trace_check
from .providers import ChatProvider, EmbeddingProvider

LAYERS = {"schema": 1, "constraint": 2, "trace": 3, "content": 4, "embedding": 5, "llm_judge": 6}
"""§4: assertion type → layer; lower layers are cheaper and run first."""

DETERMINISTIC: dict[str, Callable[[Mapping[str, Any]], DeterministicCheck]] = {
    "schema": compile_schema,
    "constraint": compile_constraint,
    "trace": compile_trace_check,
    "content": compile_content,
}


@dataclass(frozen=True, slots=True)
class Providers:
    """The configured layer 5 and layer 6 providers, if any."""

    embedding: EmbeddingProvider | None = None
    judge: ChatProvider | None = None

    @property
    def complete(self) -> bool:
        """Both layers can run: the engine claims `layers_5_6`."""
        return self.embedding is not None and self.judge is not None


@dataclass(frozen=True, slots=True)
class Assertion:
    """One compiled assertion of a batch; `index` is its position in the request."""

    index: int
    assertion_id: str
    type: str
    layer: int
    soft: bool
    request_id: str | None
    fingerprint: str | None
    check: DeterministicCheck | ProviderCheck


def failed(label: str, reason: str, detail: str) -> RpcError:
    """§5 ASSERTION_ERROR for the assertion `label` ("'assert_007'" or "#3")."""
    return assertion_error(f"assertion {label} failed: {reason}", detail)


def _provider_check(kind: str, spec: Mapping[str, Any], providers: Providers) -> ProviderCheck:
    if kind == "embedding":
        if providers.embedding is None:
            raise _no_provider(kind, "embedding")
        return compile_embedding(spec, providers.embedding)
    if providers.judge is None:
        raise _no_provider(kind, "llm_judge")
    return compile_judge(spec, providers.judge)


def _no_provider(kind: str, key: str) -> SpecError:
    return SpecError(
        f"{kind} assertions need capability layers_5_6, and this engine has no {key} provider configured",
        f"Configure providers.{key} in the engine's --config file (an OpenAI-compatible endpoint), or gate "
        "layer 5-6 assertions on the layers_5_6 capability from initialize.",
    )


def _compile_one(index: int, raw: Any, trace_id: str, providers: Providers) -> Assertion:
    label = f"#{index}"
    if not isinstance(raw, dict):
        raise failed(label, f"an assertion must be an object, got {show(raw)}", "See §2.2 assertion object fields.")
    assertion_id = raw.get("assertion_id")
    if not isinstance(assertion_id, str) or not assertion_id:
        raise failed(label, "assertion_id must be a non-empty string", "Give every assertion a unique assertion_id.")
    label = f"'{assertion_id[:200]}'"
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in LAYERS:
        raise failed(
            label,
            f"unknown assertion type {show(kind)}",
            f"This engine supports {', '.join(LAYERS)}. Gate newer assertion types on capability checks.",
        )
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise failed(label, f"spec must be an object, got {show(spec)}", f"See §4 for the {kind} spec fields.")
    request_id = raw.get("request_id")
    if request_id is not None and not isinstance(request_id, str):
        raise failed(label, f"request_id must be a string, got {show(request_id)}", "Use a string idempotency key.")
    try:
        soft = spec.get("soft", False)
        if soft is None:
            soft = False
        if not isinstance(soft, bool):
            raise SpecError(f"spec.soft must be a boolean, got {show(soft)}", "Set spec.soft to true or false.")
        check = DETERMINISTIC[kind](spec) if kind in DETERMINISTIC else _provider_check(kind, spec, providers)
    except SpecError as exc:
        raise failed(label, exc.reason, exc.detail) from None
    return Assertion(
        index=index,
        assertion_id=assertion_id,
        type=kind,
        layer=LAYERS[kind],
        soft=soft,
        request_id=request_id,
        fingerprint=None if request_id is None else fingerprint(kind, spec, trace_id),
        check=check,
    )


def compile_assertions(raw: Any, trace_id: str, providers: Providers) -> list[Assertion]:
    """Compiled assertions of a batch, in request order; raises the batch's `RpcError` otherwise."""
    if not isinstance(raw, list):
        raise invalid_params(
            f"evaluate_batch params.assertions must be an array, got {show(raw)}",
            "Send params.assertions as an array of assertion objects (§2.2).",
        )
    compiled = [_compile_one(index, item, trace_id, providers) for index, item in enumerate(raw)]
    seen_ids: set[str] = set()
    seen_requests: dict[str, str | None] = {}
    for assertion in compiled:
        label = f"'{assertion.assertion_id[:200]}'"
        if assertion.assertion_id in seen_ids:
            raise failed(label, "assertion_id is not unique within the batch", "Give each assertion its own id.")
        seen_ids.add(assertion.assertion_id)
        if assertion.request_id is not None:
            earlier = seen_requests.setdefault(assertion.request_id, assertion.fingerprint)
            if earlier != assertion.fingerprint:
                raise failed(
                    label,
                    f"request_id {show(assertion.request_id)} is used for two different assertions",
                    "A request_id is an idempotency key: reuse it only to resubmit the same assertion.",
                )
    return compiled
