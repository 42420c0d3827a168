"""Error codes and error responses (Attest protocol v1 §5 "Error Codes", §6 rule 2 `method_not_found`).

Every error the engine answers carries the §5 shape: `code`, `message`, and `data` with `error_type`,
`retryable` and an actionable `detail`. The JSON-RPC 2.0 codes the engine also answers (-32700, -32600,
-32601, -32602) carry the same `data`, named after JSON-RPC's own error names.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

_MAX_TEXT = 600
"""Longest `message` / `detail` put on the wire: they may quote client input (a regex, a field value), and
an SDK reads response lines with a 64 KiB limit."""


class ErrorCode(IntEnum):
    """§5 error code table, plus the JSON-RPC 2.0 codes for malformed messages."""

    INVALID_TRACE = 1001
    ASSERTION_ERROR = 1002
    PROVIDER_ERROR = 2001
    ENGINE_ERROR = 3001
    TIMEOUT = 3002
    SESSION_ERROR = 3003
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602


_RETRYABLE = frozenset({ErrorCode.PROVIDER_ERROR, ErrorCode.TIMEOUT})
"""§5 "Retryable" column: provider errors and timeouts are retryable; malformed requests are not."""


def clip(text: str, limit: int = _MAX_TEXT) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RpcError(Exception):
    """An error answer to one request (§5 "Error Response Format")."""

    def __init__(self, code: ErrorCode, message: str, detail: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = clip(message)
        self.detail = clip(detail)

    @property
    def retryable(self) -> bool:
        """§5: whether the SDK should retry the request."""
        return self.code in _RETRYABLE

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC `error` member."""
        return {
            "code": int(self.code),
            "message": self.message,
            "data": {"error_type": self.code.name, "retryable": self.retryable, "detail": self.detail},
        }


def invalid_trace(message: str, detail: str) -> RpcError:
    """1001 INVALID_TRACE (§5, §7)."""
    return RpcError(ErrorCode.INVALID_TRACE, message, detail)


def assertion_error(message: str, detail: str) -> RpcError:
    """1002 ASSERTION_ERROR (§5): invalid regex, malformed schema, unsupported path, unknown type."""
    return RpcError(ErrorCode.ASSERTION_ERROR, message, detail)


def provider_error(message: str, detail: str) -> RpcError:
    """2001 PROVIDER_ERROR (§5): an embedding or LLM call failed after the engine's own retries."""
    return RpcError(ErrorCode.PROVIDER_ERROR, message, detail)


def engine_error(message: str) -> RpcError:
    """3001 ENGINE_ERROR (§5): an internal fault, reported instead of crashing."""
    return RpcError(
        ErrorCode.ENGINE_ERROR,
        message,
        "This is an engine bug; the engine logged the traceback on stderr. Report it with the request.",
    )


def timeout_error(timeout_s: float, detail: str) -> RpcError:
    """3002 TIMEOUT (§5): the evaluation exceeded the configured time limit."""
    return RpcError(ErrorCode.TIMEOUT, f"evaluation timed out after {round(timeout_s * 1000)}ms", detail)


def session_error(message: str, detail: str) -> RpcError:
    """3003 SESSION_ERROR (§5): invalid session state."""
    return RpcError(ErrorCode.SESSION_ERROR, message, detail)


def invalid_params(message: str, detail: str) -> RpcError:
    """-32602 Invalid params (JSON-RPC 2.0 §5.1)."""
    return RpcError(ErrorCode.INVALID_PARAMS, message, detail)
