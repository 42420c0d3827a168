"""A content-addressed cache of loaded attack documents (issue 15: a library of 2,000 documents loaded in ≤ 2 s),
so that a proxy or `oatf evaluate` started again over the same documents does not parse, validate, strictly check,
normalize and plan each one again.

An entry holds what loading one file gave (`library.load_document`: the loaded attack, or the problems that refused
it, and its strict findings), under a key that covers everything that result depends on: the file's bytes, its path
(reports and problems name it), `lenient`, and the loading code itself (`code_version`: every source file of `oatf`
and `oatf_engine`, the Python version and the versions of the libraries that parse and check a document). Any change
to one of them is another key: an entry is never reused for anything else, so the cache cannot change a result.

An entry that is not exactly what was written (truncated, altered, written by another version: its SHA-256 digest,
kept with it, is checked before anything is read from it) or does not hold a loading result for its path is ignored
and the document is loaded from its text (and the entry written again). Entries are Python pickles: the cache's
directory is used only when it belongs to the current user and no one else can write to it (it is created so),
since whoever can write there could make the loader run code. Writes are atomic (a temporary file renamed), so
concurrent loaders share a directory safely. The directory is bounded (`MAX_ENTRIES`: the oldest written go first).

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
MAGIC = b"oatf-document-cache 1\n"
"""The first bytes of every entry, then the SHA-256 digest of the pickle that follows."""
MAX_ENTRIES = 10_000
"""Entries kept at most (five libraries of 2,000 documents, ~12 KB each); beyond it the oldest written are
removed."""
PRUNED_TO = 0.8
"""The share of `MAX_ENTRIES` left after pruning."""
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
    """Loading results by key, in `directory` (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written = 0
        """Entries written by this cache object (pruning is considered after a load that wrote some)."""

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
        """The entry's name for loading `data`, read from `path`, with `lenient`."""
        digest = hashlib.sha256(code_version().encode())
        digest.update(b"\0lenient" if lenient else b"\0strict")
        digest.update(b"\0" + os.fsencode(path) + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def get(self, key: str) -> Any:
        """The object stored under `key`, or None when there is none or it is not exactly what was written."""
        try:
            content = (self.directory / key[:2] / key).read_bytes()
        except OSError:
            return None
        head = len(MAGIC) + 32
        if not content.startswith(MAGIC) or len(content) < head:
            return None
        payload = content[head:]
        if hashlib.sha256(payload).digest() != content[len(MAGIC):head]:
            return None
        try:
            return pickle.loads(payload)
        except Exception:  # an entry another version wrote: loaded again from the document
            return None

    def put(self, key: str, value: Any) -> None:
        """Store `value` under `key` (atomically); a cache that cannot be written is skipped, silently: loading
        does not depend on it."""
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        folder = self.directory / key[:2]
        temporary = folder / f".{key}.{os.getpid()}.{threading.get_ident()}"
        try:
            try:
                handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            except FileNotFoundError:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(MAGIC + hashlib.sha256(payload).digest() + payload)
                os.replace(temporary, folder / key)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError:
            return
        self.written += 1

    def prune(self) -> None:
        """Remove the oldest entries when there are more than `MAX_ENTRIES` (only after writes)."""
        if not self.written:
            return
        self.written = 0
        entries: list[tuple[float, Path]] = []
        for folder in self.directory.iterdir():
            if folder.is_dir():
                for entry in folder.iterdir():
                    with contextlib.suppress(OSError):
                        entries.append((entry.stat().st_mtime, entry))
        if len(entries) <= MAX_ENTRIES:
            return
        entries.sort()
        for _, entry in entries[:len(entries) - int(MAX_ENTRIES * PRUNED_TO)]:
            with contextlib.suppress(OSError):
                entry.unlink()


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
