"""The document model (SDK spec §2): immutable values, structural `==`, built from and turned back into the
plain mapping of their YAML form."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

import oatf
from oatf.model import AttackVerdict, EvaluationSummary, IndicatorVerdict, SemanticExamples
from oatf.normalize import replace
from oatf.plain import to_plain


def test_indicator_from_plain_mapping_and_back() -> None:
    plain = {
        "id": "ACME-001-01", "protocol": "mcp", "surface": "tools/call", "target": "arguments",
        "direction": "request", "pattern": {"contains": "rm -rf"}, "tier": "local_action",
        "false_positives": ["admins cleaning up"], "x-team": {"owner": "red"},
    }
    indicator = oatf.Indicator.from_dict(plain)
    assert indicator.direction is oatf.Direction.REQUEST
    assert indicator.tier is oatf.Tier.LOCAL_ACTION
    assert indicator.pattern.shorthand == oatf.MatchCondition(contains="rm -rf")
    assert indicator.extensions == {"x-team": {"owner": "red"}}
    assert indicator.to_dict() == plain
    assert oatf.Indicator.from_dict(indicator.to_dict()) == indicator


def test_values_are_immutable_and_compare_structurally() -> None:
    a = oatf.Trigger.from_dict({"event": "tools/call", "match": {"name": {"regex": "^exec"}}})
    b = oatf.Trigger.from_dict({"event": "tools/call", "match": {"name": {"regex": "^exec"}}})
    assert a == b and a is not b
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.event = "tools/list"  # type: ignore[misc]


def test_normalize_replaces_fields_as_dataclasses_replace_does() -> None:
    """`normalize`'s `replace` (without `__init__`) gives what `dataclasses.replace` gives, leaves the value it
    copies alone and refuses a field the type does not have."""
    trigger = oatf.Trigger.from_dict({"event": "tools/call", "match": {"name": {"regex": "^exec"}}})
    copied = replace(trigger, count=2, event="tools/list")
    assert copied == dataclasses.replace(trigger, count=2, event="tools/list") and repr(copied) == repr(
        dataclasses.replace(trigger, count=2, event="tools/list"))
    assert (trigger.count, trigger.event) == (None, "tools/call")
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.count = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="Trigger has no field cuont"):
        replace(trigger, cuont=2)


def test_source_positions_do_not_affect_equality() -> None:
    one = oatf.parse("oatf: '0.1'\nattack:\n  execution: {mode: mcp_server, state: {}}\n")
    two = oatf.parse("\n\noatf: '0.1'\nattack:\n    execution:\n      mode: mcp_server\n      state: {}\n")
    assert one == two
    assert one.source.positions != two.source.positions


@pytest.mark.parametrize(("cls", "plain"), [
    (oatf.Trigger, {"event": 5}),
    (oatf.Extractor, {"name": "x", "source": "request", "type": "regex"}),
    (oatf.Indicator, {"target": "a", "pattern": {"contains": "x", "bogus": 1}}),
    (IndicatorVerdict, {"indicator_id": "a", "result": "maybe"}),
])
def test_from_dict_rejects_mismatched_types_with_a_path(cls: type, plain: dict) -> None:
    with pytest.raises(oatf.OATFParseError) as failure:
        cls.from_dict(plain)
    assert failure.value.errors[0].path is not None


def test_verdict_types_round_trip() -> None:
    plain = {
        "attack_id": "ACME-001", "result": "partial",
        "indicator_verdicts": [{"indicator_id": "ACME-001-01", "result": "matched", "evidence": "x"},
                               {"indicator_id": "ACME-001-02", "result": "skipped"}],
        "evaluation_summary": {"matched": 1, "not_matched": 0, "error": 0, "skipped": 1},
        "max_tier": "boundary_breach",
    }
    verdict = AttackVerdict.from_dict(plain)
    assert verdict.max_tier is oatf.Tier.BOUNDARY_BREACH
    assert verdict.to_dict() == plain
    assert SemanticExamples.from_dict({"negative": ["fine"]}).negative == ("fine",)


def test_tier_order() -> None:
    assert oatf.Tier.INGESTED.rank < oatf.Tier.LOCAL_ACTION.rank < oatf.Tier.BOUNDARY_BREACH.rank


verdict_strings = st.none() | st.text(max_size=20)
indicator_verdicts = st.builds(
    IndicatorVerdict, indicator_id=st.text(max_size=10), result=st.sampled_from(list(oatf.IndicatorResult)),
    timestamp=verdict_strings, evidence=verdict_strings, source=verdict_strings)
attack_verdicts = st.builds(
    AttackVerdict, attack_id=verdict_strings, result=st.sampled_from(list(oatf.AttackResult)),
    indicator_verdicts=st.lists(indicator_verdicts, max_size=4).map(tuple),
    evaluation_summary=st.builds(EvaluationSummary, *(st.integers(0, 9) for _ in range(4))),
    timestamp=verdict_strings, source=verdict_strings, max_tier=st.none() | st.sampled_from(list(oatf.Tier)))


@given(attack_verdicts)
def test_verdict_to_dict_is_the_reflective_plain_form(verdict: AttackVerdict) -> None:
    """The written-out `to_dict` of the verdict types gives exactly `oatf.plain.to_plain`'s form."""
    assert verdict.to_dict() == to_plain(verdict)
    assert list(verdict.to_dict()) == list(to_plain(verdict))
