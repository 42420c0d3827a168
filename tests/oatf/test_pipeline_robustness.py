"""Bad input never escapes as anything but OATFParseError; normalize is idempotent; serialize round-trips.

Issue "document pipeline", section Bad input, and SDK spec §3.1/§3.3/§3.4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oatf
from oatf import yaml_source
from oatf.errors import ECHO_LIMIT, echo
from oatf.yaml_source import MAX_DOCUMENT_BYTES, MAX_INTEGER_DIGITS, resolve_plain_scalar
from testing.paths import ROOT

# YAML streams may not carry raw control characters or surrogates; documents write them as escapes
# (test_control_characters_round_trip_through_escapes).
yaml_text = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | yaml_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(yaml_text, children, max_size=4),
    max_leaves=20,
)


def parse_or_error(data: str | bytes) -> oatf.Document | None:
    """parse, where OATFParseError (carrying at least one ParseError) is the only acceptable failure."""
    try:
        return oatf.parse(data)
    except oatf.OATFParseError as exc:
        assert exc.errors and all(isinstance(e, oatf.ParseError) for e in exc.errors)
        return None


@given(st.binary(max_size=300))
def test_binary_junk_is_a_parse_error(data: bytes) -> None:
    parse_or_error(data)


@given(st.text(max_size=300))
def test_arbitrary_text_is_a_parse_error(text: str) -> None:
    parse_or_error(text)


@given(st.dictionaries(st.sampled_from(["oatf", "attack", "x"]), json_values, max_size=3))
def test_arbitrary_json_shaped_documents(document: dict) -> None:
    parsed = parse_or_error(json.dumps(document, ensure_ascii=False))
    if parsed is not None:
        oatf.validate(parsed)  # validate never raises either


attack_fields = st.fixed_dictionaries(
    {"execution": st.fixed_dictionaries({"mode": st.just("mcp_server"), "state": st.dictionaries(
        st.sampled_from(["tools", "resources", "prompts"]), json_values, max_size=2)})},
    optional={
        "id": st.sampled_from(["ACME-001", "BAD"]),
        "name": yaml_text,
        "severity": st.sampled_from(["high", "low", {"level": "critical"}, {"level": "low", "confidence": 7}]),
        "classification": st.fixed_dictionaries({"tags": st.lists(st.text("Ab_ -", max_size=6), max_size=3)}),
        "indicators": st.lists(st.fixed_dictionaries({
            "target": st.sampled_from(["tools[*].description", "", "content[*].text"]),
            "pattern": st.sampled_from([{"contains": "x"}, {"condition": {"regex": "a+"}}, {"condition": 5}]),
        }, optional={"id": st.sampled_from(["ACME-001-01", "ACME-001-02"])}), min_size=1, max_size=3),
    },
)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=60)
@given(attack_fields)
def test_normalize_idempotent_and_serialize_round_trips(attack: dict) -> None:
    document = oatf.parse(json.dumps({"oatf": "0.1", "attack": attack}, ensure_ascii=False))
    normalized = oatf.normalize(document)
    assert oatf.normalize(normalized) == normalized
    assert oatf.normalize(oatf.parse(oatf.serialize(normalized))) == normalized
    again = oatf.parse(json.dumps({"oatf": "0.1", "attack": attack}, ensure_ascii=False))
    assert document == again, "normalize does not mutate its input"


@pytest.mark.parametrize("text", [
    "[" * 100_000,
    "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 2000)),
    "- " * 50_000 + "x",
])
def test_deep_nesting_is_a_bounded_parse_error(text: str) -> None:
    """A parse error, not a RecursionError or a hang (how long it takes is `benchmarks/bench_load.py`'s)."""
    with pytest.raises(oatf.OATFParseError) as failure:
        oatf.parse(text)
    assert "nesting" in failure.value.errors[0].message or "YAML" in failure.value.errors[0].message


def test_alias_bomb_is_rejected_without_expanding() -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    with pytest.raises(oatf.OATFParseError) as failure:
        oatf.parse("\n".join(lines))
    assert "aliases expand" in failure.value.errors[0].message


def test_oversized_document_is_rejected_before_parsing() -> None:
    big = "oatf: '0.1'\nattack:\n  description: '" + "x" * (MAX_DOCUMENT_BYTES + 1) + "'\n"
    with pytest.raises(oatf.OATFParseError) as failure:
        oatf.parse(big)
    assert "maximum" in failure.value.errors[0].message


def test_large_string_below_the_limit_parses() -> None:
    execution = "  execution: {mode: mcp_server, state: {}}\n"
    text = "oatf: '0.1'\nattack:\n  description: '" + "x" * (8 * 1024 * 1024) + "'\n" + execution
    assert len(oatf.parse(text).attack.description) == 8 * 1024 * 1024


@pytest.mark.parametrize(("text", "fragment"), [
    (b"\xff\xfe\x00garbage", "UTF-8"),
    ("oatf: '0.1'\n---\noatf: '0.1'\n", "exactly one YAML document"),
    ("- a\n- b\n", "must be a mapping"),
    ("", "empty"),
    ("oatf: '0.1'\noatf: '0.2'\n", "duplicate key"),
    ("oatf: '0.1'\nattack: {execution: {mode: mcp_server, state: !!python/object:os.system {}}}\n", None),
])
def test_malformed_inputs_name_the_problem(text: str | bytes, fragment: str | None) -> None:
    document = parse_or_error(text)
    if fragment is None:  # a custom tag parses (never constructed) and fails validation with V-020
        assert document is not None
        assert "V-020" in {e.rule for e in oatf.validate(document).errors}
    else:
        assert document is None
        with pytest.raises(oatf.OATFParseError) as failure:
            oatf.parse(text)
        assert fragment in failure.value.errors[0].message


@given(st.integers(min_value=1, max_value=2 * MAX_INTEGER_DIGITS), st.sampled_from(["", "-", "0x", "0o"]))
def test_integers_resolve_within_the_digit_limit(digits: int, form: str) -> None:
    # YAML 1.2 core schema ints; beyond MAX_INTEGER_DIGITS decimal digits a ValueError naming the limit
    # (load_yaml locates it), never Python's int/str conversion error.
    value = 10**digits - 1  # `digits` nines
    text = {"": "9" * digits, "-": "-" + "9" * digits, "0x": f"0x{value:x}", "0o": f"0o{value:o}"}[form]
    if digits <= MAX_INTEGER_DIGITS:
        assert abs(resolve_plain_scalar(text)) == value
    else:
        with pytest.raises(ValueError, match=f"more than {MAX_INTEGER_DIGITS} decimal digits"):
            resolve_plain_scalar(text)


def test_type_mismatch_carries_path_line_and_column() -> None:
    text = "oatf: '0.1'\nattack:\n  severity:\n    level: high\n    confidence: fifty\n  execution: {}\n"
    with pytest.raises(oatf.OATFParseError) as failure:
        oatf.parse(text)
    error = failure.value.errors[0]
    assert (error.kind, error.path, error.line, error.column) == (
        oatf.ParseErrorKind.TYPE_MISMATCH, "attack.severity.confidence", 5, 17)


def test_validation_errors_carry_positions_and_are_ordered_by_path() -> None:
    text = ("oatf: '0.1'\nattack:\n  id: bad\n  execution:\n    mode: mcp_server\n    state: {}\n"
            "  indicators:\n    - target: 'tools[0]'\n      pattern: {contains: x}\n")
    errors = oatf.validate(oatf.parse(text)).errors
    assert [(e.rule, e.path, e.line) for e in errors] == [
        ("V-023", "attack.id", 3), ("V-021", "attack.indicators[0].target", 8)]


def test_load_raises_one_error_type_with_all_errors() -> None:
    with pytest.raises(oatf.OATFLoadError) as failure:
        oatf.load("oatf: '9'\nattack:\n  version: 0\n  execution: {mode: mcp_server, state: {}}\n")
    assert {e.rule for e in failure.value.errors} == {"V-001", "V-035"}
    with pytest.raises(oatf.OATFLoadError) as failure:
        oatf.load(b"\x00")
    assert isinstance(failure.value.errors[0], oatf.ParseError)


def test_control_characters_round_trip_through_escapes() -> None:
    text = ('oatf: "0.1"\nattack:\n  execution:\n    mode: mcp_server\n'
            '    state: {tools: "\\x07\\x7f\\u2028\\t\\U0001F600"}\n')
    document = oatf.normalize(oatf.parse(text))
    assert document.attack.execution.actors[0].phases[0].state == {"tools": "\x07\x7f\u2028\t\U0001F600"}
    assert oatf.normalize(oatf.parse(oatf.serialize(document))) == document


HUGE = "Q" * 1_000_000
LONG = "Q" * 1000  # YAML limits implicit keys to 1024 characters
ECHO_BOUND = 400  # a message quotes at most ~80 characters of any one value, plus its own words


def test_validation_messages_bound_every_echoed_value() -> None:
    document = {"oatf": "0.1", LONG: 1, "attack": {
        "id": HUGE,
        "grace_period": HUGE,
        "execution": {"mode": HUGE, "state": {"tools": []}},
        "indicators": [
            {"id": HUGE, "surface": HUGE, "protocol": HUGE, "target": HUGE, "pattern": {"regex": HUGE + "("}},
        ],
    }}
    messages = []
    for variant in (document, {**document, "oatf": HUGE}):
        result = oatf.validate(oatf.parse(json.dumps(variant)))
        messages += [f"{d.rule}: {d.message}" for d in [*result.errors, *result.warnings]]
    assert {"V-001", "V-023"} <= {message.split(":")[0] for message in messages}
    assert [message for message in messages if len(message) > ECHO_BOUND] == []
    v023 = next(message for message in messages if message.startswith("V-023"))
    assert "QQQ" in v023 and "1000000 characters" in v023  # a head of the value, and how long it was


@pytest.mark.parametrize("text", [
    f"oatf: '0.1'\nattack: {{{LONG}: 1}}\n",
    f"oatf: '0.1'\nattack: {{id: ACME-001, x-{LONG}: 1, x-{LONG}: 2}}\n",
    f"oatf: '0.1'\nattack: {{id: !!int {HUGE}}}\n",
    f"oatf: '0.1'\nattack: {{id: *{HUGE}}}\n",
])
def test_parse_messages_bound_every_echoed_value(text: str) -> None:
    with pytest.raises(oatf.OATFParseError) as failure:
        oatf.parse(text)
    assert [e.message for e in failure.value.errors if len(e.message) > ECHO_BOUND] == []


@given(st.text(max_size=300) | st.integers() | st.lists(st.text(max_size=100), max_size=5))
def test_echo_is_short_and_exact_for_short_values(value: object) -> None:
    text = echo(value)
    assert len(text) <= 10 * ECHO_LIMIT + 40  # an escape such as \U0010ffff is 10 characters
    if len(repr(value)) <= ECHO_LIMIT:
        assert text == repr(value)
    if isinstance(value, str) and len(value) > ECHO_LIMIT:
        assert text.startswith(repr(value[:ECHO_LIMIT])) and text.endswith(f"… ({len(value)} characters)")


def _composed(text: str) -> object:
    """What `load_yaml` makes of `text`: the value and every position and feature, or that it is a ParseError."""
    try:
        source = yaml_source.load_yaml(text)
    except oatf.OATFParseError:
        return "ParseError"
    return json.dumps(source.value, sort_keys=True), source.positions, source.key_positions, source.yaml_features


@pytest.mark.parametrize("path", sorted((ROOT / "attacks").rglob("*.yaml")), ids=lambda p: p.name)
def test_the_c_parser_and_the_pure_python_parser_compose_alike(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`load_yaml` reads ruamel.yaml's C parser directly (`_events`), else its pure-Python one: both give the same
    values, positions and features, and both refuse a broken document."""
    text = path.read_text(encoding="utf-8")
    broken = text.replace(":", "", 1) + "\n\t- x: [\n"
    with_c = [_composed(text), _composed(broken)]
    monkeypatch.setattr(yaml_source, "CParser", None)
    assert [_composed(text), _composed(broken)] == with_c
    assert with_c[0] != "ParseError" and with_c[1] == "ParseError"
