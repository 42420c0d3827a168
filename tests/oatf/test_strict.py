"""Strict checks (`oatf.strict_errors`): one mistyped document per rule, and the whole library passes."""

from __future__ import annotations

import pytest

import oatf
from testing.paths import ROOT

DOCUMENT = """oatf: "0.1"
attack:
  id: ACME-001
  execution:
    mode: {mode}
    phases:
      - state: {{tools: []}}
        trigger:
          event: {event}
      - name: end
  indicators:
    - surface: {surface}
      protocol: {protocol}
      target: {target}
      pattern:
        contains: BEGIN OPENSSH PRIVATE KEY
"""
GOOD = {"mode": "mcp_server", "event": "tools/call", "surface": "tools/call", "protocol": "mcp",
        "target": "arguments.note"}


def strict(**changes: str) -> list[oatf.ValidationError]:
    document = oatf.parse(DOCUMENT.format(**(GOOD | changes)))
    assert oatf.validate(document).valid
    return list(oatf.strict_errors(document))


def test_library_documents_pass_strict_checks() -> None:
    """Every shipped document is conforming and can fire: zero strict errors."""
    paths = sorted((ROOT / "attacks").glob("*.yaml")) + sorted((ROOT / "examples").glob("*.yaml"))
    assert len(paths) > 50
    found = {str(p): list(oatf.strict_errors(oatf.parse(p.read_bytes()))) for p in paths}
    assert {p: errors for p, errors in found.items() if errors} == {}


def test_well_formed_document_has_no_strict_errors() -> None:
    assert strict() == []


def test_s001_unknown_surface_with_suggestion() -> None:
    [error] = strict(surface="tool/call")
    assert (error.rule, error.path, error.line, error.column) == ("S-001", "attack.indicators[0].surface", 12, 16)
    assert "'tool/call' is not an operation of the mcp binding" in error.message
    assert error.message.endswith("did you mean 'tools/call'?")


def test_s002_unknown_trigger_event_with_suggestion() -> None:
    [error] = strict(event="tools/cal")
    assert (error.rule, error.path, error.line, error.column) == (
        "S-002", "attack.execution.phases[0].trigger.event", 9, 18)
    assert "event 'tools/cal' is not an event of mode mcp_server" in error.message
    assert error.message.endswith("did you mean 'tools/call'?")


def test_s002_event_of_the_other_mode() -> None:
    """`sampling/createMessage` is an mcp_client event: an mcp_server actor never receives it."""
    [error] = strict(event="sampling/createMessage")
    assert error.rule == "S-002"


@pytest.mark.parametrize(("target", "hint"), [
    ("params.arguments.note", None),  # responses carry the request's params (SDK spec §4.1): not flagged
    ("result.content[*].text", "did you mean 'content[*].text'?"),
    ("jsonrpc", None),
    ("method", None),
    ("error.message", "did you mean 'message'?"),
])
def test_s003_target_in_the_jsonrpc_envelope(target: str, hint: str | None) -> None:
    errors = strict(target=f'"{target}"')
    if target.startswith("params"):
        assert errors == []
        return
    [error] = errors
    assert (error.rule, error.path, error.line) == ("S-003", "attack.indicators[0].target", 14)
    assert "JSON-RPC envelope field" in error.message
    assert error.message.endswith(hint) if hint else "did you mean" not in error.message


def test_s003_checks_the_evaluated_target_only() -> None:
    """A `pattern.target` override is what the pattern evaluates; the indicator-level target is not used."""
    text = DOCUMENT.format(**GOOD | {"target": "result.x"}).replace(
        "        contains: BEGIN", "        target: result.content\n        condition:\n          contains: BEGIN")
    [error] = oatf.strict_errors(oatf.parse(text))
    assert (error.rule, error.path) == ("S-003", "attack.indicators[0].pattern.target")


def test_s003_leaves_a2a_ids_and_ag_ui_alone() -> None:
    assert strict(mode="a2a_server", event="tasks/get", surface="tasks/get", protocol="a2a", target="id") == []
    assert strict(mode="ag_ui_client", event="run_agent_input", surface="tool_call_args", protocol="ag_ui",
                  target="result") == []


def test_s004_unknown_mode_and_protocol() -> None:
    errors = strict(mode="mpc_server", protocol="mpc")
    assert [(e.rule, e.path) for e in errors] == [
        ("S-004", "attack.execution.mode"), ("S-004", "attack.indicators[0].protocol")]
    assert errors[0].message.endswith("did you mean 'mcp_server'?")
    assert errors[-1].message.endswith("did you mean 'mcp'?")


def test_s004_actor_and_phase_modes() -> None:
    text = """oatf: "0.1"
attack:
  execution:
    actors:
      - name: one
        mode: mcp_sever
        phases:
          - state: {tools: []}
      - name: two
        mode: a2a_client
        phases:
          - mode: a2a_clinet
            state: {}
  indicators:
    - surface: tools/call
      protocol: mcp
      target: arguments
      pattern: {contains: x}
"""
    errors = list(oatf.strict_errors(oatf.parse(text)))
    assert [(e.rule, e.path, e.line) for e in errors] == [
        ("S-004", "attack.execution.actors[0].mode", 6), ("S-004", "attack.execution.actors[1].phases[0].mode", 12)]
    assert errors[0].message.endswith("did you mean 'mcp_server'?")


def test_validate_stays_conformant() -> None:
    """`validate` itself is unchanged: the mistyped surface is only the spec's V-018 warning."""
    result = oatf.validate(oatf.parse(DOCUMENT.format(**GOOD | {"surface": "tool/call"})))
    assert result.valid and [w.code for w in result.warnings] == ["V-018"]
