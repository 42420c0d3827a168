"""Every validation rule is one function named by its id (`v025_indicator_confidence`), whose docstring names it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import oatf.validation
from oatf.validation import SPEC_REFS

VALIDATION = Path(oatf.validation.__file__).parent
SPEC_TABLE = VALIDATION.parents[2] / "shared" / "oatf-spec" / "docs" / "sdk" / "entry-points.md"
V_RULES = [f"V-{n:03d}" for n in range(1, 50)]
W_RULES = [f"W-{n:03d}" for n in range(2, 8)]  # W-001 is V-002's warning, implemented by v002_*
RULE_FUNCTION = re.compile(r"^([vw])(\d{3})_[a-z0-9_]+$")


def rule_functions() -> dict[str, list[ast.FunctionDef]]:
    """Rule id → the functions of `oatf/validation` named after it."""
    found: dict[str, list[ast.FunctionDef]] = {}
    for module in sorted(VALIDATION.glob("*.py")):
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, ast.FunctionDef) and (match := RULE_FUNCTION.match(node.name)):
                found.setdefault(f"{match[1].upper()}-{match[2]}", []).append(node)
    return found


def test_the_rule_table_lists_v001_to_v049() -> None:
    assert sorted(SPEC_REFS) == V_RULES


def test_the_rule_table_matches_the_spec() -> None:
    if not SPEC_TABLE.is_file():
        pytest.skip(f"the OATF spec is not checked out at {SPEC_TABLE}")
    assert sorted(set(re.findall(r"^\| (V-\d{3}) \|", SPEC_TABLE.read_text(), re.MULTILINE))) == V_RULES


@pytest.mark.parametrize("rule", V_RULES + W_RULES)
def test_each_rule_has_exactly_one_function_whose_docstring_names_it(rule: str) -> None:
    functions = rule_functions().get(rule, [])
    assert len(functions) == 1, [f.name for f in functions]
    assert rule in (ast.get_docstring(functions[0]) or ""), f"{functions[0].name}'s docstring does not name {rule}"


def test_no_function_is_named_after_an_unknown_rule() -> None:
    assert set(rule_functions()) <= set(V_RULES + W_RULES)
