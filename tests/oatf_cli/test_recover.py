"""`oatf recover` decodes the wire steps a proxy journaled with the decoder settings it is given (`--wire-*`, as
the proxy's `oatf_wire_*` options), not the defaults: the proxy's monitor process decoded them so."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from oatf_cli.main import main
from oatf_engine.events import UNINSPECTED_EVENT
from oatf_engine.journal import Journal
from oatf_engine.wire import WireDecoder
from oatf_engine.wire.steps import WireStep
from tests.oatf_cli.test_cli import run
from tests.oatf_engine.monitor.test_monitor import POISONED_TOOL, event


def crashed_with_an_exfiltrating_call(reports: Path) -> None:
    """A journal left by a proxy that died: an MCP session's `tools/list`, then the steps of a `tools/call` that
    leaks a private key, to 127.0.0.1:8000."""
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"note": "-----BEGIN PRIVATE KEY"}}}).encode()
    headers = ((b"content-type", b"application/json"), (b"mcp-session-id", b"s"))
    start = ("POST", "http://127.0.0.1:8000/mcp", headers, "127.0.0.1:5")
    journal = Journal(reports)
    journal.received([event("tools/list", {}, 0.5, session="s"), WireStep("request_headers", "f", 1.0, start),
                      WireStep("request_end", "f", 1.0, (body,))])
    journal.tick(1.2)
    journal.close()


def test_recover_decodes_journaled_steps_with_the_wire_settings_given(tmp_path: Path) -> None:
    attack = tmp_path / "poisoned.yaml"
    attack.write_text(POISONED_TOOL)
    verdicts = {}
    for pinned in ("", "127.0.0.1:8000=ignore"):
        reports = tmp_path / f"reports{len(pinned)}"
        crashed_with_an_exfiltrating_call(reports)
        done = run("recover", str(reports), "--attacks", str(attack), "--grace-period", "5s",
                   "--wire-protocols", pinned)
        verdicts[pinned] = (done.returncode, sorted(json.loads(p.read_text())["verdict"]["result"]
                                                    for p in reports.glob("*.json")))
    assert verdicts[""] == (1, ["exploited"]), "the call decoded: its exploit reported"
    assert verdicts["127.0.0.1:8000=ignore"][0] == 0, "ignored as the proxy ignored it: no exploit decoded"
    assert "exploited" not in verdicts["127.0.0.1:8000=ignore"][1]


def test_recover_exits_two_when_the_decoder_failed_on_journaled_steps(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A journaled step that makes the wire decoder raise (a bug) cuts its exchange off, as in the monitor process:
    here the exfiltrating `tools/call`, so the run reads as if it never came. `oatf recover` says so and exits 2,
    as `oatf evaluate` does, not 0 (before, only a log line said it)."""
    attack = tmp_path / "poisoned.yaml"
    attack.write_text(POISONED_TOOL)
    reports = tmp_path / "reports"
    crashed_with_an_exfiltrating_call(reports)
    original = WireDecoder.request_data

    def request_data(self: WireDecoder, exchange_id: str, data: bytes, timestamp: float) -> object:
        if b"PRIVATE KEY" in data:
            raise RuntimeError("a decoder bug")
        return original(self, exchange_id, data, timestamp)

    with mock.patch.object(WireDecoder, "request_data", request_data):
        status = main(["recover", str(reports), "--attacks", str(attack), "--grace-period", "5s"])
    err = capsys.readouterr().err
    assert "exploited" not in [json.loads(p.read_text())["verdict"]["result"] for p in reports.glob("*.json")]
    assert status == 2, err
    assert "oatf recover: 1 step(s) of the traffic made the wire decoder raise" in err


def test_recover_exits_two_when_journaled_traffic_was_not_inspected(tmp_path: Path) -> None:
    """The journaled `tools/call` is over `--wire-max-body` (as over the proxy's `oatf_wire_max_body`): decoded
    as the monitor process decoded it, it is not inspected (`oversize_body`), so the run cannot read exploited;
    `oatf recover` says so and exits 2, not 0."""
    attack = tmp_path / "poisoned.yaml"
    attack.write_text(POISONED_TOOL)
    reports = tmp_path / "reports"
    crashed_with_an_exfiltrating_call(reports)
    done = run("recover", str(reports), "--attacks", str(attack), "--grace-period", "5s", "--wire-max-body", "100")
    assert "exploited" not in [json.loads(p.read_text())["verdict"]["result"] for p in reports.glob("*.json")]
    assert done.returncode == 2, done.stderr
    assert "oatf recover: traffic not inspected (oversize_body 1)" in done.stderr


@pytest.mark.parametrize("missed", ["mark", "cut_off"])
def test_recover_exits_two_for_what_the_proxy_itself_did_not_inspect(missed: str, tmp_path: Path) -> None:
    """What the proxy did not inspect reaches its journal as it is: a mark of a flow it decoded itself (inject mode,
    traces: `UNINSPECTED_EVENT`, here an oversize body of the session), or the `cut_off` step of a flow its tap
    failed on. Its session's run reads inconclusive, and `oatf recover` exits 2 and says why, as for the steps it
    decodes itself (before: exit 0, the run inconclusive without a word)."""
    attack = tmp_path / "poisoned.yaml"
    attack.write_text(POISONED_TOOL)
    reports = tmp_path / "reports"
    start = ("POST", "http://127.0.0.1:8000/mcp", ((b"content-type", b"application/json"), (b"mcp-session-id", b"s")),
             "127.0.0.1:5")
    lost = [event(UNINSPECTED_EVENT, {"code": "oversize_body", "message": "over the limit"}, 1.0, session="s")] \
        if missed == "mark" else [WireStep("request_headers", "f", 1.0, start),
                                  WireStep("cut_off", "f", 1.0, ("client",))]
    journal = Journal(reports)
    journal.received([event("tools/list", {}, 0.5, session="s"), *lost])
    journal.tick(1.2)
    journal.close()
    done = run("recover", str(reports), "--attacks", str(attack), "--grace-period", "5s")
    outcomes = [json.loads(p.read_text())["outcome"] for p in reports.glob("*.json")]
    assert outcomes == ["inconclusive"], done.stderr
    assert done.returncode == 2, done.stderr
    said = "traffic not inspected (oversize_body 1)" if missed == "mark" else "1 step(s) of the traffic made the wire"
    assert f"oatf recover: {said}" in done.stderr
