"""The exchange API's calls as data (`oatf_engine.wire.steps`): the journal's encoding of a step, and priming."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oatf_engine.events import UNINSPECTED_EVENT, ExchangeEnded, ObservedEvent
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.steps import CALLS, OpenSteps, StepDecoder, WireStep, decode_step, encode_step

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=12)
fields = st.lists(st.tuples(st.binary(max_size=8), st.binary(max_size=16)), max_size=4).map(tuple)
times = st.floats(0, 2e9)
steps = st.one_of(
    st.builds(lambda flow, at, method, url, head, client: WireStep("request_headers", flow, at,
                                                                   (method, url, head, client)),
              st.text(max_size=8), times, st.text(max_size=8), st.text(max_size=30), fields, st.text(max_size=8)),
    st.builds(lambda flow, at, status, head: WireStep("response_headers", flow, at, (status, head)),
              st.text(max_size=8), times, st.integers(0, 999), fields),
    st.builds(lambda call, flow, at, data: WireStep(call, flow, at, (data,)),
              st.sampled_from(["request_data", "response_data"]), st.text(max_size=8), times, st.binary(max_size=64)),
    st.builds(lambda call, flow, at: WireStep(call, flow, at),
              st.sampled_from(["request_end", "response_end", "abort"]), st.text(max_size=8), times),
    st.builds(lambda flow, at, sender: WireStep("cut_off", flow, at, (sender,)),
              st.text(max_size=8), times, st.sampled_from(["client", "server"])),
    st.builds(lambda call, flow, at, data: WireStep(call, flow, at, (data,)),  # a buffered body with its end
              st.sampled_from(["request_end", "response_end"]), st.text(max_size=8), times, st.binary(max_size=64)))


@given(steps)
def test_a_step_survives_the_journal(step: WireStep) -> None:
    """Through the journal's JSON (bytes in base64, header fields in Latin-1): the very step comes back."""
    assert decode_step(json.loads(json.dumps(encode_step(step)))) == step


@given(st.one_of(json_values, st.lists(json_values, max_size=6).map(lambda args: {"step": args}),
                 st.tuples(st.sampled_from(CALLS), st.text(max_size=4), times, st.lists(json_values, max_size=5))
                 .map(lambda parts: {"step": [parts[0], parts[1], parts[2], *parts[3]]})))
def test_any_json_is_a_step_or_a_value_error(record: Any) -> None:
    """A damaged journal record never reaches a decoder: a step whose every value has its kind, or ValueError."""
    try:
        step = decode_step(record)
    except ValueError:
        return
    assert step.call in CALLS and isinstance(step.flow_id, str) and isinstance(step.timestamp, float)
    assert decode_step(json.loads(json.dumps(encode_step(step)))) == step


def mcp_exchange(flow: str, at: float) -> list[WireStep]:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": {}}}'
    headers = ((b"content-type", b"application/json"), (b"mcp-session-id", b"s1"))
    return [WireStep("request_headers", flow, at, ("POST", "http://127.0.0.1:1/mcp", headers, "127.0.0.1:2")),
            WireStep("request_data", flow, at, (body[:30],)), WireStep("request_data", flow, at, (body[30:],)),
            WireStep("request_end", flow, at)]


@pytest.mark.parametrize("primed", [True, False])
def test_a_primed_decoder_decodes_the_rest_of_an_exchange_it_did_not_see_begin(primed: bool) -> None:
    """The open exchange's steps handed over (`OpenSteps`) prime a fresh decoder: the rest of the request
    decodes as in the decoder that saw all of it; without them the rest is noise."""
    whole = mcp_exchange("f", 1.0)
    kept = OpenSteps(max_bytes=1 << 20)
    for step in whole[:2]:
        kept.add(step)
    fresh = StepDecoder(WireDecoder())
    items = [kept.prime(), *whole[2:]] if primed else whole[2:]
    events = [e for e in fresh.decoded(items) if isinstance(e, ObservedEvent)]
    assert [e.event_type for e in events] == (["tools/call"] if primed else [])


def test_priming_leaves_an_exchange_the_decoder_knows_alone() -> None:
    """A decoder that saw an exchange begin (the journal before a cut was read too) is not fed its steps again."""
    whole = mcp_exchange("f", 1.0)
    decoder = StepDecoder(WireDecoder())
    list(decoder.decoded(whole[:2]))
    decoder.prime(whole[:2])
    events = [e for e in decoder.decoded(whole[2:]) if isinstance(e, ObservedEvent)]
    assert [e.event_type for e in events] == ["tools/call"]


def test_an_end_with_its_body_decodes_as_the_data_then_the_end() -> None:
    """A buffered body handed with its end (one step where the exchange API has two calls): the same events."""
    [headers, first, second, end] = mcp_exchange("f", 1.0)
    whole = first.args[0] + second.args[0]
    apart = list(StepDecoder(WireDecoder()).decoded([headers, first._replace(args=(whole,)), end]))
    together = list(StepDecoder(WireDecoder()).decoded([headers, end._replace(args=(whole,))]))
    assert [e.event_type for e in together if isinstance(e, ObservedEvent)] == ["tools/call"]
    assert together == apart


def test_open_steps_forget_an_exchange_at_its_end_and_bound_its_bytes() -> None:
    kept = OpenSteps(max_bytes=40)
    for step in mcp_exchange("f", 1.0):
        kept.add(step)
    assert [s.call for s in kept.prime().steps] == ["request_headers", "request_data", "request_end"]
    kept.add(WireStep("response_data", "late", 2.0, (b"x",)))  # its start was not seen here: nothing to prime
    kept.add(WireStep("abort", "f", 3.0))
    assert len(kept) == 0 and kept.prime().steps == ()


def test_a_step_that_makes_the_decoder_raise_ends_its_exchange_as_the_tap_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder bug on a response chunk: the traceback is kept for the caller (the monitor process reports it),
    the step gives the decoder's mark of the exchange cut off there (its session's runs read `inconclusive`), the
    exchange's later chunks are dropped, and its end is an abort that reports the request left unanswered — what
    the monitor needs to know it never saw the answer; the other exchanges decode on."""
    decoder = StepDecoder(WireDecoder())

    def broken(*_args: object) -> list[ObservedEvent]:
        raise RuntimeError("decoder bug")

    answer = b'{"jsonrpc": "2.0", "id": 1, "result": {"content": []}}'
    response = [WireStep("response_headers", "f", 2.0, (200, ((b"content-type", b"application/json"),))),
                WireStep("response_data", "f", 2.0, (answer[:10],)),
                WireStep("response_data", "f", 2.0, (answer[10:],)),
                WireStep("response_end", "f", 3.0)]
    items = [*mcp_exchange("f", 1.0), *mcp_exchange("g", 1.5), *response]
    with monkeypatch.context() as patched:
        patched.setattr(decoder.decoder, "response_data", broken)
        out = list(decoder.decoded(items[:-2]))
    out += decoder.decoded(items[-2:])  # the decoder works again: the exchange stays cut off
    assert decoder.failures == 1 and decoder.raised is not None and "RuntimeError: decoder bug" in decoder.raised
    assert [e.event_type for e in out if isinstance(e, ObservedEvent)] == ["tools/call", "tools/call",
                                                                           UNINSPECTED_EVENT]
    [mark] = [e for e in out if isinstance(e, ObservedEvent) and e.event_type == UNINSPECTED_EVENT]
    assert (mark.flow_id, mark.timestamp, mark.sender, mark.content["code"]) == ("f", 2.0, "server", "decoder_failure")
    assert mark.session_keys == {"mcp_session": "s1"}
    [ended] = [e for e in out if isinstance(e, ExchangeEnded)]
    assert (ended.flow_id, ended.timestamp, ended.unanswered) == ("f", 3.0, (("f", "client", 1),))
    assert decoder.decoder.is_open("g") and not decoder.decoder.is_open("f")
