"""Rules on the execution profile: forms, actors, phases, triggers, extractors, entry actions
(format spec §5, §11.1.6–§11.1.8, §11.1.12–§11.1.23)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..bindings import EVENTS, event_is_known, known_modes
from ..errors import did_you_mean, echo
from ..extractors import jsonpath_syntax_error
from ..model import (
    Action,
    Actor,
    Attack,
    Execution,
    Extractor,
    ExtractorSource,
    ExtractorType,
    Indicator,
    LogLevel,
    MatchCondition,
    Phase,
    Trigger,
)
from ..paths import is_simple_path
from ..regex import compile_regex, regex_syntax_error
from .document_rules import duration_error, v005_enum_value
from .report import Issue, Report, join_path

EXECUTION = "attack.execution"
MODE = re.compile(r"^[a-z][a-z0-9_]*_(server|client)$")
PROTOCOL = re.compile(r"^[a-z][a-z0-9_]*$")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class PhaseSite:
    """A phase with the dot-paths, relative to the execution, it is reported under, whatever form the document
    uses."""

    phase: Phase
    path: str
    """The phase's own path (`actors[0].phases[1]`); "" (the execution) for the single-phase form."""
    state_path: str


@dataclass(frozen=True)
class ActorSite:
    """An actor (explicit, or the implicit `default` actor of the single- and multi-phase forms), its paths
    relative to the execution."""

    name: str | None
    mode: str | None
    path: str
    phases_path: str
    phases: tuple[PhaseSite, ...]


_last_sites: tuple[Execution | None, tuple[ActorSite, ...]] = (None, ())
"""The execution profile `actor_sites` was last asked about, and its answer (one assignment: thread-safe)."""


def actor_sites(execution: Execution) -> tuple[ActorSite, ...]:
    """Every actor of the execution profile, in the multi-actor shape N-006/N-007 give it. Remembered for the
    profile last asked about: the rules of one document ask several times."""
    global _last_sites
    last, sites = _last_sites
    if last is not execution:
        sites = tuple(_actor_sites(execution))
        _last_sites = (execution, sites)
    return sites


def _actor_sites(execution: Execution) -> Iterator[ActorSite]:
    if execution.actors is not None:
        for a, actor in enumerate(execution.actors):
            path = f"actors[{a}]"
            phases = tuple(PhaseSite(p, f"{path}.phases[{i}]", f"{path}.phases[{i}].state")
                           for i, p in enumerate(actor.phases))
            yield ActorSite(actor.name, actor.mode, path, f"{path}.phases", phases)
    elif execution.phases is not None:
        mode = execution.mode or next((p.mode for p in execution.phases if p.mode), None)
        phases = tuple(PhaseSite(p, f"phases[{i}]", f"phases[{i}].state") for i, p in enumerate(execution.phases))
        yield ActorSite("default", mode, "", "phases", phases)
    elif execution.state is not None:
        phase = PhaseSite(Phase(name="phase-1", state=execution.state), "", "state")
        yield ActorSite("default", execution.mode, "", "state", (phase,))


# --- drivers ---------------------------------------------------------------------------------------------


def check_execution(attack: Attack, report: Report) -> None:
    """The driver for the execution profile: execution-wide rules, then every actor and every phase."""
    report.add("attack", v028_modes_declared(attack))
    execution = attack.execution
    if execution is None:
        return
    for rule in (v030_execution_form, v034_mode_protocol_pattern, w002_unknown_mode, v007_actors_and_phases_present,
                 v031_actor_name_and_mode, v044_phase_mode_matches_actor, v008_terminal_phase_last, v009_phase_state,
                 v011_unique_phase_names):
        report.add(EXECUTION, rule(execution))
    for a, actor in enumerate(execution.actors or ()):
        report.add(f"{EXECUTION}.actors[{a}]", v034_mode_protocol_pattern(actor))
        report.add(f"{EXECUTION}.actors[{a}]", w002_unknown_mode(actor))
    for site in actor_sites(execution):
        for phase_site in site.phases:
            check_phase(phase_site.phase, join_path(EXECUTION, phase_site.path), site.mode, report)


def check_phase(phase: Phase, path: str, actor_mode: str | None, report: Report) -> None:
    """Per-phase rules: mode, trigger, extractors, entry actions."""
    if path != EXECUTION:  # the single-phase form's phase is the execution, whose mode is checked above
        report.add(path, v034_mode_protocol_pattern(phase))
        report.add(path, w002_unknown_mode(phase))
    if phase.trigger is not None:
        check_trigger(phase.trigger, f"{path}.trigger", phase.mode or actor_mode, report)
    report.add(path, v038_extractors_present(phase))
    for i, extractor in enumerate(phase.extractors or ()):
        check_extractor(extractor, f"{path}.extractors[{i}]", report)
    report.add(path, v043_on_enter_present(phase))
    for i, action in enumerate(phase.on_enter or ()):
        here = f"{path}.on_enter[{i}]"
        report.add(here, v041_single_action_key(action))
        if action.key == "log" and isinstance(action.value, dict):
            report.add(f"{here}.log.level", v005_enum_value(action.value.get("level"), LogLevel, "log level"))


def check_trigger(trigger: Trigger, path: str, mode: str | None, report: Report) -> None:
    for rule in (v040_trigger_event_or_after, v019_count_match_need_event, v036_trigger_after_duration):
        report.add(path, rule(trigger))
    report.add(path, v029_trigger_event_known(trigger, mode))
    if trigger.match is not None:
        check_predicate(trigger.match, f"{path}.match", report)


def check_predicate(predicate: Any, path: str, report: Report) -> None:
    """The rules on a match predicate (`trigger.match`, a response entry's `when`): its keys, their regexes."""
    if not isinstance(predicate, dict):
        return
    for key, condition in predicate.items():
        key_path = f"{path}.{key}"
        report.add(key_path, v027_predicate_key(key))
        report.add(f"{key_path}.regex", v013_regex_syntax(condition_regex(condition)))


def condition_regex(condition: Any) -> Any:
    """The `regex` operand of a condition (MatchCondition or plain mapping), or None."""
    if isinstance(condition, MatchCondition):
        return condition.regex
    return condition.get("regex") if isinstance(condition, dict) else None


def check_extractor(extractor: Extractor, path: str, report: Report) -> None:
    report.add(path, v037_extractor_name(extractor))
    report.add(f"{path}.source", v005_enum_value(extractor.source, ExtractorSource, "source"))
    report.add(f"{path}.type", v005_enum_value(extractor.type, ExtractorType, "type"))
    report.add(path, v015_jsonpath_selector(extractor))
    if extractor.type == ExtractorType.REGEX:
        report.add(f"{path}.selector", v013_regex_syntax(extractor.selector))
    report.add(path, v042_regex_capture_group(extractor))


# --- execution-wide rules (paths relative to the execution) ------------------------------------------------


def v007_actors_and_phases_present(execution: Execution) -> Iterator[Issue]:
    """V-007 (§11.1.7): `actors`, when present, holds at least one actor, and every actor at least one phase."""
    if execution.actors is not None and not execution.actors:
        yield Issue("V-007", "actors", "execution.actors must contain at least one actor")
    for site in actor_sites(execution):
        if not site.phases:
            yield Issue("V-007", site.phases_path, "there must be at least one phase")


def v008_terminal_phase_last(execution: Execution) -> Iterator[Issue]:
    """V-008 (§11.1.7): at most one phase per actor lacks a trigger (is terminal), and it is the last."""
    for site in actor_sites(execution):
        terminal = [p for p in site.phases if p.phase.trigger is None]
        if len(terminal) > 1:
            yield Issue("V-008", site.phases_path,
                        f"{len(terminal)} phases have no trigger; only the last phase may be terminal")
        elif terminal and terminal[0] is not site.phases[-1]:
            yield Issue("V-008", terminal[0].path, "a phase without trigger is terminal and must be the last phase")


def v009_phase_state(execution: Execution) -> Iterator[Issue]:
    """V-009 (§11.1.7): every actor's first phase defines `state`, and a `state` is a mapping."""
    for site in actor_sites(execution):
        if site.phases and site.phases[0].phase.state is None:
            yield Issue("V-009", site.phases[0].path, "the first phase must define state")
        for phase_site in site.phases:
            if phase_site.phase.state is not None and not isinstance(phase_site.phase.state, dict):
                yield Issue("V-009", phase_site.state_path, "state must be a mapping")


def v011_unique_phase_names(execution: Execution) -> Iterator[Issue]:
    """V-011 (§11.1.7): phase names are unique within an actor."""
    for site in actor_sites(execution):
        names: set[str] = set()
        for phase_site in site.phases:
            name = phase_site.phase.name
            if name is not None and name in names:
                yield Issue("V-011", join_path(phase_site.path, "name"), f"phase name {echo(name)} is used twice")
            if name is not None:
                names.add(name)


def v028_modes_declared(attack: Attack) -> Iterator[Issue]:
    """V-028 (§5.1): without `execution.mode`, every phase declares the same mode and every indicator its
    protocol (paths relative to the attack)."""
    execution = attack.execution
    if execution is not None and execution.phases is not None and execution.mode is None:
        modes = set()
        for i, phase in enumerate(execution.phases):
            if phase.mode is None:
                yield Issue("V-028", f"execution.phases[{i}].mode", "without execution.mode every phase must declare "
                            "its mode")
            else:
                modes.add(phase.mode)
        if len(modes) > 1:
            yield Issue("V-028", "execution.phases", f"phases use different modes ({', '.join(sorted(modes))}); "
                        "different modes need the multi-actor form")
    if execution is None or execution.mode is None:
        for i, indicator in enumerate(attack.indicators or ()):
            if indicator.protocol is None:
                yield Issue("V-028", f"indicators[{i}].protocol",
                            "without execution.mode every indicator must declare its protocol")


def v030_execution_form(execution: Execution) -> Iterator[Issue]:
    """V-030 (§5.1): exactly one of state/phases/actors; `state` requires `mode`; actors carry their own modes."""
    present = [k for k in ("state", "phases", "actors") if getattr(execution, k) is not None]
    if len(present) != 1:
        found = " and ".join(present) if present else "none of them"
        yield Issue("V-030", "", f"execution must have exactly one of state, phases or actors; found {found}")
    if execution.state is not None and execution.mode is None:
        yield Issue("V-030", "mode", "execution.state requires execution.mode")
    if execution.actors is not None and execution.mode is not None:
        yield Issue("V-030", "mode", "execution.mode does not belong to the multi-actor form: give each actor its mode")


def v031_actor_name_and_mode(execution: Execution) -> Iterator[Issue]:
    """V-031 (§5.1): every actor declares a unique, well-formed name and a mode."""
    seen: set[str] = set()
    for a, actor in enumerate(execution.actors or ()):
        path = f"actors[{a}]"
        if actor.name is None:
            yield Issue("V-031", path, "every actor must declare a name")
        elif not NAME.match(actor.name):
            yield Issue("V-031", f"{path}.name", f"actor name {echo(actor.name)} must match [a-z][a-z0-9_]*")
        elif actor.name in seen:
            yield Issue("V-031", f"{path}.name", f"actor name {echo(actor.name)} is used by another actor")
        if actor.name is not None:
            seen.add(actor.name)
        if actor.mode is None:
            yield Issue("V-031", path, "every actor must declare a mode")


def v034_mode_protocol_pattern(node: Execution | Actor | Phase | Indicator) -> Iterator[Issue]:
    """V-034 (§5.1): a mode matches `{protocol}_(server|client)` (the closest known mode is suggested); an
    indicator protocol `[a-z][a-z0-9_]*`."""
    if isinstance(node, Indicator):
        if node.protocol is not None and not PROTOCOL.match(node.protocol):
            yield Issue("V-034", "protocol", f"protocol {echo(node.protocol)} must match [a-z][a-z0-9_]*")
    elif node.mode is not None and not MODE.match(node.mode):
        yield Issue("V-034", "mode", f"mode {echo(node.mode)} must match {{protocol}}_server or {{protocol}}_client "
                    f"([a-z][a-z0-9_]*_(server|client)){did_you_mean(node.mode, known_modes())}")


def v044_phase_mode_matches_actor(execution: Execution) -> Iterator[Issue]:
    """V-044 (§5.2): a phase of an explicit actor declares no mode other than its actor's."""
    for a, actor in enumerate(execution.actors or ()):
        for i, phase in enumerate(actor.phases):
            if phase.mode is not None and actor.mode is not None and phase.mode != actor.mode:
                yield Issue("V-044", f"actors[{a}].phases[{i}].mode",
                            f"phase mode {echo(phase.mode)} differs from its actor's mode {echo(actor.mode)}; "
                            "cross-protocol attacks use separate actors")


def w002_unknown_mode(node: Execution | Actor | Phase) -> Iterator[Issue]:
    """W-002 (SDK spec §3.2): a mode that passes V-034 but no included binding defines; likely a typo (the
    closest known mode is suggested)."""
    mode = node.mode
    if mode is not None and MODE.match(mode) and mode not in known_modes():
        yield Issue("W-002", "mode", f"mode {echo(mode)} is not defined by an included binding "
                    f"(known: {', '.join(sorted(known_modes()))})"
                    f"{did_you_mean(mode, known_modes()) or '; is it a typo?'}", warning=True)


# --- triggers and predicates ---------------------------------------------------------------------------------


def v013_regex_syntax(pattern: object) -> Iterator[Issue]:
    """V-013 (§6.2): a regular expression (a `regex` condition, a regex extractor's selector) is valid RE2."""
    if isinstance(pattern, str) and (reason := regex_syntax_error(pattern)):
        yield Issue("V-013", "", f"invalid RE2 regular expression {echo(pattern)}: {reason}")


def v019_count_match_need_event(trigger: Trigger) -> Iterator[Issue]:
    """V-019 (§5.3): trigger `count` and `match` require `event`."""
    if trigger.event is None and (trigger.count is not None or trigger.match is not None):
        yield Issue("V-019", "", "trigger `count` and `match` require `event`")


def v027_predicate_key(key: object) -> Iterator[Issue]:
    """V-027 (§5.4): a match predicate key is a simple dot-path."""
    if not isinstance(key, str) or not is_simple_path(key):
        yield Issue("V-027", "", f"predicate key {echo(key)} must be a simple dot-path (no wildcards or indices)",
                    key=True)


def v029_trigger_event_known(trigger: Trigger, mode: str | None) -> Iterator[Issue]:
    """V-029 (§7), a warning: the trigger event is one the actor's recognized mode defines."""
    event = trigger.event
    if event is not None and mode is not None and mode in known_modes() and not event_is_known(mode, event):
        yield Issue("V-029", "event", f"event {echo(event)} is not defined for mode {echo(mode)}"
                    f"{did_you_mean(event, EVENTS[mode])}", warning=True)


def v036_trigger_after_duration(trigger: Trigger) -> Iterator[Issue]:
    """V-036 (§5.2): `trigger.after` is a duration."""
    if trigger.after is not None and (why := duration_error(trigger.after)):
        yield Issue("V-036", "after", f"trigger.after {echo(trigger.after)} is not a duration: {why}")


def v040_trigger_event_or_after(trigger: Trigger) -> Iterator[Issue]:
    """V-040 (§5.3): a trigger has `event` or `after`."""
    if trigger.event is None and trigger.after is None:
        yield Issue("V-040", "", "a trigger needs `event` or `after` (omit `trigger` for a terminal phase)")


# --- extractors and entry actions ----------------------------------------------------------------------------


def v015_jsonpath_selector(extractor: Extractor) -> Iterator[Issue]:
    """V-015 (§5.5): a `json_path` extractor's selector is valid JSONPath."""
    selector = extractor.selector
    if selector is not None and extractor.type == ExtractorType.JSON_PATH and (
            reason := jsonpath_syntax_error(selector)):
        yield Issue("V-015", "selector", f"invalid JSONPath {echo(selector)}: {reason}")


def v037_extractor_name(extractor: Extractor) -> Iterator[Issue]:
    """V-037 (§5.5): an extractor name matches `[a-z][a-z0-9_]*`."""
    if extractor.name is not None and not NAME.match(extractor.name):
        yield Issue("V-037", "name", f"extractor name {echo(extractor.name)} must match [a-z][a-z0-9_]*")


def v038_extractors_present(phase: Phase) -> Iterator[Issue]:
    """V-038 (§11.1.7): `extractors`, when present, holds at least one extractor."""
    if phase.extractors is not None and not phase.extractors:
        yield Issue("V-038", "extractors", "extractors, when present, must contain at least one extractor")


def v041_single_action_key(action: Action) -> Iterator[Issue]:
    """V-041 (§11.1.16): an entry action has exactly one action key (besides `x-` keys)."""
    keys = [key for key, _ in action.entries]
    if len(keys) != 1:
        shown = ", ".join(map(str, keys)) or "none"
        yield Issue("V-041", "", f"an action has exactly one action key (found: {shown})")


def v042_regex_capture_group(extractor: Extractor) -> Iterator[Issue]:
    """V-042 (§5.5): a `regex` extractor's (valid) selector has a capture group: the first group is extracted."""
    selector = extractor.selector
    if (selector is not None and extractor.type == ExtractorType.REGEX and not regex_syntax_error(selector)
            and compile_regex(selector).groups < 1):
        yield Issue("V-042", "selector",
                    f"regex extractor {echo(selector)} needs a capture group: the first group is extracted")


def v043_on_enter_present(phase: Phase) -> Iterator[Issue]:
    """V-043 (§5.2): `on_enter`, when present, holds at least one action."""
    if phase.on_enter is not None and not phase.on_enter:
        yield Issue("V-043", "on_enter", "on_enter, when present, must contain at least one action")
