"""The SSE parser against WHATWG HTML §9.2.6, in every chunking, on any bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from oatf_engine.wire.sse import SSEEvent, SSEParser


def parse(data: bytes, sizes: list[int] | None = None, max_event_size: int = 1 << 20) -> list[SSEEvent]:
    parser = SSEParser(max_event_size)
    events: list[SSEEvent] = []
    if sizes is None:
        return parser.feed(data)
    start = 0
    for size in sizes:
        events += parser.feed(data[start:start + size])
        start += size
    return events + parser.feed(data[start:])


def test_fields_defaults_and_multiline_data() -> None:
    stream = b"data: one\ndata:two\ndata\n\nevent: add\ndata: x\nid: 7\n\n: comment\ndata:  spaced\n\n"
    assert parse(stream) == [
        SSEEvent("message", "one\ntwo\n", ""),
        SSEEvent("add", "x", "7"),
        SSEEvent("message", " spaced", "7"),  # only one leading space is removed; the id persists
    ]


def test_line_endings_crlf_cr_lf_mixed() -> None:
    assert parse(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        SSEEvent("message", "a", ""), SSEEvent("message", "b", ""), SSEEvent("message", "c", "")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    data = b"data: a\r\ndata: b\r\n\r\n"
    expected = [SSEEvent("message", "a\nb", "")]
    for cut in range(len(data) + 1):
        assert parse(data, [cut]) == expected


def test_bom_only_at_stream_start_even_split() -> None:
    assert parse(b"\xef\xbb\xbfdata: x\n\n", [1, 1, 1]) == [SSEEvent("message", "x", "")]
    assert parse(b"data: \xef\xbb\xbfx\n\n") == [SSEEvent("message", "\ufeffx", "")]


def test_empty_data_not_dispatched_and_type_reset() -> None:
    assert parse(b"event: ping\n\ndata: x\n\n") == [SSEEvent("message", "x", "")]
    assert parse(b"data\n\n") == [SSEEvent("message", "", "")]  # one empty data line is data ""


def test_id_with_nul_ignored_empty_id_resets() -> None:
    assert parse(b"id: a\ndata: 1\n\nid: b\x00c\ndata: 2\n\nid\ndata: 3\n\n") == [
        SSEEvent("message", "1", "a"), SSEEvent("message", "2", "a"), SSEEvent("message", "3", "")]


def test_retry_only_ascii_digits() -> None:
    parser = SSEParser()
    parser.feed(b"retry: 1500\n\nretry: 12x\n\nretry: \xd9\xa3\n\n")
    assert parser.retry == 1500


def test_unknown_fields_ignored_field_without_colon() -> None:
    assert parse(b"foo: bar\ndata\ndata: x\n\n") == [SSEEvent("message", "\nx", "")]


def test_end_mid_event_is_discarded() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: complete\n\ndata: partial\n") == [SSEEvent("message", "complete", "")]
    assert parser.in_event
    assert parser.close() is True
    assert parser.close() is False


def test_invalid_utf8_is_replaced() -> None:
    assert parse(b"data: \xff\xfe ok\n\n") == [SSEEvent("message", "\ufffd\ufffd ok", "")]


def test_multibyte_character_split_across_chunks() -> None:
    data = "data: héllo ✓\n\n".encode()
    for cut in range(len(data) + 1):
        assert parse(data, [cut]) == [SSEEvent("message", "héllo ✓", "")]


def test_oversize_event_dropped_then_parsing_resumes() -> None:
    parser = SSEParser(max_event_size=100)
    big = b"data: " + b"x" * 60 + b"\n"
    events = parser.feed(big + big + b"\n" + b"data: small\n\n")
    assert events == [SSEEvent("message", "small", "")]
    assert parser.dropped == 1


def test_oversize_line_in_tiny_chunks_is_bounded() -> None:
    parser = SSEParser(max_event_size=1000)
    events = []
    for _ in range(5000):
        events += parser.feed(b"y" * 10)  # a 50 KB line without end
        assert parser._pending_size <= 1000
    events += parser.feed(b"\n\ndata: after\n\n")
    assert events == [SSEEvent("message", "after", "")]
    assert parser.dropped == 1


def test_ten_thousand_events() -> None:
    data = b"".join(b'event: e\nid: %d\ndata: {"n": %d}\n\n' % (i, i) for i in range(10_000))
    events = parse(data, [4096] * (len(data) // 4096))
    assert len(events) == 10_000
    assert events[-1] == SSEEvent("e", '{"n": 9999}', "9999")


_SSE_ALPHABET = st.sampled_from([b"data", b"event", b"id", b"retry", b":", b" ", b"\n", b"\r", b"\r\n", b"x",
                                 b"\xef\xbb\xbf", b"\xff", b"\x00", b"\xc3", b"\xa9", b"1"])


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=400), st.lists(_SSE_ALPHABET, max_size=120).map(b"".join)),
       cuts=st.lists(st.integers(min_value=0, max_value=50), max_size=30),
       limit=st.sampled_from([8, 64, 1 << 20]))
def test_any_bytes_any_chunking_same_events(data: bytes, cuts: list[int], limit: int) -> None:
    whole = SSEParser(limit)
    expected = whole.feed(data)
    chunked = SSEParser(limit)
    assert parse(data, cuts, limit) == expected
    byte_by_byte = [event for i in range(len(data)) for event in chunked.feed(data[i:i + 1])]
    assert byte_by_byte == expected
    assert chunked.dropped == whole.dropped
    assert chunked.close() == whole.close()


def test_finish_dispatches_the_event_under_way_as_the_javascript_clients_do() -> None:
    """`finish`: the event under way at the stream's end is dispatched (`@a2a-js/sdk` yields it; `@ag-ui/client`
    parses what is left, an unterminated line included), where `close` discards it (§9.2.6)."""
    parser = SSEParser()
    assert parser.feed(b"data: complete\n\nevent: e\ndata: one\r\ndata: tw") == [SSEEvent("message", "complete", "")]
    assert parser.finish() == [SSEEvent("e", "one\ntw", "")]
    assert not parser.in_event and parser.finish() == []
    cut = SSEParser()
    assert cut.feed(b"data: \xc3") == [] and cut.finish() == [SSEEvent("message", "\ufffd", "")]


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=400), st.lists(_SSE_ALPHABET, max_size=120).map(b"".join)),
       limit=st.sampled_from([8, 64, 1 << 20]))
def test_finish_reads_the_stream_as_if_a_blank_line_ended_it(data: bytes, limit: int) -> None:
    """Whatever the bytes: `finish` gives what the stream would have given had it ended with a line end and a blank
    line, and leaves the parser as `close` does."""
    finished, terminated = SSEParser(limit), SSEParser(limit)
    events = finished.feed(data) + finished.finish()
    assert events == terminated.feed(data) + terminated.feed(b"\n\n")
    assert not finished.in_event and finished.close() is False
