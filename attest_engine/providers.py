"""Provider interfaces for layers 5 and 6 (Attest protocol v1 §4 "Layer 5", "Layer 6"; §5 PROVIDER_ERROR).

`EmbeddingProvider` turns texts into vectors; `ChatProvider` runs one chat completion. `OpenAICompatible`
implements both against an OpenAI-compatible HTTP API (`POST {base_url}/embeddings`,
`POST {base_url}/chat/completions`), selected and configured in the engine's `--config` file.

Failures are `ProviderFailure` (PROVIDER_ERROR, 2001, retryable). As §5 describes, the engine retries
internally first: HTTP 429, HTTP 5xx, timeouts and connection errors are retried with exponential backoff,
up to `max_attempts` (default 3) attempts; other HTTP errors (401, 404, ...) and malformed replies fail at
once. Cost is usage tokens times the configured per-1,000-token prices (0 when none are configured).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from .config import ProviderConfig

_RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


class ProviderFailure(Exception):
    """A provider call failed for good (§5 PROVIDER_ERROR): `message` and actionable `detail`."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Embeddings:
    """One vector per input text, in order, and what the call cost in USD."""

    vectors: list[list[float]]
    cost: float


@dataclass(frozen=True, slots=True)
class Completion:
    """The assistant's reply text and what the call cost in USD."""

    text: str
    cost: float


class EmbeddingProvider(Protocol):
    """Layer 5 provider."""

    name: str

    async def embed(self, texts: list[str], model: str | None) -> Embeddings: ...

    async def aclose(self) -> None: ...


class ChatProvider(Protocol):
    """Layer 6 provider."""

    name: str

    async def complete(self, system: str, user: str, model: str | None, json_reply: bool) -> Completion: ...

    async def aclose(self) -> None: ...


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


class OpenAICompatible:
    """An OpenAI-compatible HTTP endpoint, usable as `EmbeddingProvider` and `ChatProvider`."""

    def __init__(self, config: ProviderConfig, kind: str) -> None:
        self.config = config
        self.name = f"{kind} provider at {config.base_url}"
        headers = {"content-type": "application/json"}
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            base_url=config.base_url.rstrip("/") + "/", headers=headers, timeout=config.timeout_s
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def _cost(self, usage: Any) -> float:
        if not isinstance(usage, dict):
            return 0.0
        prompt = _number(usage.get("prompt_tokens", usage.get("total_tokens")))
        completion = _number(usage.get("completion_tokens"))
        return (
            prompt * self.config.input_cost_per_1k_tokens + completion * self.config.output_cost_per_1k_tokens
        ) / 1000

    async def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST `payload`, retrying transient failures with exponential backoff; the JSON reply object."""
        attempts = self.config.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                response = await self._client.post(path, json=payload)
            except httpx.TimeoutException:
                failure = ProviderFailure(
                    f"{self.name} timed out after {self.config.timeout_s:g}s",
                    f"Wait and retry, or raise timeout_s in the engine config. Tried {attempt} time(s).",
                )
            except httpx.HTTPError as exc:
                failure = ProviderFailure(
                    f"{self.name} unreachable: {type(exc).__name__}: {exc}",
                    f"Check base_url in the engine config and that the endpoint is up. Tried {attempt} time(s).",
                )
            else:
                if response.status_code < 400:
                    try:
                        reply = response.json()
                    except ValueError:
                        reply = None
                    if not isinstance(reply, dict):
                        raise ProviderFailure(
                            f"{self.name} returned a reply that is not a JSON object",
                            "Check that base_url points at an OpenAI-compatible API.",
                        )
                    return reply
                reason = response.reason_phrase or "error"
                failure = ProviderFailure(
                    f"{self.name} returned HTTP {response.status_code}: {reason}",
                    f"Wait and retry. The engine applies exponential backoff internally up to {attempts} "
                    "attempts before surfacing this error."
                    if response.status_code in _RETRIED_STATUS
                    else "Check the API key (api_key_env), the model name and base_url in the engine config.",
                )
                if response.status_code not in _RETRIED_STATUS:
                    raise failure
            if attempt < attempts:
                await asyncio.sleep(self.config.backoff_s * 2 ** (attempt - 1))
        raise failure

    async def embed(self, texts: list[str], model: str | None) -> Embeddings:
        """`POST /embeddings` for `texts`."""
        reply = await self._post("embeddings", {"model": model or self.config.model, "input": texts})
        data = reply.get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            raise ProviderFailure(
                f"{self.name} returned {len(data) if isinstance(data, list) else 'no'} embeddings for "
                f"{len(texts)} inputs",
                "Check that base_url points at an OpenAI-compatible embeddings API.",
            )
        ordered = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
        vectors = [item.get("embedding") if isinstance(item, dict) else None for item in ordered]
        if not all(
            isinstance(vector, list) and vector and all(isinstance(x, int | float) for x in vector)
            for vector in vectors
        ):
            raise ProviderFailure(
                f"{self.name} returned a malformed embedding", "Each data[].embedding must be an array of numbers."
            )
        return Embeddings(vectors, self._cost(reply.get("usage")))  # type: ignore[arg-type]

    async def complete(self, system: str, user: str, model: str | None, json_reply: bool) -> Completion:
        """`POST /chat/completions` with a system and a user message, temperature 0."""
        payload: dict[str, Any] = {
            "model": model or self.config.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
        }
        if json_reply and self.config.json_mode:
            payload["response_format"] = {"type": "json_object"}
        reply = await self._post("chat/completions", payload)
        try:
            text = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            text = None
        if not isinstance(text, str):
            raise ProviderFailure(
                f"{self.name} returned no choices[0].message.content",
                "Check that base_url points at an OpenAI-compatible chat completions API.",
            )
        return Completion(text, self._cost(reply.get("usage")))
