"""Progress of long offline work (`oatf evaluate`, `oatf recover`, `oatf export-trace`), told stage by stage to
whoever shows it (`oatf_cli.progress`: a bar on a terminal, occasional lines otherwise). The engine only counts: it
never says what the traffic holds, only how much of it is through.

A stage is one pass over a known amount of work: the attack documents loaded, the recordings' bytes read (or a
journal's, replayed), the flows decoded, the events evaluated, the reports written. `start` names it with its
total, `update` says how much is done (every `UPDATE_EVERY` items, or as a file is read, and the last count before
the end), `finish` closes it with a summary of what it did.
"""

from __future__ import annotations

import os
from typing import Protocol


class Progress(Protocol):
    def start(self, stage: str, total: int, unit: str) -> None:
        """Stage `stage` (what is being done: `reading recordings`) begins: `total` `unit`s (`bytes`, `flows`,
        `events`, `reports`, `documents`) to go through; 0 when the total is not known."""

    def update(self, done: int) -> None:
        """`done` units of the current stage are through (counted from the stage's start)."""

    def finish(self, summary: str) -> None:
        """The current stage is over; `summary` says what it did (`read 4,720 flow(s), 11.9 MB`)."""


UPDATE_EVERY = 512
"""Items (documents, flow records, events, reports) between two `Progress.update` calls: rare enough to cost
nothing per item, often enough for a bar to move several times a second."""


def size(count: float) -> str:
    """`512 bytes`, `18.4 kB`, `11.9 MB`: an amount of bytes in decimal units, for people."""
    if count < 1000:
        return f"{count:,.0f} bytes"
    for unit in ("kB", "MB"):
        count /= 1000
        if count < 1000:
            return f"{count:,.1f} {unit}"
    return f"{count / 1000:,.1f} GB"


def file_size(path: str | os.PathLike[str]) -> int:
    """The size of the file at `path` in bytes, for a stage's total; 0 when it cannot be read (reading it then
    says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


__all__ = ["UPDATE_EVERY", "Progress", "file_size", "size"]
