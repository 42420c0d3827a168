"""Rules on the execution profile: forms, actors, phases, triggers, extractors, entry actions
(format spec §5, §11.1.6–§11.1.8, §11.1.12–§11.1.23)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..bindings import event_is_known, known_modes
from ..errors import echo
from ..extractors import jsonpath_syntax_error
from ..model import (
    Action,
    Attack,
    Execution,
    ExtractorSource,
    ExtractorType,
    LogLevel,
    MatchCondition,
    Phase,
    Trigger,
)
from ..paths import is_simple_path
from ..regex import compile_regex, regex_syntax_error
from .document_rules import bad_enum, duration_error, enum_message
from .report import Report

MODE = re.compile(r"^[a-z][a-z0-9_]*_(server|client)$")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class PhaseSite:
    """A phase with the dot-paths it is reported under, whatever form the document uses."""

    phase: Phase
    path: str
    """The phase's own path (`attack.execution.phases[1]`); the execution for the single-phase form."""
    state_path: str


@dataclass(frozen=True)
class ActorSite:
    """An actor (explicit, or the implicit `default` actor of the single- and multi-phase forms)."""

    name: str | None
    mode: str | None
    path: str
    phases_path: str
    phases: tuple[PhaseSite, ...]


def actor_sites(execution: Execution) -> Iterator[ActorSite]:
    """Every actor of the execution profile, in the multi-actor shape N-006/N-007 give it."""
    base = "attack.execution"
    if execution.actors is not None:
        for a, actor in enumerate(execution.actors):
            path = f"{base}.actors[{a}]"
            phases = tuple(PhaseSite(p, f"{path}.phases[{i}]", f"{path}.phases[{i}].state")
                           for i, p in enumerate(actor.phases))
            yield ActorSite(actor.name, actor.mode, path, f"{path}.phases", phases)
    elif execution.phases is not None:
        mode = execution.mode or next((p.mode for p in execution.phases if p.mode), None)
        phases = tuple(PhaseSite(p, f"{base}.phases[{i}]", f"{base}.phases[{i}].state")
                       for i, p in enumerate(execution.phases))
        yield ActorSite("default", mode, base, f"{base}.phases", phases)
    elif execution.state is not None:
        phase = PhaseSite(Phase(name="phase-1", state=execution.state), base, f"{base}.state")
        yield ActorSite("default", execution.mode, base, f"{base}.state", (phase,))


def check_execution(attack: Attack, report: Report) -> None:
    """All execution-profile rules; per-phase rules run for every phase of every actor."""
    execution = attack.execution
    if execution is None:
        return
    check_form(execution, report)
    if execution.actors is not None:
        check_actors(execution, report)
    if execution.phases is not None and execution.mode is None:
        check_modeless_phases(execution, report)
    for site in actor_sites(execution):
        check_phase_sequence(site, report)
        for phase in site.phases:
            check_phase(phase, site, report)


def check_form(execution: Execution, report: Report) -> None:
    """V-030: exactly one of state/phases/actors; state requires mode. V-034/W-002 on `execution.mode`."""
    present = [k for k in ("state", "phases", "actors") if getattr(execution, k) is not None]
    if len(present) != 1:
        found = " and ".join(present) if present else "none of them"
        report.error("V-030", "attack.execution",
                     f"execution must have exactly one of state, phases or actors; found {found}")
    if execution.state is not None and execution.mode is None:
        report.error("V-030", "attack.execution.mode", "execution.state requires execution.mode")
    if execution.actors is not None and execution.mode is not None:
        report.error("V-030", "attack.execution.mode",
                     "execution.mode does not belong to the multi-actor form: give each actor its mode")
    check_mode(execution.mode, "attack.execution.mode", report)


def check_mode(mode: str | None, path: str, report: Report) -> None:
    """V-034: `{protocol}_{role}` pattern; W-002 for a well-formed mode no included binding defines."""
    if mode is None:
        return
    if not MODE.match(mode):
        report.error("V-034", path, f"mode {echo(mode)} must match {{protocol}}_server or {{protocol}}_client "
                     "([a-z][a-z0-9_]*_(server|client))")
    elif mode not in known_modes():
        report.warn("W-002", path, f"mode {echo(mode)} is not defined by an included binding "
                    f"(known: {', '.join(sorted(known_modes()))}); is it a typo?")


def check_actors(execution: Execution, report: Report) -> None:
    """V-007 (at least one actor), V-031 (unique well-formed names, declared modes)."""
    actors = execution.actors or ()
    if not actors:
        report.error("V-007", "attack.execution.actors", "execution.actors must contain at least one actor")
    seen: set[str] = set()
    for a, actor in enumerate(actors):
        path = f"attack.execution.actors[{a}]"
        if actor.name is None:
            report.error("V-031", path, "every actor must declare a name")
        elif not NAME.match(actor.name):
            report.error("V-031", f"{path}.name", f"actor name {echo(actor.name)} must match [a-z][a-z0-9_]*")
        elif actor.name in seen:
            report.error("V-031", f"{path}.name", f"actor name {echo(actor.name)} is used by another actor")
        if actor.name is not None:
            seen.add(actor.name)
        if actor.mode is None:
            report.error("V-031", path, "every actor must declare a mode")
        check_mode(actor.mode, f"{path}.mode", report)
        for i, phase in enumerate(actor.phases):
            if phase.mode is not None and actor.mode is not None and phase.mode != actor.mode:
                report.error("V-044", f"{path}.phases[{i}].mode",
                             f"phase mode {echo(phase.mode)} differs from its actor's mode {echo(actor.mode)}; "
                             "cross-protocol attacks use separate actors")


def check_modeless_phases(execution: Execution, report: Report) -> None:
    """V-028: without `execution.mode`, every phase declares the same mode."""
    modes = set()
    for i, phase in enumerate(execution.phases or ()):
        if phase.mode is None:
            report.error("V-028", f"attack.execution.phases[{i}].mode",
                         "without execution.mode every phase must declare its mode")
        else:
            modes.add(phase.mode)
    if len(modes) > 1:
        report.error("V-028", "attack.execution.phases",
                     f"phases use different modes ({', '.join(sorted(modes))}); different modes need the "
                     "multi-actor form")


def check_phase_sequence(site: ActorSite, report: Report) -> None:
    """V-007 (at least one phase), V-008 (one terminal phase, last), V-009 (first has state), V-011."""
    phases = site.phases
    if not phases:
        report.error("V-007", site.phases_path, "there must be at least one phase")
        return
    terminal = [p for p in phases if p.phase.trigger is None]
    if len(terminal) > 1:
        report.error("V-008", site.phases_path,
                     f"{len(terminal)} phases have no trigger; only the last phase may be terminal")
    elif terminal and terminal[0] is not phases[-1]:
        report.error("V-008", terminal[0].path,
                     "a phase without trigger is terminal and must be the last phase")
    if phases[0].phase.state is None:
        report.error("V-009", phases[0].path, "the first phase must define state")
    names: set[str] = set()
    for site_phase in phases:
        name = site_phase.phase.name
        if name is not None and name in names:
            report.error("V-011", f"{site_phase.path}.name", f"phase name {echo(name)} is used twice")
        if name is not None:
            names.add(name)


def check_phase(site: PhaseSite, actor: ActorSite, report: Report) -> None:
    """Per-phase rules: state type, mode, trigger, extractors, entry actions."""
    phase = site.phase
    if phase.state is not None and not isinstance(phase.state, dict):
        report.error("V-009", site.state_path, "state must be a mapping")
    if site.path != "attack.execution":
        check_mode(phase.mode, f"{site.path}.mode", report)
    if phase.trigger is not None:
        check_trigger(phase.trigger, f"{site.path}.trigger", phase.mode or actor.mode, report)
    if phase.extractors is not None:
        check_extractors(phase, f"{site.path}.extractors", report)
    if phase.on_enter is not None:
        check_on_enter(phase.on_enter, f"{site.path}.on_enter", report)


def check_trigger(trigger: Trigger, path: str, mode: str | None, report: Report) -> None:
    """V-019, V-027, V-013, V-036, V-040; V-029 warning for events the actor's binding does not list."""
    if trigger.event is None:
        if trigger.after is None:
            report.error("V-040", path, "a trigger needs `event` or `after` (omit `trigger` for a terminal phase)")
        if trigger.count is not None or trigger.match is not None:
            report.error("V-019", path, "trigger `count` and `match` require `event`")
    elif mode is not None and mode in known_modes() and not event_is_known(mode, trigger.event):
        report.warn("V-029", f"{path}.event", f"event {echo(trigger.event)} is not defined for mode {echo(mode)}")
    if trigger.after is not None and duration_error(trigger.after):
        report.error("V-036", f"{path}.after",
                     f"trigger.after {echo(trigger.after)} is not a duration: {duration_error(trigger.after)}")
    if trigger.match is not None:
        check_predicate(trigger.match, f"{path}.match", report)


def check_predicate(predicate: Any, path: str, report: Report) -> None:
    """V-027: predicate keys are simple dot-paths; V-013: their regex conditions are valid RE2."""
    if not isinstance(predicate, dict):
        return
    for key, condition in predicate.items():
        key_path = f"{path}.{key}"
        if not isinstance(key, str) or not is_simple_path(key):
            report.error("V-027", key_path, f"predicate key {echo(key)} must be a simple dot-path "
                         "(no wildcards or indices)", key=True)
        check_condition_regex(condition, key_path, report)


def check_condition_regex(condition: Any, path: str, report: Report) -> None:
    """V-013 for a condition's `regex` operator (MatchCondition or plain mapping)."""
    pattern = condition.regex if isinstance(condition, MatchCondition) else (
        condition.get("regex") if isinstance(condition, dict) else None)
    if isinstance(pattern, str) and (reason := regex_syntax_error(pattern)):
        report.error("V-013", f"{path}.regex", f"invalid RE2 regular expression {echo(pattern)}: {reason}")


def check_extractors(phase: Phase, path: str, report: Report) -> None:
    """V-038, V-037, V-005 (source/type), V-015 (JSONPath), V-013/V-042 (regex with a capture group)."""
    extractors = phase.extractors or ()
    if not extractors:
        report.error("V-038", path, "extractors, when present, must contain at least one extractor")
    for i, extractor in enumerate(extractors):
        here = f"{path}[{i}]"
        if extractor.name is not None and not NAME.match(extractor.name):
            report.error("V-037", f"{here}.name", f"extractor name {echo(extractor.name)} must match [a-z][a-z0-9_]*")
        if bad_enum(extractor.source, ExtractorSource):
            report.error("V-005", f"{here}.source", enum_message("source", extractor.source, ExtractorSource))
        if bad_enum(extractor.type, ExtractorType):
            report.error("V-005", f"{here}.type", enum_message("type", extractor.type, ExtractorType))
        selector = extractor.selector
        if selector is None:
            continue
        if extractor.type == ExtractorType.JSON_PATH and (reason := jsonpath_syntax_error(selector)):
            report.error("V-015", f"{here}.selector", f"invalid JSONPath {echo(selector)}: {reason}")
        elif extractor.type == ExtractorType.REGEX:
            if reason := regex_syntax_error(selector):
                report.error("V-013", f"{here}.selector", f"invalid RE2 regular expression {echo(selector)}: {reason}")
            elif compile_regex(selector).groups < 1:
                report.error("V-042", f"{here}.selector",
                             f"regex extractor {echo(selector)} needs a capture group: the first group is extracted")


def check_on_enter(actions: tuple[Action, ...], path: str, report: Report) -> None:
    """V-043 (non-empty), V-041 (exactly one action key), V-005 (`log.level`)."""
    if not actions:
        report.error("V-043", path, "on_enter, when present, must contain at least one action")
    for i, action in enumerate(actions):
        keys = [key for key, _ in action.entries]
        if len(keys) != 1:
            shown = ", ".join(map(str, keys)) or "none"
            report.error("V-041", f"{path}[{i}]", f"an action has exactly one action key (found: {shown})")
            continue
        if action.key == "log" and isinstance(action.value, dict):
            level = action.value.get("level")
            if level is not None and level not in set(LogLevel):
                report.error("V-005", f"{path}[{i}].log.level", enum_message("log level", level, LogLevel))
