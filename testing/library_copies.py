"""Large attack libraries for tests and benchmarks: re-identified copies of `attacks/` (issue 15: libraries by the
thousand). Copy k of `OW-001` is `OW-001<k>`, its indicators `OW-001<k>-01`, …; every copy keeps its original's
text otherwise, and is a file of its own (parsed from its own text: no two share an object). A size that is not a
multiple of the library takes the first documents of the next copy."""

from __future__ import annotations

import re
from pathlib import Path

from oatf_engine.monitor.library import document_files
from testing.paths import ROOT

ATTACKS = ROOT / "attacks"
_ID = re.compile(r"\bOW-(\d{3})\b")


def write_library(size: int, directory: Path, attacks: Path = ATTACKS) -> None:
    """`size` documents written to `directory`: re-identified copies of the documents of `attacks`."""
    files, _ = document_files([str(attacks)])
    texts = [(path, path.read_text()) for path in files]
    for n in range(size):
        path, text = texts[n % len(texts)]
        copy = n // len(texts)
        if copy:
            text = _ID.sub(lambda m, c=copy: f"OW-{m.group(1)}{c}", text)
        (directory / f"{n:05d}-{path.name}").write_text(text)
