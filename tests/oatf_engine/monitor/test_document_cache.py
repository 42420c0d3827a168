"""The cache of loaded documents (`oatf_engine.monitor.document_cache`) never changes what loading gives: the same
attacks, diagnostics, strict findings and problems with no cache, a cold one and a warm one, over `attacks/` and
the official conformance documents; a pack that is damaged, or an entry that belongs to another path or another
text, is not used; an unsafe directory is not used at all. A load reads and writes one file (its library's pack)."""

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
    """The files of the cache: its packs."""
    return sorted(p for p in cache.rglob("*") if p.is_file())


def written(cache: Path) -> list[tuple[Path, int, int]]:
    """Each pack and when it was written (a pack is written again as a new file, renamed over the old one)."""
    return [(p, p.stat().st_ino, p.stat().st_mtime_ns) for p in entries(cache)]


def stored(pack: Path) -> dict[str, Any]:
    """The entries of a pack, by key."""
    entries = pickle.loads(pack.read_bytes()[len(MAGIC) + 32:])
    assert isinstance(entries, dict)
    return entries


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
    packs = written(tmp_path / "cache")
    assert len(packs) == 1  # one file for the library, not one per document
    assert snapshot(load_library(corpus, lenient, cache=cache)) == expected
    assert written(tmp_path / "cache") == packs  # warm: nothing loaded again, nothing written


def test_loaded_attacks_keep_no_source_positions(tmp_path: Path) -> None:
    """What loading found is located when it is loaded: a loaded document does not carry the position of each of
    its nodes (half of a pack's entry), with or without the cache."""
    cache = DocumentCache(tmp_path / "cache")
    for library in (load_library([str(ATTACKS)], cache=None), load_library([str(ATTACKS)], cache=cache),
                    load_library([str(ATTACKS)], cache=cache)):
        assert library.attacks and all(a.document.source is None for a in library.attacks)


def test_a_warm_load_reads_the_cache_not_the_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DocumentCache(tmp_path / "cache")
    expected = snapshot(load_library([str(ATTACKS)], cache=cache))

    def refuse(*args: object) -> None:
        raise AssertionError("a cached document was loaded again")

    monkeypatch.setattr(library_module, "load_document", refuse)
    assert snapshot(load_library([str(ATTACKS)], cache=cache)) == expected


def damaged(content: bytes) -> list[bytes]:
    """The pack truncated, altered (an attack's name: still a loadable pickle of results of their paths), with
    the wrong magic, without a payload, empty."""
    head = len(MAGIC) + 32
    attack, _ = next(iter(pickle.loads(content[head:]).values()))
    name = attack.attack.name.encode()
    altered = content.replace(name, name.upper() if name.upper() != name else name.lower(), 1)
    assert altered != content and pickle.loads(altered[head:])
    return [content[:len(content) // 2], altered, b"x" + content[1:], content[:head], b""]


@pytest.mark.parametrize("damage", range(5), ids=["truncated", "altered", "bad-magic", "no-payload", "empty"])
def test_a_damaged_pack_is_ignored_and_written_again(tmp_path: Path, damage: int) -> None:
    cache = DocumentCache(tmp_path / "cache")
    expected = snapshot(load_library([str(ATTACKS)], cache=cache))
    entry = entries(tmp_path / "cache")[0]
    intact = entry.read_bytes()
    entry.write_bytes(damaged(intact)[damage])
    assert snapshot(load_library([str(ATTACKS)], cache=cache)) == expected
    assert entry.read_bytes() == intact


def test_an_entry_of_another_document_is_not_used(tmp_path: Path) -> None:
    """An intact entry under the wrong key (as a pack of a copied or renamed cache could hold) holds the result of
    another path: the document is loaded from its text, and the pack written again with its own entry."""
    cache = DocumentCache(tmp_path / "cache")
    expected = snapshot(load_library([str(ATTACKS)], cache=cache))
    [pack] = entries(tmp_path / "cache")
    intact = stored(pack)
    first, second = list(intact)[:2]
    cache.write(pack.name, {**intact, first: intact[second]})
    assert snapshot(load_library([str(ATTACKS)], cache=cache)) == expected
    assert stored(pack).keys() == intact.keys() and stored(pack)[first][0].path == intact[first][0].path


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
    [pack] = entries(tmp_path / "cache")
    assert len(stored(pack)) == 1  # the entry of the old text is left out
    # The strict and lenient loads of one text are different entries, in different packs.
    load_library([str(document)], lenient=True, cache=cache)
    assert len(entries(tmp_path / "cache")) == 2


def test_only_the_documents_not_in_the_pack_are_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = tmp_path / "library"
    library.mkdir()
    for name in sorted(os.listdir(ATTACKS))[:5]:
        (library / name).write_text((ATTACKS / name).read_text())
    cache = DocumentCache(tmp_path / "cache")
    load_library([str(library)], cache=cache)
    edited = library / sorted(os.listdir(library))[2]
    edited.write_text(edited.read_text().replace("name:", "name: edited", 1))
    loaded: list[str] = []
    load_document = library_module.load_document

    def counted(path: str, data: bytes, lenient: bool = False) -> Any:
        loaded.append(path)
        return load_document(path, data, lenient)

    monkeypatch.setattr(library_module, "load_document", counted)
    after = load_library([str(library)], cache=cache)
    assert loaded == [str(edited)]
    assert snapshot(after) == snapshot(load_library([str(library)], cache=None))
    [pack] = entries(tmp_path / "cache")
    assert len(stored(pack)) == 5


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


def test_the_cache_is_pruned_to_its_newest_packs_beyond_its_bound(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DocumentCache(tmp_path / "cache")
    documents = sorted(ATTACKS.glob("*.yaml"))[:13]
    packs = [cache.directory / cache.pack_name([str(d)], False) for d in documents]
    for number, document in enumerate(documents[:12]):  # a pack each, written a second after the other
        load_library([str(document)], cache=cache)
        os.utime(packs[number], (number, number))
    assert entries(cache.directory) == sorted(packs[:12])
    sizes = [p.stat().st_size for p in packs[:12]]
    monkeypatch.setattr(document_cache, "MAX_BYTES", sum(sizes))
    load_library([str(documents[12])], cache=cache)  # a load that writes a pack prunes, never that pack
    kept = [p for p in packs if p.exists()]
    assert packs[12] in kept and 1 < len(kept) < 12
    assert kept == packs[13 - len(kept):]  # the packs written longest ago went first
    total = sum(p.stat().st_size for p in kept)
    removed = sizes[12 - len(kept)]  # the last one removed: without removing it, the bound was not reached
    assert total <= document_cache.MAX_BYTES * document_cache.PRUNED_TO < total + removed
