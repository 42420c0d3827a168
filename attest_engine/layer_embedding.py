"""Layer 5 — Embedding Similarity (Attest protocol v1 §4 "Layer 5"; capability `layers_5_6`).

Embeds the reference text and the text the target selects with the configured `EmbeddingProvider` and
compares them by cosine similarity. Passes when the similarity is at least `threshold` (default 0.8).
The score is the similarity clamped to [0, 1] (cosine similarity may be negative). When the target
selects several values, each is compared and the lowest similarity decides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .checks import Outcome, ProviderCheck, TraceView, as_text, field, not_found, target, threshold
from .providers import EmbeddingProvider, ProviderFailure

DEFAULT_THRESHOLD = 0.8


def cosine_similarity(a: list[float], b: list[float]) -> float:
    """cos(a, b); raises `ProviderFailure` for vectors that can't be compared."""
    if len(a) != len(b):
        raise ProviderFailure(
            f"embedding vectors have different dimensions ({len(a)} and {len(b)})",
            "Use one embedding model for the reference and the output.",
        )
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norm == 0.0 or not math.isfinite(norm):
        raise ProviderFailure("embedding provider returned a zero or non-finite vector", "Check the embedding model.")
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norm


def compile_embedding(spec: Mapping[str, Any], provider: EmbeddingProvider) -> ProviderCheck:
    """The layer 5 check for `spec` (`target`, `reference`, `threshold`, `model`)."""
    selector = target(spec)
    reference = field(spec, "reference", str, "the reference text", required=True)
    minimum = threshold(spec, DEFAULT_THRESHOLD)
    model = field(spec, "model", str, "an embedding model name", required=False)

    async def check(view: TraceView) -> Outcome:
        selection = view.select(selector)
        if not selection.values:
            return not_found(selection, selector)
        embeddings = await provider.embed([reference, *(as_text(value) for _, value in selection.values)], model)
        similarities = [cosine_similarity(embeddings.vectors[0], vector) for vector in embeddings.vectors[1:]]
        worst = min(range(len(similarities)), key=similarities.__getitem__)
        similarity = similarities[worst]
        passed = similarity >= minimum
        relation = "meets" if passed else "is below"
        return Outcome(
            passed,
            min(1.0, max(0.0, similarity)),
            f"Cosine similarity {similarity:.4f} between {selection.values[worst][0]} and reference text "
            f"{relation} threshold {minimum:g}.",
            embeddings.cost,
        )

    return check
