"""`validate` (SDK spec §3.2): every V-rule and W-code, all violations at once, ordered by dot-path.

Rules live in small functions grouped by what they inspect — the envelope (`document_rules`), the execution
profile (`execution_rules`), indicators (`indicator_rules`) and phase state (`state_rules`) — each naming
its rule in its docstring. A rule never raises on a malformed document: it reports and moves on.
"""

from __future__ import annotations

from ..bindings import known_modes, known_protocols
from ..model import Document
from .document_rules import check_attack_fields, check_oatf_version, check_single_attack, check_yaml_features
from .execution_rules import check_execution
from .indicator_rules import check_indicators
from .report import SPEC_REFS, Report, ValidationResult
from .state_rules import check_states

__all__ = ["SPEC_REFS", "ValidationResult", "known_modes", "known_protocols", "validate"]


def validate(document: Document) -> ValidationResult:
    """SDK spec §3.2. A document is conforming iff `result.errors` is empty."""
    report = Report(document)
    check_oatf_version(document, report)
    check_single_attack(document, report)
    check_yaml_features(document, report)
    attack = document.attack
    if attack is not None:
        check_attack_fields(attack, report)
        check_execution(attack, report)
        check_indicators(attack, report)
        check_states(attack, report)
    return report.result()
