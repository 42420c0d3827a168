"""`validate` (SDK spec §3.2): every V-rule and W-code, all violations at once, ordered by dot-path.

Each rule is one small generator named by its id and what it checks (`v025_indicator_confidence`,
`w004_template_reference`), its docstring naming the rule and the spec section. It yields `Issue`s whose paths
are relative to the node it inspects; the drivers (`check_*`) walk the document, join those paths to the node's
dot-path and record them in a `Report`, which locates errors in the source and sorts everything by path. Rules
are grouped by what they inspect — the envelope and attack metadata (`document_rules`), the execution profile
(`execution_rules`), indicators (`indicator_rules`) and phase state (`state_rules`). A rule never raises on a
malformed document: it reports and moves on.
"""

from __future__ import annotations

from ..bindings import known_modes, known_protocols
from ..model import Document
from .document_rules import check_document
from .execution_rules import check_execution
from .indicator_rules import check_indicators
from .report import SPEC_REFS, Report, ValidationResult
from .state_rules import check_states

__all__ = ["SPEC_REFS", "ValidationResult", "known_modes", "known_protocols", "validate"]


def validate(document: Document) -> ValidationResult:
    """SDK spec §3.2. A document is conforming iff `result.errors` is empty."""
    report = Report(document)
    check_document(document, report)
    attack = document.attack
    if attack is not None:
        check_execution(attack, report)
        check_indicators(attack, report)
        check_states(attack, report)
    return report.result()
