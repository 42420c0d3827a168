"""Template interpolation (SDK spec §5.5 `interpolate_template`, §5.5a `interpolate_value`; format spec §5.6
"Response Templates").

`{{name}}` is an extractor value (`{{actor.name}}` a cross-actor one: the caller puts qualified keys in
`extractors`), `{{request.a.b}}` / `{{response.a.b}}` a simple dot-path into the current request or
response, and `\\{{` a literal `{{`. A reference is the text between an unescaped `{{` and the next `}}`,
stripped of surrounding whitespace. An unescaped `{{` with no `}}` after it is kept as literal text (it is
a V-016 error at validate time: `template_syntax_error`). Substituted text is never scanned again, so an
extracted value containing `{{` cannot inject a template expression.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .errors import Diagnostic, DiagnosticSeverity, echo
from .paths import NOT_FOUND, resolve_simple_path
from .values import compact_json

_OPEN = "{{"
_CLOSE = "}}"
_ESCAPE = "\\"
_MESSAGE_PREFIXES = ("request.", "response.")


def _scan(template: str) -> Iterator[tuple[str, str | None]]:
    """Split `template` into (literal text, reference or None) pairs, escapes already resolved.

    The reference is None for the last piece and for an unclosed `{{` (whose text is in the literal)."""
    position = 0
    literal: list[str] = []
    while True:
        start = template.find(_OPEN, position)
        if start < 0:
            break
        if start > 0 and template[start - 1] == _ESCAPE:
            literal.append(template[position : start - 1])
            literal.append(_OPEN)
            position = start + len(_OPEN)
            continue
        end = template.find(_CLOSE, start + len(_OPEN))
        if end < 0:
            break
        literal.append(template[position:start])
        yield "".join(literal), template[start + len(_OPEN) : end].strip()
        literal.clear()
        position = end + len(_CLOSE)
    literal.append(template[position:])
    yield "".join(literal), None


def template_literals(template: str) -> list[str]:
    """The literal text between the references of `template`, in order (escapes resolved; format spec §5.6).
    Whatever a reference interpolates to, an interpolated string holds these pieces in this order: the
    monitor uses them to recognise a document's payload on the wire (`oatf_engine.monitor.delivery`)."""
    return [literal for literal, _ in _scan(template)]


def template_references(template: str) -> list[str]:
    """The references of `template` in order (`name`, `actor.name`, `request.a.b`, …), escaped `\\{{…}}`
    excluded; used to report W-004 (a) (unknown extractor reference) at validate time."""
    return [reference for _, reference in _scan(template) if reference is not None]


def template_syntax_error(template: str) -> str | None:
    """Why `template` is not valid template syntax, or None (validation rule V-016): an unescaped `{{`
    without a closing `}}`. Escaped `\\{{` is not a reference and is never flagged."""
    position = 0
    while True:
        start = template.find(_OPEN, position)
        if start < 0:
            return None
        position = start + len(_OPEN)
        if start > 0 and template[start - 1] == _ESCAPE:
            continue
        end = template.find(_CLOSE, position)
        if end < 0:
            return f"unclosed template reference at offset {start}: {template[start : start + 40]!r}"
        position = end + len(_CLOSE)


def _as_text(value: Any) -> str:
    """A resolved request/response value as template text: strings as they are, anything else as
    compact JSON (`42`, `true`, `null`, `{"a":1}`)."""
    if isinstance(value, str):
        return value
    try:
        return compact_json(value)
    except (TypeError, ValueError, RecursionError):
        return ""


def _w004(reference: str, why: str) -> Diagnostic:
    return Diagnostic(
        severity=DiagnosticSeverity.WARNING, code="W-004", message=f"template reference {echo(reference)} {why}"
    )


def interpolate_template(
    template: str,
    extractors: Mapping[str, str],
    request: Any = None,
    response: Any = None,
) -> tuple[str, list[Diagnostic]]:
    """SDK spec §5.5 `interpolate_template`: the interpolated string and its W-004 warnings.

    Each reference resolves, in this order, to: the value of the extractor of that exact name (local or
    `actor.name`); for `request.<path>` when `request` is not None, the value at `<path>` in `request`;
    likewise `response.<path>`. Non-string values are written as compact JSON. A reference that resolves
    to nothing becomes "" with a W-004 warning (an extractor absent from `extractors` is undefined; one
    mapped to "" substitutes "" silently). None for `request`/`response` means absent."""
    if _OPEN not in template:
        return template, []
    parts: list[str] = []
    diagnostics: list[Diagnostic] = []
    for literal, reference in _scan(template):
        parts.append(literal)
        if reference is None:
            continue
        value = extractors.get(reference)
        if value is not None:
            parts.append(value)
            continue
        for prefix, message in zip(_MESSAGE_PREFIXES, (request, response), strict=True):
            if message is not None and reference.startswith(prefix):
                resolved = resolve_simple_path(reference[len(prefix) :], message)
                if resolved is NOT_FOUND:
                    diagnostics.append(_w004(reference, f"did not resolve in the {prefix[:-1]}"))
                else:
                    parts.append(_as_text(resolved))
                break
        else:
            diagnostics.append(_w004(reference, "is not a defined extractor or message path"))
    return "".join(parts), diagnostics


def interpolate_value(
    value: Any,
    extractors: Mapping[str, str],
    request: Any = None,
    response: Any = None,
) -> tuple[Any, list[Diagnostic]]:
    """SDK spec §5.5a `interpolate_value`: `value` with `interpolate_template` applied to every string in
    it (object values and array elements, never object keys), and all W-004 warnings in document order.

    Other scalars are returned unchanged, and so is every subtree in which no string changes: nothing is
    copied unless a string in it changes; a changed object comes back as a dict, a changed list as a
    list, a changed tuple as a tuple. Values are document content (phase state, action parameters), whose
    depth the YAML parser already bounds."""
    diagnostics: list[Diagnostic] = []
    return _interpolate(value, extractors, request, response, diagnostics), diagnostics


def _interpolate(
    value: Any, extractors: Mapping[str, str], request: Any, response: Any, diagnostics: list[Diagnostic]
) -> Any:
    if isinstance(value, str):
        if _OPEN not in value:
            return value
        text, found = interpolate_template(value, extractors, request, response)
        diagnostics.extend(found)
        return text
    if isinstance(value, Mapping):
        copied: dict[Any, Any] | None = None
        for key, item in value.items():
            new = _interpolate(item, extractors, request, response, diagnostics)
            if new is not item and copied is None:
                copied = dict(value)
            if copied is not None:
                copied[key] = new
        return value if copied is None else copied
    if isinstance(value, list | tuple):
        replaced: list[Any] | None = None
        for index, item in enumerate(value):
            new = _interpolate(item, extractors, request, response, diagnostics)
            if new is not item and replaced is None:
                replaced = list(value)
            if replaced is not None:
                replaced[index] = new
        if replaced is None:
            return value
        return replaced if isinstance(value, list) else tuple(replaced)
    return value
