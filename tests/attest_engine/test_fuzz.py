"""Property tests: malformed input never crashes the engine or puts a non-JSON line on stdout."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attest_engine.jsonrpc import Malformed, Request, parse_message, parse_oversized
from attest_engine.ndjson import Line, LineSplitter, OversizedLine

from .conftest import INITIALIZE, EngineProcess, batch, refund_trace, request, run_engine

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)

envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": st.integers() | st.text(max_size=5) | st.none() | json_values,
        "method": st.sampled_from(["initialize", "evaluate_batch", "submit_plugin_result", "nope"]) | json_values,
        "params": json_values,
    },
)

lines = st.one_of(
    st.binary(max_size=200).map(lambda raw: raw.replace(b"\n", b" ")),
    json_values.map(lambda value: json.dumps(value).encode()),
    envelopes.map(lambda value: json.dumps(value).encode()),
    st.text(max_size=100).map(lambda text: text.replace("\n", " ").encode("utf-8", "surrogatepass")),
)


def check_response(response: Any) -> None:
    assert isinstance(response, dict) and response["jsonrpc"] == "2.0" and "id" in response
    assert ("result" in response) != ("error" in response)
    if "error" in response:
        error = response["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str)
        assert set(error["data"]) == {"error_type", "retryable", "detail"}
        assert error["code"] != 3001, error  # malformed input is the client's error, never an engine fault


@given(st.lists(st.binary(max_size=50).map(lambda raw: raw.replace(b"\n", b"")), max_size=20), st.data())
def test_line_splitter_reassembles_any_chunking(parts: list[bytes], data: st.DataObject) -> None:
    stream = b"\n".join(parts) + b"\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    splitter = LineSplitter(max_line_bytes=30, prefix_bytes=8)
    out: list[Line | OversizedLine] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out.extend(splitter.feed(stream[start:end]))
    out.extend(splitter.finish())
    expected = [part for part in parts if part.strip()]
    assert len(out) == len(expected)
    for item, part in zip(out, expected, strict=True):
        if len(part) <= 30:
            assert item == Line(part)
        else:
            assert item == OversizedLine(part[:8], len(part))


@given(st.binary(max_size=300))
def test_parse_message_never_raises(raw: bytes) -> None:
    assert isinstance(parse_message(raw), Request | Malformed)
    parse_oversized(raw, len(raw))


@given(envelopes)
def test_parse_message_on_envelopes(message: dict[str, Any]) -> None:
    parsed = parse_message(json.dumps(message).encode())
    if isinstance(parsed, Request):
        assert parsed.method == message["method"] and parsed.params == message.get("params")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(lines, max_size=12))
def test_engine_answers_any_line_sequence(garbage: list[bytes]) -> None:
    messages: list[Any] = [request(0, "initialize", INITIALIZE)]
    messages += [line + b"\n" for line in garbage]
    messages.append(batch("last", refund_trace()))
    responses = run_engine(messages)
    for response in responses:
        check_response(response)
    assert any(response["id"] == "last" and "result" in response for response in responses)


assertion_types = st.sampled_from(["schema", "constraint", "trace", "content", "embedding", "llm_judge", "x"])
spec_keys = st.sampled_from(
    [
        "target",
        "schema",
        "field",
        "operator",
        "value",
        "min",
        "max",
        "soft",
        "check",
        "tools",
        "tool",
        "max_repetitions",
        "values",
        "case_sensitive",
        "reference",
        "threshold",
        "model",
        "rubric",
        "prompt",
    ]
)
spec_values = json_values | st.sampled_from(
    [
        "output.message",
        "steps[?name=='lookup_order'].result",
        "steps.length",
        "lte",
        "between",
        "contains",
        "regex_match",
        "keyword_all",
        "loop_detection",
        "contains_in_order",
        ["lookup_order"],
        "[",
        0.5,
    ]
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(assertion_types, st.dictionaries(spec_keys, spec_values, max_size=6)), max_size=4))
def test_any_assertion_spec_is_evaluated_or_refused_cleanly(items: list[tuple[str, dict[str, Any]]]) -> None:
    assertions = [{"assertion_id": f"a{i}", "type": kind, "spec": spec} for i, (kind, spec) in enumerate(items)]
    responses = run_engine([request(0, "initialize", INITIALIZE), batch(1, refund_trace(), *assertions)])
    check_response(responses[1])
    if "error" in responses[1]:
        assert responses[1]["error"]["code"] == 1002
    else:
        assert len(responses[1]["result"]["results"]) == len(items)


@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(lines, min_size=1, max_size=30))
def test_engine_process_survives_garbage(garbage: list[bytes]) -> None:
    engine = EngineProcess("--log-level=warn")
    try:
        engine.initialize()
        engine.send_raw(b"\n".join(garbage) + b"\n")
        engine.send(batch("probe", refund_trace()))
        while (response := engine.read(timeout=30))["id"] != "probe":
            check_response(response)
        assert response["result"]["results"] == []
        engine.close_stdin()
        assert engine.wait() == 0
        for line in engine.raw_stdout:
            check_response(json.loads(line))
    finally:
        engine.kill()
