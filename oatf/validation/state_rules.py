"""Rules on phase state and entry-action payloads: templates (V-016, V-032, W-004), response-dispatch lists
(V-027, V-033, V-013, W-006) and binding enumerations (V-005) — format spec §5.4–§5.6, §7, §11.1.14."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..bindings import response_lists, state_enum_violations
from ..errors import echo
from ..model import Attack
from ..templates import template_references, template_syntax_error
from ..yaml_source import child_path
from .execution_rules import ActorSite, actor_sites, check_predicate
from .report import Report

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
    if attack.execution is None:
        return
    sites = list(actor_sites(attack.execution))
    extractors = {site.name: _extractor_names(site) for site in sites if site.name is not None}
    for site in sites:
        for phase_site in site.phases:
            phase = phase_site.phase
            mode = phase.mode or site.mode
            payloads: list[tuple[str, Any]] = []
            if phase.state is not None:
                payloads.append((phase_site.state_path, phase.state))
                if isinstance(phase.state, dict) and mode is not None:
                    check_response_lists(mode, phase.state, phase_site.state_path, report)
                    for rel, bad, allowed in state_enum_violations(mode, phase.state):
                        report.error("V-005", _join(phase_site.state_path, rel),
                                     f"{echo(bad)} is not one of: {', '.join(allowed)}")
            for i, action in enumerate(phase.on_enter or ()):
                payloads.extend((f"{phase_site.path}.on_enter[{i}].{key}", value) for key, value in action.entries)
            for root, payload in payloads:
                for path, text in strings_in(payload, root):
                    check_template(text, path, site, extractors, report)


def _extractor_names(site: ActorSite) -> set[str]:
    return {e.name for p in site.phases for e in (p.phase.extractors or ()) if e.name is not None}


def _join(base: str, relative: str) -> str:
    return f"{base}{relative}" if relative.startswith("[") else f"{base}.{relative}"


def check_template(text: str, path: str, site: ActorSite, extractors: dict[str, set[str]],
                   report: Report) -> None:
    """V-016 (syntax), V-032 (cross-actor references name an actor), W-004 (unknown extractor)."""
    if "{{" not in text:
        return
    if reason := template_syntax_error(text):
        report.error("V-016", path, reason)
    for reference in template_references(text):
        if reference.startswith(MESSAGE_REFERENCE_PREFIXES):
            continue
        actor, dot, name = reference.partition(".")
        if dot:
            if actor not in extractors:
                report.error("V-032", path, f"template reference {echo(reference)} names actor {echo(actor)}, "
                             f"which does not exist (actors: {', '.join(sorted(extractors))})")
            elif name not in extractors[actor]:
                report.warn("W-004", path, f"actor {echo(actor)} declares no extractor {echo(name)}; "
                            f"{echo(reference)} will be empty")
        elif site.name is None or reference not in extractors.get(site.name, set()):
            report.warn("W-004", path, f"no extractor named {echo(reference)} is declared; "
                        f"{echo(reference)} will be empty")


def check_response_lists(mode: str, state: dict[str, Any], state_path: str, report: Report) -> None:
    """V-033 (one fallback entry without `when`), V-027/V-013 (`when` predicates), W-006 (`synthesize`)."""
    for rel, entries in response_lists(mode, state):
        list_path = _join(state_path, rel)
        fallbacks = 0
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            entry_path = f"{list_path}[{i}]"
            if "when" in entry:
                check_predicate(entry["when"], f"{entry_path}.when", report)
            else:
                fallbacks += 1
                if fallbacks == 2:
                    report.error("V-033", list_path, "at most one entry may omit `when` (the fallback, last)")
            if "synthesize" in entry:
                report.warn("W-006", f"{entry_path}.synthesize", "`synthesize` is reserved for a future OATF "
                            "version; tools fall back to static content")
