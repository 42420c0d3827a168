"""A content-addressed cache of loaded attack documents (issue 15: a library of 2,000 documents loaded in ≤ 2 s),
so that a proxy or `oatf evaluate` started again over the same documents does not parse, validate, strictly check,
normalize and plan each one again.

An *entry* holds what loading one file gave (`library.load_document`: the loaded attack, or the problems that
refused it, and its strict findings), under a key that covers everything that result depends on: the file's bytes,
its path (reports and problems name it), `lenient`, and the loading code itself (`code_version`: every source file
of `oatf` and `oatf_engine`, the Python version and the versions of the libraries that parse and check a document).
Any change to one of them is another key: an entry is never reused for anything else, so the cache cannot change a
result.

The entries of one load are kept together in a *pack*, one file per library (the paths a load is given, made
absolute, and `lenient`: `Pack`): a start reads one file and writes at most one, not one per document (creating
2,000 files took 1–2 s). A load uses the entries of its pack whose keys it computes, loads the other documents from
their text, and writes the pack again, holding exactly its documents' entries, when anything was loaded or left
out. A pack that is not exactly what was written (truncated, altered, written by another version: its SHA-256
digest, kept with it, is checked before anything is read from it) is ignored, and an entry that does not hold a
loading result for its path is not used: those documents are loaded from their text (and the pack written again).
Packs are Python pickles: the cache's directory is used only when it belongs to the current user and no one else
can write to it (it is created so), since whoever can write there could make the loader run code. Writes are
atomic (a temporary file renamed), so concurrent loaders share a directory safely. The directory is bounded
(`MAX_BYTES`: the packs written longest ago go first).

`OATF_CACHE_DIR` names the directory (`off`: no cache); by default `$XDG_CACHE_HOME/oatf/documents`, else
`~/.cache/oatf/documents`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import stat
import sys
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

CACHE_ENV = "OATF_CACHE_DIR"
"""The environment variable naming the cache's directory (`off`: no cache)."""
MAGIC = b"oatf-document-cache 2\n"
"""The first bytes of every pack, then the SHA-256 digest of the pickle that follows (its entries by key)."""
MAX_BYTES = 128 * 1024 * 1024
"""Bytes of packs kept at most (a pack of 2,000 documents of `attacks/` is 8.7 MB); beyond it the packs written
longest ago are removed (never the one just written)."""
PRUNED_TO = 0.8
"""The share of `MAX_BYTES` left after pruning."""
LIBRARIES = ("ruamel.yaml", "ruamel.yaml.clib", "google-re2", "cel-python", "jsonpath-rfc9535", "jsonschema")
"""Distributions whose behaviour decides what loading gives (parsing, regexes, CEL, JSONPath, schemas)."""


@functools.cache
def code_version() -> str:
    """A digest of everything besides a file that decides what loading it gives: the source of the `oatf` and
    `oatf_engine` packages, the Python version and the versions of `LIBRARIES`."""
    digest = hashlib.sha256(sys.version.encode())
    for name in LIBRARIES:
        try:
            digest.update(f"\0{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"\0{name}=none".encode())
    root = Path(__file__).resolve().parents[2]
    for package in ("oatf", "oatf_engine"):
        for source in sorted((root / package).rglob("*.py")):
            digest.update(b"\0" + str(source.relative_to(root)).encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


class DocumentCache:
    """Packs of loading results, in `directory` (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def default(cls) -> DocumentCache | None:
        """The cache `OATF_CACHE_DIR` names (or the default directory), None when it is `off` or cannot be used
        safely (`usable`)."""
        named = os.environ.get(CACHE_ENV, "")
        if named.strip().lower() == "off":
            return None
        if named:
            directory = Path(named)
        else:
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            directory = Path(base) / "oatf" / "documents"
        return cls(directory) if usable(directory) else None

    def key(self, path: str, data: bytes, lenient: bool) -> str:
        """The entry's key for loading `data`, read from `path`, with `lenient`."""
        digest = hashlib.sha256(code_version().encode())
        digest.update(b"\0lenient" if lenient else b"\0strict")
        digest.update(b"\0" + os.fsencode(path) + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def pack_name(self, paths: list[str], lenient: bool) -> str:
        """The file name of the pack of a load of `paths` with `lenient`."""
        digest = hashlib.sha256(code_version().encode())
        digest.update(b"\0lenient" if lenient else b"\0strict")
        for path in paths:
            digest.update(b"\0" + os.fsencode(os.path.abspath(path)))
        return digest.hexdigest()

    def read(self, name: str) -> dict[str, Any]:
        """The entries of pack `name` by key: none when there is no such pack or it is not exactly what was
        written."""
        try:
            content = (self.directory / name).read_bytes()
        except OSError:
            return {}
        head = len(MAGIC) + 32
        if not content.startswith(MAGIC) or len(content) < head:
            return {}
        payload = content[head:]
        if hashlib.sha256(payload).digest() != content[len(MAGIC):head]:
            return {}
        try:
            entries = pickle.loads(payload)
        except Exception:  # a pack another version wrote: its documents are loaded again
            return {}
        return entries if isinstance(entries, dict) else {}

    def write(self, name: str, entries: dict[str, Any]) -> None:
        """Store `entries` as pack `name` (atomically), then prune; a cache that cannot be written is skipped,
        silently: loading does not depend on it."""
        payload = pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL)
        temporary = self.directory / f".{name}.{os.getpid()}.{threading.get_ident()}"
        try:
            try:
                handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            except FileNotFoundError:
                self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(MAGIC + hashlib.sha256(payload).digest() + payload)
                os.replace(temporary, self.directory / name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError:
            return
        self.prune(keep=name)

    def prune(self, keep: str) -> None:
        """Remove the packs written longest ago, all but `keep`, when they take more than `MAX_BYTES`."""
        packs: list[tuple[float, int, Path]] = []
        try:
            total = (self.directory / keep).stat().st_size
            with os.scandir(self.directory) as found:
                for entry in found:
                    if entry.name.startswith(".") or entry.name == keep:  # others' temporary files; the newest
                        continue
                    with contextlib.suppress(OSError):
                        if entry.is_file(follow_symlinks=False):
                            status = entry.stat(follow_symlinks=False)
                            packs.append((status.st_mtime, status.st_size, Path(entry.path)))
                            total += status.st_size
        except OSError:
            return
        if total <= MAX_BYTES:
            return
        packs.sort()
        for _, size, pack in packs:
            if total <= MAX_BYTES * PRUNED_TO:
                break
            with contextlib.suppress(OSError):
                pack.unlink()
                total -= size


class Pack:
    """The entries of one load of `paths` (see the module docstring): those read from its pack (`stored`) and
    those of this load (`entries`), written when they differ (`save`)."""

    def __init__(self, cache: DocumentCache, paths: list[str], lenient: bool) -> None:
        self.cache = cache
        self.lenient = lenient
        self.name = cache.pack_name(paths, lenient)
        self.stored = cache.read(self.name)
        self.entries: dict[str, Any] = {}
        self.loaded = False
        """A document was loaded from its text (not in the pack, or its entry not used)."""

    def key(self, path: str, data: bytes) -> str:
        return self.cache.key(path, data, self.lenient)

    def get(self, key: str) -> Any:
        """The stored entry under `key` (None: none)."""
        return self.stored.get(key)

    def put(self, key: str, value: Any, loaded: bool) -> None:
        """This load's entry under `key`: `value`, `loaded` from its text or the stored entry."""
        self.entries[key] = value
        self.loaded = self.loaded or loaded

    def save(self) -> None:
        """Write the pack when this load's entries are not the stored ones."""
        if self.loaded or self.entries.keys() != self.stored.keys():
            self.cache.write(self.name, self.entries)


def usable(directory: Path) -> bool:
    """Whether `directory` (created, private, when missing) belongs to the current user and no one else can write
    to it (nor so create its entries' folders): only then are its entries unpickled."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = directory.lstat()
    except OSError:
        return False
    return (stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
            and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
