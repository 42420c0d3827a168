"""Loading a library of attack documents for evaluation (format spec §11.4: evaluation tools).

Files and directories are loaded with the SDK's `load`; an invalid document is reported once with file,
line and rule and the others keep working; a document without indicators is rejected (§11.4 item 2: an
evaluation tool must not silently pass a simulation-only document).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import oatf

from .plan import AttackPlan

DOCUMENT_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class LoadedAttack:
    """A valid, normalized attack document, ready to evaluate."""

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


def document_files(paths: list[str]) -> tuple[list[Path], list[LoadProblem]]:
    """The documents named by `paths` (files, or `.yaml`/`.yml` files under directories), sorted."""
    files: list[Path] = []
    problems: list[LoadProblem] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in DOCUMENT_SUFFIXES and p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            problems.append(LoadProblem(name, "unreadable", "no such file or directory"))
    return files, problems


def load_attack(path: Path) -> LoadedAttack | list[LoadProblem]:
    """One document, loaded and normalized; or the problems that stop it from being evaluated."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [LoadProblem(str(path), "unreadable", exc.strerror or str(exc))]
    try:
        loaded = oatf.load(data)
    except oatf.OATFLoadError as exc:
        return [_problem(str(path), e) for e in exc.errors]
    attack = loaded.document.attack
    if attack is None or not attack.indicators:
        return [LoadProblem(str(path), "no-indicators",
                            "the document has no indicators: it can be simulated but not evaluated "
                            "(format spec §11.4), so it is not loaded")]
    return LoadedAttack(str(path), loaded.document, tuple(loaded.warnings))


def _problem(path: str, error: oatf.OATFError) -> LoadProblem:
    if isinstance(error, oatf.ParseError):
        return LoadProblem(path, f"parse/{error.kind.value}", error.message, error.path or "", error.line, error.column)
    return LoadProblem(path, error.rule, error.message, error.path, error.line, error.column)


def load_library(paths: list[str]) -> Library:
    """Every document under `paths`; attacks with duplicate ids after the first are reported, not loaded."""
    files, problems = document_files(paths)
    attacks: list[LoadedAttack] = []
    seen: dict[str, str] = {}
    for path in files:
        result = load_attack(path)
        if isinstance(result, list):
            problems.extend(result)
            continue
        if result.key in seen:
            problems.append(LoadProblem(str(path), "duplicate-id", f"attack id {result.key} is already loaded "
                                        f"from {seen[result.key]}"))
            continue
        seen[result.key] = str(path)
        attacks.append(result)
    return Library(tuple(attacks), tuple(problems))
