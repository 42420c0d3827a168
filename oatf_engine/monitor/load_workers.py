"""A large library's documents loaded in child processes too (issue 15: 2,000 documents loaded in ≤ 2 s).

Loading a document — parsing (its YAML alone a third of the time), validating, normalizing, planning — is about
a millisecond of pure CPU, and documents are independent. So when at least `PARALLEL_MIN_DOCUMENTS` documents
must be loaded from their text (not found in the cache: `document_cache`) and more than one CPU is available,
`load_library` loads them in the calling process and in one child process per other CPU (`main`), `CHUNK`
documents at a time from one queue: whoever is free takes the next chunk, so the children's start (their
imports, ~0.5 s) costs the caller nothing, and a slow one slows nobody. A child is kept `AHEAD` chunks ahead by a
thread of the caller, another takes its answers.

Each child runs `load_document`, as the calling process does: the results are the same (a test compares them).
A child that fails (killed, out of memory, a bug) loses nothing: the chunks it was given and did not answer are
loaded in the calling process, and so are the chunks no child took.

Between the two, over the child's standard streams: in, a pickle `(lenient, [(path, data), ...])` per chunk; out,
a pickle per chunk, the list of its `load_document` results in order; the child ends when its input does.
"""

from __future__ import annotations

import collections
import contextlib
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..collector import collector_paused
from ..cpus import available_cpus

if TYPE_CHECKING:
    from .library import LoadedAttack, LoadProblem

    Result = tuple[LoadedAttack | None, list[LoadProblem]]
    Chunks = queue.SimpleQueue[int]
    """The chunks no one has taken yet, each by the index of its first document."""
    Answers = queue.SimpleQueue[tuple[int, list[Result] | None] | None]
    """Chunks a child loaded (its first document's index, their results; None: the child failed, the caller
    loads it), and a None from each child's thread when it is done."""

PARALLEL_MIN_DOCUMENTS = 500
"""Below this many documents to load, they load in the calling process alone: a child's start (its imports and
the CEL grammar, ~0.45 s of CPU) would cost more than it saves."""
CHUNK = 25
"""Documents loaded at a time by the caller or a child (the caller's progress moves with each chunk)."""
AHEAD = 4
"""Chunks given to a child before it answers one: it starts the next while the caller takes its answer."""
ROOT = Path(__file__).resolve().parents[2]
"""The checkout whose engine the children run (on their `PYTHONPATH`)."""
CHILD = "from oatf_engine.monitor.load_workers import main; main()"
"""A child's program (not `-m` of this module, which its package has imported already)."""


def children_for(documents: int) -> int:
    """How many children help load `documents` documents (0: the calling process loads them alone)."""
    cpus = available_cpus()
    if documents < PARALLEL_MIN_DOCUMENTS or cpus < 2:
        return 0
    return min(cpus - 1, documents // CHUNK)


def load_in_children(documents: list[tuple[str, bytes]], lenient: bool, children: int,
                     load: Callable[[str, bytes, bool], Result], done: Callable[[int], None],
                     here: bool = True) -> list[Result]:
    """`load(path, data, lenient)` of every document, in order, computed here and by `children` child processes
    (see the module docstring); `done(n)` after each `n` more are loaded (called in this thread). `here=False`:
    this thread loads only what a failed child leaves."""
    results: list[Result | None] = [None] * len(documents)
    chunks: Chunks = queue.SimpleQueue()
    for first in range(0, len(documents), CHUNK):
        chunks.put(first)
    answers: Answers = queue.SimpleQueue()
    threads = [threading.Thread(target=_serve, args=(documents, lenient, chunks, answers), name="oatf-load-child",
                                daemon=True) for _ in range(children)]
    for thread in threads:
        thread.start()

    def take(start: int, loaded: list[Result] | None) -> None:
        if loaded is None:  # here, or the child it was given failed
            loaded = [load(path, data, lenient) for path, data in documents[start:start + CHUNK]]
        results[start:start + len(loaded)] = loaded
        done(len(loaded))

    running = children

    def receive(block: bool) -> bool:
        """Take a child's answer (waiting for one if `block`); False when none was there."""
        nonlocal running
        try:
            answer = answers.get(block)
        except queue.Empty:
            return False
        if answer is None:
            running -= 1
        else:
            take(*answer)
        return True

    while here and (chunk := _next(chunks)) is not None:
        take(chunk, None)
        while receive(block=False):
            pass
    while running:
        receive(block=True)
    for thread in threads:
        thread.join()  # its child has exited (a replay forks its workers only when no other thread runs)
    for first in range(0, len(documents), CHUNK):
        if results[first] is None:  # no one answered it (no child could take it, or one failed unforeseen)
            take(first, None)
    return [result for result in results if result is not None]


def _next(chunks: Chunks) -> int | None:
    """The next chunk no one has taken (None: none is left)."""
    try:
        return chunks.get_nowait()
    except queue.Empty:
        return None


def _serve(documents: list[tuple[str, bytes]], lenient: bool, chunks: Chunks, answers: Answers) -> None:
    """One child (on a thread of the caller): a writer thread keeps it `AHEAD` chunks from `chunks` ahead, so it
    never waits for the caller between two; its answers go to `answers`, then None. When it fails, the chunks it
    was given and did not answer go to `answers` as failed (the caller loads them)."""
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *(p for p in sys.path if p)])}
        with subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env) as child:
            assert child.stdin is not None and child.stdout is not None
            sent: collections.deque[int] = collections.deque()
            room = threading.Semaphore(AHEAD)
            stop = threading.Event()
            writer = threading.Thread(target=_feed, args=(child.stdin, documents, lenient, chunks, sent, room, stop),
                                      name="oatf-load-feed", daemon=True)
            writer.start()
            with child.stdout:
                while True:
                    try:
                        loaded: list[Result] = pickle.load(child.stdout)
                    except Exception:  # its input ended (EOF: done), or the child ended or garbled its answer
                        break
                    answers.put((sent.popleft(), loaded))
                    room.release()
            if sent:  # the child failed (it ends only once its input has, after its last answer)
                child.kill()
            stop.set()  # the writer stops waiting for room
            room.release()
            writer.join()
            for start in sent:  # what the failed child was given and did not answer: the caller loads it
                answers.put((start, None))
    except (OSError, ValueError, TypeError, subprocess.SubprocessError):
        pass  # no child could be started (no interpreter to run, no process to spare): the caller loads the chunks
    finally:
        answers.put(None)


def _feed(stdin: IO[bytes], documents: list[tuple[str, bytes]], lenient: bool, chunks: Chunks,
          sent: collections.deque[int], room: threading.Semaphore, stop: threading.Event) -> None:
    """Write chunks to a child while it has room for them (`_serve`), until none is left or `stop`; then close its
    input."""
    with contextlib.suppress(OSError), stdin:  # a child that ended: `_serve` hands its chunks to the caller
        while room.acquire() and not stop.is_set() and (start := _next(chunks)) is not None:
            sent.append(start)
            pickle.dump((lenient, documents[start:start + CHUNK]), stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()


def main() -> None:
    """A child: load each chunk of documents read from standard input, answer its results on standard output."""
    from .library import load_document

    with collector_paused():
        inbox, out = sys.stdin.buffer, sys.stdout.buffer
        while True:
            try:
                lenient, documents = pickle.load(inbox)
            except EOFError:
                return
            pickle.dump([load_document(path, data, lenient) for path, data in documents], out,
                        protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
