"""The addon journals each event when it takes it in, before the watermark releases it, and a "released up to"
marker as the watermark releases (`addon.watermark`, `oatf_engine.journal`): the addon's own hand-over code with a
real journal, and a stand-in for the monitor process that records what it is given. A replay of the journal
(`oatf_engine.recovery.monitor_inputs`) gives the monitor exactly what the live one was given: after a crash of
the proxy, every event journaled, each once (those still held last, in time order); after the loss of the
monitor process only, the events released to it, each once (the proxy hands the rest to the new one). The MCP
sessions the agent closed are journaled and replayed the same way, in the same places."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy.test import taddons

from addon.oatf_addon import OatfAddon
from addon.watermark import ClockMark, SessionClosed
from oatf_engine.events import ObservedEvent
from oatf_engine.journal import JOURNAL_DIR, Journal, decode_event, records, segments
from oatf_engine.recovery import Recovered, monitor_inputs
from tests.oatf_engine.monitor.test_monitor import call

Inputs = list[ObservedEvent | tuple[str, float] | float]
"""What a monitor was given, in order: events, closed sessions (`(session, at)`) and clock ticks (floats)."""


class Recorder:
    """Stands in for `MonitorProcess`: records what it is given, and the recoveries asked of it."""

    def __init__(self) -> None:
        self.inputs: Inputs = []
        self.recoveries: list[tuple[list[str], bool]] = []

    def observe(self, events: list[ObservedEvent]) -> None:
        self.inputs.extend(events)

    def tick(self, now: float) -> None:
        self.inputs.append(now)

    def close_session(self, protocol: str, name: str, value: str, at: float) -> None:
        self.inputs.append((value, at))

    def recover(self, report_dir: str, segments: list[str], origin: str, unreleased: bool) -> None:
        self.recoveries.append((segments, unreleased))


class Proxy:
    """The addon's worker side, with a journal in a directory of its own and a `Recorder` as monitor."""

    def __init__(self, addon: OatfAddon, directory: Path) -> None:
        self.addon = addon
        self.directory = directory
        addon.journal = Journal(directory)
        addon.monitor = self.monitor = Recorder()  # type: ignore[assignment]
        addon.library_ready.set()  # its library (none) is in place: a recovery is made at once
        self.lost: list[Inputs] = []
        """What each lost monitor process had been given."""
        self.recovered: list[Inputs] = []
        """What the recovery of each lost one replayed."""

    def take_in(self, items: list[ObservedEvent | ClockMark | SessionClosed]) -> None:
        with self.addon.lock:
            self.addon._hand_over(items)  # type: ignore[arg-type]

    def flush(self) -> None:
        with self.addon.lock:
            self.addon._flush()

    def lose_monitor(self) -> None:
        """The monitor process is lost: what `_replace_if_gone` does, the new one recovering the journal's segments
        so far (released events only) before they are dropped (`_recovered`)."""
        self.lost.append(self.monitor.inputs)
        self.addon.monitor = self.monitor = Recorder()  # type: ignore[assignment]
        with self.addon.lock:
            self.addon._recover("a monitor process that was lost", unreleased=False)
        if not self.monitor.recoveries:  # nothing journaled yet
            self.recovered.append([])
            return
        [(cut, unreleased)] = self.monitor.recoveries
        self.recovered.append(list(monitor_inputs(records(self.journal, [Path(s) for s in cut]), unreleased)))
        self.addon._recovered(Recovered(tuple(cut), "a monitor process that was lost", 0, True))

    @property
    def journal(self) -> Path:
        return self.directory / JOURNAL_DIR


@contextlib.contextmanager
def proxy() -> Iterator[Proxy]:
    addon = OatfAddon()
    with taddons.context(addon), tempfile.TemporaryDirectory() as directory:
        yield Proxy(addon, Path(directory))


Step = tuple[str, Any]
steps = st.lists(st.one_of(
    st.tuples(st.just("events"), st.lists(st.integers(0, 30).map(float), min_size=1, max_size=6)),
    st.tuples(st.just("mark"), st.integers(0, 30).map(float)),
    st.tuples(st.just("close"), st.integers(0, 30).map(float)),
    st.tuples(st.just("flush"), st.none()),
    st.tuples(st.just("lose"), st.none())), max_size=25)


def play(proxy: Proxy, script: list[Step]) -> list[ObservedEvent]:
    """Run the steps (events taken in, clock marks, sessions the agent closed, a flush as at a library swap, the
    loss of the monitor process); the events taken in."""
    taken: list[ObservedEvent] = []
    for kind, value in script:
        if kind == "events":
            events = [call("x", at, session=f"s{int(at) % 3}") for at in value]
            taken += events
            proxy.take_in(list(events))
        elif kind == "mark":
            proxy.take_in([ClockMark(value)])
        elif kind == "close":
            proxy.take_in([SessionClosed(f"s{int(value) % 3}", value)])
        elif kind == "flush":
            proxy.flush()
        else:
            proxy.lose_monitor()
    return taken


def held(proxy: Proxy) -> Inputs:
    """What the proxy holds, events and closes, as a replay gives them."""
    return [(item.session, item.at) if isinstance(item, SessionClosed) else item for item in proxy.addon.order.held()]


def at(item: ObservedEvent | tuple[str, float] | float) -> float:
    """The time of an event or of a close."""
    return item.timestamp if isinstance(item, ObservedEvent) else item[1] if isinstance(item, tuple) else item


def events_of(inputs: Inputs) -> list[ObservedEvent]:
    return [item for item in inputs if isinstance(item, ObservedEvent)]


@settings(max_examples=150)
@given(steps)
def test_every_event_is_given_to_exactly_one_monitor_and_replays_as_it_was_given(script: list[Step]) -> None:
    """Whatever the steps: the recovery of each lost monitor process replays exactly what it had been given, in
    order; a crash at the end replays exactly what the current one was given, then the events still held, in
    time order; so every event taken in is evaluated by exactly one monitor (live or replayed), once."""
    with proxy() as running:
        taken = play(running, script)
        assert running.recovered == running.lost
        running.addon.journal.close()  # type: ignore[union-attr]
        crash = list(monitor_inputs(records(running.journal)))
        assert crash == running.monitor.inputs + held(running)
        evaluated = [e for inputs in [*running.lost, crash] for e in events_of(inputs)]
        assert sorted(evaluated, key=lambda e: e.seq) == sorted(taken, key=lambda e: e.seq)


@settings(max_examples=150)
@given(steps, st.floats(0, 1))
def test_a_journal_cut_anywhere_recovers_each_event_it_holds_exactly_once(script: list[Step], where: float) -> None:
    """The proxy dies at any byte of its journal (a torn last line is skipped): what was released before the
    cut replays as it was given, and every event of a whole record, released or still held, comes out once."""
    with proxy() as running:
        play(running, script)
        running.addon.journal.close()  # type: ignore[union-attr]
        files = segments(running.journal)
        sizes = [f.stat().st_size for f in files]
        cut = int(where * sum(sizes))
        for segment, size in zip(files, sizes, strict=True):
            with open(segment, "r+b") as handle:
                handle.truncate(max(0, min(size, cut)))
            cut -= size
        released = list(monitor_inputs(records(running.journal), unreleased=False))
        assert released == running.monitor.inputs[:len(released)]
        crash = list(monitor_inputs(records(running.journal)))
        rest = crash[len(released):]
        assert crash[:len(released)] == released
        assert not any(isinstance(e, float) for e in rest)
        assert rest == sorted(rest, key=at)
        whole = [fields for r in records(running.journal) for key in ("received", "held") for fields in r.get(key, [])]
        journaled = {(event.flow_id, event.seq) for event in map(decode_event, whole)}
        recovered = [(e.flow_id, e.seq) for e in events_of(crash)]
        assert len(recovered) == len(set(recovered)) and set(recovered) == journaled
