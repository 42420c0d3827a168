"""JSON-RPC 2.0 messages on the wire (Attest protocol v1 §1.2 framing, §5 error format), sans-I/O.

`parse_message` turns one NDJSON line into a `Request` or a `Malformed` message with the error to answer:

- not UTF-8, not JSON, NaN/Infinity, or trailing data: -32700 Parse error (id null);
- JSON but not an object (a number, a string, a JSON-RPC batch array): -32600 Invalid Request (id null);
- an object without `"jsonrpc": "2.0"` or a string `method`, or whose `id` is not a string, an integer or
  null: -32600 Invalid Request (with the id when it is usable).

A request without `id` is a notification: it is never answered (JSON-RPC 2.0 §4.1).

The top-level object and its `params` object are scanned member by member with the standard library's
C scanner, so the byte span of `params.trace` on the wire is known: that is the trace size the §7 limit
applies to, without serialising the trace again. `parse_oversized` recovers `id` and `method` from the
first bytes of a line too long to read (they precede `params` in SDK requests).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from json import decoder as _json_decoder
from typing import Any

from .errors import ErrorCode, RpcError, engine_error

RequestId = int | str | None

# The standard library decoder's own whitespace pattern and string scanner (C-accelerated); typeshed's
# json.decoder stub omits both, so they are typed here.
WHITESPACE: re.Pattern[str] = _json_decoder.WHITESPACE  # type: ignore[attr-defined]  # not in typeshed's stub
scanstring: Callable[[str, int], tuple[str, int]] = _json_decoder.scanstring  # type: ignore[attr-defined]  # idem


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


@dataclass(frozen=True, slots=True)
class Request:
    """A well-formed request or notification."""

    id: RequestId
    method: str
    params: Any
    notification: bool
    size_bytes: int
    trace_size_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Malformed:
    """A line that is not a valid request, and the error to answer with."""

    id: RequestId
    error: RpcError


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line over the message size limit: what could be read of its envelope, and its length."""

    id: RequestId
    method: str | None
    total_bytes: int


def _ws(text: str, index: int) -> int:
    match = WHITESPACE.match(text, index)  # `[ \t\n\r]*` always matches, if only the empty string
    return index if match is None else match.end()


def _scan_object(
    text: str, index: int, members: dict[str, Any], spans: dict[tuple[str, ...], tuple[int, int]], path: tuple[str, ...]
) -> int:
    """Parse the JSON object at `text[index]` into `members`, recording each member's span; its end."""
    if not text.startswith("{", index):
        raise ValueError("expected '{'")
    index = _ws(text, index + 1)
    if text.startswith("}", index):
        return index + 1
    while True:
        if not text.startswith('"', index):
            raise ValueError("expected a member name")
        key, index = scanstring(text, index + 1)
        index = _ws(text, index)
        if not text.startswith(":", index):
            raise ValueError("expected ':'")
        start = _ws(text, index + 1)
        if not path and key == "params" and text.startswith("{", start):
            value: Any = {}
            end = _scan_object(text, start, value, spans, ("params",))
        else:
            value, end = _DECODER.raw_decode(text, start)
        members[key] = value
        spans[(*path, key)] = (start, end)
        index = _ws(text, end)
        if text.startswith(",", index):
            index = _ws(text, index + 1)
        elif text.startswith("}", index):
            return index + 1
        else:
            raise ValueError("expected ',' or '}'")


def _invalid_request(request_id: RequestId, message: str) -> Malformed:
    return Malformed(
        request_id,
        RpcError(
            ErrorCode.INVALID_REQUEST,
            f"invalid request: {message}",
            'Send one JSON-RPC 2.0 request object per line: {"jsonrpc":"2.0","id":1,"method":...,"params":{...}}.',
        ),
    )


def _usable_id(members: dict[str, Any]) -> tuple[bool, RequestId]:
    """(valid, id): JSON-RPC ids are strings, numbers or null; this engine takes integers, not fractions."""
    request_id = members.get("id")
    if request_id is None or isinstance(request_id, str):
        return True, request_id
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return True, request_id
    return False, None


def parse_message(line: bytes) -> Request | Malformed:
    """One NDJSON line as a `Request`, or `Malformed` with its error (see the module docstring)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Malformed(None, _parse_error(f"message is not UTF-8 ({exc.reason} at byte {exc.start})"))
    members: dict[str, Any] = {}
    spans: dict[tuple[str, ...], tuple[int, int]] = {}
    start = _ws(text, 0)
    try:
        if not text.startswith("{", start):
            _DECODER.raw_decode(text, start)  # a JSON value that is not an object, or not JSON at all
            return _invalid_request(None, "a message must be a JSON object (JSON-RPC batches are not supported)")
        end = _scan_object(text, start, members, spans, ())
        if _ws(text, end) != len(text):
            raise ValueError(f"extra data after the message at column {end + 1}")
    except (ValueError, RecursionError) as exc:
        return Malformed(None, _parse_error(str(exc) if not isinstance(exc, RecursionError) else "nesting too deep"))
    valid_id, request_id = _usable_id(members)
    if not valid_id:
        return _invalid_request(None, "id must be a string, an integer or null")
    if members.get("jsonrpc") != "2.0":
        return _invalid_request(request_id, 'jsonrpc must be "2.0"')
    method = members.get("method")
    if not isinstance(method, str) or not method:
        return _invalid_request(request_id, "method must be a non-empty string")
    trace_span = spans.get(("params", "trace"))
    trace_size = None
    if trace_span is not None:
        trace_size = trace_span[1] - trace_span[0]
        if len(text) != len(line):  # non-ASCII: measure the span in UTF-8 bytes
            trace_size = len(text[trace_span[0] : trace_span[1]].encode("utf-8"))
    return Request(
        id=request_id,
        method=method,
        params=members.get("params"),
        notification="id" not in members,
        size_bytes=len(line),
        trace_size_bytes=trace_size,
    )


def parse_oversized(prefix: bytes, total_bytes: int) -> Oversized:
    """What can be read of a too-long line's envelope from its first bytes."""
    text = prefix.decode("utf-8", "ignore")
    members: dict[str, Any] = {}
    with contextlib.suppress(ValueError, RecursionError):  # cut short: keep the members read before the cut
        _scan_object(text, _ws(text, 0), members, {}, ())
    valid_id, request_id = _usable_id(members)
    method = members.get("method")
    return Oversized(request_id if valid_id else None, method if isinstance(method, str) else None, total_bytes)


def _parse_error(reason: str) -> RpcError:
    return RpcError(
        ErrorCode.PARSE_ERROR,
        f"parse error: {reason}",
        "Each line must be one compact JSON object terminated by \\n (NDJSON, protocol §1.2).",
    )


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii") + b"\n"


def encode_result(request_id: RequestId, result: Any) -> bytes:
    """A compact one-line success response; an ENGINE_ERROR response if `result` isn't JSON."""
    try:
        return _encode({"jsonrpc": "2.0", "id": request_id, "result": result})
    except (TypeError, ValueError) as exc:
        return encode_error(request_id, engine_error(f"internal engine error: unencodable result ({exc})"))


def encode_error(request_id: RequestId, error: RpcError) -> bytes:
    """A compact one-line error response."""
    return _encode({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})
