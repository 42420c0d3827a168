"""Rules on phase state and entry-action payloads: templates (V-016, V-032, W-004), response-dispatch lists
(V-033, W-006; V-027 and V-013 on their `when` predicates) and binding enumerations (V-005) — format spec
§5.4–§5.6, §7, §11.1.14."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..bindings import response_lists, state_enum_violations
from ..errors import echo
from ..model import Attack
from ..templates import template_references, template_syntax_error
from ..yaml_source import child_path
from .document_rules import v005_enum_value
from .execution_rules import EXECUTION, ActorSite, actor_sites, check_predicate
from .report import Issue, Report, join_path

MESSAGE_REFERENCE_PREFIXES = ("request.", "response.")


def strings_in(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(dot-path, string) of every string in a Value tree, depth-first, without recursion."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        here, node = stack.pop()
        if isinstance(node, str):
            yield here, node
        elif isinstance(node, dict):
            stack.extend((child_path(here, str(k)), v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((child_path(here, i), v) for i, v in reversed(list(enumerate(node))))


def check_states(attack: Attack, report: Report) -> None:
    """The driver for every phase's state and entry-action payloads."""
    if attack.execution is None:
        return
    sites = list(actor_sites(attack.execution))
    extractors = {site.name: _extractor_names(site) for site in sites if site.name is not None}
    for site in sites:
        for phase_site in site.phases:
            phase = phase_site.phase
            mode = phase.mode or site.mode
            state_path = join_path(EXECUTION, phase_site.state_path)
            payloads: list[tuple[str, Any]] = []
            if phase.state is not None:
                payloads.append((state_path, phase.state))
                if isinstance(phase.state, dict) and mode is not None:
                    check_response_lists(mode, phase.state, state_path, report)
                    for rel, text, allowed in state_enum_violations(mode, phase.state):
                        report.add(join_path(state_path, rel), v005_enum_value(text, allowed))
            phase_path = join_path(EXECUTION, phase_site.path)
            for i, action in enumerate(phase.on_enter or ()):
                payloads.extend((f"{phase_path}.on_enter[{i}].{key}", value) for key, value in action.entries)
            for root, payload in payloads:
                if not _may_hold_templates(payload):
                    continue
                for path, text in strings_in(payload, root):
                    if "{{" not in text:  # what the three template rules read
                        continue
                    report.add(path, v016_template_syntax(text))
                    report.add(path, v032_template_actor(text, extractors))
                    report.add(path, w004_template_reference(text, site.name, extractors))


def _may_hold_templates(payload: Any) -> bool:
    """Whether a string in `payload` (a Value) may hold `{{`: its JSON text does, unless no string does (JSON
    writes `{{` only inside strings, unescaped; walking the payload costs ten times more than writing it)."""
    try:
        return "{{" in json.dumps(payload, default=str)
    except (TypeError, ValueError, RecursionError):
        return True


def _extractor_names(site: ActorSite) -> set[str]:
    return {e.name for p in site.phases for e in (p.phase.extractors or ()) if e.name is not None}


def check_response_lists(mode: str, state: dict[str, Any], state_path: str, report: Report) -> None:
    """The rules on each response-dispatch list of `mode`'s binding in `state`, and on its entries."""
    for rel, entries in response_lists(mode, state):
        list_path = join_path(state_path, rel)
        report.add(list_path, v033_single_fallback(entries))
        for i, entry in enumerate(entries):
            if isinstance(entry, dict):
                if "when" in entry:
                    check_predicate(entry["when"], f"{list_path}[{i}].when", report)
                report.add(f"{list_path}[{i}]", w006_synthesize(entry))


def _actor_references(text: str) -> Iterator[tuple[str, str | None, str]]:
    """(reference, actor or None when unqualified, extractor name) of each extractor reference in a template
    string; message references (`request.*`, `response.*`) excluded."""
    if "{{" not in text:
        return
    for reference in template_references(text):
        if not reference.startswith(MESSAGE_REFERENCE_PREFIXES):
            actor, dot, name = reference.partition(".")
            yield (reference, actor, name) if dot else (reference, None, reference)


def v016_template_syntax(text: str) -> Iterator[Issue]:
    """V-016 (§5.7): a string holding `{{` is a well-formed template."""
    if "{{" in text and (reason := template_syntax_error(text)):
        yield Issue("V-016", "", reason)


def v032_template_actor(text: str, extractors: dict[str, set[str]]) -> Iterator[Issue]:
    """V-032 (§5.5): a cross-actor template reference (`{{actor.name}}`) names an actor."""
    for reference, actor, _ in _actor_references(text):
        if actor is not None and actor not in extractors:
            yield Issue("V-032", "", f"template reference {echo(reference)} names actor {echo(actor)}, "
                        f"which does not exist (actors: {', '.join(sorted(extractors))})")


def v033_single_fallback(entries: list[Any]) -> Iterator[Issue]:
    """V-033 (§11.1.14): at most one entry of a response-dispatch list omits `when` (the fallback)."""
    if sum(1 for entry in entries if isinstance(entry, dict) and "when" not in entry) >= 2:
        yield Issue("V-033", "", "at most one entry may omit `when` (the fallback, last)")


def w004_template_reference(text: str, actor_name: str | None, extractors: dict[str, set[str]]) -> Iterator[Issue]:
    """W-004 (SDK spec §7.0): a template reference names an extractor its actor declares."""
    for reference, actor, name in _actor_references(text):
        if actor is not None:
            if actor in extractors and name not in extractors[actor]:
                yield Issue("W-004", "", f"actor {echo(actor)} declares no extractor {echo(name)}; "
                            f"{echo(reference)} will be empty", warning=True)
        elif actor_name is None or reference not in extractors.get(actor_name, set()):
            yield Issue("W-004", "", f"no extractor named {echo(reference)} is declared; "
                        f"{echo(reference)} will be empty", warning=True)


def w006_synthesize(entry: dict[str, Any]) -> Iterator[Issue]:
    """W-006 (SDK spec §7.0): `synthesize` is reserved for a future OATF version."""
    if "synthesize" in entry:
        yield Issue("W-006", "synthesize", "`synthesize` is reserved for a future OATF version; tools fall back to "
                    "static content", warning=True)
