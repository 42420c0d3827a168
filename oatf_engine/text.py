"""Traffic-derived text made safe for a terminal or a log line. No mitmproxy.

Session keys, evidence, indicator ids and anything else that comes from the traffic (or from an attack file)
may hold ESC sequences, CR/LF or other invisible characters; shown raw they recolour a terminal or forge log
lines. Everything the addon writes to a log line, the summary table, a flow comment or a command's output goes
through `printable`. Reports on disk keep the raw values (JSON escapes them).
"""

from __future__ import annotations

from collections import Counter

ELLIPSIS = "…"


def printable(text: object, limit: int = 200) -> str:
    """`text` (`str()` of it) with every character that is not printable (`str.isprintable`: control and format
    characters, line and paragraph separators, non-space blanks, surrogates) written as its escape (`\\x1b`,
    `\\r`, `\\n`, `\\u2028`), cut to at most `limit` (≥ 1) characters (ending in "…" when cut; no escape is split)."""
    value = text if isinstance(text, str) else str(text)
    if len(value) <= limit and value.isprintable():
        return value
    pieces: list[str] = []
    size = 0
    for char in value:
        piece = char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            break
    if size <= limit:
        return "".join(pieces)
    kept: list[str] = []
    size = len(ELLIPSIS)
    for piece in pieces:
        if size + len(piece) > limit:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept) + ELLIPSIS


class Once:
    """Which failures were reported: each kind (where, and what: an exception's type) is logged the first time
    only; repeats are counted. A loop that must not die catches everything and asks this whether to log."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()

    def first(self, place: str, what: str) -> bool:
        """Count this failure; True when it is the first of its kind."""
        self.counts[place, what] += 1
        return self.counts[place, what] == 1


def describe(exc: BaseException) -> str:
    """One printable line naming an exception: its type and (bounded) message."""
    return printable(f"{type(exc).__name__}: {exc}", 300)
