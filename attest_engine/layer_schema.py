"""Layer 1 — Schema Validation (Attest protocol v1 §4 "Layer 1").

Validates the value a target selects (structured output, tool args or results) against a JSON Schema,
always as Draft 2020-12, with the `jsonschema` package. A schema that is not a valid 2020-12 schema, or
a `$ref` the engine can't resolve (remote references are never fetched), is an ASSERTION_ERROR. When the
target selects several values (a tool called several times), every one must match. Boolean check: score
1.0 or 0.0.

Regular expressions (`pattern`, `patternProperties`, and the pattern test inside `additionalProperties`) are
matched with RE2 (`oatf.regex`), not Python's backtracking `re`: a pattern such as `^(a+)+$` on a long
string held the GIL for minutes and stalled the whole engine. A schema whose patterns RE2 cannot compile
(backreferences, lookaround) fails the schema check (its `format: regex` positions are checked with RE2),
so it is an ASSERTION_ERROR naming the pattern's location. `unevaluatedProperties` next to
`patternProperties` is an ASSERTION_ERROR too: jsonschema finds the evaluated keys with Python's `re`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from itertools import islice
from typing import Any

import jsonschema
import referencing.exceptions

from oatf.regex import RegexSyntaxError, compile_regex, searcher

from .checks import DeterministicCheck, Outcome, SpecError, TraceView, not_found, show, target

_ERRORS_COUNTED = 50

_Errors = Iterator[jsonschema.ValidationError]


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> _Errors:
    """Draft 2020-12 `pattern` (a partial match, JSON Schema Validation §6.3.3) with RE2."""
    if validator.is_type(instance, "string") and not searcher(pattern)(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> _Errors:
    """Draft 2020-12 `patternProperties` (JSON Schema Core §10.3.2.2) with RE2."""
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        matches = searcher(pattern)
        for key, value in instance.items():
            if matches(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> _Errors:
    """Draft 2020-12 `additionalProperties` (JSON Schema Core §10.3.2.3): the keys neither `properties` nor
    `patternProperties` (matched with RE2) cover; messages as jsonschema words them."""
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [searcher(pattern) for pattern in schema.get("patternProperties", {})]
    extras = [key for key in instance if key not in properties and not any(match(key) for match in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(pattern) for pattern in sorted(schema["patternProperties"]))
            yield jsonschema.ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield jsonschema.ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


_RE2_FORMATS = jsonschema.FormatChecker(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)


@_RE2_FORMATS.checks("regex", raises=RegexSyntaxError)
def _is_re2(instance: object) -> bool:
    """`format: regex` with RE2 semantics; like every format, it constrains strings only."""
    if isinstance(instance, str):
        compile_regex(instance)  # raises RegexSyntaxError for a pattern outside RE2
    return True

_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties},
)


def _uses_unevaluated_and_pattern_properties(schema: Any) -> bool:
    """Whether any subschema of `schema` has `unevaluatedProperties` and any has `patternProperties`
    (conservatively: a property merely named so counts too)."""
    found: set[str] = set()
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            found.update(key for key in ("unevaluatedProperties", "patternProperties") if key in node)
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return len(found) == 2


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_json)
    try:
        _Validator.check_schema(schema, format_checker=_RE2_FORMATS)
    except jsonschema.SchemaError as exc:
        where = exc.json_path if exc.path else "the schema root"
        cause = exc.cause
        why = f" (RE2 syntax: {cause.reason})" if isinstance(cause, RegexSyntaxError) else ""
        raise SpecError(
            f"malformed JSON Schema at {where}: {exc.message}{why}",
            "Fix spec.schema: it must be a valid JSON Schema Draft 2020-12 document.",
        ) from None
    if _uses_unevaluated_and_pattern_properties(schema):
        raise SpecError(
            "unsupported JSON Schema: unevaluatedProperties together with patternProperties",
            "Use additionalProperties instead of unevaluatedProperties, or drop patternProperties: the engine "
            "matches patterns with RE2 only, and jsonschema's unevaluatedProperties would use Python's re.",
        )
    return _Validator(schema)


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
