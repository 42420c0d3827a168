"""Strict checks: what in a document can never fire in the binding it targets (not OATF conformance rules).

The OATF spec makes an unknown surface (V-018) or trigger event (V-029) a warning, so a valid document may
hold an indicator that no traffic can ever match. For a tool that judges traffic that is a silent
`not_exploited`, so evaluators refuse such documents unless told otherwise. `validate` stays conformant and
never runs these checks; `strict_errors` is the separate entry point (`oatf validate --strict`).

Rules (each a function named by its id, yielding `Issue`s relative to what it inspects):
- S-001: an indicator `surface` its recognized protocol's binding does not define (strict V-018);
- S-002: a trigger `event` the actor's recognized mode does not list (strict V-029);
- S-003: an indicator target (the one its pattern or semantic block evaluates) whose first segment is a
  JSON-RPC envelope field: MCP and A2A indicators see the message's `params`, `result` or `error` object,
  never the envelope (format spec §7.1.3, §7.2.3; SDK spec §4.1). Only envelope fields are flagged: message
  content is protocol-native pass-through (§7.1, §7.2 "Design principle"), so no other first segment is
  certainly impossible. A2A `id` is left alone (tasks and `tasks/*` params carry an `id`); AG-UI events are
  flat payloads without an envelope, and extractors are not checked (the binding does not say whether the
  "message body" a JSONPath selector sees includes the envelope);
- S-004: a mode or indicator protocol no included binding defines (strict W-002 / W-003): no traffic of it
  is observed, so its indicators never fire.

Every issue names the closest known name (`did you mean 'tools/call'?`) when there is one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .bindings import EVENTS, KNOWN_MODES, KNOWN_PROTOCOLS, SURFACES
from .errors import ValidationError, did_you_mean
from .model import Document, Indicator, Trigger
from .validation.execution_rules import EXECUTION, actor_sites
from .validation.indicator_rules import indicator_protocol
from .validation.report import Issue, join_path

STRICT_RULES: dict[str, str] = {
    "S-001": "§7", "S-002": "§7", "S-003": "§7.1.3", "S-004": "§7",
}
"""Strict rule id → the format specification section whose binding it checks against."""

ENVELOPE_FIELDS: dict[str, frozenset[str]] = {
    "mcp": frozenset({"jsonrpc", "id", "method", "result", "error"}),
    "a2a": frozenset({"jsonrpc", "method", "result", "error"}),
}
"""Protocol → the JSON-RPC envelope fields an indicator target can never start with (S-003)."""

_FIRST_SEGMENT = re.compile(r"^[^.\[]*")


def strict_errors(document: Document) -> Iterator[ValidationError]:
    """Every S-rule violation of `document` (a parsed, not normalized, document: its source positions locate
    each error), in document order. Checks only what `validate` leaves as warnings; run it after `validate`."""
    attack = document.attack
    if attack is None:
        return
    execution = attack.execution
    if execution is not None:
        yield from _located(document, EXECUTION, s004_unknown_mode(execution.mode))
        for site in actor_sites(execution):
            if site.path:  # an explicit actor (the implicit one's mode is not its own)
                yield from _located(document, join_path(EXECUTION, site.path), s004_unknown_mode(site.mode))
            for phase_site in site.phases:
                phase = phase_site.phase
                phase_path = join_path(EXECUTION, phase_site.path)
                if phase_site.path:
                    yield from _located(document, phase_path, s004_unknown_mode(phase.mode))
                if phase.trigger is not None:
                    yield from _located(document, f"{phase_path}.trigger",
                                        s002_unknown_event(phase.trigger, phase.mode or site.mode))
    execution_mode = execution.mode if execution is not None else None
    for i, indicator in enumerate(attack.indicators or ()):
        protocol = indicator_protocol(indicator, execution_mode)
        path = f"attack.indicators[{i}]"
        yield from _located(document, path, s004_unknown_protocol(indicator))
        yield from _located(document, path, s001_unknown_surface(indicator, protocol))
        yield from _located(document, path, s003_envelope_target(indicator, protocol))


def s001_unknown_surface(indicator: Indicator, protocol: str | None) -> Iterator[Issue]:
    """S-001 (strict V-018): `surface` is not an operation of the indicator's recognized protocol binding."""
    surfaces = SURFACES.get(protocol or "")
    if surfaces is None or indicator.surface is None or indicator.surface in surfaces:
        return
    yield Issue("S-001", "surface", f"surface {indicator.surface!r} is not an operation of the {protocol} binding, "
                f"so no traffic can match this indicator{did_you_mean(indicator.surface, surfaces)}")


def s002_unknown_event(trigger: Trigger, mode: str | None) -> Iterator[Issue]:
    """S-002 (strict V-029): `trigger.event` is not an event the actor's recognized mode lists."""
    events = EVENTS.get(mode or "")
    if events is None or trigger.event is None or trigger.event in events:
        return
    yield Issue("S-002", "event", f"event {trigger.event!r} is not an event of mode {mode}, so this trigger "
                f"never fires{did_you_mean(trigger.event, events)}")


def s003_envelope_target(indicator: Indicator, protocol: str | None) -> Iterator[Issue]:
    """S-003: the target a pattern or semantic block evaluates starts with a JSON-RPC envelope field, which
    indicator content never holds (format spec §7.1.3, §7.2.3; SDK spec §4.1)."""
    envelope = ENVELOPE_FIELDS.get(protocol or "")
    if envelope is None:
        return
    for path, target in _evaluated_targets(indicator):
        first = _FIRST_SEGMENT.match(target)[0]  # type: ignore[index]  # the pattern matches every string
        if first not in envelope:
            continue
        rest = target[len(first):].lstrip(".")
        hint = f"; did you mean {rest!r}?" if rest and not rest.startswith("[") else ""
        yield Issue("S-003", path, f"target {target!r} starts with the JSON-RPC envelope field {first!r}: "
                    f"{protocol} indicators see the message's params, result or error object, not the "
                    f"envelope, so this path never resolves{hint}")


def s004_unknown_mode(mode: str | None) -> Iterator[Issue]:
    """S-004 (strict W-002): a mode no included binding defines: none of its traffic is observed."""
    if mode is not None and mode not in KNOWN_MODES:
        yield Issue("S-004", "mode", f"mode {mode!r} is not defined by an included binding, so none of its "
                    f"traffic is observed{did_you_mean(mode, KNOWN_MODES)}")


def s004_unknown_protocol(indicator: Indicator) -> Iterator[Issue]:
    """S-004 (strict W-003): an indicator protocol no included binding defines: it never fires."""
    protocol = indicator.protocol
    if protocol is not None and protocol not in KNOWN_PROTOCOLS:
        yield Issue("S-004", "protocol", f"protocol {protocol!r} is not defined by an included binding, so "
                    f"this indicator never fires{did_you_mean(protocol, KNOWN_PROTOCOLS)}")


def _evaluated_targets(indicator: Indicator) -> Iterator[tuple[str, str]]:
    """(path relative to the indicator, target) of each target a pattern or semantic block evaluates
    (its own override, else the indicator's `target`); expressions navigate `message` and have none."""
    for key, block in (("pattern", indicator.pattern), ("semantic", indicator.semantic)):
        if block is None:
            continue
        if block.target is not None:
            yield f"{key}.target", block.target
        elif indicator.target is not None:
            yield "target", indicator.target


def _located(document: Document, base: str, issues: Iterator[Issue]) -> Iterator[ValidationError]:
    """The driver's half: each issue's path joined to `base`, located in the document's source."""
    for issue in issues:
        path = join_path(base, issue.path)
        found = document.source.locate(path) if document.source is not None else None
        line, column = found if found is not None else (None, None)
        yield ValidationError(issue.rule, STRICT_RULES[issue.rule], issue.message, path, line, column)
