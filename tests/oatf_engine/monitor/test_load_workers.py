"""A large library loaded in child processes (`oatf_engine.monitor.load_workers`) gives what loading in the calling
process gives — the same attacks, diagnostics, strict findings and problems, in the same order, over `attacks/` and
the official conformance documents, with and without the cache — and a child that fails loses no document."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from oatf_engine.monitor import library as library_module
from oatf_engine.monitor import load_library, load_workers
from oatf_engine.monitor.document_cache import DocumentCache
from tests.oatf_engine.monitor.test_document_cache import corpus, snapshot

__all__ = ["corpus"]  # the fixture, shared with the cache's tests


def in_children(monkeypatch: pytest.MonkeyPatch, children: int = 2) -> list[int]:
    """Loading hands any number of documents to `children` children (whatever the CPUs); the documents each load
    handed them, in a list."""
    handed: list[int] = []

    def children_for(documents: int) -> int:
        handed.append(documents)
        return children

    monkeypatch.setattr(library_module, "children_for", children_for)
    return handed


def counting_loads_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the documents loaded in this process from now on, in a list."""
    loaded: list[str] = []
    real = library_module.load_document

    def load_here(path: str, data: bytes, lenient: bool) -> object:
        loaded.append(path)
        return real(path, data, lenient)

    monkeypatch.setattr(library_module, "load_document", load_here)
    return loaded


@pytest.mark.parametrize("lenient", [False, True])
def test_with_children_loading_gives_what_the_calling_process_alone_loads(
        corpus: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lenient: bool) -> None:
    expected = snapshot(load_library(corpus, lenient, cache=None))
    assert expected[0] and expected[1]  # attacks and refused documents alike
    handed = in_children(monkeypatch, children=2)
    assert snapshot(load_library(corpus, lenient, cache=None)) == expected
    cache = DocumentCache(tmp_path / "cache")
    assert snapshot(load_library(corpus, lenient, cache=cache)) == expected  # cold: what was loaded is cached
    assert snapshot(load_library(corpus, lenient, cache=cache)) == expected  # warm: nothing left to load
    assert handed[0] == handed[1] > 0 and handed[2] == 0


def documents_of(corpus: list[str]) -> list[tuple[str, bytes]]:
    files, _problems = library_module.document_files(corpus)
    return [(str(path), path.read_bytes()) for path in files]


def test_children_alone_load_what_the_calling_process_loads(corpus: list[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunk loaded by the children (the caller takes none): the same results, in order."""
    documents = documents_of(corpus)
    expected = [library_module.load_document(path, data, False) for path, data in documents]
    loaded_here = counting_loads_here(monkeypatch)
    progress: list[int] = []
    results = load_workers.load_in_children(documents, False, 3, library_module.load_document, progress.append,
                                            here=False)
    assert repr(results) == repr(expected)
    assert not loaded_here and sum(progress) == len(documents)


def fake_child(tmp_path: Path, answers: int) -> str:
    """An executable that, whatever its arguments, loads and answers the first `answers` chunks it is given as a
    child does, then dies when given the next."""
    script = tmp_path / "child"
    script.write_text(f"""#!{sys.executable}
import os, pickle, sys
sys.path.insert(0, {str(load_workers.ROOT)!r})
from oatf_engine.monitor.library import load_document
for _ in range({answers}):
    lenient, documents = pickle.load(sys.stdin.buffer)
    pickle.dump([load_document(p, d, lenient) for p, d in documents], sys.stdout.buffer)
    sys.stdout.buffer.flush()
pickle.load(sys.stdin.buffer)
os._exit(1)
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.mark.parametrize("answers", [0, 1])
def test_what_a_failed_child_did_not_answer_is_loaded_by_the_caller(corpus: list[str], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    answers: int) -> None:
    """Children that die at their first chunk, or at their second: every document is loaded all the same, the
    caller loading exactly what they did not answer."""
    documents = documents_of(corpus)
    expected = [library_module.load_document(path, data, False) for path, data in documents]
    monkeypatch.setattr(sys, "executable", fake_child(tmp_path, answers))
    loaded_here = counting_loads_here(monkeypatch)
    results = load_workers.load_in_children(documents, False, 2, library_module.load_document, lambda n: None,
                                            here=False)
    assert repr(results) == repr(expected)
    assert len(loaded_here) == len(documents) - 2 * answers * load_workers.CHUNK


@pytest.mark.parametrize("executable", ["missing", "", None])
def test_without_a_child_the_caller_loads_everything(corpus: list[str], monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, executable: str | None) -> None:
    """No child can be started (no such executable; an interpreter embedded without one: `sys.executable` empty
    or None): the caller loads every chunk, even with `here=False`."""
    documents = documents_of(corpus)
    monkeypatch.setattr(sys, "executable", str(tmp_path / executable) if executable else executable)
    loaded_here = counting_loads_here(monkeypatch)
    results = load_workers.load_in_children(documents, False, 2, library_module.load_document, lambda n: None,
                                            here=False)
    assert len(results) == len(loaded_here) == len(documents)


def test_a_small_library_or_a_single_cpu_loads_in_the_calling_process_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load_workers, "available_cpus", lambda: 4)
    assert load_workers.children_for(load_workers.PARALLEL_MIN_DOCUMENTS - 1) == 0
    assert load_workers.children_for(2_000) == 3
    monkeypatch.setattr(load_workers, "available_cpus", lambda: 1)
    assert load_workers.children_for(2_000) == 0


def test_a_chunk_a_child_took_and_never_answered_is_loaded_by_the_caller(corpus: list[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever ends a child's thread (here it takes a chunk and ends without answering or giving it back), no
    document goes missing: the caller loads every chunk no one answered."""
    documents = documents_of(corpus)
    expected = [library_module.load_document(path, data, False) for path, data in documents]

    def losing(documents: object, lenient: bool, chunks: load_workers.Chunks, answers: load_workers.Answers) -> None:
        chunks.get_nowait()
        answers.put(None)

    monkeypatch.setattr(load_workers, "_serve", losing)
    results = load_workers.load_in_children(documents, False, 1, library_module.load_document, lambda n: None,
                                            here=False)
    assert repr(results) == repr(expected)
