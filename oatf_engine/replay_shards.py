"""Replay's sessions evaluated by forked worker processes, fed while the recording is decoded (`oatf evaluate
--jobs N`, `oatf_engine.replay`).

What stays in the main process: reading, decoding and placing (`replay.placed_events`). They are one decoder and
one session resolver over the whole recording, as on the live proxy, and cannot be split by any key without
changing what is placed where: exchanges answer each other across flows (the legacy MCP transport answers POSTs
on its GET stream), an agent episode gathers sessions of several protocols and of several hosts (README "How
traffic becomes runs", rules 4–6: a chain of agents is one episode), and the clock every run sees stops at the
oldest event held anywhere (`SessionResolver.oldest_held`).

What the workers do: each follows its share of the episodes in its own monitor. A placed event goes to the
worker of its episode (its session: a hash of it, so an episode is never split over workers, and a run sees
every event of its episode in order); an end of an exchange goes to every worker (one of an episode a worker
does not follow changes nothing there), and so does the clock: where each event moved it, when that is later
than the worker was told (a run's timers fire, and a closed session closes, between the same events of its
episode as in one monitor: a run concluded by the clock before a late-placed event of its session, such as
parked set-up traffic, does not take that event). The main process sends events as they are placed, `SHARD_BATCH` per
worker at a time, and blocks while a worker is a batch behind: memory holds a few batches, not the recording,
and the decoder and the monitors run at once, on different cores. The workers are forked before the recording
is read (`ShardedMonitors` is entered first), so they share none of its memory.

A worker that fails (an exception, or killed) fails the replay (`WorkerFailed`): no report of any worker is
returned then, as no run may silently go missing. Ctrl-C is the main process's: the workers ignore it and are
stopped when it leaves.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import operator
import os
import signal
import socket
import traceback
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import TYPE_CHECKING, Any

from oatf_engine.collector import collector_paused
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.progress import UPDATE_EVERY

if TYPE_CHECKING:
    from oatf_engine.replay import Placed, SessionClose

SHARD_BATCH = 1024
"""Placed events sent to a worker at a time (pickled together: fewer, larger messages cost less per event)."""

Evaluate = Callable[[Iterable["Placed | ExchangeEnded | float"], "list[SessionClose]", Callable[[], float],
                     Callable[[float], float]], list[dict[str, Any]]]
"""What a worker runs over its share: placed events, closes, the recording's end (asked once every event is
placed), the clock to conclude the runs still waiting for traffic at (`Monitor.end_of_traffic`'s `last_clock`)
→ the reports of its runs."""

_FIELDS = tuple(field.name for field in fields(ObservedEvent))
_flat = operator.attrgetter(*_FIELDS)
"""An event as a tuple of its fields, in order (`ObservedEvent(*fields)` rebuilds it): pickled and unpickled in
a third of the time of the frozen dataclass itself."""
_Sent = tuple[tuple[Any, ...], str, float] | ExchangeEnded | float


SEND_BUFFER = 4 << 20
"""Bytes of batches the kernel holds for a worker (asked of it; Linux caps it at `net.core.wmem_max`): the main
process goes on decoding while a worker is that far behind, instead of waiting for it to finish its batch."""


def _widen(connection: Connection) -> None:
    with socket.socket(fileno=os.dup(connection.fileno())) as view:  # the same socket, through another descriptor
        view.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)


class WorkerFailed(Exception):
    """An evaluation process failed: the replay has no complete result."""


class ShardedMonitors:
    """`shards` forked processes, each evaluating its share of the episodes with `evaluate` (see the module
    docstring). A context manager: the processes start on entry and are stopped on exit; `evaluate` once."""

    def __init__(self, evaluate: Evaluate, shards: int) -> None:
        self.shards = shards
        self._evaluate = evaluate
        self._connections: list[Connection] = []
        self._processes: list[BaseProcess] = []

    def __enter__(self) -> ShardedMonitors:
        context = multiprocessing.get_context("fork")
        # Ctrl-C is held back while forking, so that no worker gets it before it ignores it (`_serve`).
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for _ in range(self.shards):
                ours, theirs = context.Pipe()
                _widen(ours)
                process = context.Process(target=_serve, args=(theirs, self._evaluate, self._connections),
                                          daemon=True)
                process.start()
                theirs.close()
                self._connections.append(ours)
                self._processes.append(process)
        except BaseException:
            self._stop()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop()

    def evaluate(self, placed: Iterable[Placed | ExchangeEnded], closes: list[SessionClose],
                 end: Callable[[], float], through: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
        """The reports of every worker's runs over `placed` (in time order; see the module docstring), worker by
        worker; `closes` and `end` as `replay._evaluate_placed` takes them. `through` is told how many more
        events were sent to the workers every `UPDATE_EVERY` events, and at the end."""
        for index in range(self.shards):
            self._send(index, closes)
        batches: list[list[_Sent]] = [[] for _ in range(self.shards)]
        seen = [float("-inf")] * self.shards
        count = 0
        for count, item in enumerate(placed, 1):
            if isinstance(item, ExchangeEnded):
                for index, batch in enumerate(batches):
                    batch.append(item)
                    if len(batch) >= SHARD_BATCH:
                        self._send(index, batch)
                        batch.clear()
            else:
                event, session, clock = item
                index = zlib.crc32(session.encode("utf-8", "surrogatepass")) % self.shards
                for other, batch in enumerate(batches):
                    if other == index:
                        batch.append((_flat(event), session, clock))
                    elif clock > seen[other]:  # the clock of every run moves with every event, as in one monitor
                        batch.append(clock)
                    else:
                        continue
                    seen[other] = max(seen[other], clock)
                    if len(batch) >= SHARD_BATCH:
                        self._send(other, batch)
                        batch.clear()
            if through is not None and count % UPDATE_EVERY == 0:
                through(UPDATE_EVERY)
        finished = end()
        for index, batch in enumerate(batches):
            if batch:
                self._send(index, batch)
            self._send(index, float(finished))
        last = max(self._receive(index, "clock") for index in range(self.shards))
        for index in range(self.shards):
            self._send(index, last)
        reports = [self._receive(index, "reports") for index in range(self.shards)]
        if through is not None and count % UPDATE_EVERY:
            through(count % UPDATE_EVERY)
        return [report for shard in reports for report in shard]

    def _send(self, index: int, message: object) -> None:
        try:
            self._connections[index].send(message)
        except OSError:  # the worker is gone (a broken pipe, a reset connection)
            raise self._failed(index) from None

    def _receive(self, index: int, expected: str) -> Any:
        """Worker `index`'s next answer, of kind `expected` ("clock": where the end of the traffic brought its
        monitor's clock; "reports")."""
        try:
            kind, value = self._connections[index].recv()
        except (EOFError, OSError):
            raise self._failed(index) from None
        if kind == "failed":
            raise WorkerFailed(f"evaluation process {index + 1} of {self.shards} failed: {value}")
        assert kind == expected, (kind, expected)
        return value

    def _failed(self, index: int) -> WorkerFailed:
        """Why worker `index` stopped: the error it reported, else how it exited."""
        connection, process = self._connections[index], self._processes[index]
        try:
            if connection.poll(1.0):
                kind, value = connection.recv()
                if kind == "failed":
                    return WorkerFailed(f"evaluation process {index + 1} of {self.shards} failed: {value}")
        except (EOFError, OSError):
            pass
        process.join(5.0)
        code = process.exitcode
        how = (f"was killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exited with status {code}" if code is not None else "stopped answering")
        return WorkerFailed(f"evaluation process {index + 1} of {self.shards} (pid {process.pid}) {how} before it "
                            "finished: no report is complete")

    def _stop(self) -> None:
        """Stop the workers still running (after a failure, or Ctrl-C) and wait for every one."""
        for connection in self._connections:
            connection.close()
        for process in self._processes:
            process.join(5.0)
            if process.exitcode is None:
                process.terminate()
                process.join()


def _serve(connection: Connection, evaluate: Evaluate, inherited: list[Connection]) -> None:
    """A worker: closes, then batches of placed events until the recording's end (a float), evaluated as they come
    (`ShardedMonitors.evaluate`); once through, ("clock", its monitor's clock) for the latest of all, then
    ("reports", its reports); or ("failed", the error)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the main process stops us
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held back while forking (`__enter__`)
    for other in inherited:  # the main process's ends to the workers forked before this one
        other.close()
    try:
        with collector_paused():
            closes: list[SessionClose] = connection.recv()
            ended: list[float] = []
            reports = evaluate(_received(connection, ended), closes, lambda: ended[0], _latest(connection))
        connection.send(("reports", reports))
    except Exception as exc:  # any error is the replay's: reported to the main process
        last = traceback.format_exception_only(exc)[-1].strip()
        with contextlib.suppress(OSError):  # unless it stopped first (it failed, or was interrupted)
            connection.send(("failed", last))
    finally:
        connection.close()


def _latest(connection: Connection) -> Callable[[float], float]:
    """`Monitor.end_of_traffic`'s `last_clock` in a worker: the latest clock of every worker's monitor, which the
    main process answers once each has told it its own."""

    def last_clock(clock: float) -> float:
        connection.send(("clock", clock))
        latest: float = connection.recv()
        return latest

    return last_clock


def _received(connection: Connection, ended: list[float]) -> Iterator[Placed | ExchangeEnded | float]:
    """The placed events the main process sends, each rebuilt, until the recording's end (put in `ended`)."""
    while True:
        message = connection.recv()
        if isinstance(message, float):
            ended.append(message)
            return
        for item in message:
            if isinstance(item, ExchangeEnded | float):
                yield item
            else:
                event, session, clock = item
                yield ObservedEvent(*event), session, clock


__all__ = ["SHARD_BATCH", "ShardedMonitors", "WorkerFailed"]
