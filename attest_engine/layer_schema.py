"""Layer 1 — Schema Validation (Attest protocol v1 §4 "Layer 1").

Validates the value a target selects (structured output, tool args or results) against a JSON Schema,
always as Draft 2020-12, with the `jsonschema` package. A schema that is not a valid 2020-12 schema, or
a `$ref` the engine can't resolve (remote references are never fetched), is an ASSERTION_ERROR. When the
target selects several values (a tool called several times), every one must match. Boolean check: score
1.0 or 0.0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from itertools import islice
from typing import Any

import jsonschema
import referencing.exceptions

from .checks import DeterministicCheck, Outcome, SpecError, TraceView, not_found, show, target

_ERRORS_COUNTED = 50


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_json)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = exc.json_path if exc.path else "the schema root"
        raise SpecError(
            f"malformed JSON Schema at {where}: {exc.message}",
            "Fix spec.schema: it must be a valid JSON Schema Draft 2020-12 document.",
        ) from None
    return jsonschema.Draft202012Validator(schema)


def _describe(error: jsonschema.ValidationError) -> str:
    where = error.json_path.removeprefix("$").lstrip(".") or "value"
    return f"{where}: {error.message}" if where != "value" else error.message


def compile_schema(spec: Mapping[str, Any]) -> DeterministicCheck:
    """The layer 1 check for `spec` (`target`, `schema`)."""
    selector = target(spec)
    schema = spec.get("schema")
    if not isinstance(schema, dict | bool):
        raise SpecError(
            f"spec.schema must be a JSON Schema object, got {show(schema)}",
            "Set spec.schema to a JSON Schema Draft 2020-12 document.",
        )
    validator = _validator(json.dumps(schema, sort_keys=True, separators=(",", ":")))

    def check(view: TraceView) -> Outcome:
        selection = view.select(selector)
        if not selection.values:
            return not_found(selection, selector)
        try:
            for path, value in selection.values:
                if validator.is_valid(value):
                    continue
                errors = list(islice(validator.iter_errors(value), _ERRORS_COUNTED))
                best = jsonschema.exceptions.best_match(errors)
                more = len(errors) - 1
                tail = f" (and {more}{'+' if len(errors) == _ERRORS_COUNTED else ''} more)" if more > 0 else ""
                return Outcome(False, 0.0, f"{path} failed schema validation: {_describe(best)}{tail}.")
        except referencing.exceptions.Unresolvable as exc:
            raise SpecError(
                f"schema $ref cannot be resolved: {exc}",
                "Inline the referenced schema under $defs: the engine never fetches remote schemas.",
            ) from None
        paths = ", ".join(path for path, _ in selection.values)
        required = schema.get("required") if isinstance(schema, dict) else None
        fields = f"; required fields {', '.join(map(str, required))} present" if isinstance(required, list) else ""
        return Outcome(True, 1.0, f"{paths} match{'es' if len(selection.values) == 1 else ''} schema{fields}.")

    return check
