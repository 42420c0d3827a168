"""YAML 1.2 text → plain JSON-like values with source positions (SDK spec §3.1 step 1).

Built on ruamel.yaml's event parser (the libyaml-based C parser when `ruamel.yaml.clib` is installed, the
pure-Python one otherwise) with our own iterative composer, so that:
- nothing is ever constructed from tags (safe by design: no Python objects, no `!!python/...`);
- plain scalars resolve by the YAML 1.2 core schema (`yes`/`no`/`on` stay strings, `0o17` is octal);
- every node's 1-based line/column is kept by dot-path, for diagnostics;
- anchors, aliases, merge keys and custom tags are recorded (format spec §11.1.1, rule V-020), and alias
  expansion is bounded so an alias bomb cannot exhaust memory;
- nesting depth and input size are bounded (`MAX_DOCUMENT_BYTES`, `MAX_NESTING_DEPTH`), with no recursion.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from ruamel.yaml.reader import ReaderError

from .errors import OATFParseError, ParseError, ParseErrorKind, echo

try:  # as ruamel.yaml itself finds its C parser (`ruamel.yaml.main`)
    from _ruamel_yaml import CParser  # type: ignore[import-not-found]  # C extension without stubs
except ImportError:  # pragma: no cover - ruamel.yaml.clib is a dependency
    CParser = None

MAX_DOCUMENT_BYTES = 10 * 1024 * 1024
"""Largest accepted document (10 MiB): larger input is rejected before parsing."""
MAX_NESTING_DEPTH = 256
"""Deepest accepted nesting of mappings and sequences."""
MAX_EXPANDED_NODES = 1_000_000
"""Most nodes a document may hold once aliases are expanded (alias-bomb guard)."""
MAX_INTEGER_DIGITS = 4300
"""Longest integer accepted, in decimal digits (Python's default int/str conversion limit, so that every
parsed integer can be printed, serialized and echoed in a diagnostic); hex and octal integers are bounded
by the same magnitude."""
_INTEGER_BOUND = 10**MAX_INTEGER_DIGITS

_CORE_TAGS = {
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq", "!",
}
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_WORDS = {"": None, "~": None, "null": None, "Null": None, "NULL": None,
          "true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
"""The core schema's null and bool forms, as written."""
_WORD_STARTS = frozenset("~nNtTfF")
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")


@dataclass
class YamlSource:
    """A parsed YAML document: its value and what `validate` needs to know about its text."""

    value: Any
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    """dot-path → (line, column) of each node: where a scalar is written, where a collection's key is."""
    key_positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    """dot-path → (line, column) of the mapping key that names the node."""
    yaml_features: list[tuple[str, str]] = field(default_factory=list)


def child_path(parent: str, key: str | int) -> str:
    """The dot-path of a child node: `a.b` for a key, `a[0]` for an index (SDK spec §7 dot-paths)."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


_NON_STRING_STARTS = frozenset("~nNtTfF0123456789+-.")


def resolve_plain_scalar(text: str) -> Any:
    """YAML 1.2 core schema resolution of an untagged plain scalar."""
    if text and text[0] not in _NON_STRING_STARTS:
        return text
    if text in _WORDS:
        return _WORDS[text]
    if text[0] in _WORD_STARTS and text[-1] != "\n":  # no number starts so; `_NULL` matches "null\n" too
        return text
    if _NULL.match(text):
        return None
    if _INT10.match(text):
        return _integer(text, 10)
    if _INT8.match(text):
        return _integer(text[2:], 8)
    if _INT16.match(text):
        return _integer(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return -math.inf if text.startswith("-") else math.inf
    if _NAN.match(text):
        return math.nan
    return text


def _integer(digits: str, base: int) -> int:
    """`int(digits, base)` within `MAX_INTEGER_DIGITS`; a ValueError naming the limit otherwise. Decimal
    text is measured before conversion (converting it is what Python limits, and quadratic)."""
    too_large = f"integer is too large: more than {MAX_INTEGER_DIGITS} decimal digits"
    if base == 10 and (count := len(digits.lstrip("+-"))) > MAX_INTEGER_DIGITS:
        raise ValueError(f"{too_large} ({count} digits)")
    value = int(digits, base)
    if abs(value) >= _INTEGER_BOUND:
        raise ValueError(too_large)
    return value


def _error(message: str, line: int | None = None, column: int | None = None) -> OATFParseError:
    return OATFParseError([ParseError(ParseErrorKind.SYNTAX, message, None, line, column)])


def _tagged_scalar(tag: str, text: str) -> Any:
    """A scalar with an explicit core tag (`!!str 5`, `!!int "5"`)."""
    if tag.endswith(":str") or tag == "!":
        return text
    value = resolve_plain_scalar(text)
    if tag.endswith(":null") and value is None:
        return None
    if tag.endswith(":bool") and isinstance(value, bool):
        return value
    if tag.endswith(":int") and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tag.endswith(":float") and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"value {echo(text)} does not match its tag {echo(tag)}")


class _Frame:
    __slots__ = ("anchor", "container", "key", "key_path", "path", "start_count")

    def __init__(self, container: Any, path: str, anchor: str | None, start_count: int):
        self.container = container
        self.path = path
        self.key: Any = _NO_KEY
        self.key_path = ""
        """The dot-path of the value of `key` (a mapping's), once its key is placed."""
        self.anchor = anchor
        self.start_count = start_count


_NO_KEY = object()


def load_yaml(text: str | bytes) -> YamlSource:
    """Parse exactly one YAML document into plain values; raise `OATFParseError` (kind `syntax`)."""
    if isinstance(text, bytes | bytearray):
        if len(text) > MAX_DOCUMENT_BYTES:
            raise _error(f"document is {len(text)} bytes; the maximum is {MAX_DOCUMENT_BYTES}")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _error(f"document is not valid UTF-8 (byte offset {exc.start})") from None
    if len(text) > MAX_DOCUMENT_BYTES:
        raise _error(f"document is {len(text)} characters; the maximum is {MAX_DOCUMENT_BYTES} bytes")
    if "\x00" in text:
        offset = text.index("\x00")
        line = text.count("\n", 0, offset) + 1
        column = offset - text.rfind("\n", 0, offset)  # 1-based; rfind gives -1 on the first line
        raise _error("document contains a NUL character", line, column)
    try:
        return _compose(text)
    except OATFParseError:
        raise
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at_line, at_column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise _error(f"invalid YAML: {syntax_message(exc, text)}", at_line, at_column) from None
    except ReaderError as exc:  # a character YAML does not allow anywhere: located by its offset
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        raise _error(f"invalid YAML: character U+{exc.character:04X} is not allowed in YAML text (write it as "
                     "an escape in a double-quoted string)" if isinstance(exc.character, int)
                     else f"invalid YAML: {' '.join(str(exc.reason).split())}", line, column) from None
    except (YAMLError, ValueError, TypeError, UnicodeError) as exc:
        raise _error(f"invalid YAML: {' '.join(str(exc).split())}") from None


_SYNTAX_MESSAGES = (
    ("mapping values are not allowed", "unexpected ':': a key indented deeper than the keys before it, or a "
     "plain value holding ': ' (quote the value)"),
    ("did not find expected key", "this line does not line up with the keys of the {context_what} at {context_at}: "
     "check its indentation"),
    ("expected <block end>", "this line does not line up with the keys of the {context_what} at {context_at}: "
     "check its indentation"),
    ("did not find expected '-' indicator", "expected a '- ' item of the list at {context_at}: a list and mapping "
     "keys are mixed at one indentation"),
    ("could not find expected ':'", "a key without ':' (the key starts at {context_at})"),
    ("found unexpected end of stream", "the {context_what} at {context_at} is never closed"),
    ("did not find expected ',' or", "the {context_what} at {context_at} is not closed: expected ',' or '{closer}'"),
    ("found incompatible YAML document", "the %YAML directive names a version this parser does not read "
     "(OATF documents are YAML 1.2)"),
)
"""(a YAML parser's problem, as the start of its text → what the author reads: one line, in terms of the
document). `{context_what}` and `{context_at}` name the construct the parser was in and where it starts."""


_CONSTRUCTS = {"block mapping": "mapping", "block collection": "list", "flow sequence": "[…] list",
               "flow mapping": "{…} mapping", "quoted scalar": "quoted string"}
"""The parser's names of YAML constructs → the names an author knows."""


def syntax_message(exc: MarkedYAMLError, text: str) -> str:
    """A YAML syntax error (SDK spec §3.1: `ParseError` kind `syntax`) as one human line: the common mistakes
    (indentation, a tab, an unclosed quote or bracket, an unquoted ': ', an empty or missing value, an unknown
    escape such as a regex's `\\d` in double quotes) in the author's terms, anything else as the parser's problem
    and the construct it was in. Never more than one line."""
    problem = " ".join((exc.problem or exc.context or "invalid YAML").split())
    context = exc.context_mark
    construct = " ".join((exc.context or "").split())
    for prefix in ("while ", "parsing ", "scanning ", "a "):
        construct = construct.removeprefix(prefix)
    context_what = _CONSTRUCTS.get(construct, construct or "construct")
    context_at = f"line {context.line + 1}, column {context.column + 1}" if context is not None else "its start"
    mark = exc.problem_mark
    found = text[mark.index] if mark is not None and 0 <= mark.index < len(text) else ""
    if problem.startswith("found character that cannot start any token") or "tab character" in problem:
        if found == "\t" or "tab character" in problem:
            return "a tab character: YAML is indented with spaces only"
        return f"{found!r} cannot start a plain value: quote the value"
    if problem.startswith("did not find expected node content"):
        if not found:
            return "the text ends where a value should be: a […] list or {…} mapping is never closed"
        if found == ",":
            return "an empty item: ',' where a value should be (two commas, or one first, in a […] list or {…} mapping)"
        return f"a value should be here, not {found!r}"
    if problem.startswith("found unknown escape character") and mark is not None:
        escape = text[mark.index:mark.index + 2]
        return (f"unknown escape '{escape}' in a double-quoted string: write '\\\\' for a backslash (a regex's "
                "'\\\\d'), or quote the value with single quotes")
    for start, message in _SYNTAX_MESSAGES:
        if problem.startswith(start):
            closer = "}" if "'}'" in problem else "]"
            return message.format(context_what=context_what, context_at=context_at, closer=closer)
    if exc.context and context is not None and exc.problem:
        return f"{problem} ({' '.join(exc.context.split())} at {context_at})"
    return problem


@contextlib.contextmanager
def _events(text: str) -> Iterator[Callable[[], Any]]:
    """The parsing events of `text`, one per call (None after the last): from ruamel.yaml's C parser itself when
    it is installed (what `YAML(typ="safe").parse` uses then, without building a loader class and scanning for
    plug-ins per document: a third of the parsing time), else from `YAML(typ="safe", pure=True).parse`."""
    if CParser is None:
        yield functools.partial(next, iter(YAML(typ="safe", pure=True).parse(text)), None)
        return
    parser = CParser(text)
    try:
        yield parser.get_event
    finally:
        parser.dispose()


def _compose(text: str) -> YamlSource:
    """`text`'s one document as plain values, with positions and features. One loop over the events, without a
    call per node (a document of a library is a few hundred nodes: the loop is most of parsing): a scalar, an
    ended collection or an alias is *placed* (appended to its list, or a mapping's key or value), at the end of
    the loop's body; `frame` is the innermost open collection (`None` at the root)."""
    positions: dict[str, tuple[int, int]] = {}
    key_positions: dict[str, tuple[int, int]] = {}
    source = YamlSource(value=None, positions=positions, key_positions=key_positions)
    features = source.yaml_features
    documents = 0
    stack: list[_Frame] = []
    frame: _Frame | None = None
    anchors: dict[str, tuple[Any, int]] = {}
    node_count = 0
    expanded = 0
    root: Any = None
    have_root = False
    with _events(text) as get:
        while (event := get()) is not None:
            kind = type(event)
            if kind is ScalarEvent:
                mark = event.start_mark
                line, column = mark.line + 1, mark.column + 1
                # `event.ctag`, not `event.tag`: a property that calls `str` on every event, tagged or not
                anchor, tag, value = event.anchor, event.ctag, event.value
                if anchor is not None or tag is not None:
                    tag = None if tag is None else str(tag)
                    _record_features(source, _current_path(frame), anchor, tag)
                try:
                    if tag is not None:
                        if tag in _CORE_TAGS:
                            value = _tagged_scalar(tag, value)
                    elif not event.style and (not value or value[0] in _NON_STRING_STARTS):  # may not be a string
                        value = resolve_plain_scalar(value)
                except ValueError as exc:  # a value not matching its tag, an integer too large
                    raise _error(str(exc), line, column) from None
                size = 1
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                ended = stack.pop()
                frame = stack[-1] if stack else None
                line, column = positions[ended.path]
                value, anchor, size = ended.container, ended.anchor, expanded - ended.start_count + 1
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                mark = event.start_mark
                line, column = mark.line + 1, mark.column + 1
                if len(stack) >= MAX_NESTING_DEPTH:
                    raise _error(f"nesting deeper than {MAX_NESTING_DEPTH} levels", line, column)
                if frame is not None and frame.key is _NO_KEY and type(frame.container) is dict:
                    raise _error("mapping keys must be scalars", line, column)
                path_here = _current_path(frame)
                anchor, tag = event.anchor, event.ctag
                if anchor is not None or tag is not None:
                    _record_features(source, path_here, anchor, None if tag is None else str(tag))
                # A collection's position is recorded now (unless its key already located it); it is placed in
                # its parent when it ends.
                positions.setdefault(path_here, (line, column))
                frame = _Frame({} if kind is MappingStartEvent else [], path_here, anchor, expanded + 1)
                stack.append(frame)
                node_count += 1
                expanded += 1
                if node_count > MAX_EXPANDED_NODES:
                    raise _error(f"document has more than {MAX_EXPANDED_NODES} nodes", line, column)
                continue
            elif kind is AliasEvent:
                mark = event.start_mark
                line, column = mark.line + 1, mark.column + 1
                anchor = event.anchor
                features.append((_current_path(frame), f"alias *{echo(anchor)}"))
                if anchor not in anchors:
                    raise _error(f"alias *{echo(anchor)} refers to an unknown anchor", line, column)
                value, size = anchors[anchor]
                expanded += size
                if expanded > MAX_EXPANDED_NODES:
                    raise _error(f"aliases expand the document beyond {MAX_EXPANDED_NODES} nodes", line, column)
                anchor = None
            elif kind is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    mark = event.start_mark
                    raise _error("an OATF file holds exactly one YAML document; found a second one",
                                 mark.line + 1, mark.column + 1)
                continue
            elif kind is StreamEndEvent:
                break
            else:
                continue
            # Placing `value` (at `line`, `column`; `anchor` names it; `size`: its nodes once aliases are expanded).
            if frame is None:
                root, have_root = value, True
                positions[""] = (line, column)
            elif type(container := frame.container) is list:
                positions[f"{frame.path}[{len(container)}]"] = (line, column)
                container.append(value)
            elif frame.key is _NO_KEY:
                if type(value) is str:
                    key = value
                elif isinstance(value, int | float) or value is None:  # bool is an int
                    key = _scalar_key(value)
                else:
                    raise _error("mapping keys must be scalars", line, column)
                path = f"{frame.path}.{key}" if frame.path else key
                if key == "<<":
                    features.append((path, "merge key `<<`"))
                if key in container:
                    raise _error(f"duplicate key {echo(key)}", line, column)
                frame.key, frame.key_path = key, path
                positions[path] = key_positions[path] = (line, column)
            else:
                if size == 1:  # a scalar value is located where it is written; a collection, at its key
                    positions[frame.key_path] = (line, column)
                container[frame.key] = value
                frame.key = _NO_KEY
            if anchor is not None:
                anchors[anchor] = (value, size)
            if kind is not ScalarEvent and kind is not AliasEvent:
                continue
            node_count += 1
            expanded += 1
            if node_count > MAX_EXPANDED_NODES:
                raise _error(f"document has more than {MAX_EXPANDED_NODES} nodes", line, column)
    if documents == 0 or not have_root:
        raise _error("document is empty")
    source.value = root
    return source


def _record_features(source: YamlSource, path: str, anchor: str | None, tag: str | None) -> None:
    """V-020: remember where anchors and custom tags are."""
    if anchor is not None:
        source.yaml_features.append((path, f"anchor &{echo(anchor)}"))
    if tag is not None and tag not in _CORE_TAGS:
        source.yaml_features.append((path, f"custom tag {echo(tag)}"))


def _scalar_key(value: Any) -> str:
    """Non-string scalar keys (`1:`, `true:`) become their YAML text, as JSON object keys must be strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _current_path(frame: _Frame | None) -> str:
    """The dot-path of the node about to be placed in `frame` (the innermost open collection; None: the root)."""
    if frame is None:
        return ""
    if type(frame.container) is list:
        return child_path(frame.path, len(frame.container))
    if frame.key is _NO_KEY:
        return frame.path
    return child_path(frame.path, frame.key)
