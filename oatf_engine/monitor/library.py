"""Loading a library of attack documents for evaluation (format spec §11.4: evaluation tools).

Files and directories are parsed, validated and normalized with the SDK (`load`'s three steps); an invalid
document is reported once with file, line and rule and the others keep working; a document without
indicators is rejected (§11.4 item 2: an evaluation tool must not silently pass a simulation-only document).

Loading is strict by default: a document with an `oatf.strict_errors` finding (an indicator or trigger that
can never fire in its binding: a mistyped surface, event, mode, protocol or envelope target) is refused,
because evaluating it would report a false `not_exploited`. With `lenient`, it is loaded anyway and each
finding is kept in `Library.waived` for the caller to warn about.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import oatf

from ..collector import collector_paused
from ..progress import Progress
from .document_cache import DocumentCache, Pack
from .load_workers import children_for, load_in_children
from .plan import AttackPlan

DOCUMENT_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class LoadedAttack:
    """A valid, normalized attack document, ready to evaluate. Its `document` keeps no `source` (the position of
    each node, for diagnostics): what loading found is located already (`warnings`, `LoadProblem`), and the
    positions were half of a document's memory and of its cache entry."""

    path: str
    document: oatf.Document
    warnings: tuple[oatf.Diagnostic, ...]

    plan: AttackPlan = field(init=False, repr=False, compare=False)
    """What of the traffic can concern this attack (computed once)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan", AttackPlan(self.path, self.attack))

    @property
    def attack(self) -> oatf.Attack:
        assert self.document.attack is not None
        return self.document.attack

    @property
    def protocols(self) -> frozenset[str]:
        """The protocols of the attack's actors: traffic of any other protocol cannot concern it."""
        return self.plan.protocols

    @property
    def key(self) -> str:
        """A stable identifier: the attack id, else the file path."""
        return self.plan.key


@dataclass(frozen=True)
class LoadProblem:
    """Why one file was not loaded, in `file:line:col: RULE path: message` form."""

    path: str
    rule: str
    message: str
    dot_path: str = ""
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}:" if self.line is not None else ""
        dot = f" {self.dot_path}" if self.dot_path else ""
        return f"{self.path}:{where} {self.rule}{dot}: {self.message}"


@dataclass(frozen=True)
class Library:
    attacks: tuple[LoadedAttack, ...]
    problems: tuple[LoadProblem, ...]
    """Why each document that is not loaded was refused."""
    waived: tuple[LoadProblem, ...] = ()
    """Strict-check findings of documents loaded anyway (`lenient`): the caller warns about each."""


LENIENT_HINT = "refused by strict loading; oatf evaluate --lenient or --set oatf_lenient=true loads it anyway"


def document_files(paths: list[str]) -> tuple[list[Path], list[LoadProblem]]:
    """The documents named by `paths` (files, or `.yaml`/`.yml` files under directories), sorted; a path that
    names no document (missing, or a directory without any) is a problem."""
    files: list[Path] = []
    problems: list[LoadProblem] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted((p for p in path.rglob("*") if p.suffix in DOCUMENT_SUFFIXES and p.is_file()),
                           key=lambda p: p.parts)  # `Path`'s order, without a method call per comparison
            if not found:
                problems.append(LoadProblem(name, "no-documents", "no OATF document (.yaml, .yml) in this directory"))
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(LoadProblem(name, "unreadable", "no such file or directory"))
    return files, problems


def load_document(path: str, data: bytes, lenient: bool = False) -> tuple[LoadedAttack | None, list[LoadProblem]]:
    """One document's bytes `data`, read from `path`, loaded (see `_load_all`), without a cache."""
    try:
        document = oatf.parse(data)
    except oatf.OATFParseError as exc:
        return None, [_problem(path, e) for e in exc.errors]
    result = oatf.validate(document)
    strict = list(oatf.strict_errors(document))
    refused = [] if lenient else [_problem(path, e, LENIENT_HINT) for e in strict]
    if result.errors or refused:
        return None, [_problem(path, e) for e in result.errors] + refused
    attack = document.attack
    if attack is None or not attack.indicators:
        return None, [LoadProblem(path, "no-indicators",
                                  "the document has no indicators: it can be simulated but not evaluated "
                                  "(format spec §11.4), so it is not loaded")]
    loaded = replace(oatf.normalize(document), source=None)
    return LoadedAttack(path, loaded, tuple(result.warnings)), [_problem(path, e) for e in strict]


def _load_all(files: list[Path], lenient: bool, pack: Pack | None, progress: Progress | None,
              ) -> list[tuple[LoadedAttack | None, list[LoadProblem]]]:
    """Each document of `files`, parsed, validated, strictly checked and normalized, and its problems: when the
    attack is None they are why it is not loaded, else (only with `lenient`) the strict findings it was loaded
    despite. Through `pack` (its library's cached entries, `document_cache`) when there is one: the entry of a
    path, text, `lenient` and code is used when it holds a loading result of this path, else the document is
    loaded; either is this load's entry. The documents to load are loaded in child processes when they are many
    (`load_workers`), else here."""
    results: list[tuple[LoadedAttack | None, list[LoadProblem]] | None] = []
    missing: list[tuple[int, str, bytes, str]] = []
    """(index, path, text, cache key) of each document to load."""
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            results.append((None, [LoadProblem(str(path), "unreadable", exc.strerror or str(exc))]))
            continue
        key = pack.key(str(path), data) if pack is not None else ""
        stored = pack.get(key) if pack is not None else None
        if pack is not None and _is_result(stored, str(path)):
            pack.put(key, stored, loaded=False)
            results.append(stored)  # checked by `_is_result`
            continue
        missing.append((len(results), str(path), data, key))
        results.append(None)
    count = len(files) - len(missing)
    if progress is not None:
        progress.update(count)

    def done(more: int) -> None:
        nonlocal count
        count += more
        if progress is not None:
            progress.update(count)  # a document takes a millisecond or so to load: each one counts

    documents = [(name, data) for _index, name, data, _key in missing]
    children = children_for(len(documents))
    if children:
        loaded = load_in_children(documents, lenient, children, load_document, done)
    else:
        loaded = []
        for name, data in documents:
            loaded.append(load_document(name, data, lenient))
            done(1)
    for (index, _path, _data, key), result in zip(missing, loaded, strict=True):
        results[index] = result
        if pack is not None:
            pack.put(key, result, loaded=True)
    return [result for result in results if result is not None]


def _is_result(stored: object, path: str) -> bool:
    """Whether a cache entry holds what `load_document` gives for `path`."""
    if not isinstance(stored, tuple) or len(stored) != 2:
        return False
    attack, problems = stored
    return ((attack is None or (isinstance(attack, LoadedAttack) and attack.path == path))
            and isinstance(problems, list) and all(isinstance(p, LoadProblem) and p.path == path for p in problems))


def _problem(path: str, error: oatf.OATFError, hint: str = "") -> LoadProblem:
    if isinstance(error, oatf.ParseError):
        return LoadProblem(path, f"parse/{error.kind.value}", error.message, error.path or "", error.line, error.column)
    message = f"{error.message} ({hint})" if hint else error.message
    return LoadProblem(path, error.rule, message, error.path, error.line, error.column)


def load_library(paths: list[str], lenient: bool = False, progress: Progress | None = None,
                 cache: DocumentCache | Literal["default"] | None = "default", long_lived: bool = False) -> Library:
    """Every document under `paths` (strictly checked unless `lenient`); attacks with duplicate ids after the
    first are reported, not loaded. `progress`: the stage `loading attacks`, in documents. `cache`: the loading
    results kept from earlier loads (`document_cache`, the pack of these `paths`; by default
    `DocumentCache.default()`, None: none). `long_lived`: the calling process keeps the library for its life
    (`oatf_engine.collector.freeze_long_lived`, before the collector resumes)."""
    if cache == "default":
        cache = DocumentCache.default()
    files, problems = document_files(paths)
    attacks: list[LoadedAttack] = []
    waived: list[LoadProblem] = []
    seen: dict[str, str] = {}
    if progress is not None:
        progress.start("loading attacks", len(files), "documents")
    with collector_paused(long_lived):  # documents and plans are long-lived, without cycles: a third of the time
        pack = Pack(cache, paths, lenient) if cache is not None else None
        for path, (result, found) in zip(files, _load_all(files, lenient, pack, progress), strict=True):
            if result is None:
                problems.extend(found)
                continue
            if result.key in seen:
                problems.append(LoadProblem(str(path), "duplicate-id", f"attack id {result.key} is already "
                                            f"loaded from {seen[result.key]}"))
                continue
            seen[result.key] = str(path)
            attacks.append(result)
            waived.extend(found)
        if pack is not None:
            pack.save()
    if progress is not None:
        progress.update(len(files))
        progress.finish(f"loaded {len(attacks):,} attack(s) from {len(files):,} document(s)")
    return Library(tuple(attacks), tuple(problems), tuple(waived))
