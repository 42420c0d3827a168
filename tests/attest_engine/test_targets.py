"""Target expressions (§4): the exact grammar and semantics of the paths assertions use."""

from __future__ import annotations

from typing import Any

import pytest

from attest_engine.targets import TargetSyntaxError, parse_target

from .conftest import refund_trace


def values(expression: str, document: Any = None) -> list[tuple[str, Any]]:
    return parse_target(expression).select(refund_trace() if document is None else document).values


def missing(expression: str, document: Any = None) -> str | None:
    selection = parse_target(expression).select(refund_trace() if document is None else document)
    assert selection.values == []
    return selection.missing


def test_the_forms_the_spec_names() -> None:
    assert values("output") == [("output", refund_trace()["output"])]
    assert values("output.message")[0][1].startswith("Your refund")
    assert values("output.structured") == [("output.structured", {"refund_id": "RFD-001", "confidence": 0.95})]
    assert values("output.structured.confidence") == [("output.structured.confidence", 0.95)]
    assert values("metadata.cost_usd") == [("metadata.cost_usd", 0.0067)]
    assert values("steps.length") == [("steps.length", 3)]
    assert values("steps[?type=='tool_call'].length") == [("steps[?type=='tool_call'].length", 2)]
    assert values("steps[?name=='lookup_order'].result") == [
        ("steps[1].result", {"status": "delivered", "amount": 89.99, "eligible_for_refund": True})
    ]
    assert values("steps[?name=='process_refund'].args") == [
        ("steps[2].args", {"order_id": "ORD-123", "amount": 89.99})
    ]
    assert values("steps[?name=='process_refund'].result.refund_id") == [("steps[2].result.refund_id", "RFD-001")]


def test_filter_keeps_every_match_and_counts_zero() -> None:
    trace = refund_trace()
    trace["steps"].append({"type": "tool_call", "name": "lookup_order", "result": {"status": "late"}})
    assert values("steps[?name=='lookup_order'].result.status", trace) == [
        ("steps[1].result.status", "delivered"),
        ("steps[3].result.status", "late"),
    ]
    assert values("steps[?name=='lookup_order'][1].result.status", trace) == [("steps[3].result.status", "late")]
    assert values("steps[?name=='lookup_order'][-1].result.status", trace) == [("steps[3].result.status", "late")]
    assert values("steps[?type=='agent_call'].length") == [("steps[?type=='agent_call'].length", 0)]
    assert values('steps[?name=="lookup_order"].length', trace) == [("steps[?name=='lookup_order'].length", 2)]


def test_indexes_quoted_keys_and_dollar_prefix() -> None:
    assert values("steps[0].name") == [("steps[0].name", "reasoning")]
    assert values("steps[-1].name") == [("steps[2].name", "process_refund")]
    assert values("$.output.structured['refund_id']") == [("output.structured.refund_id", "RFD-001")]
    document = {"output": {"a b": {"it's": 1}}}
    assert values("output['a b'][\"it's\"]", document) == [('output["a b"]["it\'s"]', 1)]
    assert values("output['a b']['it\\'s']", document) == [('output["a b"]["it\'s"]', 1)]


def test_length_of_a_member_named_length() -> None:
    assert values("output.length", {"output": {"length": 12}}) == [("output.length", 12)]


def test_reasons_when_nothing_is_selected() -> None:
    assert missing("output.nope") == "output has no field 'nope'"
    assert missing("steps[?name=='refund_all'].result") == "no step with name == 'refund_all' in steps"
    assert missing("output.message.x") == "output.message is not an object"
    assert missing("output[?a=='b']") == "output is not an array"
    assert missing("steps[7]") == "steps has 3 element(s), no [7]"
    assert missing("steps[?type=='tool_call'][5]") == "only 2 element(s) matched, no [5]"
    assert missing("steps[?name=='reasoning'].result.tokens") == "steps[0].result has no field 'tokens'"
    assert missing("input.user_message", {"output": {}}) == "the trace has no field 'input'"


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "expected a field name at column 1"),
        ("output.", "expected a field name after '.' at column 8"),
        ("output..message", "expected a field name after '.' at column 8"),
        ("steps[?name==x]", "expected a quoted string at column 14"),
        ("steps[?name='x']", "expected '==' at column 12"),
        ("steps[?name=='x'", "expected ']' at column 17"),
        ("steps[?name=='x].result", "unterminated string starting at column 14"),
        ("steps[*].result", "expected '?', a quoted key or an index at column 7"),
        ("steps[?@.name=='x']", "expected a field name after '[?' at column 8"),
        ("$..message", "expected a field name at column 3"),
        ("output message", "unexpected ' ' at column 7"),
        ("1output", "expected a field name at column 1"),
    ],
)
def test_unsupported_expressions(expression: str, reason: str) -> None:
    with pytest.raises(TargetSyntaxError) as caught:
        parse_target(expression)
    assert caught.value.reason == reason
    assert str(caught.value).startswith(f"unsupported JSONPath expression '{expression}'")
