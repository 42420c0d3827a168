"""Duration parsing (SDK spec §5.2 `parse_duration`; format spec §5.3 `trigger.after`)."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache

from .errors import OATFParseError, ParseError, ParseErrorKind, echo
from .regex import compile_regex

# Shorthand `{N}s|m|h|d`, or ISO 8601 `P[nD][T[nH][nM][nS]]` with D/H/M/S only, in that order. N is a
# non-negative integer of ASCII digits: no sign, no fraction, no whitespace.
_SHORTHAND = compile_regex(r"\A([0-9]+)([smhd])\z")
_ISO_8601 = compile_regex(r"\AP(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+)S)?)?\z")
_SHORTHAND_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _invalid(text: str, why: str) -> OATFParseError:
    return OATFParseError([ParseError(kind=ParseErrorKind.SYNTAX, message=f"invalid duration {echo(text)}: {why}")])


@lru_cache(maxsize=256)
def parse_duration(text: str) -> timedelta:
    """SDK spec §5.2 `parse_duration`: `"30s"`, `"5m"`, `"1h"`, `"2d"`, or ISO 8601 such as `"PT30S"`,
    `"P1DT12H30M15S"`.

    Components are non-negative integers; ISO components appear in the order D, H, M, S, and time
    components follow `T`. Anything else (negative or fractional values, `"P"`, `"PT"`, `"P1DT"`, weeks,
    months, years, surrounding whitespace, a duration beyond `timedelta`'s range) raises
    `OATFParseError` with one `ParseError` of kind `syntax`. Results are cached: `trigger.after` is read
    on every trigger evaluation."""
    if not isinstance(text, str):
        raise _invalid(repr(text), "not a string")
    try:
        match = _SHORTHAND.search(text)
        if match is not None:
            return timedelta(**{_SHORTHAND_UNITS[match.group(2)]: int(match.group(1))})
        match = _ISO_8601.search(text)
        if match is None:
            raise _invalid(text, "expected {N}s, {N}m, {N}h, {N}d or ISO 8601 P[nD][T[nH][nM][nS]]")
        days, hours, minutes, seconds = match.groups()
        if days is None and hours is None and minutes is None and seconds is None:
            raise _invalid(text, "no duration component")
        if text.endswith("T"):
            raise _invalid(text, "'T' must be followed by a time component")
        return timedelta(
            days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0), seconds=int(seconds or 0)
        )
    except (OverflowError, ValueError) as exc:  # beyond timedelta's range, or int()'s digit limit
        raise _invalid(text, str(exc)) from None
