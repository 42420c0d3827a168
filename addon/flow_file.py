"""Reading mitmproxy flow files fast, for offline replay: the HTTP flows as light views of what replay reads.

A flow file is a sequence of tnetstrings (`mitmproxy.io.tnetstring`: `<length>:<payload><type tag>`, the
tag one of `,` bytes, `;` text, `#` int, `^` float, `!` bool, `~` null, `]` list, `}` dict), one per flow:
the flow's state (`Flow.get_state()`), a dict with text keys. mitmproxy's `FlowReader` parses every record
whole in pure Python and rebuilds a full `HTTPFlow` from it (about half a millisecond a flow).

Here a record is read directly when it is an HTTP flow of the current format
(`mitmproxy.version.FLOW_FORMAT_VERSION`) laid out exactly as the installed mitmproxy writes it: the same
keys in the same order in the flow, request, response, error and client connection dicts, and the types
mitmproxy writes in every value read. Only what replay reads is converted (`RecordedFlow`: id, client
address, metadata, error, request method, URL, header fields, body and timestamps, response status, header
fields, body and timestamps); the rest (server connection, TLS details, backup, WebSocket messages, ...) is
skipped over by its length prefix, unparsed, so damage inside it goes unnoticed where mitmproxy would refuse
the record. Every other record (older formats, which mitmproxy migrates; other flow types; anything not
recognised, damaged records included) is read by mitmproxy's `FlowReader`, and so are HAR files: they read
exactly as mitmproxy reads them, as `HTTPFlow`s, and fail as mitmproxy fails, with a `FlowReadException`.
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

from mitmproxy import connection, http
from mitmproxy.exceptions import FlowReadException
from mitmproxy.flow import Error
from mitmproxy.io import FlowReader, tnetstring
from mitmproxy.version import FLOW_FORMAT_VERSION

from oatf_engine.progress import UPDATE_EVERY

_BYTES, _TEXT, _INT, _FLOAT, _BOOL, _NULL, _LIST, _DICT = b",;#^!~]}"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_PREFIX = 12
"""Most digits of a record's length prefix (as `tnetstring.load`)."""
_CHUNK = 1 << 20
"""How many bytes of a flow file are read at a time."""

Fields = tuple[tuple[bytes, bytes], ...]


@dataclass(slots=True)
class RecordedRequest:
    """The parts of a recorded request replay reads, named as on `mitmproxy.http.Request`."""

    method: str
    url: str
    headers: Fields
    """The raw header fields, as `mitmproxy.http.Headers.fields`."""
    raw_content: bytes | None
    timestamp_start: float
    timestamp_end: float | None


@dataclass(slots=True)
class RecordedResponse:
    """The parts of a recorded response replay reads, named as on `mitmproxy.http.Response`."""

    status_code: int
    headers: Fields
    """The raw header fields, as `mitmproxy.http.Headers.fields`."""
    raw_content: bytes | None
    timestamp_start: float
    timestamp_end: float | None


@dataclass(slots=True)
class RecordedError:
    """Why a recorded flow failed, as `mitmproxy.flow.Error`."""

    msg: str
    timestamp: float


@dataclass(slots=True)
class RecordedClient:
    """The client connection of a recorded flow: its address, as `mitmproxy.connection.Client.peername`."""

    peername: tuple[str, int]


@dataclass(slots=True)
class RecordedFlow:
    """A recorded HTTP flow as replay reads it: the attributes of `mitmproxy.http.HTTPFlow` it uses."""

    id: str
    request: RecordedRequest
    response: RecordedResponse | None
    error: RecordedError | None
    client_conn: RecordedClient
    metadata: dict[str, Any]


AnyHTTPFlow = http.HTTPFlow | RecordedFlow
"""A recorded HTTP flow: mitmproxy's, or the view of one read here."""


class _Unrecognised(ValueError):
    """A record this module does not read itself: mitmproxy's reader reads it."""


_Span = tuple[int, int]
"""Where a tnetstring's payload is in the file: (start, end), its type tag at `end`."""


def _layouts() -> tuple[_Layout, ...]:
    """The keys of the flow, request, response, error and client connection states, as the installed mitmproxy
    writes them: in order, each as its tnetstring (`<length>:<name>;`) and its length. Found by writing a sample
    flow's state and reading it back (`tnetstring.loads` keeps a dict's keys in file order)."""
    sample = http.HTTPFlow(connection.Client(peername=("", 0), sockname=("", 0)), connection.Server(address=None))
    sample.request, sample.response = http.Request.make("GET", "http://x/"), http.Response.make()
    sample.error = Error("")
    state = cast(dict[str, Any], tnetstring.loads(tnetstring.dumps(sample.get_state())))
    dicts = [state, *(state[part] for part in ("request", "response", "error", "client_conn"))]
    return tuple(tuple(_entry(tnetstring.dumps(key)) for key in keys) for keys in dicts)


def _entry(key: bytes) -> re.Pattern[bytes]:
    """An entry of a dict whose key is the tnetstring `key`, up to its value's payload: the key, then the value's
    length prefix (at most `_MAX_PREFIX` digits, captured) and its colon."""
    return re.compile(re.escape(key) + rb"(\d{1,%d}):" % _MAX_PREFIX)


_Layout = tuple[re.Pattern[bytes], ...]
"""A dict's keys in order, each as the pattern of its entry (`_entry`)."""
_FLOW, _REQUEST, _RESPONSE, _ERROR, _CLIENT = _layouts()
_TIMES = (float, int)
"""The types of a timestamp (mitmproxy writes floats, and whatever number it was given)."""


def read_flow_file(source: bytes | BinaryIO, position: Callable[[int], None] | None = None) -> list[AnyHTTPFlow]:
    """The HTTP flows of a flow file's (or a HAR file's) content, in file order; `source`: the content, or a
    binary file read from its current position on. `position`, when given, is told how many bytes are read every
    `UPDATE_EVERY` records of a flow file. A flow file is read `_CHUNK` bytes at a time (a record larger than
    that at once): the file is never held whole, only the flows read from it.

    Raises `FlowReadException` when the content is neither."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else source
    data = handle.read(_CHUNK)
    if data.startswith((b"{", b"\xef\xbb\xbf{")):  # HAR, as `FlowReader.stream` recognises it
        return _read_by_mitmproxy(data + handle.read())
    flows: list[AnyHTTPFlow] = []
    pos = dropped = 0  # where the next record starts in `data`; how many bytes of the file preceded `data`
    while True:
        if len(data) - pos <= _MAX_PREFIX:  # the next length prefix may not be in `data` whole
            data, dropped, pos = data[pos:] + handle.read(max(_CHUNK, _MAX_PREFIX + 1)), dropped + pos, 0
            if not data:
                return flows
        if position is not None and len(flows) % UPDATE_EVERY == 0:
            position(dropped + pos)
        colon = data.find(b":", pos, pos + _MAX_PREFIX + 1)
        prefix = data[pos:colon] if colon > pos else b""
        if not prefix.isdigit():  # no length prefix: mitmproxy reads (and rejects) the rest
            return flows + _read_by_mitmproxy(data[pos:] + handle.read())
        end = colon + 1 + int(prefix)  # where the record's type tag is
        if end >= len(data):  # the record goes on past `data`: read the rest of it
            data = data[pos:] + handle.read(end + 1 - len(data))
            dropped, colon, end, pos = dropped + pos, colon - pos, end - pos, 0
            if end >= len(data):  # a truncated record: mitmproxy reads (and rejects) it
                return flows + _read_by_mitmproxy(data)
        try:
            flows.append(_flow(data, (colon + 1, end)))
        except (ValueError, IndexError, RecursionError):
            flows += _read_by_mitmproxy(data[pos:end + 1])
        pos = end + 1


def _read_by_mitmproxy(data: bytes) -> list[AnyHTTPFlow]:
    """The HTTP flows mitmproxy's `FlowReader` reads from `data`; any failure is a `FlowReadException`
    (mitmproxy rebuilding a flow from a corrupt record can raise about anything)."""
    try:
        return [flow for flow in FlowReader(io.BytesIO(data)).stream() if isinstance(flow, http.HTTPFlow)]
    except FlowReadException:
        raise
    except Exception as exc:
        raise FlowReadException(f"Invalid flow: {type(exc).__name__}: {exc}") from None


def _flow(data: bytes, span: _Span) -> RecordedFlow:
    """The flow whose state is the dict at `span`; `_Unrecognised` unless it is an HTTP flow of the current
    format laid out as mitmproxy writes it, with the types mitmproxy writes in the parts read."""
    (_, response, request, _, _, _, metadata, _, _, _, _, client_conn, error, flow_id, flow_type,
     version) = _entries(data, span, _FLOW)
    version, flow_type, flow_id = _value(data, version), _value(data, flow_type), _value(data, flow_id)
    if type(version) is not int or version != FLOW_FORMAT_VERSION or flow_type != "http" or type(flow_id) is not str:
        raise _Unrecognised
    return RecordedFlow(flow_id, _request(data, request), _response(data, response), _error(data, error),
                        RecordedClient(_peername(data, client_conn)), _metadata(data, metadata))


def _request(data: bytes, span: _Span) -> RecordedRequest:
    _, _, _, _, _, host, ended, started, _, content, headers, _ = _entries(data, span, _REQUEST)
    method, url = _target(data[span[0]:host[1] + 1])
    return RecordedRequest(method, url, *_message(data, headers, content, started, ended))


_TARGET = 6
"""How many of the request state's entries `_target` reads: the first (path, authority, scheme, method, port,
host)."""


@functools.lru_cache(maxsize=1024)
def _target(entries: bytes) -> tuple[str, str]:
    """The method and URL of a request whose state begins with `entries` (its first `_TARGET` entries: path,
    authority, scheme, method, port, host; remembered: an endpoint's requests repeat them)."""
    path, _, scheme, method, port, host = (_value(entries, part) for part in _entries(
        entries + b"}", (0, len(entries)), _REQUEST[:_TARGET]))
    if type(method) is not bytes or type(scheme) is not bytes or type(path) is not bytes or type(
            host) is not str or type(port) is not int:
        raise _Unrecognised
    method_text = method.decode("utf-8", "surrogateescape").upper()
    return method_text, _url(method_text, scheme.decode("utf-8", "surrogateescape"), host, port,
                             path.decode("utf-8", "surrogateescape"))


def _url(method: str, scheme: str, host: str, port: int, path: str) -> str:
    """`mitmproxy.http.Request.url`: `host:port` for CONNECT, else scheme, host, the port unless it is the
    scheme's default, and the path (none for `*`)."""
    if method == "CONNECT":
        return f"{host}:{port}"
    authority = host if _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    return f"{scheme}://{authority}{'' if path == '*' else path}"


def _response(data: bytes, span: _Span) -> RecordedResponse | None:
    if _is_null(data, span):
        return None
    _, status, ended, started, _, content, headers, _ = _entries(data, span, _RESPONSE)
    status = _value(data, status)
    if type(status) is not int:
        raise _Unrecognised
    return RecordedResponse(status, *_message(data, headers, content, started, ended))


def _message(data: bytes, headers: _Span, content: _Span, started: _Span, ended: _Span) -> tuple[Any, ...]:
    """Header fields, body and timestamps of a request or response."""
    content, started, ended = _value(data, content), _value(data, started), _value(data, ended)
    if not (type(content) is bytes or content is None) or type(started) not in _TIMES or not (
            type(ended) in _TIMES or ended is None):
        raise _Unrecognised
    return _fields(data, headers), content, started, ended


def _error(data: bytes, span: _Span) -> RecordedError | None:
    if _is_null(data, span):
        return None
    timestamp, msg = (_value(data, part) for part in _entries(data, span, _ERROR))
    if type(msg) is not str or type(timestamp) not in _TIMES:
        raise _Unrecognised
    return RecordedError(msg, timestamp)


def _peername(data: bytes, span: _Span) -> tuple[str, int]:
    """The client address in the client connection state at `span` (flows share their connection's state)."""
    return _address(data[span[0]:span[1] + 1])


@functools.lru_cache(maxsize=1024)
def _address(state: bytes) -> tuple[str, int]:
    """The client address in a client connection state (a dict tnetstring): its [host, port] `peername`."""
    items = _items(state, _entries(state, (0, len(state) - 1), _CLIENT)[-1])
    host, port = (_value(state, items[0]), _value(state, items[1])) if len(items) == 2 else (None, None)
    if type(host) is not str or type(port) is not int:
        raise _Unrecognised
    return host, port


def _metadata(data: bytes, span: _Span) -> dict[str, Any]:
    """The flow's metadata (any values: read by `tnetstring` itself)."""
    start, end = span
    if data[end] != _DICT:
        raise _Unrecognised
    return cast(dict[str, Any], tnetstring.loads(b"%d:%b" % (end - start, data[start:end + 1]))) if end > start else {}


def _fields(data: bytes, span: _Span) -> Fields:
    """Header fields: the list at `span` of [name, value] lists of two byte strings."""
    start, end = span
    if data[end] != _LIST:
        raise _Unrecognised
    return _field_list(data[start:end])


@functools.lru_cache(maxsize=4096)
def _field_list(data: bytes) -> Fields:
    """The header fields in a list's payload (cached: the header fields of a session's messages repeat)."""
    fields = []
    find = data.index
    pos, end = 0, len(data)
    while pos < end:  # each item: <length>:<name length>:<name>,<value length>:<value>,]
        colon = find(b":", pos, pos + _MAX_PREFIX + 1)
        item_end = colon + 1 + int(data[pos:colon])
        name_colon = find(b":", colon + 1, item_end)
        name_end = name_colon + 1 + int(data[colon + 1:name_colon])
        value_colon = find(b":", name_end + 1, item_end)
        value_end = value_colon + 1 + int(data[name_end + 1:value_colon])
        if not (colon < item_end < end and name_colon < name_end < value_colon and value_end == item_end - 1
                and data[item_end] == _LIST and data[name_end] == _BYTES and data[value_end] == _BYTES):
            raise _Unrecognised
        fields.append((data[name_colon + 1:name_end], data[value_colon + 1:value_end]))
        pos = item_end + 1
    return tuple(fields)


def _entries(data: bytes, span: _Span, keys: _Layout) -> list[_Span]:
    """The value spans of the dict at `span`, whose keys must be exactly `keys`, in this order; the values
    unparsed."""
    start, end = span
    if data[end] != _DICT:
        raise _Unrecognised
    values: list[_Span] = []
    append = values.append
    pos = start
    for key in keys:  # one match per entry: the key and the value's length prefix checked at once
        entry = key.match(data, pos)
        if entry is None:
            raise _Unrecognised
        payload = entry.end()
        value_end = payload + int(entry[1])
        if value_end >= end:
            raise _Unrecognised
        append((payload, value_end))
        pos = value_end + 1
    if pos != end:
        raise _Unrecognised
    return values


def _items(data: bytes, span: _Span) -> list[_Span]:
    """The spans of the items of the list at `span`, the items unparsed."""
    start, end = span
    if data[end] != _LIST:
        raise _Unrecognised
    items: list[_Span] = []
    append, find = items.append, data.index
    pos = start
    while pos < end:
        colon = find(b":", pos, pos + _MAX_PREFIX + 1)
        item_end = colon + 1 + int(data[pos:colon])
        if not colon < item_end < end:
            raise _Unrecognised
        append((colon + 1, item_end))
        pos = item_end + 1
    return items


def _is_null(data: bytes, span: _Span) -> bool:
    return data[span[1]] == _NULL and span[0] == span[1]


def _value(data: bytes, span: _Span) -> Any:
    """The scalar at `span`, parsed as `tnetstring.parse` parses it; `_Unrecognised` for a container."""
    start, end = span
    kind = data[end]
    payload = data[start:end]
    if kind == _BYTES:
        return payload
    if kind == _TEXT:
        return payload.decode()
    if kind == _INT:
        return int(payload)
    if kind == _FLOAT:
        return float(payload)
    if kind == _NULL and not payload:
        return None
    if kind == _BOOL and payload in (b"true", b"false"):
        return payload == b"true"
    raise _Unrecognised


__all__ = ["AnyHTTPFlow", "Fields", "RecordedClient", "RecordedError", "RecordedFlow", "RecordedRequest",
           "RecordedResponse", "read_flow_file"]


def client_address(flow: AnyHTTPFlow) -> str:
    """`host:port` of the flow's client (live or recorded), or "" when mitmproxy recorded none."""
    peer = flow.client_conn.peername
    return f"{peer[0]}:{peer[1]}" if peer else ""
