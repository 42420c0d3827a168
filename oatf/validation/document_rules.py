"""Rules on the document envelope and attack metadata (format spec §4, §11.1.1–§11.1.5)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from enum import EnumType

from ..durations import parse_duration
from ..errors import OATFParseError, did_you_mean, echo
from ..model import (
    Attack,
    Category,
    CorrelationLogic,
    Document,
    Impact,
    Relationship,
    SeverityLevel,
    Status,
)
from .report import Issue, Report

SUPPORTED_VERSIONS = ("0.1",)
ATTACK_ID = re.compile(r"^[A-Z][A-Z0-9-]*-[0-9]{3,}$")


def check_document(document: Document, report: Report) -> None:
    """The driver for the envelope (paths relative to the document root) and attack metadata."""
    report.add("", v001_oatf_version(document))
    report.add("", v002_oatf_first_key(document))
    report.add("", v003_single_attack(document))
    report.add("", v020_yaml_features(document))
    attack = document.attack
    if attack is None:
        return
    for rule in (v004_execution_required, v023_attack_id_format, v035_attack_version, v017_severity_confidence,
                 v045_unique_impacts, v046_grace_period, v047_correlation_needs_indicators):
        report.add("attack", rule(attack))
    report.add("attack.status", v005_enum_value(attack.status, Status, "status"))
    severity = attack.severity
    if severity is not None:
        level_path = "attack.severity" if severity.confidence is None else "attack.severity.level"
        report.add(level_path, v005_enum_value(severity.level, SeverityLevel, "severity level"))
    for i, impact in enumerate(attack.impact or ()):
        report.add(f"attack.impact[{i}]", v005_enum_value(impact, Impact, "impact"))
    classification = attack.classification
    if classification is not None:
        report.add("attack.classification.category",
                   v005_enum_value(classification.category, Category, "category"))
        for i, mapping in enumerate(classification.mappings or ()):
            report.add(f"attack.classification.mappings[{i}].relationship",
                       v005_enum_value(mapping.relationship, Relationship, "relationship"))
    if attack.correlation is not None:
        report.add("attack.correlation.logic",
                   v005_enum_value(attack.correlation.logic, CorrelationLogic, "correlation.logic"))


def v001_oatf_version(document: Document) -> Iterator[Issue]:
    """V-001 (§11.1.1): `oatf` is present and a supported version."""
    shape = dict(document.source.shape_errors) if document.source else {}
    if "oatf" in shape:
        yield Issue("V-001", "oatf", shape["oatf"])
    elif document.oatf is None:
        yield Issue("V-001", "oatf", 'the `oatf` version field is missing; declare oatf: "0.1"')
    elif document.oatf not in SUPPORTED_VERSIONS:
        yield Issue("V-001", "oatf", f"oatf version {echo(document.oatf)} is not supported (supported: 0.1)")


def v002_oatf_first_key(document: Document) -> Iterator[Issue]:
    """V-002 (§11.1.2), reported as warning W-001: `oatf` is the first key of the document."""
    order = document.source.key_order if document.source else ()
    if document.oatf is not None and order and order[0] != "oatf":
        yield Issue("W-001", "oatf", f"`oatf` should be the first key of the document (first is {echo(order[0])})",
                    warning=True)


def v003_single_attack(document: Document) -> Iterator[Issue]:
    """V-003 (§11.1.3): exactly one `attack` object, and nothing else at the root but `oatf` and `$schema`.

    Unknown root keys are reported here rather than failing `parse`: the validate fixture VAL-020a puts
    one beside its alias and expects a V-020 validation error, so parse must accept it."""
    shape = document.source.shape_errors if document.source else ()
    for path, message in shape:
        if path != "oatf":
            yield Issue("V-003", path, message)
    if document.attack is None and not any(path == "attack" for path, _ in shape):
        yield Issue("V-003", "attack", "the document has no `attack` object")


def v004_execution_required(attack: Attack) -> Iterator[Issue]:
    """V-004 (§11.1.4): `attack.execution` is present."""
    if attack.execution is None:
        yield Issue("V-004", "execution", "attack.execution is required")


def v005_enum_value(value: object, allowed: Iterable[str], name: str = "") -> Iterator[Issue]:
    """V-005 (§11.1.5): a closed-enumeration field holds one of its values (`name` introduces the value in the
    message; the closest member is suggested). Parse keeps a value that is no member of its enum as a plain
    string, which is not `allowed`."""
    if value is None or (isinstance(allowed, EnumType) and isinstance(value, allowed)):  # a member, as parsed
        return
    members = tuple(allowed)
    if value not in members:
        prefix = f"{name} " if name else ""
        yield Issue("V-005", "", f"{prefix}{echo(value)} is not one of: {', '.join(members)}"
                    f"{did_you_mean(value, members)}")


def v017_severity_confidence(attack: Attack) -> Iterator[Issue]:
    """V-017 (§4.3): `severity.confidence` is within 0–100."""
    confidence = attack.severity.confidence if attack.severity is not None else None
    if confidence is not None and not 0 <= confidence <= 100:
        yield Issue("V-017", "severity.confidence", f"severity.confidence must be within 0–100, got {confidence}")


def v020_yaml_features(document: Document) -> Iterator[Issue]:
    """V-020 (§11.1.1): no anchors, aliases, merge keys or custom tags."""
    for path, feature in document.source.yaml_features if document.source else ():
        yield Issue("V-020", path, f"OATF documents must not use YAML {feature} (format spec §11.1.1)")


def v023_attack_id_format(attack: Attack) -> Iterator[Issue]:
    """V-023 (§4.2): `attack.id` matches PREFIX-NNN."""
    if attack.id is not None and not ATTACK_ID.match(attack.id):
        yield Issue("V-023", "id", f"attack.id {echo(attack.id)} must match PREFIX-NNN "
                    "(^[A-Z][A-Z0-9-]*-[0-9]{3,}$), e.g. ACME-001")


def v035_attack_version(attack: Attack) -> Iterator[Issue]:
    """V-035 (§4.2): `attack.version` is a positive integer."""
    if attack.version is not None and attack.version < 1:
        yield Issue("V-035", "version", f"attack.version must be a positive integer, got {attack.version}")


def v045_unique_impacts(attack: Attack) -> Iterator[Issue]:
    """V-045 (§4.2): no impact is listed twice."""
    seen: set[object] = set()
    for impact in attack.impact or ():
        if impact in seen:
            yield Issue("V-045", "impact", f"impact {impact!s} is listed more than once")
        seen.add(impact)


def v046_grace_period(attack: Attack) -> Iterator[Issue]:
    """V-046 (§4.2): `grace_period` is a duration."""
    if attack.grace_period is not None and (why := duration_error(attack.grace_period)):
        yield Issue("V-046", "grace_period", f"grace_period {echo(attack.grace_period)} is not a duration: {why}")


def v047_correlation_needs_indicators(attack: Attack) -> Iterator[Issue]:
    """V-047 (§2.3a): `correlation` only appears with `indicators`."""
    if attack.correlation is not None and attack.indicators is None:
        yield Issue("V-047", "correlation", "correlation is only meaningful with indicators")


def duration_error(text: str) -> str | None:
    """Why `text` is not a valid OATF duration (shorthand or ISO 8601), or None."""
    try:
        parse_duration(text)
    except OATFParseError as exc:
        return exc.errors[0].message
    return None
