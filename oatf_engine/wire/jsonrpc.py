"""JSON-RPC 2.0 message classification and request/response correlation (JSON-RPC 2.0 specification §4–§6).

Classification is lenient where leniency helps observation and strict where it would mislead:
- a request (§4) has a string `method` and an `id` that is a string, an integer or null; a notification
  (§4.1) has a string `method` and no `id`. A request whose `id` has another type (a bool, a float, an
  object) is still observed, as a request that no response can be correlated to;
- a response (§5) has an `id` and exactly one of `result` / `error`; an error response's `error` is
  reported as it is, whatever its type;
- the `jsonrpc: "2.0"` member is not required (some peers omit it), but a message with a different
  `jsonrpc` value, a non-string `method`, or neither `method` nor `result`/`error` is invalid;
- a batch (§6) is a non-empty array of such messages; its invalid members are reported, the others kept.

`Correlator` remembers outstanding requests per scope (a session, or one HTTP exchange) so that a response
can be named after its request's method (format spec §7.1.2 "the runtime correlates each response to the
original request by `id`"); it holds at most `capacity` requests, forgetting the oldest first.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from enum import Enum
from typing import Any, NamedTuple

JsonRpcId = str | int


class Kind(Enum):
    """What a JSON-RPC message is."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESULT = "result"
    ERROR = "error"


class Message(NamedTuple):
    """One classified JSON-RPC message."""

    kind: Kind
    method: str | None
    """The method of a request or notification; None for responses."""
    id: JsonRpcId | None
    """The id, when it is a string or an integer (the only ids that correlate); else None."""
    payload: Any
    """`params` (None when absent) for requests and notifications, `result` or `error` for responses."""
    envelope: dict[str, Any]
    """The whole message object."""


class Invalid(NamedTuple):
    """A member of a body that is not a JSON-RPC message, with the reason."""

    reason: str


class Pending(NamedTuple):
    """An outstanding request: what a response to it is named after and enriched with."""

    method: str
    params: Any
    flow: str = ""
    """The flow its answer belongs to, when not the answer's own exchange (a message stream's request)."""


def looks_like_jsonrpc(value: Any) -> bool:
    """Whether a decoded JSON body is meant as JSON-RPC: an object with `jsonrpc`, `method`, or `id` plus
    `result`/`error`, or an array whose first member is such an object. Cheap; no validation."""
    if isinstance(value, list):
        value = value[0] if value else None
    if not isinstance(value, dict):
        return False
    return "jsonrpc" in value or "method" in value or ("id" in value and ("result" in value or "error" in value))


def classify(value: Any) -> Message | Invalid:
    """Classify one decoded JSON value as a JSON-RPC 2.0 request, notification, result or error (§4, §5)."""
    if not isinstance(value, dict):
        return Invalid(f"not a JSON object ({type(value).__name__})")
    version = value.get("jsonrpc", "2.0")
    if version != "2.0":
        return Invalid(f"unsupported jsonrpc version {version!r}")
    raw_id = value.get("id")
    msg_id = raw_id if type(raw_id) is str or type(raw_id) is int else None  # not bool, not float
    if "method" in value:
        method = value["method"]
        if not isinstance(method, str):
            return Invalid(f"method is not a string ({type(method).__name__})")
        kind = Kind.REQUEST if "id" in value else Kind.NOTIFICATION
        return Message(kind, method, msg_id, value.get("params"), value)
    has_result, has_error = "result" in value, "error" in value
    if "id" not in value or has_result == has_error:
        return Invalid("neither a request, a notification nor a response")
    if has_error:
        return Message(Kind.ERROR, None, msg_id, value["error"], value)
    return Message(Kind.RESULT, None, msg_id, value["result"], value)


_HEAD_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]')
_HEAD_GAP = re.compile(rb"[\sA-Za-z0-9.+-]*")  # between tokens: blanks, numbers, true/false/null
HEAD_SCAN = 65_536
"""At most this many leading bytes of a body are scanned for its method (`leading_method`)."""


def leading_method(head: bytes) -> str | None:
    """The `method` of the JSON-RPC message (or a batch's first message) whose text begins with `head`, when
    `head` (a body cut short: over the size limit) already holds it as a top-level member; else None. Reads
    tokens only while they are well-formed JSON: a cut string (its text might mimic members) stops the scan."""
    head = head[:HEAD_SCAN]
    stack: list[int] = []
    key = previous = b""
    at = 0
    for token in _HEAD_TOKEN.finditer(head):
        if _HEAD_GAP.fullmatch(head, at, token.start()) is None:
            return None
        at, text = token.end(), token.group()
        message_level = len(stack) in (1, 2) and stack[-1] == ord("{") and (len(stack) == 1 or stack[0] == ord("["))
        if text[0] == ord('"') and message_level:
            if previous in (b"{", b","):
                key = text
            elif previous == b":" and key == b'"method"':
                try:
                    method = json.loads(text)
                except ValueError:
                    return None
                return method if isinstance(method, str) else None
        elif text in (b"{", b"["):
            stack.append(text[0])
        elif text in (b"}", b"]"):
            if not stack:
                return None
            stack.pop()
        previous = text
    return None


def classify_body(value: Any) -> list[Message | Invalid]:
    """Classify a decoded body: one message, or a batch (§6). An empty batch is one Invalid."""
    if isinstance(value, list):
        return [classify(member) for member in value] if value else [Invalid("empty batch")]
    return [classify(value)]


_DECODER = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"
_STRINGS_AND_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')

MAX_DEPTH = 256
"""The deepest JSON nesting inspected: arrays and objects (the top-level one is level 1) nested deeper are
replaced by `TRUNCATED`, so that every decoded value can be handed on (the monitor process receives events
pickled, and pickling fails from about 800 levels) and evaluated. The traffic itself is never altered."""
TRUNCATED = f"[truncated: nested deeper than {MAX_DEPTH} levels]"


class Parsed(NamedTuple):
    """A decoded JSON text."""

    value: Any
    truncated: bool
    """Some array or object was nested deeper than `MAX_DEPTH` and replaced by `TRUNCATED`."""


def loads(data: bytes | str) -> Parsed:
    """`json.loads` with nesting cut at `MAX_DEPTH`, raising ValueError (never anything else) for bytes that are
    not JSON text. UTF-8 goes straight to the decoder's scanner (the hot path: one call per message or SSE event).

    Bytes that are not valid in their encoding are read as the peers read them, not refused: each invalid
    sequence is U+FFFD, as the WHATWG Encoding Standard's UTF-8 decode does (`TextDecoder`, what the TypeScript
    MCP SDK's server and `fetch`'s `Response.json()` read a body with; Go's `encoding/json` does the same). A
    request such a server executes is then judged, not dropped as no JSON: its bytes reached the server, and
    the attacker when the server is the attacker's."""
    if not isinstance(data, str):
        raw = data
        try:
            data = raw.decode()  # RFC 8259 §8.1: JSON exchanged between systems is UTF-8
        except UnicodeDecodeError:
            data = raw.decode(json.detect_encoding(raw), "replace")  # UTF-16/32 as json.loads reads them
        data = data.removeprefix("\ufeff")  # a UTF-8 BOM, which json.loads accepts on bytes
    try:
        value = _decode(data)
    except RecursionError:  # too deep for the scanner: cut in the text, then decoded
        return Parsed(_decode(_cut_text(data)), True)
    if data.count("[") + data.count("{") <= MAX_DEPTH:  # cheap: nothing can be nested too deeply
        return Parsed(value, False)
    return Parsed(*cut(value))


def _decode(text: str) -> Any:
    start = len(text) - len(text.lstrip(_JSON_SPACE)) if text[:1] in _JSON_SPACE else 0
    value, end = _DECODER.raw_decode(text, start)
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        raise ValueError(f"extra data after JSON at {end}")
    return value


def cut(value: Any, levels: int = MAX_DEPTH) -> tuple[Any, bool]:
    """`value` with the dicts and lists (arrays and objects) nested deeper than `levels` levels replaced by
    `TRUNCATED` (in place), and whether any was. Descends at most `levels` levels."""
    if not isinstance(value, dict | list):
        return value, False
    if levels == 0:
        return TRUNCATED, True
    changed = False
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        if isinstance(item, dict | list):
            value[key], item_changed = cut(item, levels - 1)
            changed = changed or item_changed
    return value, changed


def _cut_text(text: str) -> str:
    """`text` with every array or object nested deeper than `MAX_DEPTH` replaced by `TRUNCATED` as a JSON
    string (brackets inside strings do not count): a text the scanner can decode, or not JSON at all."""
    pieces: list[str] = []
    depth = copied = 0
    for token in _STRINGS_AND_BRACKETS.finditer(text):
        bracket = token.group()
        if bracket[0] == '"':
            continue
        if bracket in "[{":
            depth += 1
            if depth == MAX_DEPTH + 1:
                pieces.append(text[copied:token.start()])
        else:
            if depth == MAX_DEPTH + 1:
                pieces.append(json.dumps(TRUNCATED))
                copied = token.end()
            depth -= 1
    if depth > MAX_DEPTH:
        raise ValueError("JSON text ends inside an array or object")
    pieces.append(text[copied:])
    return "".join(pieces)


class Correlator:
    """Outstanding requests by (scope, id), at most `capacity` of them (the oldest are forgotten first)."""

    __slots__ = ("_table", "capacity", "evicted")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.evicted = 0
        """How many requests were forgotten unanswered to stay within `capacity`."""
        self._table: OrderedDict[tuple[str, JsonRpcId], Pending] = OrderedDict()

    def __len__(self) -> int:
        return len(self._table)

    def register(self, scope: str, msg_id: JsonRpcId, pending: Pending) -> None:
        """Remember a request; a later request with the same id in the same scope replaces it."""
        key = (scope, msg_id)
        self._table.pop(key, None)
        self._table[key] = pending
        while len(self._table) > self.capacity:
            self._table.popitem(last=False)
            self.evicted += 1

    def pop(self, scope: str, msg_id: JsonRpcId) -> Pending | None:
        """The request a response with `msg_id` answers, forgotten; None when unknown."""
        return self._table.pop((scope, msg_id), None)
