"""A large library's documents loaded in child processes (issue 15: 2,000 documents loaded in ≤ 2 s).

Loading a document — parsing (its YAML alone a third of the time), validating, normalizing, planning — is about
a millisecond of pure CPU, and documents are independent. So when at least `PARALLEL_MIN_DOCUMENTS` documents
must be loaded from their text (not found in the cache: `document_cache`) and more than one CPU is available,
`load_library` hands them to one child process per CPU (`python -m oatf_engine.monitor.load_workers`), dealt
round-robin; the calling process only unpickles the results. In the proxy that also leaves the interpreter lock
to mitmproxy's event loop while a library loads.

Each child runs `load_document`, as the calling process would: the results are the same (a test compares
them). A child that fails (killed, out of memory, a bug) loses nothing: the documents it did not answer are
loaded in the calling process.

Between the two, over the child's standard streams: in, one pickle `(lenient, [(path, data), ...])`; out, a pickle
per `CHUNK` documents, the list of their `load_document` results in order; the output ends with the last.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..collector import collector_paused
from ..cpus import available_cpus

if TYPE_CHECKING:
    from .library import LoadedAttack, LoadProblem

    Result = tuple[LoadedAttack | None, list[LoadProblem]]

PARALLEL_MIN_DOCUMENTS = 400
"""Below this many documents to load, they load in the calling process: a child's start (its imports, ~0.4 s of
CPU) would cost more than it saves."""
CHUNK = 25
"""Documents a child answers at a time (the caller's progress moves with each answer)."""
ROOT = Path(__file__).resolve().parents[2]
"""The checkout whose engine the children run (on their `PYTHONPATH`)."""


def children_for(documents: int) -> int:
    """How many children load `documents` documents (0: the calling process loads them)."""
    cpus = available_cpus()
    return min(cpus, documents // CHUNK) if documents >= PARALLEL_MIN_DOCUMENTS and cpus > 1 else 0


def load_in_children(documents: list[tuple[str, bytes]], lenient: bool, children: int,
                     load: Callable[[str, bytes, bool], Result], done: Callable[[int], None]) -> list[Result]:
    """`load(path, data, lenient)` of every document, in order, computed by `children` child processes;
    `done(n)` after each `n` more are loaded. What a child did not answer is loaded here with `load`."""
    results: list[Result | None] = [None] * len(documents)
    answers: queue.SimpleQueue[tuple[list[int], list[Result]] | None] = queue.SimpleQueue()
    shares = [list(range(n, len(documents), children)) for n in range(children)]
    threads = [threading.Thread(target=_run_child, args=([documents[i] for i in share], share, lenient, answers),
                                name="oatf-load-child", daemon=True) for share in shares]
    for thread in threads:
        thread.start()
    for _ in threads:
        while (answer := answers.get()) is not None:
            indices, loaded = answer
            for index, result in zip(indices, loaded, strict=True):
                results[index] = result
            done(len(loaded))
    for thread in threads:
        thread.join()  # its child has exited (a replay forks its workers only when no other thread runs)
    complete: list[Result] = []
    for (path, data), answered in zip(documents, results, strict=True):
        if answered is None:  # its child failed
            answered = load(path, data, lenient)
            done(1)
        complete.append(answered)
    return complete


def _run_child(documents: list[tuple[str, bytes]], indices: list[int], lenient: bool,
               answers: queue.SimpleQueue[tuple[list[int], list[Result]] | None]) -> None:
    """One child's share (on a thread of the caller): its answers, then None, go to `answers`."""
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *(p for p in sys.path if p)])}
        with subprocess.Popen([sys.executable, "-m", "oatf_engine.monitor.load_workers"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env) as child:
            assert child.stdin is not None and child.stdout is not None
            with contextlib.suppress(OSError), child.stdin:  # a child that ended early: its share is loaded here
                pickle.dump((lenient, documents), child.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            answered = 0
            with child.stdout:
                while answered < len(indices):
                    try:
                        loaded: list[Result] = pickle.load(child.stdout)
                    except Exception:  # ended (EOF) or garbled: the rest is loaded here
                        break
                    answers.put((indices[answered:answered + len(loaded)], loaded))
                    answered += len(loaded)
            if answered < len(indices):
                child.kill()
    except OSError:
        pass  # no child could be started: its documents are loaded here
    finally:
        answers.put(None)


def main() -> None:
    """A child: load the documents read from standard input, answer their results on standard output."""
    from .library import load_document

    with collector_paused():
        lenient, documents = pickle.load(sys.stdin.buffer)
        out = sys.stdout.buffer
        for start in range(0, len(documents), CHUNK):
            chunk: list[Any] = [load_document(path, data, lenient) for path, data in documents[start:start + CHUNK]]
            pickle.dump(chunk, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()


if __name__ == "__main__":
    main()
