"""An observed event crosses process boundaries whole (`ObservedEvent.__reduce__`: the proxy pickles every event to
its monitor process, a sharded replay to its workers): every field, of any value the decoder can give."""

from __future__ import annotations

import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from oatf_engine.events import EVENT_FIELDS, Endpoint, ObservedEvent, event_values
from tests.oatf_engine.test_journal import json_values


@given(json_values, json_values, st.text(), st.floats(allow_nan=False), st.none() | st.integers() | st.text(),
       st.booleans(), st.lists(st.text(), max_size=2), st.dictionaries(st.text(), st.text(), max_size=2))
def test_an_event_pickles_to_an_equal_event(content: Any, envelope: Any, flow: str, at: float,
                                            jsonrpc_id: int | str | None, is_error: bool, injected: list[str],
                                            keys: dict[str, str]) -> None:
    original = ObservedEvent("a2a", "message/send", "response", "server", content, flow, 12, at,
                             Endpoint("agent.example", 443, "/"), "10.0.0.1:4000", keys, jsonrpc_id, is_error,
                             envelope, tuple(injected))
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(original, protocol=protocol))
        assert copy == original and type(copy) is ObservedEvent
    assert len(event_values(original)) == len(EVENT_FIELDS) == 15
