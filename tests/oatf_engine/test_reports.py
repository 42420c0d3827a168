"""Report files: atomic JSON per run, JSONL stream, console table, CI exit status."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from oatf_engine import reports
from oatf_engine.monitor.delivery import outcome
from oatf_engine.reports import JSONL_NAME, ReportWriter, exit_status, summary_table, undelivered_attacks


def report(result: str, session: str = "mcp_session:abc/1", attack_id: str | None = "ACME-001",
           delivered: bool = True) -> dict:
    return {
        "attack": {"id": attack_id, "name": "x", "version": 1, "file": "attacks/x.yaml", "severity": None,
                   "classification": None},
        "verdict": {"attack_id": attack_id, "result": result, "indicator_verdicts": [],
                    "evaluation_summary": {"matched": 1, "not_matched": 1, "error": 0, "skipped": 0},
                    "max_tier": "ingested"},
        "outcome": outcome(result, delivered),
        "execution_summary": {"status": "completed", "session": session, "ended_at": "1970-01-01T00:20:34.500Z",
                              "delivered": delivered},
    }


def test_writer_writes_one_file_per_run_and_appends_jsonl(tmp_path: Path) -> None:
    writer = ReportWriter(tmp_path / "reports")
    first = Path(writer.write(report("exploited")))
    second = Path(writer.write(report("not_exploited", session="connection:127.0.0.1:5")))
    assert first.name.startswith("ACME-001__mcp_session_abc_1__")
    assert first.name.endswith("__1970-01-01T00_20_34.500Z.json")
    assert json.loads(first.read_text())["verdict"]["result"] == "exploited"
    assert second.exists() and first != second
    lines = (tmp_path / "reports" / JSONL_NAME).read_text().splitlines()
    assert [json.loads(line)["verdict"]["result"] for line in lines] == ["exploited", "not_exploited"]
    assert not list((tmp_path / "reports").glob(".*.tmp")), "no temporary file is left behind"


def test_a_report_being_written_is_not_listed_as_a_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a report's bytes are being written, the reports a reader lists (`*.json`, as `oatf serve`'s users and
    tests do; pathlib's glob matches hidden names) are whole reports only: the temporary file is not among them."""
    folder = tmp_path / "reports"
    writer = ReportWriter(folder)
    writer.write(report("exploited"))
    listed: list[list[str]] = []
    real = reports._write_all

    def watching(fd: int, data: bytes) -> None:
        listed.append([p.read_text() for p in sorted(folder.glob("*.json"))])
        real(fd, data)

    monkeypatch.setattr(reports, "_write_all", watching)
    writer.write(report("not_exploited", session="connection:127.0.0.1:5"))
    assert listed and all(json.loads(text)["verdict"] for seen in listed for text in seen)
    assert len(listed[0]) == 1, "the report being written is not listed before it is in place"


def test_reports_are_made_durable_together_at_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`write` puts each report in place without syncing; `commit` makes every report written since durable
    with one `syncfs` of the directory's filesystem; a commit with nothing written syncs nothing."""
    synced: list[int] = []
    monkeypatch.setattr(reports, "SYNCFS", lambda fd: (synced.append(os.fstat(fd).st_ino), 0)[1])
    monkeypatch.setattr(os, "fsync", lambda fd: pytest.fail("fsync where syncfs is available"))
    writer = ReportWriter(tmp_path)
    paths = [Path(writer.write(report("exploited", session=f"s{n}"))) for n in range(5)]
    assert synced == [] and all(path.exists() for path in paths)
    writer.commit()
    assert synced == [tmp_path.stat().st_ino]
    writer.commit()
    assert len(synced) == 1
    assert len((tmp_path / JSONL_NAME).read_text().splitlines()) == 5


def test_without_syncfs_commit_fsyncs_each_report_then_the_jsonl_and_the_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(reports, "SYNCFS", None)
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.fstat(fd).st_ino), real(fd))[1])
    writer = ReportWriter(tmp_path)
    paths = [Path(writer.write(report("exploited", session=f"s{n}"))) for n in range(5)]
    writer.commit()
    assert sorted(synced) == sorted(p.stat().st_ino for p in [*paths, tmp_path / JSONL_NAME, tmp_path])
    writer.commit()
    assert len(synced) == 7


def test_a_failed_syncfs_fails_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs of a commit whose sync failed are not durable: the monitor process tells them unwritten."""
    monkeypatch.setattr(reports, "SYNCFS", lambda fd: -1)
    writer = ReportWriter(tmp_path)
    writer.write(report("exploited"))
    with pytest.raises(OSError):
        writer.commit()


def test_summary_table_and_exit_status() -> None:
    table = summary_table([report("exploited"), report("not_exploited", attack_id=None)])
    lines = table.splitlines()
    assert lines[0].split() == ["ATTACK", "SESSION", "OUTCOME", "MATCHED", "MAX", "TIER", "STATUS"]
    assert "exploited" in lines[1] and "1/2" in lines[1] and "attacks/x.yaml" in lines[2]
    assert exit_status([report("not_exploited")]) == 0
    assert exit_status([report("not_exploited"), report("partial")]) == 1
    assert exit_status([report("error"), report("not_exploited")]) == 2
    assert exit_status([]) == 0


def test_resisted_and_not_delivered_are_never_merged() -> None:
    """`not_exploited` reads "resisted" only when the attack reached the agent; the table counts both."""
    reports = [report("not_exploited", delivered=True), report("not_exploited", attack_id="ACME-002",
                                                                delivered=False)]
    lines = summary_table(reports).splitlines()
    assert "resisted" in lines[1] and "not delivered" in lines[2]
    assert lines[-1] == "2 run(s): 0 exploited, 0 partial, 1 resisted, 0 inconclusive, 1 not delivered, 0 error"
    assert undelivered_attacks(reports, ["ACME-001", "ACME-002", "ACME-003"]) == ["ACME-002", "ACME-003"]
    assert exit_status(reports, ["ACME-002"]) == 3, "--require-delivered: an attack never delivered"
    assert exit_status([*reports, report("exploited")], ["ACME-002"]) == 1, "exploited wins"


def test_the_summary_line_counts_every_run_when_the_table_shows_the_latest() -> None:
    """The addon keeps the latest 1,000 rows for its table, and the count of every outcome for the last line."""
    lines = summary_table([report("exploited")], counts={"exploited": 2, "resisted": 3000}).splitlines()
    assert lines[-2:] == ["(the latest 1 of 3,002 runs)", "3002 run(s): 2 exploited, 0 partial, 3000 resisted, "
                          "0 inconclusive, 0 not delivered, 0 error"]


def test_hostile_session_keys_get_distinct_bounded_file_names(tmp_path: Path) -> None:
    writer = ReportWriter(tmp_path)
    paths = {Path(writer.write(report("exploited", session=key))) for key in ("ctx/1", "ctx:1", "t" * 5000, "é" * 300)}
    assert len(paths) == 4 and all(len(p.name) < 200 for p in paths)
    assert len((tmp_path / JSONL_NAME).read_text().splitlines()) == 4


def test_summary_table_is_sorted_by_severity_with_totals_and_whole_session_keys() -> None:
    """Most severe outcome first, then attack, then session; the totals line last; a long session key is
    shown whole, wrapped onto continuation lines when a terminal width is given (never on one cut line)."""
    long_session = "mcp_session:" + "0123456789abcdef" * 5
    reports = [report("not_exploited", session="s2"), report("exploited", session="s9", attack_id="ZETA-1"),
               report("not_exploited", session="s1"), report("exploited", session=long_session),
               report("partial", session="s3")]
    lines = summary_table(reports).splitlines()
    assert [line.split()[:3] for line in lines[1:-1]] == [
        ["ACME-001", long_session, "exploited"], ["ZETA-1", "s9", "exploited"], ["ACME-001", "s3", "partial"],
        ["ACME-001", "s1", "resisted"], ["ACME-001", "s2", "resisted"]]
    assert lines[-1] == "5 run(s): 2 exploited, 1 partial, 2 resisted, 0 inconclusive, 0 not delivered, 0 error"
    wrapped = summary_table(reports, width=80).splitlines()
    assert max(map(len, wrapped[:-1])) <= 80 < len(lines[1])
    start = wrapped[1].index("mcp_session:")
    pieces = [wrapped[1][start:].split()[0]] + [line.strip() for line in wrapped[2:] if line.startswith(" ")]
    assert "".join(pieces) == long_session
    assert wrapped[1 + len(pieces)].split()[:3] == ["ZETA-1", "s9", "exploited"]


def test_a_report_file_and_its_jsonl_line_are_the_redacted_report_as_compact_json(tmp_path: Path) -> None:
    """What `write` puts on disk, byte for byte: the redacted report, compact JSON (non-ASCII escaped), a
    newline — in the report's file and as its `verdicts.jsonl` line; a report directory removed meanwhile is
    created again."""
    secret = report("exploited", session="mcp_session:é/1")
    secret["verdict"]["indicator_verdicts"] = [{"indicator_id": "ACME-001-01", "result": "matched",
                                                "evidence": 'tools/call request: "AKIAABCDEFGHIJKLMNOP"'}]
    expected = (json.dumps(reports.redact_report(secret), separators=(",", ":")) + "\n").encode()
    assert b"AKIAABCDEFGHIJKLMNOP" not in expected and b"\\u00e9" in expected
    directory = tmp_path / "reports"
    writer = ReportWriter(directory)
    first = Path(writer.write(secret))
    writer.commit()
    for path in directory.iterdir():
        path.unlink()
    directory.rmdir()
    second = Path(writer.write(secret))
    writer.commit()
    assert first == second and first.read_bytes() == expected
    assert (directory / JSONL_NAME).read_bytes() == expected
    assert (first.stat().st_mode & 0o777) == 0o600 == ((directory / JSONL_NAME).stat().st_mode & 0o777)


def test_every_recorded_session_s_reports_are_written_as_their_compact_json(tmp_path: Path) -> None:
    """Differential, over the library's recorded sessions (each attack's complying and resisting agent: matched
    evidence, extracted values, deliveries, secrets to redact): each report file and `verdicts.jsonl` line is
    byte for byte `json.dumps` of the redacted report, compact — the encoding the writer always had."""
    from testing import sessions
    from tests.attacks.harness import monitor_reports

    writer = ReportWriter(tmp_path)
    expected = []
    scripted = set(sessions.script_ids())
    for attack_id, path in sorted(sessions.attack_files().items()):
        for variant in sessions.VARIANTS if attack_id in scripted else ():
            for run in monitor_reports(path, variant):
                data = (json.dumps(reports.redact_report(run), separators=(",", ":"), default=str) + "\n").encode()
                assert Path(writer.write(run)).read_bytes() == data
                expected.append(data)
    writer.commit()
    assert len(expected) > 60
    assert (tmp_path / JSONL_NAME).read_bytes() == b"".join(expected)
