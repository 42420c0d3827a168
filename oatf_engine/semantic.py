"""Loading a `SemanticEvaluator` (SDK spec §6.2) named by the `oatf_semantic_evaluator` option."""

from __future__ import annotations

import importlib
from typing import Any

import oatf


def load_semantic_evaluator(spec: str) -> oatf.SemanticEvaluator | None:
    """`module:attribute` naming a SemanticEvaluator (or a zero-argument factory of one); None for "".

    Raises ImportError / AttributeError when the name does not resolve."""
    if not spec:
        return None
    module_name, _, attribute = spec.partition(":")
    target: Any = getattr(importlib.import_module(module_name), attribute or "evaluator")
    return target() if isinstance(target, type) else target
