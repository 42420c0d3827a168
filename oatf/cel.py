"""The default `CelEvaluator` (SDK spec §6.1; format spec §6.3 "Expression Evaluation").

`DefaultCelEvaluator().evaluate(expression, context)` returns `True`/`False`, or an `EvaluationError`
value (errors are values, see `oatf.errors`): `type_error` when the expression yields a non-boolean,
`unsupported_method` when it calls a function this evaluator does not provide, `cel_error` for every other
failure (syntax, missing field, overflow, bad operand types, time or allocation limit).
`cel_syntax_error(expression)` is the parse check behind validation rule V-014.

How it is built on cel-python
    Parsing is cel-python's: its Lark grammar and `CELParser` (syntax errors come from there, with their
    line/column context). String and bytes literals are decoded here (`_decode_literal`): cel-python's
    `celstr`/`celbytes` drop raw newlines inside cooked triple-quoted literals. Evaluation is not cel-python's tree
    interpreter: measured on a 30-tool `tools/list` result, `celpy`'s `InterpretedRunner` evaluates
    `message.tools.exists(t, ...)` about 100 times a second and its `CompiledRunner` about 600 times even
    with the message converted in advance (`celpy.json_to_cel` alone costs ~1.3 ms per such message),
    because every macro step builds a new `Activation` and every value is wrapped in a `celtypes` class.
    Instead each parsed expression is compiled once into a tree of Python closures that evaluate directly
    on the plain JSON values of the message: nothing is converted, and a macro step rebinds one dict slot.
    Compiled programs (and compile failures) are cached in a bounded LRU shared by every evaluator, so
    validation (`cel_syntax_error`) and evaluation parse an expression once.

Supported CEL (CEL language definition, cel-spec `langdef.md`)
    - Literals: `null`, `true`/`false`, int (decimal, hex), uint (`1u`), double, strings (quoted, triple
      quoted, raw, all escapes), bytes (`b"..."`), lists `[...]`, maps `{k: v}`.
    - Operators: `! - * / % + - < <= > >= == != in && || ?:`, field selection `a.b`, indexing `a[i]`,
      root-scoped names `.a`. `&&`, `||`, `exists` and `all` absorb errors as CEL specifies
      (`false && error` is `false`, `true || error` is `true`); `?:` evaluates only the chosen branch.
    - Equality is CEL's heterogeneous equality: values of different types are unequal (`1 == "1"` is false,
      `true == 1` is false) except numbers, which compare by value (`1 == 1.0`, `1u < 2.5`).
    - Macros: `has(a.b)`, `e.all(x, p)`, `e.exists(x, p)`, `e.exists_one(x, p)`, `e.map(x, f)`,
      `e.map(x, p, f)`, `e.filter(x, p)` over lists (elements) and maps (keys).
    - Functions: `size` (global and method; strings count code points), `contains`, `startsWith`,
      `endsWith`, `matches` (global and method; RE2 syntax, partial match, patterns compiled through the
      `oatf.regex` cache), conversions `int`, `uint`, `double`, `string`, `bytes`, `bool`, `dyn`, `type`,
      and the type names `int uint double bool string bytes list map null_type type`.
    - Values: JSON values as Python gives them (dict, list/tuple, str, int, float, bool, None) plus bytes.
      Python ints are CEL ints (64-bit: arithmetic that leaves the range is an overflow error), floats are
      doubles; NaN and infinities behave as IEEE doubles, and an int or uint compares with a double exactly
      (cel-spec "Numbers": on one number line; `9007199254740993 > 9007199254740992.0` is true, the int is
      never rounded to a double). Map keys are typed as in CEL: a bool key is never found by a number nor a
      number key by a bool (`true in {1: 'x'}` is false), although a Python dict cannot hold both `true` and
      `1`; a map literal naming both is a `cel_error` rather than a silent merge. JSON maps have string keys
      only. Any other Python object is a `cel_error` when an operation touches it.

Not supported (calls return `unsupported_method`)
    `timestamp`, `duration` and their accessor methods (`getFullYear`, `getHours`, ...), message
    construction (`T{field: v}`), extension libraries (`lowerAscii`, `split`, `cel.bind`, ...) and any other
    function name. The check is static: such an expression fails on every evaluation, even if the call sits
    in a branch that would not run, so an unsupported indicator is never silently `not_matched`.

Limits (a hostile expression or message cannot stall or exhaust the caller)
    - Time: each evaluation has a deadline (`time_limit`, 100 ms by default, SDK spec §6.1). The deadline is
      checked cooperatively at every macro iteration and every `_CHECK_EVERY` steps of the Python-level loops
      (element by element equality of lists and maps, at any depth, and `in`), so any long or super-linear
      work (a long `==`, nested macros) stops within a few steps of the deadline. What is not interruptible
      is a single primitive (a substring search, an RE2 scan, a concatenation), each linear in operands
      bounded by the message and the allocation cap below, so the overrun is at most one linear pass. A
      watchdog thread could not do better: CPython cannot interrupt C code either, and an abandoned
      evaluation thread would keep burning the core.
    - Allocation: the characters, bytes and list elements an evaluation creates (concatenation,
      conversions, `map`/`filter` results, literals) are counted against `max_allocation` (16 Mi units by
      default); exceeding it is a `cel_error`.
    - Expression size: at most `MAX_EXPRESSION_LENGTH` characters (cel-go's default); nesting deep enough to
      exhaust the interpreter stack while compiling or evaluating is a `cel_error`, not a crash.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from time import perf_counter
from typing import Any, Final, cast

import lark
from celpy.celparser import CELParseError, CELParser

from oatf.errors import EvaluationError, EvaluationErrorKind, echo
from oatf.regex import RegexSyntaxError, search

__all__ = [
    "DEFAULT_MAX_ALLOCATION",
    "DEFAULT_TIME_LIMIT",
    "MAX_EXPRESSION_LENGTH",
    "SUPPORTED_FUNCTIONS",
    "DefaultCelEvaluator",
    "cel_syntax_error",
]

DEFAULT_TIME_LIMIT: Final = 0.1
"""Seconds per evaluation (SDK spec §6.1: "100 milliseconds per expression is RECOMMENDED")."""

DEFAULT_MAX_ALLOCATION: Final = 16 * 1024 * 1024
"""Characters, bytes and list elements one evaluation may create."""

MAX_EXPRESSION_LENGTH: Final = 100_000
"""Longest accepted expression, in characters (cel-go's default expression size limit)."""

_CACHE_SIZE: Final = 2048

SUPPORTED_FUNCTIONS: Final = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches",
    "int", "uint", "double", "string", "bytes", "bool", "dyn", "type",
    "has", "all", "exists", "exists_one", "map", "filter",
})
"""Every function and macro name the default evaluator implements."""

_INT_MIN: Final = -(1 << 63)
_INT_MAX: Final = (1 << 63) - 1
_UINT_MAX: Final = (1 << 64) - 1

# Frame slots that cannot collide with a CEL identifier.
_DEADLINE: Final = " deadline"
_ALLOCATED: Final = " allocated"
_ALLOCATION_LIMIT: Final = " allocation limit"

_CHECK_EVERY: Final = 1024  # iterations of a cheap Python-level loop between two deadline checks


class _CelUint(int):
    """A CEL `uint` value (only literals such as `1u` and `uint()` produce one; JSON numbers are ints)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


@dataclass(frozen=True)
class _CelType:
    """A CEL type value: what `type(x)` returns and what the names `int`, `string`, ... denote."""

    name: str


class _CelError(Exception):
    """A CEL runtime error: `&&`, `||`, `exists` and `all` may absorb it."""


class _LimitExceeded(Exception):
    """The allocation limit was reached: never absorbed, always ends the evaluation."""


class _TimeLimitExceeded(_LimitExceeded):
    """The deadline passed: never absorbed, always ends the evaluation."""


class _CompileError(Exception):
    def __init__(self, kind: EvaluationErrorKind, message: str, *, syntax: bool = False):
        super().__init__(message)
        self.kind = kind
        self.syntax = syntax


Frame = dict[str, Any]
Eval = Callable[[Frame], Any]
Node = lark.Tree[Any]
"""A parse-tree node; its children are `lark.Token`s or nodes, as the grammar's rule says (hence `Any`)."""

_TYPE_NAMES: Final = {
    name: _CelType(name)
    for name in ("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type")
}
_EXACT_KINDS: Final[dict[type, str]] = {
    type(None): "null_type", bool: "bool", int: "int", _CelUint: "uint", float: "double", str: "string",
    bytes: "bytes", dict: "map", list: "list", tuple: "list", _CelType: "type",
}
_NUMERIC: Final = frozenset({"int", "uint", "double"})
_ORDERED: Final = frozenset({"int", "uint", "double", "string", "bytes", "bool"})
_KEY_KINDS: Final = frozenset({"int", "uint", "bool", "string"})
_LOOKUP_KINDS: Final = _KEY_KINDS | {"double"}  # a double finds an int key of equal value (cel-spec)


def _kind(value: Any) -> str:
    """The CEL type name of a Python value; a `_CelError` for a value CEL has no type for."""
    kind = _EXACT_KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _CelUint):
        return "uint"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list | tuple):
        return "list"
    raise _CelError(f"unsupported value of Python type {type(value).__name__}")


def _no_overload(operator: str, *operands: Any) -> _CelError:
    kinds = []
    for operand in operands:
        try:
            kinds.append(_kind(operand))
        except _CelError:
            kinds.append(type(operand).__name__)
    return _CelError(f"no such overload: {operator}({', '.join(kinds)})")


def _charge(frame: Frame, units: int) -> None:
    """Count `units` of newly created data against the evaluation's allocation limit."""
    total = frame[_ALLOCATED] + units
    if total > frame[_ALLOCATION_LIMIT]:
        raise _LimitExceeded
    frame[_ALLOCATED] = total


def _check_deadline(frame: Frame) -> None:
    if perf_counter() > frame[_DEADLINE]:
        raise _TimeLimitExceeded


# --- equality, ordering, membership ------------------------------------------------------------------


def _map_get(mapping: Mapping[Any, Any], key: Any) -> tuple[bool, Any]:
    """CEL map lookup (cel-spec "Equality" applied to keys): `(found, value)`. Numbers find keys of equal
    value across int, uint and double, but a bool never finds a number key nor a number a bool key, where
    Python's dict would (`True == 1`, `hash(True) == hash(1)`)."""
    try:
        value = mapping[key]
    except KeyError:
        return False, None
    if type(key) is str or not (key == 0 or key == 1):  # only 0 and 1 collide with false and true
        return True, value
    wanted_bool = type(key) is bool
    return any(stored == key and (type(stored) is bool) == wanted_bool for stored in mapping), value


def _equal(frame: Frame, left: Any, right: Any) -> bool:
    """CEL heterogeneous equality (cel-spec "Equality"): different types are unequal, numbers compare
    by value, lists element-wise, maps by key set and values. The deadline is checked every
    `_CHECK_EVERY` elements, so comparing long containers stops at the time limit."""
    if type(left) is str and type(right) is str:
        return left == right
    left_kind, right_kind = _kind(left), _kind(right)
    if left_kind != right_kind:
        return left_kind in _NUMERIC and right_kind in _NUMERIC and left == right
    if left_kind == "list":
        if len(left) != len(right):
            return False
        for index, (left_item, right_item) in enumerate(zip(left, right, strict=True)):
            if index % _CHECK_EVERY == 0:
                _check_deadline(frame)
            if not _equal(frame, left_item, right_item):
                return False
        return True
    if left_kind == "map":
        if len(left) != len(right):
            return False
        for index, (key, value) in enumerate(left.items()):
            if index % _CHECK_EVERY == 0:
                _check_deadline(frame)
            found, other = _map_get(right, key)
            if not (found and _equal(frame, value, other)):
                return False
        return True
    return bool(left == right)


def _compare(operator: str, left: Any, right: Any) -> bool:
    """`<`, `<=`, `>`, `>=` over same-kind ordered values, or across numeric kinds."""
    left_kind, right_kind = _kind(left), _kind(right)
    if not (
        (left_kind == right_kind and left_kind in _ORDERED)
        or (left_kind in _NUMERIC and right_kind in _NUMERIC)
    ):
        raise _no_overload(f"_{operator}_", left, right)
    if operator == "<":
        return bool(left < right)
    if operator == "<=":
        return bool(left <= right)
    if operator == ">":
        return bool(left > right)
    return bool(left >= right)


def _contains_element(frame: Frame, item: Any, container: Any) -> bool:
    """`item in container`: list membership by CEL equality, map membership by key."""
    kind = _kind(container)
    if kind == "list":
        if type(item) is str:  # str == non-str is False in Python too: C speed, same semantics
            return item in container
        for index, element in enumerate(container):
            if index % _CHECK_EVERY == 0:
                _check_deadline(frame)
            if _equal(frame, item, element):
                return True
        return False
    if kind == "map" and _kind(item) in _LOOKUP_KINDS:
        return _map_get(container, item)[0]
    raise _no_overload("_in_", item, container)


# --- arithmetic ----------------------------------------------------------------------------------------


def _checked_int(value: int, operator: str) -> int:
    if _INT_MIN <= value <= _INT_MAX:
        return value
    raise _CelError(f"integer overflow in {operator}")


def _checked_uint(value: int, operator: str) -> _CelUint:
    if 0 <= value <= _UINT_MAX:
        return _CelUint(value)
    raise _CelError(f"unsigned integer overflow in {operator}")


def _add(frame: Frame, left: Any, right: Any) -> Any:
    kind = _kind(left)
    if kind != _kind(right):
        raise _no_overload("_+_", left, right)
    if kind == "int":
        return _checked_int(left + right, "+")
    if kind == "uint":
        return _checked_uint(left + right, "+")
    if kind == "double":
        return left + right
    if kind in ("string", "bytes", "list"):
        _charge(frame, len(left) + len(right))
        if kind == "list":
            return [*left, *right]
        return left + right
    raise _no_overload("_+_", left, right)


def _subtract(frame: Frame, left: Any, right: Any) -> Any:
    kind = _kind(left)
    if kind != _kind(right) or kind not in _NUMERIC:
        raise _no_overload("_-_", left, right)
    if kind == "int":
        return _checked_int(left - right, "-")
    if kind == "uint":
        return _checked_uint(left - right, "-")
    return left - right


def _multiply(frame: Frame, left: Any, right: Any) -> Any:
    kind = _kind(left)
    if kind != _kind(right) or kind not in _NUMERIC:
        raise _no_overload("_*_", left, right)
    if kind == "int":
        return _checked_int(left * right, "*")
    if kind == "uint":
        return _checked_uint(left * right, "*")
    return left * right


def _divide(frame: Frame, left: Any, right: Any) -> Any:
    kind = _kind(left)
    if kind != _kind(right) or kind not in _NUMERIC:
        raise _no_overload("_/_", left, right)
    if kind == "double":
        if right == 0:  # IEEE 754: ±inf, or NaN for 0/0 and NaN/0
            if left == 0 or left != left:
                return math.nan
            return math.copysign(math.inf, left) * math.copysign(1.0, right)
        return left / right
    if right == 0:
        raise _CelError("division by zero")
    quotient = abs(left) // abs(right)  # CEL truncates toward zero
    if kind == "uint":
        return _CelUint(quotient)
    return _checked_int(quotient if (left < 0) == (right < 0) else -quotient, "/")


def _modulo(frame: Frame, left: Any, right: Any) -> Any:
    kind = _kind(left)
    if kind != _kind(right) or kind not in ("int", "uint"):
        raise _no_overload("_%_", left, right)
    if right == 0:
        raise _CelError("modulus by zero")
    if kind == "uint":
        return _CelUint(left % right)
    if left == _INT_MIN and right == -1:
        raise _CelError("integer overflow in %")
    remainder = abs(left) % abs(right)  # the sign follows the dividend, as in C and Go
    return -remainder if left < 0 else remainder


def _negate(value: Any) -> Any:
    kind = _kind(value)
    if kind == "int":
        return _checked_int(-value, "unary -")
    if kind == "double":
        return -value
    raise _no_overload("-_", value)


def _logical_not(value: Any) -> bool:
    if value is True:
        return False
    if value is False:
        return True
    raise _no_overload("!_", value)


# --- field selection and indexing ----------------------------------------------------------------------


def _select(value: Any, field: str, where: str) -> Any:
    if isinstance(value, Mapping):
        try:
            return value[field]
        except KeyError:
            raise _CelError(f"no such key: {field!r} (in `{where}`)") from None
    raise _CelError(f"type {_kind(value)} has no field {field!r} (in `{where}`)")


def _index(value: Any, key: Any, where: str) -> Any:
    kind = _kind(value)
    key_kind = _kind(key)
    if kind == "list":
        if key_kind == "double" and math.isfinite(key) and key == int(key):  # cel-spec: integral doubles index
            key = int(key)
            key_kind = "int"
        if key_kind not in ("int", "uint"):
            raise _no_overload("_[_]", value, key)
        if not 0 <= key < len(value):
            raise _CelError(f"index out of range: {int(key)} (size {len(value)}, in `{where}`)")
        return value[key]
    if kind == "map":
        if key_kind not in _LOOKUP_KINDS:
            raise _no_overload("_[_]", value, key)
        found, item = _map_get(value, key)
        if found:
            return item
        raise _CelError(f"no such key: {echo(key)} (in `{where}`)")
    raise _no_overload("_[_]", value, key)


def _has_field(value: Any, field: str, where: str) -> bool:
    if isinstance(value, Mapping):
        return field in value
    raise _CelError(f"has() needs a map, got {_kind(value)} (in `{where}`)")


def _iteration_range(value: Any, macro: str) -> Iterable[Any]:
    kind = _kind(value)
    if kind == "list":
        return value
    if kind == "map":
        return list(value)
    raise _CelError(f"{macro}() needs a list or a map, got {kind}")


# --- functions -------------------------------------------------------------------------------------------


def _size(value: Any) -> int:
    if _kind(value) in ("string", "bytes", "list", "map"):
        return len(value)
    raise _no_overload("size", value)


def _string_function(name: str) -> Callable[[Any, Any], bool]:
    def apply(receiver: Any, argument: Any) -> bool:
        if not (isinstance(receiver, str) and isinstance(argument, str)):
            raise _no_overload(name, receiver, argument)
        if name == "contains":
            return argument in receiver
        if name == "startsWith":
            return receiver.startswith(argument)
        return receiver.endswith(argument)

    return apply


def _matches(text: Any, pattern: Any) -> bool:
    if not (isinstance(text, str) and isinstance(pattern, str)):
        raise _no_overload("matches", text, pattern)
    try:
        return search(pattern, text)
    except RegexSyntaxError as exc:
        raise _CelError(f"matches(): {exc}") from None


_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+\Z")
_UINT_TEXT: Final = re.compile(r"[0-9]+\Z")
_DOUBLE_TEXT: Final = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)\Z", re.IGNORECASE
)
_TRUE_TEXT: Final = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE_TEXT: Final = frozenset({"0", "f", "F", "false", "FALSE", "False"})


def _to_int(value: Any) -> int:
    kind = _kind(value)
    if kind in ("int", "uint"):
        return _checked_int(int(value), "int()")
    if kind == "double":
        if not (math.isfinite(value) and -9.223372036854775808e18 < value < 9.223372036854775808e18):
            raise _CelError(f"int() out of range: {value!r}")
        return int(value)
    if kind == "string" and len(value) <= 32 and _INT_TEXT.match(value):
        return _checked_int(int(value), "int()")
    raise _CelError(f"int() cannot convert {kind} {echo(value)}")


def _to_uint(value: Any) -> _CelUint:
    kind = _kind(value)
    if kind in ("int", "uint"):
        return _checked_uint(int(value), "uint()")
    if kind == "double":
        if not (math.isfinite(value) and 0 <= value < 1.8446744073709551616e19):
            raise _CelError(f"uint() out of range: {value!r}")
        return _CelUint(int(value))
    if kind == "string" and len(value) <= 32 and _UINT_TEXT.match(value):
        return _checked_uint(int(value), "uint()")
    raise _CelError(f"uint() cannot convert {kind} {echo(value)}")


def _to_double(value: Any) -> float:
    kind = _kind(value)
    if kind in ("int", "uint", "double"):
        return float(value)
    if kind == "string" and _DOUBLE_TEXT.match(value):
        return float(value)
    raise _CelError(f"double() cannot convert {kind} {echo(value)}")


def _format_double(value: float) -> str:
    """Go's `%g` (shortest representation), which cel-go uses for `string(double)`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite
    text = "".join(map(str, digits))
    point = len(text) + exponent  # position of the decimal point within `text`
    prefix = "-" if sign else ""
    if value == 0:
        return prefix + "0"
    if point - 1 < -4 or point - 1 >= 6:  # Go: shortest precision decides with eprec 6
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{point - 1:+03d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def _to_string(frame: Frame, value: Any) -> str:
    kind = _kind(value)
    if kind == "string":
        return value
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("int", "uint"):
        result = str(int(value))
    elif kind == "double":
        result = _format_double(value)
    elif kind == "bytes":
        try:
            result = value.decode("utf-8")
        except UnicodeDecodeError:
            raise _CelError("string(): bytes are not valid UTF-8") from None
    elif kind == "type":
        result = value.name
    else:
        raise _CelError(f"string() cannot convert {kind}")
    _charge(frame, len(result))
    return result


def _to_bytes(frame: Frame, value: Any) -> bytes:
    kind = _kind(value)
    if kind == "bytes":
        return value
    if kind == "string":
        _charge(frame, len(value))
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise _CelError("bytes(): string holds a lone surrogate") from None
    raise _CelError(f"bytes() cannot convert {kind}")


def _to_bool(value: Any) -> bool:
    kind = _kind(value)
    if kind == "bool":
        return bool(value)
    if kind == "string":
        if value in _TRUE_TEXT:
            return True
        if value in _FALSE_TEXT:
            return False
    raise _CelError(f"bool() cannot convert {kind} {echo(value)}")


def _type_of(value: Any) -> _CelType:
    return _TYPE_NAMES[_kind(value)]


_UNARY_FUNCTIONS: Final[dict[str, Callable[[Any], Any]]] = {
    "size": _size, "int": _to_int, "uint": _to_uint, "double": _to_double, "bool": _to_bool,
    "type": _type_of, "dyn": lambda value: value,
}
_ALLOCATING_FUNCTIONS: Final[dict[str, Callable[[Frame, Any], Any]]] = {
    "string": _to_string, "bytes": _to_bytes,
}
_METHODS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "contains": _string_function("contains"),
    "startsWith": _string_function("startsWith"),
    "endsWith": _string_function("endsWith"),
    "matches": _matches,
}
_ARITHMETIC: Final[dict[str, Callable[[Frame, Any, Any], Any]]] = {
    "addition_add": _add, "addition_sub": _subtract,
    "multiplication_mul": _multiply, "multiplication_div": _divide, "multiplication_mod": _modulo,
}
_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
_RELATIONS: Final = {
    "relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=",
    "relation_eq": "==", "relation_ne": "!=", "relation_in": "in",
}
_PASS_THROUGH: Final = frozenset({
    "expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member",
    "primary",
})


# --- literals ------------------------------------------------------------------------------------------

_LITERAL_PART: Final = re.compile(
    r"\\(?:([abfnrtv\\'\"`?])|([0-3][0-7]{2})|[xX]([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))"
    r"|(\\.?)|([^\\]+)",
    re.DOTALL,
)
_SIMPLE_ESCAPES: Final = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
}


def _decode_literal(text: str) -> str | bytes:
    """The value of a CEL string or bytes literal token (cel-spec "String and Bytes Literals"): optional
    `b`/`r` prefixes, single or triple quotes, the escapes `\\a \\b \\f \\n \\r \\t \\v \\\\ \\' \\" \\` \\?`,
    octal `\\ooo` and `\\xHH` or `\\XHH` (a code point in strings, a byte in bytes), and `\\uHHHH`,
    `\\UHHHHHHHH` (strings only). Raises ValueError for any other escape."""
    prefix = ""
    while text[0] in "bBrR":
        prefix += text[0].lower()
        text = text[1:]
    quote = 3 if text[:3] in ('"""', "'''") else 1
    body = text[quote:-quote]
    is_bytes = "b" in prefix
    if "r" in prefix:
        return body.encode("utf-8") if is_bytes else body
    chunks: list[Any] = []
    for part in _LITERAL_PART.finditer(body):
        simple, octal, hex_value, short, long, invalid, plain = part.groups()
        if plain is not None:
            piece = plain
        elif simple is not None:
            piece = _SIMPLE_ESCAPES[simple]
        elif octal is not None or hex_value is not None:
            number = int(octal, 8) if octal is not None else int(hex_value, 16)
            if is_bytes:
                chunks.append(bytes([number]))
                continue
            piece = chr(number)
        elif invalid is None and not is_bytes:
            point = int(short or long, 16)
            if 0xD800 <= point <= 0xDFFF or point > 0x10FFFF:
                raise ValueError(f"invalid Unicode code point in escape {part.group(0)!r}")
            piece = chr(point)
        else:
            kind = "bytes" if is_bytes else "string"
            raise ValueError(f"invalid escape sequence {part.group(0)!r} in a {kind} literal")
        chunks.append(piece.encode("utf-8") if is_bytes else piece)
    return b"".join(chunks) if is_bytes else "".join(chunks)


# --- compiler: parse tree → closures -----------------------------------------------------------------


class _Compiler:
    """Compiles a cel-python parse tree (grammar `celpy/cel.lark`) into a closure `Frame -> value`."""

    def __init__(self, source: str):
        self.source = source

    def where(self, tree: Node) -> str:
        """The source text of `tree`, whitespace collapsed and cut to 60 characters, for messages."""
        start = getattr(tree.meta, "start_pos", 0)
        end = getattr(tree.meta, "end_pos", len(self.source))
        text = " ".join(self.source[start:end].split())
        return text if len(text) <= 60 else text[:57] + "..."

    @staticmethod
    def unwrap(tree: Node) -> Node:
        """Skip the single-child precedence levels (and parentheses) down to the node that does work."""
        while True:
            if (tree.data in _PASS_THROUGH and len(tree.children) == 1) or tree.data == "paren_expr":
                tree = tree.children[0]
            else:
                return tree

    def simple_name(self, tree: Node) -> str | None:
        node = self.unwrap(tree)
        return str(node.children[0]) if node.data == "ident" else None

    def compile(self, tree: Node) -> Eval:
        node = self.unwrap(tree)
        handler = getattr(self, f"c_{node.data}", None)
        if handler is None:  # every rule of the grammar has a handler; this guards a grammar change
            raise _CompileError(EvaluationErrorKind.CEL_ERROR, f"unexpected syntax node {node.data!r}")
        return handler(node)

    # expr: conditionalor "?" conditionalor ":" expr
    def c_expr(self, node: Node) -> Eval:
        condition, if_true, if_false = (self.compile(child) for child in node.children)

        def conditional(frame: Frame) -> Any:
            chosen = condition(frame)
            if chosen is True:
                return if_true(frame)
            if chosen is False:
                return if_false(frame)
            raise _no_overload("_?_:_", chosen)

        return conditional

    def c_conditionalor(self, node: Node) -> Eval:
        return self._logical(node, absorbing=True)

    def c_conditionaland(self, node: Node) -> Eval:
        return self._logical(node, absorbing=False)

    @staticmethod
    def chain(node: Node) -> list[Node]:
        """The operands of a left-recursive chain (`a || b || c`: `[a, b, c]`), gathered without
        recursion so that a chain of thousands of terms compiles."""
        rule = node.data
        operands = []
        while node.data == rule and len(node.children) == 2:
            node, right = node.children
            operands.append(right)
        operands.append(node)
        operands.reverse()
        return operands

    def _logical(self, node: Node, *, absorbing: bool) -> Eval:
        """`||` (absorbing value true) or `&&` (absorbing value false) over a whole chain, commutative
        over errors: an absorbing operand decides, wherever errors or non-booleans occur."""
        operands = [self.compile(operand) for operand in self.chain(node)]
        other = not absorbing
        operator = "_||_" if absorbing else "_&&_"

        def logical(frame: Frame) -> Any:
            error: _CelError | None = None
            for operand in operands:
                try:
                    value = operand(frame)
                except _CelError as exc:
                    error = error or exc
                    continue
                if value is absorbing:
                    return absorbing
                if value is not other and error is None:
                    error = _no_overload(operator, value)
            if error is not None:
                raise error
            return other

        return logical

    def c_relation(self, node: Node) -> Eval:
        operator_node, right_tree = node.children
        left = self.compile(operator_node.children[0])
        right = self.compile(right_tree)
        operator = _RELATIONS[operator_node.data]
        if operator == "==":
            return lambda frame: _equal(frame, left(frame), right(frame))
        if operator == "!=":
            return lambda frame: not _equal(frame, left(frame), right(frame))
        if operator == "in":
            return lambda frame: _contains_element(frame, left(frame), right(frame))
        return lambda frame: _compare(operator, left(frame), right(frame))

    def c_addition(self, node: Node) -> Eval:
        return self._arithmetic(node)

    def c_multiplication(self, node: Node) -> Eval:
        return self._arithmetic(node)

    def _arithmetic(self, node: Node) -> Eval:
        """A left-associative chain of `+ -` or `* / %`, folded left to right without recursion."""
        rule = node.data
        steps: list[tuple[Callable[[Frame, Any, Any], Any], Node]] = []
        while node.data == rule and len(node.children) == 2:
            operator_node, right_tree = node.children
            steps.append((_ARITHMETIC[operator_node.data], right_tree))
            node = operator_node.children[0]
        first = self.compile(node)
        folded = [(operation, self.compile(operand)) for operation, operand in reversed(steps)]
        if len(folded) == 1:
            ((operation, second),) = folded
            return lambda frame: operation(frame, first(frame), second(frame))

        def arithmetic(frame: Frame) -> Any:
            value = first(frame)
            for operation, operand in folded:
                value = operation(frame, value, operand(frame))
            return value

        return arithmetic

    def c_unary(self, node: Node) -> Eval:
        operator_node, operand_tree = node.children
        operand = self.compile(operand_tree)
        if operator_node.data == "unary_not":
            return lambda frame: _logical_not(operand(frame))
        return lambda frame: _negate(operand(frame))

    def c_member_dot(self, node: Node) -> Eval:
        target_tree, name_token = node.children
        target = self.compile(target_tree)
        field = str(name_token)
        where = self.where(node)

        def select(frame: Frame) -> Any:
            value = target(frame)
            if type(value) is dict:
                try:
                    return value[field]
                except KeyError:
                    pass
            return _select(value, field, where)

        return select

    def c_member_index(self, node: Node) -> Eval:
        target_tree, key_tree = node.children
        target = self.compile(target_tree)
        key = self.compile(key_tree)
        where = self.where(node)
        return lambda frame: _index(target(frame), key(frame), where)

    def c_member_object(self, node: Node) -> Eval:
        raise _CompileError(
            EvaluationErrorKind.UNSUPPORTED_METHOD,
            f"message construction `{self.where(node)}` is not supported by the default CEL evaluator",
        )

    def c_member_dot_arg(self, node: Node) -> Eval:
        target_tree, name_token, *rest = node.children
        name = str(name_token)
        arguments = list(rest[0].children) if rest else []
        if name in _MACROS:
            return self._macro(node, name, target_tree, arguments)
        target = self.compile(target_tree)
        compiled = [self.compile(argument) for argument in arguments]
        if name == "size" and not compiled:
            return lambda frame: _size(target(frame))
        if name in _METHODS and len(compiled) == 1:
            method = _METHODS[name]
            argument = compiled[0]
            if name == "contains":
                def contains(frame: Frame) -> bool:
                    receiver = target(frame)
                    needle = argument(frame)
                    if type(receiver) is str and type(needle) is str:
                        return needle in receiver
                    return method(receiver, needle)

                return contains
            return lambda frame: method(target(frame), argument(frame))
        self._reject_call(name, len(compiled), receiver=True)
        raise AssertionError("unreachable")  # pragma: no cover - _reject_call always raises

    def c_ident(self, node: Node) -> Eval:
        name = str(node.children[0])
        type_value = _TYPE_NAMES.get(name)

        def identifier(frame: Frame) -> Any:
            try:
                return frame[name]
            except KeyError:
                if type_value is not None:
                    return type_value
                raise _CelError(f"undeclared reference to {name!r}") from None

        return identifier

    c_dot_ident = c_ident

    def c_ident_arg(self, node: Node) -> Eval:
        name_token, *rest = node.children
        name = str(name_token)
        arguments = list(rest[0].children) if rest else []
        if name == "has":
            return self._has(node, arguments)
        if name in _MACROS:  # a macro name called as a global function
            self._reject_call(name, len(arguments), receiver=False)
        compiled = [self.compile(argument) for argument in arguments]
        if len(compiled) == 1 and name in _UNARY_FUNCTIONS:
            function = _UNARY_FUNCTIONS[name]
            argument = compiled[0]
            return lambda frame: function(argument(frame))
        if len(compiled) == 1 and name in _ALLOCATING_FUNCTIONS:
            allocating = _ALLOCATING_FUNCTIONS[name]
            argument = compiled[0]
            return lambda frame: allocating(frame, argument(frame))
        if name == "matches" and len(compiled) == 2:
            text, pattern = compiled
            return lambda frame: _matches(text(frame), pattern(frame))
        self._reject_call(name, len(compiled), receiver=False)
        raise AssertionError("unreachable")  # pragma: no cover - _reject_call always raises

    c_dot_ident_arg = c_ident_arg

    def c_list_lit(self, node: Node) -> Eval:
        elements = [self.compile(child) for child in node.children[0].children] if node.children else []

        def list_literal(frame: Frame) -> list[Any]:
            _charge(frame, len(elements))
            return [element(frame) for element in elements]

        return list_literal

    def c_map_lit(self, node: Node) -> Eval:
        children = node.children[0].children if node.children else []
        entries = [(self.compile(children[i]), self.compile(children[i + 1])) for i in range(0, len(children), 2)]

        def map_literal(frame: Frame) -> dict[Any, Any]:
            _charge(frame, len(entries))
            result: dict[Any, Any] = {}
            for key_eval, value_eval in entries:
                key = key_eval(frame)
                if _kind(key) not in _KEY_KINDS:
                    raise _CelError(f"unsupported map key type {_kind(key)}")
                if key in result:
                    if _map_get(result, key)[0]:
                        raise _CelError(f"repeated map key {echo(key)}")
                    raise _CelError(
                        f"map literal with both the keys {'true' if key else 'false'} and {int(key)}: distinct in "
                        "CEL, but one key in a Python dict (not supported)"
                    )
                result[key] = value_eval(frame)
            return result

        return map_literal

    def c_literal(self, node: Node) -> Eval:
        value = self._literal_value(cast(lark.Token, node.children[0]))  # the grammar's literals are one token
        return lambda frame: value

    def _literal_value(self, token: lark.Token) -> Any:
        text = str(token)
        kind = token.type
        if kind == "INT_LIT":
            value = int(text, 0) if "x" in text.lower() else int(text)
            if not _INT_MIN <= value <= _INT_MAX:
                raise _CompileError(EvaluationErrorKind.CEL_ERROR, f"int literal out of range: {text}", syntax=True)
            return value
        if kind == "UINT_LIT":
            digits = text[:-1]
            value = int(digits, 0) if "x" in digits.lower() else int(digits)
            if not 0 <= value <= _UINT_MAX:
                raise _CompileError(EvaluationErrorKind.CEL_ERROR, f"uint literal out of range: {text}", syntax=True)
            return _CelUint(value)
        if kind == "FLOAT_LIT":
            return float(text)
        if kind in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
            try:
                return _decode_literal(text)
            except ValueError as exc:
                raise _CompileError(EvaluationErrorKind.CEL_ERROR, str(exc), syntax=True) from None
        if kind == "BOOL_LIT":
            return text == "true"
        return None  # NULL_LIT

    def _has(self, node: Node, arguments: list[Node]) -> Eval:
        selection = self.unwrap(arguments[0]) if len(arguments) == 1 else None
        if selection is None or selection.data != "member_dot":
            raise _CompileError(
                EvaluationErrorKind.CEL_ERROR,
                f"invalid argument to has() macro in `{self.where(node)}`: expected a field selection a.b",
                syntax=True,
            )
        target_tree, name_token = selection.children
        target = self.compile(target_tree)
        field = str(name_token)
        where = self.where(node)

        def has(frame: Frame) -> bool:
            value = target(frame)
            if type(value) is dict:
                return field in value
            return _has_field(value, field, where)

        return has

    def _macro(self, node: Node, name: str, target_tree: Node, arguments: list[Node]) -> Eval:
        if not (len(arguments) == 2 or (name == "map" and len(arguments) == 3)):
            arity = "2 or 3 arguments" if name == "map" else "2 arguments"
            raise _CompileError(
                EvaluationErrorKind.CEL_ERROR,
                f"{name}() macro takes {arity}, got {len(arguments)} in `{self.where(node)}`",
                syntax=True,
            )
        variable = self.simple_name(arguments[0])
        if variable is None:
            raise _CompileError(
                EvaluationErrorKind.CEL_ERROR,
                f"{name}() macro variable must be a simple name in `{self.where(node)}`",
                syntax=True,
            )
        target = self.compile(target_tree)
        body = [self.compile(argument) for argument in arguments[1:]]
        if name in ("exists", "all"):
            return _quantifier(target, variable, body[0], name, wanted=name == "exists")
        if name == "exists_one":
            return _macro_exists_one(target, variable, body[0])
        if name == "filter":
            return _macro_map(target, variable, body[0], None)
        return _macro_map(target, variable, body[0] if len(body) == 2 else None, body[-1])

    def _reject_call(self, name: str, arity: int, *, receiver: bool) -> None:
        form = f"x.{name}(...)" if receiver else f"{name}(...)"
        if name in SUPPORTED_FUNCTIONS:
            raise _CompileError(
                EvaluationErrorKind.CEL_ERROR, f"no overload of {form} takes {arity} argument(s)"
            )
        raise _CompileError(
            EvaluationErrorKind.UNSUPPORTED_METHOD,
            f"function {name!r} ({form}) is not supported by the default CEL evaluator; supported: "
            + ", ".join(sorted(SUPPORTED_FUNCTIONS)),
        )


# --- macros (cel-spec "Macros"): the bound variable is one frame slot, restored afterwards ----------------
# Each macro runs its own loop (no per-element helper call): this is the hot path of indicator expressions.

_UNBOUND: Final = object()


def _restore(frame: Frame, variable: str, saved: Any) -> None:
    if saved is _UNBOUND:
        frame.pop(variable, None)
    else:
        frame[variable] = saved


def _quantifier(target: Eval, variable: str, predicate: Eval, macro: str, *, wanted: bool) -> Eval:
    """`exists` (`wanted=True`: stops at the first true) and `all` (`wanted=False`: stops at the first
    false). An error of one element is absorbed by a decisive element, as `||`/`&&` absorb errors."""
    other = not wanted

    def quantifier(frame: Frame) -> bool:
        elements = _iteration_range(target(frame), macro)
        saved = frame.get(variable, _UNBOUND)
        deadline = frame[_DEADLINE]
        error: _CelError | None = None
        try:
            for element in elements:
                if perf_counter() > deadline:
                    raise _TimeLimitExceeded
                frame[variable] = element
                try:
                    value = predicate(frame)
                except _CelError as exc:
                    error = error or exc
                    continue
                if value is wanted:
                    return wanted
                if value is not other and error is None:
                    error = _no_overload(macro, value)
        finally:
            _restore(frame, variable, saved)
        if error is not None:
            raise error
        return other

    return quantifier


def _macro_exists_one(target: Eval, variable: str, predicate: Eval) -> Eval:
    def exists_one(frame: Frame) -> bool:
        elements = _iteration_range(target(frame), "exists_one")
        saved = frame.get(variable, _UNBOUND)
        deadline = frame[_DEADLINE]
        count = 0
        try:
            for element in elements:
                if perf_counter() > deadline:
                    raise _TimeLimitExceeded
                frame[variable] = element
                value = predicate(frame)
                if value is True:
                    count += 1
                elif value is not False:
                    raise _no_overload("exists_one", value)
        finally:
            _restore(frame, variable, saved)
        return count == 1

    return exists_one


def _macro_map(target: Eval, variable: str, guard: Eval | None, transform: Eval | None) -> Eval:
    """`map(x, f)`, `map(x, p, f)` (`guard` p) and `filter(x, p)` (`transform` None: keep the element)."""
    macro = "filter" if transform is None else "map"

    def map_or_filter(frame: Frame) -> list[Any]:
        elements = _iteration_range(target(frame), macro)
        saved = frame.get(variable, _UNBOUND)
        deadline = frame[_DEADLINE]
        result: list[Any] = []
        try:
            for element in elements:
                if perf_counter() > deadline:
                    raise _TimeLimitExceeded
                frame[variable] = element
                if guard is not None:
                    keep = guard(frame)
                    if keep is False:
                        continue
                    if keep is not True:
                        raise _no_overload(macro, keep)
                result.append(element if transform is None else transform(frame))
        finally:
            _restore(frame, variable, saved)
        _charge(frame, len(result))
        return result

    return map_or_filter


# --- programs and their cache --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Program:
    """A compiled expression, or why it cannot be evaluated."""

    run: Eval | None
    error: EvaluationError | None = None
    syntax_error: str | None = None


@lru_cache(maxsize=_CACHE_SIZE)
def _compile(expression: str) -> _Program:
    """Parse (cel-python's grammar) and compile `expression`; failures are cached too."""
    if not expression.strip():
        message = "the CEL expression is empty"
        return _Program(None, EvaluationError(EvaluationErrorKind.CEL_ERROR, message), message)
    if len(expression) > MAX_EXPRESSION_LENGTH:
        message = f"expression is {len(expression)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
        return _Program(None, EvaluationError(EvaluationErrorKind.CEL_ERROR, message), message)
    try:
        tree = CELParser().parse(expression)
        run = _Compiler(expression).compile(tree)
    except CELParseError as exc:
        where = f" at line {exc.line}, column {exc.column}" if exc.line is not None else ""
        message = f"CEL syntax error{where}:\n{exc.args[0]}"
        return _Program(None, EvaluationError(EvaluationErrorKind.CEL_ERROR, message), message)
    except lark.exceptions.LarkError as exc:
        message = f"CEL syntax error: {exc}"
        return _Program(None, EvaluationError(EvaluationErrorKind.CEL_ERROR, message), message)
    except _CompileError as exc:
        return _Program(None, EvaluationError(exc.kind, str(exc)), str(exc) if exc.syntax else None)
    except RecursionError:
        message = "expression is nested too deeply to compile"
        return _Program(None, EvaluationError(EvaluationErrorKind.CEL_ERROR, message), message)
    return _Program(run)


def cel_syntax_error(expression: str) -> str | None:
    """Why `expression` is not valid CEL syntax, or None when it parses (validation rule V-014).

    Syntax covers the grammar and the macro forms (`has(a.b)`, `e.exists(x, p)`: a simple variable name and
    the right number of arguments). Calls to functions the default evaluator lacks are not syntax errors;
    evaluating them returns `unsupported_method`. The compiled program is cached for evaluation."""
    if not isinstance(expression, str):
        return f"CEL expression must be a string, got {type(expression).__name__}"
    return _compile(expression).syntax_error


class DefaultCelEvaluator:
    """The SDK's `CelEvaluator` (SDK spec §6.1): see the module documentation for the supported subset.

    Stateless apart from its limits, so one instance can be shared across threads and indicators."""

    __slots__ = ("max_allocation", "time_limit")

    def __init__(self, *, time_limit: float = DEFAULT_TIME_LIMIT, max_allocation: int = DEFAULT_MAX_ALLOCATION):
        """`time_limit`: seconds per evaluation (SDK spec §6.1); `max_allocation`: characters, bytes and
        list elements one evaluation may create."""
        if not time_limit > 0:
            raise ValueError("time_limit must be positive")
        if max_allocation < 0:
            raise ValueError("max_allocation must not be negative")
        self.time_limit = float(time_limit)
        self.max_allocation = max_allocation

    def evaluate(self, expression: str, context: Mapping[str, Any]) -> bool | EvaluationError:
        """Evaluate `expression` with the variables of `context` bound (SDK spec §6.1 `evaluate`).

        Returns the boolean result, or an `EvaluationError`: `type_error` for a non-boolean result,
        `unsupported_method` for an unsupported function, `cel_error` otherwise. Never raises."""
        if not isinstance(expression, str):
            return EvaluationError(
                EvaluationErrorKind.CEL_ERROR, f"CEL expression must be a string, got {type(expression).__name__}"
            )
        program = _compile(expression)
        if program.run is None:
            assert program.error is not None
            return program.error
        try:
            frame: Frame = dict(context)
            frame[_ALLOCATED] = 0
            frame[_ALLOCATION_LIMIT] = self.max_allocation
            frame[_DEADLINE] = perf_counter() + self.time_limit
            result = program.run(frame)
        except _CelError as exc:
            return EvaluationError(EvaluationErrorKind.CEL_ERROR, str(exc))
        except _TimeLimitExceeded:
            return EvaluationError(
                EvaluationErrorKind.CEL_ERROR,
                f"evaluation stopped: time limit of {self.time_limit * 1000:g} ms exceeded",
            )
        except _LimitExceeded:
            return EvaluationError(
                EvaluationErrorKind.CEL_ERROR,
                f"evaluation stopped: allocation limit of {self.max_allocation} characters/elements exceeded",
            )
        except RecursionError:
            return EvaluationError(EvaluationErrorKind.CEL_ERROR, "evaluation nested too deeply")
        except MemoryError:
            return EvaluationError(EvaluationErrorKind.CEL_ERROR, "evaluation ran out of memory")
        except Exception as exc:  # a defect or a hostile value (e.g. a raising __eq__): still a value
            return EvaluationError(
                EvaluationErrorKind.CEL_ERROR, f"evaluation failed: {type(exc).__name__}: {echo(exc, 120)}"
            )
        if result is True or result is False:
            return result
        try:
            kind = _kind(result)
        except _CelError:
            kind = type(result).__name__
        return EvaluationError(
            EvaluationErrorKind.TYPE_ERROR,
            f"expression evaluated to {kind} {echo(result)}, not bool",
        )
