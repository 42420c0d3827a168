"""Rules on the document envelope and attack metadata (format spec §4, §11.1.1–§11.1.5)."""

from __future__ import annotations

import re
from enum import StrEnum

from ..durations import parse_duration
from ..errors import OATFParseError, echo
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
from .report import Report

SUPPORTED_VERSIONS = ("0.1",)
ATTACK_ID = re.compile(r"^[A-Z][A-Z0-9-]*-[0-9]{3,}$")


def bad_enum(value: object, enum: type[StrEnum]) -> bool:
    """True for a value parse kept as a plain string because it is not a member of `enum` (V-005)."""
    return value is not None and not isinstance(value, enum)


def enum_message(field: str, value: object, enum: type[StrEnum]) -> str:
    return f"{field} {echo(value)} is not one of: {', '.join(m.value for m in enum)}"


def check_oatf_version(document: Document, report: Report) -> None:
    """V-001: `oatf` is present and a supported version; W-001 (V-002): `oatf` is the first key."""
    shape = dict(document.source.shape_errors) if document.source else {}
    if "oatf" in shape:
        report.error("V-001", "oatf", shape["oatf"])
    elif document.oatf is None:
        report.error("V-001", "oatf", 'the `oatf` version field is missing; declare oatf: "0.1"')
    elif document.oatf not in SUPPORTED_VERSIONS:
        report.error("V-001", "oatf", f"oatf version {echo(document.oatf)} is not supported (supported: 0.1)")
    order = document.source.key_order if document.source else ()
    if document.oatf is not None and order and order[0] != "oatf":
        report.warn("W-001", "oatf", f"`oatf` should be the first key of the document (first is {echo(order[0])})")


def check_single_attack(document: Document, report: Report) -> None:
    """V-003: exactly one `attack` object, and nothing else at the root but `oatf` and `$schema`.

    Unknown root keys are reported here rather than failing `parse`: the validate fixture VAL-020a puts
    one beside its alias and expects a V-020 validation error, so parse must accept it."""
    shape = document.source.shape_errors if document.source else ()
    for path, message in shape:
        if path != "oatf":
            report.error("V-003", path, message)
    if document.attack is None and not any(path == "attack" for path, _ in shape):
        report.error("V-003", "attack", "the document has no `attack` object")


def check_yaml_features(document: Document, report: Report) -> None:
    """V-020: no anchors, aliases, merge keys or custom tags."""
    for path, feature in document.source.yaml_features if document.source else ():
        report.error("V-020", path, f"OATF documents must not use YAML {feature} (format spec §11.1.1)")


def check_attack_fields(attack: Attack, report: Report) -> None:
    """V-004, V-005 (envelope enums), V-017, V-023, V-035, V-045, V-046, V-047."""
    if attack.execution is None:
        report.error("V-004", "attack.execution", "attack.execution is required")
    if attack.id is not None and not ATTACK_ID.match(attack.id):
        report.error("V-023", "attack.id", f"attack.id {echo(attack.id)} must match PREFIX-NNN "
                     "(^[A-Z][A-Z0-9-]*-[0-9]{3,}$), e.g. ACME-001")
    if attack.version is not None and attack.version < 1:
        report.error("V-035", "attack.version", f"attack.version must be a positive integer, got {attack.version}")
    if bad_enum(attack.status, Status):
        report.error("V-005", "attack.status", enum_message("status", attack.status, Status))
    severity = attack.severity
    if severity is not None:
        scalar = severity.confidence is None
        if bad_enum(severity.level, SeverityLevel):
            path = "attack.severity" if scalar else "attack.severity.level"
            report.error("V-005", path, enum_message("severity level", severity.level, SeverityLevel))
        if severity.confidence is not None and not 0 <= severity.confidence <= 100:
            report.error("V-017", "attack.severity.confidence",
                         f"severity.confidence must be within 0–100, got {severity.confidence}")
    seen: set[object] = set()
    for i, impact in enumerate(attack.impact or ()):
        if bad_enum(impact, Impact):
            report.error("V-005", f"attack.impact[{i}]", enum_message("impact", impact, Impact))
        if impact in seen:
            report.error("V-045", "attack.impact", f"impact {impact!s} is listed more than once")
        seen.add(impact)
    classification = attack.classification
    if classification is not None:
        if bad_enum(classification.category, Category):
            report.error("V-005", "attack.classification.category",
                         enum_message("category", classification.category, Category))
        for i, mapping in enumerate(classification.mappings or ()):
            if bad_enum(mapping.relationship, Relationship):
                report.error("V-005", f"attack.classification.mappings[{i}].relationship",
                             enum_message("relationship", mapping.relationship, Relationship))
    if attack.grace_period is not None and (why := duration_error(attack.grace_period)):
        report.error("V-046", "attack.grace_period",
                     f"grace_period {echo(attack.grace_period)} is not a duration: {why}")
    if attack.correlation is not None:
        if attack.indicators is None:
            report.error("V-047", "attack.correlation", "correlation is only meaningful with indicators")
        if bad_enum(attack.correlation.logic, CorrelationLogic):
            report.error("V-005", "attack.correlation.logic",
                         enum_message("correlation.logic", attack.correlation.logic, CorrelationLogic))


def duration_error(text: str) -> str | None:
    """Why `text` is not a valid OATF duration (shorthand or ISO 8601), or None."""
    try:
        parse_duration(text)
    except OATFParseError as exc:
        return exc.errors[0].message
    return None
