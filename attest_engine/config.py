"""Engine configuration: the `--config` JSON file (Attest protocol v1 §1.4 step 1, §1.5, §4 layers 5–6, §7).

Every key is optional; the file is checked against `CONFIG_SCHEMA` (unknown keys are rejected, so a typo is
an error rather than a silently ignored setting). `--eval-timeout` on the command line overrides
`eval_timeout_s`. See attest_engine/README.md for the meaning of each key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from .trace_validation import TraceLimits

_PROVIDER_COMMON: dict[str, Any] = {
    "base_url": {"type": "string", "minLength": 1},
    "model": {"type": "string", "minLength": 1},
    "api_key_env": {"type": "string", "minLength": 1},
    "timeout_s": {"type": "number", "exclusiveMinimum": 0},
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 10},
    "backoff_s": {"type": "number", "minimum": 0},
}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_concurrent_requests": {"type": "integer", "minimum": 1},
        "max_inflight_bytes": {"type": "integer", "minimum": 1},
        "max_message_bytes": {"type": "integer", "minimum": 1024},
        "eval_timeout_s": {"type": "number", "exclusiveMinimum": 0},
        "drain_timeout_s": {"type": "number", "minimum": 0},
        "strict_step_types": {"type": "boolean"},
        "short_circuit": {"type": "boolean"},
        "idempotency_cache_entries": {"type": "integer", "minimum": 0},
        "report_path": {"type": "string", "minLength": 1},
        "providers": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "embedding": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["base_url", "model"],
                    "properties": {**_PROVIDER_COMMON, "cost_per_1k_tokens": {"type": "number", "minimum": 0}},
                },
                "llm_judge": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["base_url", "model"],
                    "properties": {
                        **_PROVIDER_COMMON,
                        "input_cost_per_1k_tokens": {"type": "number", "minimum": 0},
                        "output_cost_per_1k_tokens": {"type": "number", "minimum": 0},
                        "json_mode": {"type": "boolean"},
                    },
                },
            },
        },
    },
}


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """An OpenAI-compatible HTTP endpoint for layer 5 (`/embeddings`) or layer 6 (`/chat/completions`)."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 30.0
    max_attempts: int = 3
    backoff_s: float = 0.5
    input_cost_per_1k_tokens: float = 0.0
    output_cost_per_1k_tokens: float = 0.0
    json_mode: bool = True


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the engine can be configured with; the defaults are the §1.5 / §2.1 / §7 figures."""

    max_concurrent_requests: int = 64
    max_inflight_bytes: int = 256 * 1024 * 1024
    max_message_bytes: int = 32 * 1024 * 1024
    eval_timeout_s: float = 30.0
    drain_timeout_s: float = 30.0
    strict_step_types: bool = False
    short_circuit: bool = False
    idempotency_cache_entries: int = 10_000
    report_path: str | None = None
    embedding: ProviderConfig | None = None
    llm_judge: ProviderConfig | None = None
    limits: TraceLimits = field(default_factory=TraceLimits)


class ConfigError(ValueError):
    """The `--config` file can't be read or doesn't match `CONFIG_SCHEMA`."""


def _provider(raw: dict[str, Any] | None, *, cost_key: str = "input_cost_per_1k_tokens") -> ProviderConfig | None:
    if raw is None:
        return None
    values = dict(raw)
    if "cost_per_1k_tokens" in values:
        values[cost_key] = values.pop("cost_per_1k_tokens")
    return ProviderConfig(**values)


def config_from_mapping(raw: Any) -> EngineConfig:
    """An `EngineConfig` from the parsed JSON of a config file; raises `ConfigError` when it is invalid."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(CONFIG_SCHEMA).iter_errors(raw))
    if error is not None:
        where = error.json_path if error.path else "the top level"
        raise ConfigError(f"invalid engine config at {where}: {error.message}")
    values = dict(raw)
    providers = values.pop("providers", {})
    return EngineConfig(
        **values,
        embedding=_provider(providers.get("embedding")),
        llm_judge=_provider(providers.get("llm_judge")),
    )


def load_config(path: str | Path) -> EngineConfig:
    """Read and check the `--config` JSON file."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read engine config {path}: {exc.strerror or exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"engine config {path} is not valid JSON: {exc}") from exc
    return config_from_mapping(raw)
