"""Session state and capability negotiation (Attest protocol v1 §1.4, §2.1 `initialize`, §2.3, §6).

- `initialize` establishes the session once: a second `initialize` after a successful one is SESSION_ERROR
  (3003); `evaluate_batch` and `submit_plugin_result` before it are SESSION_ERROR.
- Version window (§6 "Backward Compatibility Window"): the engine speaks protocol 1 and accepts SDKs at
  the current version and current − 1 (1 and 0); any other `protocol_version` is SESSION_ERROR with a
  migration message, and the session stays uninitialized (the SDK may retry).
- Negotiation: `missing` lists the required capabilities the engine lacks; `compatible` is false when it
  is non-empty. An incompatible `initialize` does not establish the session either — the SDK "should
  abort" (§2.1), so `evaluate_batch` stays refused until an `initialize` that is compatible.
- `shutdown` is honoured in any state (it is how a client ends the process).
"""

from __future__ import annotations

from typing import Any

from .errors import invalid_params, session_error
from .trace_validation import TraceLimits

ENGINE_VERSION = "0.1.0"
PROTOCOL_VERSION = 1
SUPPORTED_PROTOCOL_VERSIONS = (PROTOCOL_VERSION - 1, PROTOCOL_VERSION)


class Session:
    """The engine's side of one SDK session."""

    def __init__(self, capabilities: list[str], max_concurrent_requests: int, limits: TraceLimits) -> None:
        self.capabilities = capabilities
        self._max_concurrent = max_concurrent_requests
        self._limits = limits
        self.initialized = False
        self.sessions_completed = 0

    def initialize(self, params: Any) -> dict[str, Any]:
        """The §2.1 `initialize` result; raises `RpcError` for invalid params, state or version."""
        if self.initialized:
            raise session_error(
                "initialize called twice",
                "The session is already initialized: send initialize once per engine process.",
            )
        if not isinstance(params, dict):
            raise invalid_params("initialize params must be an object", "See §2.1 for the initialize fields.")
        for key in ("sdk_name", "sdk_version", "preferred_encoding"):
            if not isinstance(params.get(key), str):
                raise invalid_params(f"initialize params.{key} must be a string", f"Send params.{key} (§2.1).")
        version = params.get("protocol_version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise invalid_params("initialize params.protocol_version must be an integer", "Send protocol_version: 1.")
        required = params.get("required_capabilities")
        if not isinstance(required, list) or not all(isinstance(item, str) for item in required):
            raise invalid_params(
                "initialize params.required_capabilities must be an array of strings",
                'List the capabilities the SDK needs, e.g. ["layers_1_4"].',
            )
        if version not in SUPPORTED_PROTOCOL_VERSIONS:
            low, high = SUPPORTED_PROTOCOL_VERSIONS
            raise session_error(
                f"protocol version {version} not supported; engine supports versions {low} and {high}",
                "Upgrade the engine binary or downgrade the SDK protocol_version"
                if version > PROTOCOL_VERSION
                else f"Upgrade the SDK: it speaks protocol {version}, older than this engine's window ({low}-{high}).",
            )
        missing = [capability for capability in dict.fromkeys(required) if capability not in self.capabilities]
        if not missing:
            self.initialized = True
            self.sessions_completed += 1
        return {
            "engine_version": ENGINE_VERSION,
            "protocol_version": version,
            "capabilities": list(self.capabilities),
            "missing": missing,
            "compatible": not missing,
            "encoding": "json",
            "max_concurrent_requests": self._max_concurrent,
            "max_trace_size_bytes": self._limits.max_trace_size_bytes,
            "max_steps_per_trace": self._limits.max_steps_per_trace,
        }

    def require_initialized(self, method: str) -> None:
        """SESSION_ERROR (3003) unless a compatible `initialize` came first."""
        if not self.initialized:
            raise session_error(
                f"{method} called before initialize",
                f"Call initialize first to establish a session before sending {method} requests.",
            )
