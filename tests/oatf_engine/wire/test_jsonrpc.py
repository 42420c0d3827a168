"""JSON-RPC 2.0 classification (§4–§6) and correlation, including wrong types and fuzzed values."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oatf_engine.wire.jsonrpc import (
    MAX_DEPTH,
    TRUNCATED,
    Correlator,
    Invalid,
    Kind,
    Message,
    Pending,
    classify,
    classify_body,
    leading_method,
    loads,
)


@pytest.mark.parametrize(("value", "kind", "method", "msg_id"), [
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}, Kind.REQUEST, "tools/call", 1),
    ({"jsonrpc": "2.0", "id": "a", "method": "ping"}, Kind.REQUEST, "ping", "a"),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, Kind.REQUEST, "ping", None),
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, Kind.NOTIFICATION, "notifications/initialized", None),
    ({"jsonrpc": "2.0", "id": 1, "result": {}}, Kind.RESULT, None, 1),
    ({"jsonrpc": "2.0", "id": 1, "result": None}, Kind.RESULT, None, 1),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}, Kind.ERROR, None, 1),
    ({"id": 3, "method": "tools/list"}, Kind.REQUEST, "tools/list", 3),  # no "jsonrpc" member: tolerated
    ({"jsonrpc": "2.0", "id": True, "method": "x"}, Kind.REQUEST, "x", None),  # bool id: uncorrelatable
    ({"jsonrpc": "2.0", "id": 1.5, "method": "x"}, Kind.REQUEST, "x", None),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "result": 1}, Kind.RESULT, None, None),
])
def test_classify(value: dict, kind: Kind, method: str | None, msg_id: object) -> None:
    message = classify(value)
    assert isinstance(message, Message)
    assert (message.kind, message.method, message.id, message.envelope) == (kind, method, msg_id, value)


@pytest.mark.parametrize("value", [
    [], "text", 3, None,
    {"jsonrpc": "1.0", "id": 1, "method": "x"},
    {"jsonrpc": "2.0", "id": 1, "method": 7},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {}},
    {"jsonrpc": "2.0", "result": 1},
])
def test_invalid(value: object) -> None:
    assert isinstance(classify(value), Invalid)


def test_batch_keeps_valid_members() -> None:
    items = classify_body([{"jsonrpc": "2.0", "id": 1, "method": "a"}, 5, {"jsonrpc": "2.0", "method": "b"}])
    assert [type(item).__name__ for item in items] == ["Message", "Invalid", "Message"]
    assert isinstance(classify_body([])[0], Invalid)


@pytest.mark.parametrize("data", [b'{"jsonrpc": "2.0", "id": 1, "meth', b"\xff\xfe{}", b"<html>", b"[" * 100_000])
def test_loads_raises_value_error_only(data: bytes) -> None:
    with pytest.raises(ValueError):
        loads(data)


def test_loads_accepts_what_json_loads_accepts_on_bytes() -> None:
    assert loads(b'\xef\xbb\xbf{"a": 1}') == ({"a": 1}, False)  # UTF-8 BOM
    assert loads('{"a": [1, "é"]}'.encode("utf-16")) == ({"a": [1, "é"]}, False)
    assert loads(b' \n{"a": 1}\r\n') == ({"a": 1}, False)


STRING_BYTES = st.binary(max_size=40).map(lambda raw: bytes(b for b in raw if b >= 0x20 and b not in b'"\\'))
"""Bytes that may stand in a JSON string literal once decoded (no control characters, quotes or backslashes)."""


@settings(max_examples=300, deadline=None)
@given(STRING_BYTES, STRING_BYTES)
def test_bytes_not_valid_utf8_are_read_as_textdecoder_reads_them(before: bytes, junk: bytes) -> None:
    """Whatever bytes a string holds, `loads` reads the message as the WHATWG UTF-8 decode (`TextDecoder`, the
    TypeScript MCP SDK's server) does: each invalid sequence is U+FFFD, the rest as sent — never refused."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"text": "' + before + junk + b'"}}'
    value, truncated = loads(body)
    assert value["params"]["text"] == (before + junk).decode("utf-8", "replace") and not truncated


def test_a_character_cut_in_half_is_one_replacement_character() -> None:
    cut = "café".encode()[:-1]
    assert loads(b'{"m": "' + cut + b'", "n": "\xff\xfe\xed\xa0\x80"}').value == {
        "m": "caf\ufffd", "n": "\ufffd" * 5}
    assert loads(b'\xef\xbb\xbf{"m": "\xc3"}').value == {"m": "\ufffd"}  # with a BOM


def test_correlator_is_bounded_and_scoped() -> None:
    correlator = Correlator(capacity=3)
    for i in range(5):
        correlator.register("s", i, Pending(f"m{i}", {}))
    assert len(correlator) == 3 and correlator.evicted == 2
    assert correlator.pop("s", 0) is None
    assert correlator.pop("other", 4) is None
    assert correlator.pop("s", 4) == Pending("m4", {})
    assert correlator.pop("s", 4) is None
    correlator.register("s", "1", Pending("str", {}))
    assert correlator.pop("s", 1) is None  # "1" and 1 are different ids
    assert correlator.pop("s", "1") == Pending("str", {})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]), children, max_size=5),
    max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_any_json_value_classifies_without_raising(value: object) -> None:
    for item in classify_body(value):
        assert isinstance(item, Message | Invalid)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_load_or_value_error(data: bytes) -> None:
    try:
        value, _ = loads(data)
    except ValueError:
        return
    classify_body(value)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=' \t\n\r{}[]":,0123456789.eE+-abcnlstrufx\\', max_size=40)
       | json_values.map(lambda v: f" {json.dumps(v)}\n"))
def test_text_loads_like_json_loads(text: str) -> None:
    try:
        expected: object = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            loads(text)
        return
    assert loads(text) == (expected, False)


def first_method(value: object) -> str | None:
    """The `method` member of `value`, or of the first member of a batch that has a string one."""
    messages = value if isinstance(value, list) else [value]
    return next((m["method"] for m in messages if isinstance(m, dict) and isinstance(m.get("method"), str)), None)


@settings(max_examples=500, deadline=None)
@given(value=json_values | st.lists(json_values, max_size=3), cut=st.integers(min_value=0), spaced=st.booleans())
def test_the_method_read_from_a_bodys_first_bytes_is_its_own(value: object, cut: int, spaced: bool) -> None:
    """`leading_method` never names a method the message does not have, however the body is cut (inside a string
    included), and finds it in the whole text."""
    text = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":")).encode()
    whole = first_method(value)
    assert leading_method(text) == whole
    assert leading_method(text[:cut % (len(text) + 1)]) in (None, whole)


@pytest.mark.parametrize(("head", "method"), [
    (b'{"jsonrpc": "2.0", "id": "e1", "method": "message/send", "params": {"message": {"parts": [{"text": "x',
     "message/send"),
    (b'[{"id": 1, "params": {}}, {"method": "tasks/get", "params": {"id', "tasks/get"),
    (b'{"params": {"a": {"method": "inner"}}, "method": "tools/call", "id"', "tools/call"),
    (b'{"id": "a \\"method\\": \\"forged', None),  # a cut string whose text mimics a member
    (b'{"params": {"method": "inner"', None),
    (b'{"method": 7, "id": 1', None),
    (b'\xff\xfe{"method"', None),
    (b"", None),
])
def test_the_method_of_a_body_cut_short(head: bytes, method: str | None) -> None:
    assert leading_method(head) == method


@settings(max_examples=300, deadline=None)
@given(head=st.binary(max_size=200))
def test_any_bytes_give_a_method_or_none(head: bytes) -> None:
    assert leading_method(head) is None or isinstance(leading_method(head), str)


def nested(levels: int, inner: str = '"deep"') -> str:
    return "[" * levels + inner + "]" * levels


def depth(value: object) -> int:
    levels = 0
    while isinstance(value, list):
        levels += 1
        value = value[0] if value else None
    return levels


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 800, 1_500, 100_000])
def test_json_nested_deeper_than_the_limit_is_cut_there(levels: int) -> None:
    """However deep (the scanner itself gives up near 1,500 levels), the value is decoded, nested at most
    MAX_DEPTH levels, the deeper part replaced by TRUNCATED; a value can then always be pickled."""
    body = f'{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {nested(levels)}, "after": "kept"}}'
    value, truncated = loads(body.encode())
    assert truncated and value["after"] == "kept" and value["method"] == "tools/call"
    assert depth(value["params"]) == MAX_DEPTH - 1  # the envelope is level 1, params' array level 2
    inner = value["params"]
    for _ in range(MAX_DEPTH - 1):
        inner = inner[0]
    assert inner == TRUNCATED
    assert pickle.loads(pickle.dumps(value)) == value


def test_json_at_the_limit_is_kept_whole_and_brackets_in_strings_do_not_count() -> None:
    text = nested(MAX_DEPTH, '"[[[{{{"')
    assert loads(text) == (json.loads(text), False)
    assert loads(nested(300, '"]]]]"')).value == json.loads(nested(MAX_DEPTH, f'"{TRUNCATED}"'))
    with pytest.raises(ValueError):
        loads("[" * 100_000 + "]" * 99_999)
