"""`evaluate_batch` (Attest protocol v1 §2.2, §4 evaluation order, §5 errors, §7 validation).

One batch: validate the trace (§7; INVALID_TRACE before any assertion runs), compile every assertion
(ASSERTION_ERROR before any assertion runs), then evaluate in layer order — layers 1–4 on a worker
thread, then layer 5, then layer 6 through their providers — and answer the results in request order.

- `soft: true` turns a failure into `soft_fail`; otherwise a failure is `hard_fail`.
- `request_id`: a result already computed for that key (same assertion, same trace_id) is returned from the
  idempotency cache, marked `"cached": true`, with `cost` 0 and `duration_ms` 0 since nothing was spent
  again. Results are cached as soon as they are computed, so a batch retried after a provider error or a
  timeout re-evaluates only what had not finished.
- Short-circuit (§4 "can short-circuit ... engine decides based on configuration"): off by default. With
  `short_circuit: true` in the config, once an assertion has hard-failed, the provider-backed layers not
  yet run (5, then 6) are not sent to their providers; their assertions are answered with
  `"skipped": true`, score 0.0, `hard_fail` (`soft_fail` if soft) and an explanation naming the hard
  failure. Layers 1–4 always all run: they are free.
- The whole batch is bounded by `eval_timeout_s` (`--eval-timeout`): past it the answer is TIMEOUT (3002).
- Each result also carries `type` and `layer` (fields the attest-ai SDK reads; §6 lets clients ignore them).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from concurrent.futures import Executor
from time import perf_counter
from typing import Any, cast

from .assertions import Assertion, Providers, compile_assertions, failed
from .checks import DeterministicCheck, Outcome, ProviderCheck, SpecError, TraceView
from .config import EngineConfig
from .errors import clip, invalid_params, invalid_trace, provider_error, timeout_error
from .idempotency import IdempotencyCache, ReusedRequestId
from .logs import JsonLogger
from .providers import ProviderFailure
from .trace_validation import validate_trace

EXPLANATION_CHARS = 1000
"""Bound on each explanation."""

RESPONSE_LINE_BUDGET = 60_000
"""The attest-ai SDK reads response lines with asyncio's 64 KiB limit: when a batch's results would encode
to more than this, explanations (only they) are shortened until they fit or reach `_SHORTEST_EXPLANATION`."""

_SHORTEST_EXPLANATION = 60

_PROVIDER_CALLS_PER_BATCH = 8


def _fit_line(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`results` with explanations shortened as needed to keep the response line within budget."""
    limit = EXPLANATION_CHARS
    while limit > _SHORTEST_EXPLANATION and len(json.dumps(results, separators=(",", ":"))) > RESPONSE_LINE_BUDGET:
        limit = max(_SHORTEST_EXPLANATION, limit // 2)
        results = [{**result, "explanation": clip(result["explanation"], limit)} for result in results]
    return results


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _wire(assertion: Assertion, outcome: Outcome, duration_ms: int) -> dict[str, Any]:
    """The §2.2 result object for `assertion`."""
    status = "pass" if outcome.passed else "soft_fail" if assertion.soft else "hard_fail"
    score = outcome.score if math.isfinite(outcome.score) else 0.0
    result: dict[str, Any] = {
        "assertion_id": assertion.assertion_id,
        "status": status,
        "score": min(1.0, max(0.0, float(score))),
        "explanation": clip(outcome.explanation, EXPLANATION_CHARS),
        "cost": outcome.cost if math.isfinite(outcome.cost) else 0.0,
        "duration_ms": duration_ms,
        "type": assertion.type,
        "layer": assertion.layer,
    }
    if assertion.request_id is not None:
        result["request_id"] = assertion.request_id
    return result


class BatchEvaluator:
    """Evaluates `evaluate_batch` requests; keeps the idempotency cache and the evaluation counter."""

    def __init__(self, config: EngineConfig, providers: Providers, logger: JsonLogger, executor: Executor) -> None:
        self._config = config
        self._providers = providers
        self._logger = logger
        self._executor = executor
        self._cache = IdempotencyCache(config.idempotency_cache_entries)
        self._warned_deprecated = False
        self.assertions_evaluated = 0
        """Assertions actually evaluated (not answered from the cache, not skipped), all batches."""

    async def evaluate(self, params: Any, trace_size_bytes: int | None) -> dict[str, Any]:
        """The `evaluate_batch` result for `params`; raises `RpcError` for an error answer."""
        cancelled = threading.Event()
        try:
            async with asyncio.timeout(self._config.eval_timeout_s):
                return await self._evaluate(params, trace_size_bytes, cancelled)
        except TimeoutError:
            cancelled.set()
            raise timeout_error(
                self._config.eval_timeout_s,
                "LLM-backed assertions (layers 5-6) can be slow. Reduce batch size or increase the engine "
                "timeout via --eval-timeout flag.",
            ) from None

    async def _evaluate(self, params: Any, size: int | None, cancelled: threading.Event) -> dict[str, Any]:
        started = perf_counter()
        loop = asyncio.get_running_loop()
        view, assertions, results, evaluated = await loop.run_in_executor(
            self._executor, self._prepare_and_run_deterministic, params, size, cancelled
        )
        later = [assertion for assertion in assertions if assertion.index not in results]
        slots = asyncio.Semaphore(_PROVIDER_CALLS_PER_BATCH)
        for layer in sorted({assertion.layer for assertion in later}):
            in_layer = [assertion for assertion in later if assertion.layer == layer]
            failures = (result for result in results.values() if result["status"] == "hard_fail")
            hard_failure = next(failures, None) if self._config.short_circuit else None
            if hard_failure is not None:
                for assertion in in_layer:
                    results[assertion.index] = self._skipped(assertion, hard_failure)
            else:
                evaluated += await self._run_provider_layer(in_layer, view, results, slots)
        self.assertions_evaluated += evaluated
        ordered = _fit_line([results[assertion.index] for assertion in assertions])
        total_ms = _ms(perf_counter() - started)
        self._logger.info(
            "evaluation complete",
            trace_id=view.trace["trace_id"],
            assertions=len(ordered),
            evaluated=evaluated,
            duration_ms=total_ms,
        )
        return {
            "results": ordered,
            "total_cost": math.fsum(result["cost"] for result in ordered),
            "total_duration_ms": total_ms,
        }

    def _prepare_and_run_deterministic(
        self, params: Any, size: int | None, cancelled: threading.Event
    ) -> tuple[TraceView, list[Assertion], dict[int, dict[str, Any]], int]:
        """Worker thread: §7 validation, compilation, then layers 1–4 in layer order."""
        if not isinstance(params, dict):
            raise invalid_params(
                "evaluate_batch params must be an object", 'Send {"trace": ..., "assertions": [...]} (§2.2).'
            )
        if "trace" not in params:
            raise invalid_trace("evaluate_batch params missing required field: trace", "Send the trace to evaluate.")
        trace = params["trace"]
        error = validate_trace(
            trace,
            limits=self._config.limits,
            strict_step_types=self._config.strict_step_types,
            size_bytes=size,
            warn=self._warn_deprecated,
        )
        if error is not None:
            raise invalid_trace(error.message, error.detail)
        assertions = compile_assertions(params.get("assertions"), trace["trace_id"], self._providers)
        view = TraceView(trace)
        results: dict[int, dict[str, Any]] = {}
        evaluated = 0
        for assertion in sorted(assertions, key=lambda a: a.layer):
            if assertion.layer > 4:
                break
            if cancelled.is_set():
                break
            cached = self._cached(assertion)
            if cached is not None:
                results[assertion.index] = cached
                continue
            begun = perf_counter()
            try:
                outcome = cast(DeterministicCheck, assertion.check)(view)  # layers 1–4: synchronous checks
            except SpecError as exc:
                raise failed(f"'{assertion.assertion_id[:200]}'", exc.reason, exc.detail) from None
            results[assertion.index] = self._store(assertion, _wire(assertion, outcome, _ms(perf_counter() - begun)))
            evaluated += 1
        return view, assertions, results, evaluated

    async def _run_provider_layer(
        self,
        assertions: list[Assertion],
        view: TraceView,
        results: dict[int, dict[str, Any]],
        slots: asyncio.Semaphore,
    ) -> int:
        """Runs one provider-backed layer's assertions concurrently; the number actually evaluated."""
        firsts: dict[str, Assertion] = {}
        runs: list[Assertion] = []
        repeats: list[Assertion] = []
        for assertion in assertions:
            key = assertion.request_id
            if key is not None and key in firsts:
                repeats.append(assertion)  # same request_id in this batch: answered from the first's result
                continue
            if key is not None:
                firsts[key] = assertion
            cached = self._cached(assertion)
            if cached is not None:
                results[assertion.index] = cached
            else:
                runs.append(assertion)

        async def run(assertion: Assertion) -> None:
            async with slots:
                begun = perf_counter()
                try:
                    outcome = await cast(ProviderCheck, assertion.check)(view)  # layers 5–6: provider checks
                except ProviderFailure as exc:
                    raise provider_error(exc.message, exc.detail) from None
            results[assertion.index] = self._store(assertion, _wire(assertion, outcome, _ms(perf_counter() - begun)))

        try:
            async with asyncio.TaskGroup() as group:
                for assertion in runs:
                    group.create_task(run(assertion))
        except BaseExceptionGroup as errors:
            raise errors.exceptions[0] from None
        for assertion in repeats:
            first = firsts[assertion.request_id]  # type: ignore[index]
            results[assertion.index] = self._as_cached(assertion, results[first.index])
        return len(runs)

    def _cached(self, assertion: Assertion) -> dict[str, Any] | None:
        if assertion.request_id is None or assertion.fingerprint is None:
            return None
        try:
            cached = self._cache.get(assertion.request_id, assertion.fingerprint)
        except ReusedRequestId:
            raise failed(
                f"'{assertion.assertion_id[:200]}'",
                f"request_id '{assertion.request_id[:200]}' was already used for a different assertion or trace",
                "A request_id is an idempotency key: reuse it only to resubmit the same assertion on the same trace.",
            ) from None
        return None if cached is None else self._as_cached(assertion, cached)

    @staticmethod
    def _as_cached(assertion: Assertion, cached: dict[str, Any]) -> dict[str, Any]:
        return {**cached, "assertion_id": assertion.assertion_id, "cost": 0.0, "duration_ms": 0, "cached": True}

    def _store(self, assertion: Assertion, result: dict[str, Any]) -> dict[str, Any]:
        if assertion.request_id is not None and assertion.fingerprint is not None:
            self._cache.put(assertion.request_id, assertion.fingerprint, result)
        return result

    @staticmethod
    def _skipped(assertion: Assertion, hard_failure: dict[str, Any]) -> dict[str, Any]:
        outcome = Outcome(
            False,
            0.0,
            f"Not evaluated: short_circuit is on and assertion '{hard_failure['assertion_id'][:200]}' "
            f"(layer {hard_failure['layer']}) hard-failed.",
        )
        return {**_wire(assertion, outcome, 0), "skipped": True}

    def _warn_deprecated(self, message: str) -> None:
        if not self._warned_deprecated:  # once per process: stderr may be a pipe nobody reads
            self._warned_deprecated = True
            self._logger.warn(message)
