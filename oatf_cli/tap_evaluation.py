"""`oatf tap`'s evaluation process: what the tap relays, judged in a process of its own, so that the relay threads
never wait for an interpreter lock held by evaluation (issue 18: a round trip through the tap added whatever
the evaluation was doing when the answer came).

The tap (`oatf_cli.tap`) starts `python -m oatf_cli.tap_evaluation TAP_PID` and writes frames to its stdin
(`Frame`: a kind, a side, the time the tap read the bytes, a length, the bytes):

    OPTIONS (pickled `TapOptions`: the tap's own process is the only writer) first; the process loads the
    library, opens the judge (or the shared monitor's feed) and the capture, then writes `READY` on its stdout
    (or says why it cannot on stderr and exits `EXIT_USAGE`);
    BEGIN (pickled (server pid, command)), then DATA / END / GAP for each side as the tap relayed them, in
    batches (`oatf_cli.tap.Backlog`), then FINISH ("1": the server exited by itself, "0": a signal ended it).

Each batch read is evaluated together (`Evaluator.evaluate`: NDJSON framing and MCP decoding, `--record`'s
capture, the events to the `Judge` or the shared monitor); while nothing comes the clock ticks every
`TICK_SECONDS`. At FINISH every open run is concluded and reported and the process exits. When its stdin ends
without one, the tap is gone (killed, or crashed): the process concludes nothing and exits, its journal made
durable, so the runs it held open are concluded by `oatf recover` or the next judge started on the report
directory (status `recovered`), as the addon's monitor process leaves them when the proxy dies. It dies with the
tap too (`PR_SET_PDEATHSIG`, SIGTERM: a process busy evaluating never reads its stdin's end), with the same
result: which of the two comes first, once the tap is gone, changes nothing. It runs in a process group of its
own (a terminal's Ctrl-C does not reach it: the tap says when it is done) and at the scheduler's batch policy (it
never preempts the relay or the server when they wake).
"""

from __future__ import annotations

import ctypes
import functools
import os
import pickle
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, NamedTuple

from oatf_cli.judge import TICK_SECONDS, Judge, Say
from oatf_engine.events import ObservedEvent, Side
from oatf_engine.feed import FeedClient, FrameError
from oatf_engine.monitor import load_library
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.wire import Diagnostic, WireDecoder
from oatf_engine.wire.ndjson import StdioSession, endpoint_of, record_header, record_line

if TYPE_CHECKING:
    from oatf_cli.tap import TapOptions

OPTIONS, BEGIN, DATA, END, GAP, FINISH = b"O", b"B", b"D", b"E", b"G", b"F"
SIDES: dict[Side, bytes] = {"client": b"c", "server": b"s"}
READY = b"ready\n"
EXIT_USAGE = 2
HEADER = struct.Struct("<ccdI")
"""A frame's header: kind, side, time read (seconds since the epoch), length of the bytes that follow."""
READ_BYTES = 1 << 20
_PR_SET_PDEATHSIG = 1


class Frame(NamedTuple):
    kind: bytes
    side: Side
    timestamp: float
    data: bytes


def header(kind: bytes, side: Side, timestamp: float, length: int = 0) -> bytes:
    """A frame's header; its `length` bytes follow."""
    return HEADER.pack(kind, SIDES[side], timestamp, length)


class FrameReader:
    """The frames in a byte stream, in any chunking. Sans-I/O. Each frame's bytes are copied once (the stream's
    own bytes are framed in place; only an incomplete frame at a read's end is buffered)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._sides = {code: side for side, code in SIDES.items()}

    def feed(self, data: bytes) -> Iterator[Frame]:
        if self._buffer:
            data = self._buffer + data
        view = memoryview(data)
        start = 0
        while len(data) - start >= HEADER.size:
            kind, side, timestamp, length = HEADER.unpack_from(data, start)
            end = start + HEADER.size + length
            if len(data) < end:
                break
            yield Frame(kind, self._sides[side], timestamp, bytes(view[start + HEADER.size:end]))
            start = end
        self._buffer = bytes(view[start:])


class Evaluator:
    """The evaluation's work: batches of frames in (`evaluate`), events to the judge or the shared monitor, the
    capture out."""

    def __init__(self, session: StdioSession, make_judge: Callable[[], Judge], judge: Judge | None,
                 record: IO[str] | None, say: Say, monitor_path: str | None) -> None:
        self.session = session
        self.make_judge = make_judge
        self.judge = judge
        """Judging alone (from the start, or since the shared monitor was lost); else None."""
        self.feed: FeedClient | None = None
        """The shared monitor's feed, while it serves."""
        self.monitor_path = monitor_path
        self.record = record
        self.say = say

    def evaluate(self, frames: list[Frame]) -> None:
        """Decode (and record) a batch of DATA / END / GAP frames and hand their events on together (one journal
        record, one frame to a shared monitor)."""
        events: list[ObservedEvent] = []
        for frame in frames:
            self.say.guard("evaluation", functools.partial(self._chunk, frame, events))
        self.say.guard("evaluation", functools.partial(self._hand, events))

    def tick(self) -> None:
        if self.judge is not None:  # a shared monitor keeps its own clock
            self.judge.tick(time.time())

    def _chunk(self, frame: Frame, events: list[ObservedEvent]) -> None:
        """Decode (and record) one frame; its events appended to `events`."""
        if frame.kind == END:
            last = self.session.end(frame.side)
            lines = [last] if last is not None else []
        elif frame.kind == GAP:
            self.session.gap(frame.side)
            return
        else:
            lines = self.session.lines(frame.side, frame.data)
        for line in lines:
            if self.record is not None:
                self.say.guard("record", functools.partial(self._record, frame.side, line, frame.timestamp))
            events.extend(self.session.message(frame.side, line, frame.timestamp))

    def _hand(self, events: list[ObservedEvent]) -> None:
        if not events:
            return
        if self.feed is not None:
            try:
                self.feed.send(events)
                return
            except (OSError, FrameError) as exc:
                self.alone(f"the shared monitor at {self.monitor_path} failed ({exc})", self.feed.close())
                return
        assert self.judge is not None
        self.judge.observe(events)

    def alone(self, why: str, unacked: list[ObservedEvent]) -> None:
        """Judge alone from now on, beginning with what the shared monitor did not acknowledge."""
        self.feed = None
        self.judge = self.make_judge()
        self.say.always(f"{why}: judging alone from now on ({len(unacked)} event(s) it had not acknowledged "
                        f"included), reports in {self.judge.report_dir}")
        self.judge.observe(unacked)

    def leave(self) -> None:
        """The tap is gone: conclude nothing, keep every open run in a journal for recovery (what the shared
        monitor had not acknowledged goes to a journal of this process's own first)."""
        if self.feed is not None:
            unacked = self.feed.close()
            if unacked:
                self.alone(f"the tap is gone and the shared monitor at {self.monitor_path} did not acknowledge "
                           "every event", unacked)
        if self.judge is not None:
            self.judge.leave()
        self.session.close()

    def finish(self, server_exited: bool) -> None:
        """Conclude and report every open run: as at a recording's end when the server exited by itself (the
        agent closed the session, `Monitor.end_of_traffic`), else at once (`interrupted`)."""
        if self.feed is not None:
            unacked = self.feed.close()
            if unacked:
                self.alone(f"the shared monitor at {self.monitor_path} did not acknowledge every event", unacked)
        if self.judge is not None:
            self.judge.finish(server_exited)
        self.session.close()

    def _record(self, sender: Side, line: bytes, timestamp: float) -> None:
        assert self.record is not None
        self.record.write(record_line(sender, line, timestamp))
        self.record.flush()


def die_with_parent() -> None:
    """SIGTERM when the parent dies, however it dies (Linux `PR_SET_PDEATHSIG`: the parent is the thread that
    started this process)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(parent: int) -> None:
    """Die with the tap (gone at once if it already is); yield the CPU to the relay and the server when they
    wake (`SCHED_BATCH`)."""
    if sys.platform == "linux":
        die_with_parent()
    if os.getppid() != parent:
        sys.exit(0)
    if hasattr(os, "SCHED_BATCH"):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def _frames(fd: int, reader: FrameReader) -> Iterator[list[Frame] | None]:
    """The batches of frames read from `fd` (None: nothing came for `TICK_SECONDS`), until its end."""
    while True:
        if not select.select([fd], [], [], TICK_SECONDS)[0]:
            yield None
            continue
        data = os.read(fd, READ_BYTES)
        if not data:
            return
        yield list(reader.feed(data))


def main(argv: list[str]) -> int:
    """The evaluation process (see the module docstring)."""
    _start(int(argv[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    say = Say("oatf tap", sys.stderr)
    reader = FrameReader()
    batches = _frames(0, reader)
    first = next((frames for frames in batches if frames), [])
    if not first or first[0].kind != OPTIONS:
        return EXIT_USAGE
    from oatf_cli.tap import TapOptions  # here: `oatf_cli.tap` imports this module

    options = pickle.loads(first[0].data)  # written by the tap that started this process
    assert isinstance(options, TapOptions)
    library = load_library(options.attack_paths, options.config.lenient, long_lived=True)
    for problem in library.problems:
        say.always(f"not loaded: {problem}")
    try:
        semantic = load_semantic_evaluator(options.config.semantic_evaluator)
        make_judge = functools.partial(Judge, list(library.attacks), options.config, semantic, options.report_dir,
                                       say, options.verbose)
        judge = make_judge() if options.monitor is None else None
        record = open(options.record, "a", encoding="utf-8") if options.record else None  # noqa: SIM115
    except (ImportError, AttributeError, OSError) as exc:
        say.always(str(exc))
        return EXIT_USAGE
    os.write(1, READY)
    try:
        return _follow(options, first[1:], batches, make_judge, judge, record, say)
    finally:
        if record is not None:
            record.close()


def _follow(options: TapOptions, pending: list[Frame], batches: Iterator[list[Frame] | None],
            make_judge: Callable[[], Judge], judge: Judge | None, record: IO[str] | None, say: Say) -> int:
    """Evaluate the server's frames from its BEGIN until FINISH (every open run concluded) or until the tap is
    gone (stdin ended without FINISH: every open run left to the journal); the exit status."""
    while not any(frame.kind == BEGIN for frame in pending):
        more = next(batches, [])
        if more is None:
            continue
        if not more:  # the server never started
            if judge is not None:
                say.guard("shutdown", functools.partial(judge.finish, True))
            return 0
        pending += more
    begin = next(i for i, frame in enumerate(pending) if frame.kind == BEGIN)
    evaluator = _evaluator(options, pickle.loads(pending[begin].data), make_judge, judge, record, say)
    pending = pending[begin + 1:]
    server_exited = False
    while True:
        finish = next((i for i, frame in enumerate(pending) if frame.kind == FINISH), None)
        evaluator.evaluate(pending[:finish])
        if finish is not None:
            server_exited = pending[finish].data == b"1"
            break
        batch = next(batches, [])
        if batch is None:
            say.guard("tick", evaluator.tick)
            pending = []
            continue
        if not batch:  # the tap is gone: its runs are left to the journal
            say.guard("shutdown", evaluator.leave)
            return 0
        pending = batch
    say.guard("shutdown", functools.partial(evaluator.finish, server_exited))
    if options.verbose:
        judged = (f"{evaluator.judge.reported} run(s) reported in {options.report_dir}" if evaluator.judge
                  else f"its events judged by the shared monitor at {options.monitor}")
        say.always(f"{options.command[0]}: {judged}")
    return 0


def _evaluator(options: TapOptions, begin: tuple[int, list[str], bool], make_judge: Callable[[], Judge],
               judge: Judge | None, record: IO[str] | None, say: Say) -> Evaluator:
    """The evaluation of the server `begin` names (its pid, its command, whether a capture starts here)."""
    pid, command, fresh = begin
    session_name = f"stdio:{pid}"
    if record is not None and fresh:
        record.write(record_header(session_name, pid, command, options.agent, time.time()))
        record.flush()

    def diagnose(diagnostic: Diagnostic) -> None:
        if options.verbose:
            say.always(f"{diagnostic.code}: {diagnostic.message}")

    decoder = WireDecoder(options.config.decoder, on_diagnostic=diagnose)
    session = StdioSession(decoder, session_name, endpoint_of(command, pid), options.agent)
    evaluator = Evaluator(session, make_judge, judge, record, say, options.monitor)
    if options.monitor is not None:
        source = f"oatf tap {command[0]} (pid {pid}, agent {options.agent})"
        try:
            evaluator.feed = FeedClient(options.monitor, source)
        except (OSError, FrameError) as exc:
            evaluator.alone(f"cannot reach the shared monitor at {options.monitor} ({exc})", [])
    return evaluator


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
