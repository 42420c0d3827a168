"""The cache of loaded documents (`oatf_engine.monitor.document_cache`) never changes what loading gives: the same
attacks, diagnostics, strict findings and problems with no cache, a cold one and a warm one, over `attacks/` and
the official conformance documents; an entry that is damaged, belongs to another path or another text is not used;
an unsafe directory is not used at all."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from oatf_engine.monitor import Library, document_cache, load_library
from oatf_engine.monitor import library as library_module
from oatf_engine.monitor.document_cache import CACHE_ENV, MAGIC, DocumentCache
from testing.paths import ROOT
from tests.oatf.conformance.fixtures import conformance_dir, load_yaml_file

ATTACKS = ROOT / "attacks"
SUITES = ("validate/suite.yaml", "validate/warnings.yaml", "normalize/suite.yaml")
"""Conformance suites whose cases hold a document text (`input`): valid, invalid and with warnings."""


def snapshot(library: Library) -> Any:
    """Everything a caller reads of a load: each attack's path, document (`repr`: NaN is equal to itself there),
    warnings and plan, the problems and the strict findings."""
    return ([(a.path, repr(a.document), a.warnings, a.plan.__getstate__()) for a in library.attacks],
            library.problems, library.waived)


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`attacks/`, the conformance `parse/` documents and every document text of the suites, one file each."""
    paths = [str(ATTACKS)]
    base = conformance_dir()
    if base is None:
        return paths
    written = tmp_path_factory.mktemp("conformance")
    for suite in SUITES:
        for case in load_yaml_file(base / suite):
            if isinstance(case.get("input"), str):
                (written / f"{case['id']}.yaml").write_text(case["input"])
    return [*paths, str(base / "parse"), str(written)]


@pytest.mark.parametrize("lenient", [False, True])
def test_a_cold_and_a_warm_cache_load_what_loading_without_one_does(corpus: list[str], tmp_path: Path,
                                                                    lenient: bool) -> None:
    cache = DocumentCache(tmp_path / "cache")
    expected = snapshot(load_library(corpus, lenient, cache=None))
    assert expected[0] and expected[1]  # attacks and refused documents alike
    assert snapshot(load_library(corpus, lenient, cache=cache)) == expected
    written = entries(tmp_path / "cache")
    assert written
    assert snapshot(load_library(corpus, lenient, cache=cache)) == expected
    assert entries(tmp_path / "cache") == written  # warm: nothing loaded again


def test_a_warm_load_reads_the_cache_not_the_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DocumentCache(tmp_path / "cache")
    expected = snapshot(load_library([str(ATTACKS)], cache=cache))

    def refuse(*args: object) -> None:
        raise AssertionError("a cached document was loaded again")

    monkeypatch.setattr(library_module, "load_document", refuse)
    assert snapshot(load_library([str(ATTACKS)], cache=cache)) == expected


def damaged(content: bytes) -> list[bytes]:
    """The entry truncated, altered (its attack's name: still a loadable pickle of a result of its path), with
    the wrong magic, without a payload, empty."""
    head = len(MAGIC) + 32
    attack, _ = pickle.loads(content[head:])
    name = attack.attack.name.encode()
    altered = content.replace(name, name.upper() if name.upper() != name else name.lower())
    assert altered != content and pickle.loads(altered[head:])[0].attack.name != attack.attack.name
    return [content[:len(content) // 2], altered, b"x" + content[1:], content[:head], b""]


@pytest.mark.parametrize("damage", range(5), ids=["truncated", "altered", "bad-magic", "no-payload", "empty"])
def test_a_damaged_entry_is_ignored_and_written_again(tmp_path: Path, damage: int) -> None:
    cache = DocumentCache(tmp_path / "cache")
    expected = snapshot(load_library([str(ATTACKS)], cache=cache))
    entry = entries(tmp_path / "cache")[0]
    intact = entry.read_bytes()
    entry.write_bytes(damaged(intact)[damage])
    assert snapshot(load_library([str(ATTACKS)], cache=cache)) == expected
    assert entry.read_bytes() == intact


def test_an_entry_of_another_document_is_not_used(tmp_path: Path) -> None:
    """An intact entry under the wrong name (as a copied or renamed cache could hold) holds the result of another
    path: the document is loaded from its text."""
    cache = DocumentCache(tmp_path / "cache")
    expected = snapshot(load_library([str(ATTACKS)], cache=cache))
    first, second = entries(tmp_path / "cache")[:2]
    first.write_bytes(second.read_bytes())
    assert snapshot(load_library([str(ATTACKS)], cache=cache)) == expected


def test_an_edited_document_is_loaded_from_its_new_text(tmp_path: Path) -> None:
    document = tmp_path / "attack.yaml"
    text = (ATTACKS / sorted(os.listdir(ATTACKS))[0]).read_text()
    document.write_text(text)
    cache = DocumentCache(tmp_path / "cache")
    before = load_library([str(document)], cache=cache)
    edited = text.replace("name:", "name: edited", 1)
    assert edited != text
    document.write_text(edited)
    after = load_library([str(document)], cache=cache)
    assert snapshot(after) == snapshot(load_library([str(document)], cache=None))
    assert snapshot(after) != snapshot(before)
    # The strict and lenient loads of one text are different entries.
    load_library([str(document)], lenient=True, cache=cache)
    assert len(entries(tmp_path / "cache")) == 3


def test_the_default_cache_is_named_by_the_environment_and_used_only_when_private(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    assert DocumentCache.default() is None
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "new"))
    created = DocumentCache.default()
    assert created is not None and created.directory == tmp_path / "new"
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(CACHE_ENV, str(shared))
    assert DocumentCache.default() is None  # anyone could plant an entry there
    load_library([str(ATTACKS)])
    assert not entries(shared)


def test_the_cache_is_pruned_to_its_newest_entries_beyond_its_bound(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DocumentCache(tmp_path / "cache")
    load_library([str(ATTACKS)], cache=cache)
    written = entries(tmp_path / "cache")
    monkeypatch.setattr(document_cache, "MAX_ENTRIES", 10)
    edited = tmp_path / "edited.yaml"  # a load that writes an entry prunes
    edited.write_text((ATTACKS / sorted(os.listdir(ATTACKS))[0]).read_text())
    load_library([str(edited)], cache=cache)
    kept = entries(tmp_path / "cache")
    assert len(written) > 10 and len(kept) == 8  # 80% of the bound
    assert len(set(kept) - set(written)) == 1  # the newest, just written, is kept
