"""What the proxy logs of the runs the monitor reports: each run a line while it runs (the lines of a batch in one
record, but for runs that need attention); while it stops (a shutdown concludes every open run at once,
thousands), each run whose outcome needs attention a line, the others counted in one line per batch — every one
of them is in the summary table and has its report file."""

from __future__ import annotations

import logging

import pytest

from addon.oatf_addon import OatfAddon
from oatf_engine.reports import Reported, RunSummary


def reported(n: int, outcome: str, status: str = "interrupted", path: str | None = "r.json") -> Reported:
    summary = RunSummary("OW-001", f"mcp_session:s{n}", outcome, 0, 2, None, status)
    return Reported(f"OW-001@mcp_session:s{n}", ("OW-001", f"mcp_session:s{n}", "t"), summary, path,
                    None if path else "OSError: [Errno 28] No space left on device")


def test_while_stopping_unremarkable_runs_are_counted_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    addon = OatfAddon()
    batch = [reported(0, "exploited"), *(reported(n, "not_delivered") for n in range(1, 4)),
             reported(4, "resisted", "completed"), reported(5, "not_delivered", path=None)]
    with caplog.at_level(logging.INFO, logger="oatf"):
        addon._handle(batch[:2])
        running = [r.message for r in caplog.records]
        caplog.clear()
        addon.stopping.set()
        addon._handle(batch)
    assert running == ["oatf OW-001@mcp_session:s0: exploited (interrupted) -> r.json",
                       "oatf OW-001@mcp_session:s1: not_delivered (interrupted) -> r.json"]
    lines = [r.message for r in caplog.records]
    assert "oatf OW-001@mcp_session:s0: exploited (interrupted) -> r.json" in lines
    assert "oatf OW-001@mcp_session:s5: not_delivered (interrupted) -> -" in lines, "not written: said one by one"
    [counted] = [line for line in lines if "concluded while stopping" in line]
    assert counted.endswith(": 3 not_delivered (interrupted), 1 resisted (completed)")
    assert counted.startswith("oatf: 4 run(s) concluded while stopping")
    assert len(lines) == 4  # the exploited run, the unwritten one (and its error), the count
    assert len(addon.concluded_reports()[0]) == 8


def test_while_running_the_unremarkable_runs_of_a_batch_are_one_record_of_a_line_each(
        caplog: pytest.LogCaptureFixture) -> None:
    """Each log record costs mitmproxy's event loop a hook (`add_log`, whatever the verbosity), and a session's runs
    conclude together (with 2,000 documents, over a thousand): their lines go out as one record; a run that needs
    attention, or whose report was not written, keeps a record of its own."""
    addon = OatfAddon()
    batch = [*(reported(n, "not_delivered", "completed") for n in range(3)), reported(3, "exploited"),
             reported(4, "resisted", "completed"), reported(5, "not_delivered", path=None)]
    with caplog.at_level(logging.INFO, logger="oatf"):
        addon._handle(batch)
    records = [r.getMessage() for r in caplog.records]
    assert records == [
        "oatf OW-001@mcp_session:s3: exploited (interrupted) -> r.json",
        "oatf: report not written (each kind of failure is logged once; the journal keeps the runs): OSError: "
        "[Errno 28] No space left on device",
        "oatf OW-001@mcp_session:s5: not_delivered (interrupted) -> -",
        "oatf OW-001@mcp_session:s0: not_delivered (completed) -> r.json\n"
        "oatf OW-001@mcp_session:s1: not_delivered (completed) -> r.json\n"
        "oatf OW-001@mcp_session:s2: not_delivered (completed) -> r.json\n"
        "oatf OW-001@mcp_session:s4: resisted (completed) -> r.json"]
