"""`oatf tap` in the end-to-end tests: its command line, the bytes on each side of it, and the replay of its
capture.

**The bytes on each side.** `Tee(directory).wrap(command)` runs `command` with coreutils `tee` on its stdin
and on its stdout (`bash -c 'tee UP | COMMAND | tee DOWN'`, `pipefail`: its status is the command's): `up`
holds every byte that went into the command's stdin (towards the server), `down` every byte that came out of
its stdout (towards the client), exactly, in whatever chunks. Wrapped around what a client starts, a tee
records what the client sent and received; wrapped around the server under the tap (`oatf tap … -- bash -c
'tee … | SERVER | tee …'`), what the server received and sent. The recorder is a program that is not ours,
so the comparison does not trust the relay it checks. The shell waits for every member of the pipeline, so
the client sees the wrapped command end only once the tap inside it has ended (its reports written).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testing.oatf_proxy import OATF, Evaluation, Report, assert_reports_agree, evaluate

GRACE = "60s"
"""The taps' grace period here (and their captures' replay's): longer than any pause a loaded machine makes in
a scripted session (a server's start), since a run whose request waits for its answer still goes quiet (the
slow answers of issue 12). A session's end does not wait for it: the tap concludes its runs as at a recording's
end."""
_TEE = 'set -o pipefail; up=$1 down=$2; shift 2; tee "$up" | "$@" | tee "$down"'


@dataclass(frozen=True)
class Tee:
    """Both streams of a stdio pipe, recorded by `tee` in `directory` (see the module docstring)."""

    directory: Path

    @property
    def up(self) -> Path:
        return self.directory / "up"

    @property
    def down(self) -> Path:
        return self.directory / "down"

    def wrap(self, command: Sequence[str]) -> list[str]:
        self.directory.mkdir(parents=True, exist_ok=True)
        return ["bash", "-c", _TEE, "tee", str(self.up), str(self.down), *command]

    def streams(self) -> tuple[bytes, bytes]:
        """(the bytes towards the server, the bytes towards the client)."""
        return self.up.read_bytes(), self.down.read_bytes()


def tap_command(attacks: Sequence[Path], report_dir: Path, command: Sequence[str], *, record: Path | None = None,
                flags: Sequence[str] = ()) -> list[str]:
    """`oatf tap` judging `command` alone with `attacks` (grace period `GRACE`)."""
    return [str(OATF), "tap", "--attacks", ",".join(map(str, attacks)), "--report-dir", str(report_dir),
            "--grace-period", GRACE, *(["--record", str(record)] if record else []), *flags, "--", *command]


def reports(report_dir: Path) -> list[Report]:
    """The reports a tap (or `oatf monitor`) wrote, in `verdicts.jsonl` order."""
    path = report_dir / "verdicts.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line] \
        if path.exists() else []


def assert_capture_replays(attacks: Sequence[Path], captures: Sequence[Path], live_dir: Path, workdir: Path,
                           flags: tuple[str, ...] = ()) -> Evaluation:
    """`oatf evaluate` over the taps' `--record` captures gives the reports the taps wrote live in `live_dir`,
    byte for byte (`assert_reports_agree`)."""
    replayed = workdir / f"{live_dir.name}-replay"
    offline = evaluate(list(attacks), captures, replayed, GRACE, flags)
    assert_reports_agree(reports(live_dir), live_dir, offline, replayed)
    return offline
