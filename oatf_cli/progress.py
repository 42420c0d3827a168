"""How `oatf evaluate`, `oatf recover` and `oatf export-trace` show the progress of long work
(`oatf_engine.progress.Progress`) on stderr:

- on a terminal, a bar per stage (`rich.progress`): what is done of the total (bytes, flows, events, reports),
  the rate, the time left and the time taken; a finished stage keeps its line, with what it did;
- not on a terminal but asked for (`--progress`), `Lines`: a line when a stage begins, one every
  `LINE_SECONDS` while it runs (done of total, rate, time left) and one when it ends;
- otherwise nothing (`--no-progress` turns the bar off too).

Either ends with one line: the whole time and each stage's. Only counts and sizes are shown, never anything
the traffic carries; the stage names and summaries are the engine's, and shown escaped (`printable`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import IO

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as Bars
from rich.text import Text

from oatf_engine.progress import Progress, size
from oatf_engine.text import printable

LINE_SECONDS = 5.0
"""Least time between two lines about a running stage (`Lines`)."""
REFRESH_SECONDS = 0.1
"""Least time between two redraws of the bars."""


def amount(count: float, unit: str) -> str:
    """`11.9 MB` for bytes, `4,720 flows` for the rest."""
    return size(count) if unit == "bytes" else f"{count:,.0f} {unit}"


def done_of(done: float, total: float, unit: str) -> str:
    """`5.2 MB/11.9 MB`, `2,048/10,820 events`."""
    if unit == "bytes":
        return f"{amount(done, unit)}/{amount(total, unit)}"
    return f"{done:,.0f}/{amount(total, unit)}"


def rate(count: float, unit: str) -> str:
    """`2.1 MB/s`, `12,345 events/s`."""
    return f"{amount(count, unit)}/s"


def duration(seconds: float) -> str:
    return f"{seconds:.1f} s"


class Stages:
    """The stages seen and how long each took, for the closing line."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.began = clock()
        self.taken: list[tuple[str, float]] = []
        self.current: tuple[str, float] | None = None

    def start(self, stage: str) -> None:
        self.current = (stage, self.clock())

    def finish(self) -> float:
        """The current stage's time."""
        if self.current is None:
            return 0.0
        stage, began = self.current
        self.current = None
        self.taken.append((stage, self.clock() - began))
        return self.taken[-1][1]

    def complete(self) -> bool:
        """Whether some stage ran and every stage begun ended (the work was not cut short by an error)."""
        return bool(self.taken) and self.current is None

    def summary(self) -> str:
        """`done in 9.5 s (loading attacks 0.6 s, reading recordings 0.9 s, …)`."""
        parts = ", ".join(f"{printable(stage, 60)} {duration(seconds)}" for stage, seconds in self.taken)
        return f"done in {duration(self.clock() - self.began)}" + (f" ({parts})" if parts else "")


class Lines:
    """`Progress` as occasional lines on a stream that is not a terminal (a CI log)."""

    def __init__(self, program: str, stream: IO[str], every: float = LINE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.program, self.stream, self.every, self.clock = program, stream, every, clock
        self.stages = Stages(clock)
        self.stage, self.total, self.unit = "", 0, ""
        self.began = self.said = 0.0

    def say(self, text: str) -> None:
        print(f"{self.program}: {text}", file=self.stream, flush=True)

    def start(self, stage: str, total: int, unit: str) -> None:
        self.stage, self.total, self.unit = printable(stage, 60), total, unit
        self.stages.start(stage)
        self.began = self.said = self.clock()
        self.say(f"{self.stage}: {amount(total, unit)}" if total else f"{self.stage}…")

    def update(self, done: int) -> None:
        now = self.clock()
        if now - self.said < self.every:
            return
        self.said = now
        speed = done / (now - self.began) if now > self.began else 0.0
        line = f"{self.stage}: {amount(done, self.unit)}"
        if self.total:
            line = f"{self.stage}: {done_of(done, self.total, self.unit)} ({100 * done / self.total:.0f}%)"
        if speed:
            line += f", {rate(speed, self.unit)}"
            if self.total > done:
                line += f", about {duration((self.total - done) / speed)} left"
        self.say(line)

    def finish(self, summary: str) -> None:
        self.say(f"{printable(summary, 300)} in {duration(self.stages.finish())}")

    def close(self) -> None:
        if self.stages.complete():
            self.say(self.stages.summary())


class AmountColumn(ProgressColumn):
    """`5.2 MB/11.9 MB`, `2,048/10,820 events`: done of the total, in the stage's unit."""

    def render(self, task: Task) -> Text:
        unit = task.fields["unit"]
        shown = done_of(task.completed, task.total, unit) if task.total else amount(task.completed, unit)
        return Text(shown, style="progress.download")


class RateColumn(ProgressColumn):
    """`2.1 MB/s`, `12,345 events/s`."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(rate(speed, task.fields["unit"]) if speed else "", style="progress.data.speed")


class Bar:
    """`Progress` as a bar per stage on a terminal (`rich.progress`), redrawn as the counts change (no thread of
    its own: a replay forks its workers only while no other thread runs)."""

    def __init__(self, program: str, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.program, self.console, self.clock = program, console, clock
        self.stages = Stages(clock)
        self.bars = Bars(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), AmountColumn(),
                         RateColumn(), TimeRemainingColumn(), TimeElapsedColumn(), console=console,
                         auto_refresh=False, get_time=clock)
        self.task: TaskID | None = None
        self.drawn = 0.0
        self.bars.start()

    def start(self, stage: str, total: int, unit: str) -> None:
        self.stages.start(stage)
        self.task = self.bars.add_task(escape(printable(stage, 60)), total=total or None, unit=unit)
        self._draw(force=True)

    def update(self, done: int) -> None:
        if self.task is not None:
            self.bars.update(self.task, completed=done)
            self._draw()

    def finish(self, summary: str) -> None:
        self.stages.finish()
        if self.task is not None:
            task = next(task for task in self.bars.tasks if task.id == self.task)
            done = max(1, task.completed)
            self.bars.update(self.task, total=done, completed=done, description=escape(printable(summary, 120)))
            self.task = None
        self._draw(force=True)

    def close(self) -> None:
        self.bars.stop()
        if self.stages.complete():
            self.console.print(escape(f"{self.program}: {self.stages.summary()}"), highlight=False)

    def _draw(self, force: bool = False) -> None:
        now = self.clock()
        if force or now - self.drawn >= REFRESH_SECONDS:
            self.drawn = now
            self.bars.refresh()


@contextlib.contextmanager
def shown(program: str, asked: bool | None, stream: IO[str]) -> Iterator[Progress | None]:
    """The `Progress` for `program`'s work on `stream`: a `Bar` on a terminal unless `asked` is False, `Lines`
    when `asked` (`--progress`) elsewhere, else None. Closed when the work is done: the bars taken down, and the
    closing line written unless the work was cut short (a stage begun and not finished: an error)."""
    display: Bar | Lines | None = None
    if asked is not False and stream.isatty():
        display = Bar(program, Console(file=stream))
    elif asked:
        display = Lines(program, stream)
    if display is None:
        yield None
        return
    try:
        yield display
    finally:
        display.close()
