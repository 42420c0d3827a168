"""`oatf tap` queues what it reads for evaluation *before* relaying it, so the evaluation sees every request
before the answer the peer gives it, however the relay threads are scheduled (`oatf_cli.tap._relay`).

Queued after the write (as before), a relay thread paused between the two — a loaded machine, a tap running
at a lower priority than its server — let the server's answer be queued first: the decoder had no request to
correlate it with and dropped it (`uncorrelated_response`), and a resisting agent whose `tools/list` answer
was lost came out `not_delivered` (the flaky `test_pydantic_agent_with_a_tapped_stdio_toolset[resisting]`).
The pause is made deterministic here: the relay thread waits, right after writing the `tools/list` request
to the server, until the server's answer has been queued."""

from __future__ import annotations

import io
import json
import os
import select
import threading
from pathlib import Path
from typing import Any

import pytest

from oatf_cli import tap as tap_module
from oatf_cli.tap import Backlog, TapOptions, run_tap
from oatf_engine.engine_config import engine_config
from oatf_engine.events import Side
from tests.oatf_cli.test_tap import ATTACK, GUARD, SERVER, reports


def test_a_chunk_is_queued_for_evaluation_before_its_peer_can_read_it() -> None:
    """At the moment a chunk is queued, none of it has reached the peer's pipe yet."""
    source_read, source_write = os.pipe()
    target_read, target_write = os.pipe()
    readable_when_queued: list[tuple[bytes | None, bool]] = []

    class Recorder:
        def put(self, sender: Side, data: bytes | None) -> None:
            readable_when_queued.append((data, bool(select.select([target_read], [], [], 0)[0])))

    os.write(source_write, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n')
    os.close(source_write)
    tap_module._relay(source_read, target_write, "client", Recorder())  # type: ignore[arg-type]
    assert readable_when_queued[0] == (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n', False)
    assert [data for data, _readable in readable_when_queued] == [readable_when_queued[0][0], None]  # then its end
    assert os.read(target_read, 1 << 10) == b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'  # relayed whole
    for fd in (source_read, target_read, target_write):
        os.close(fd)


def test_an_answer_is_never_evaluated_before_its_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real tap in front of the FastMCP server, its client-side relay thread paused right after writing
    `tools/list` until the server's answer is queued: the capture holds the request before its answer, and the
    resisting agent is `resisted` (the description reached it), not `not_delivered`."""
    answered = threading.Event()
    put, write_all = Backlog.put, tap_module._write_all

    def queue(self: Backlog, sender: Side, data: bytes | None) -> None:
        put(self, sender, data)
        if sender == "server" and data and b'"tools":[' in data:  # the listing, not `initialize`'s capabilities
            answered.set()

    def relay(fd: int, data: bytes) -> None:
        write_all(fd, data)
        if b'"tools/list"' in data:
            assert answered.wait(GUARD), "the server never answered tools/list"

    monkeypatch.setattr(Backlog, "put", queue)
    monkeypatch.setattr(tap_module, "_write_all", relay)
    agent_read, tap_stdin = os.pipe()
    tap_stdout, agent_write = os.pipe()
    capture = tmp_path / "capture.ndjson"
    options = TapOptions(SERVER, [ATTACK], str(tmp_path), engine_config({}), str(capture), verbose=True)
    stderr = io.StringIO()
    status: list[int] = []
    tap = threading.Thread(target=lambda: status.append(run_tap(options, agent_read, agent_write, stderr)))
    tap.start()
    with os.fdopen(tap_stdin, "wb", buffering=0) as to_tap, os.fdopen(tap_stdout, "rb") as from_tap:

        def say(message: dict[str, Any]) -> dict[str, Any]:
            to_tap.write(json.dumps(message).encode() + b"\n")
            return json.loads(from_tap.readline()) if "id" in message else {}

        say({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        say({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert say({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"][0]["name"] == "forecast"
        assert answered.is_set()  # the pause happened: the answer was queued while the relay thread waited
        say({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "forecast",
                                                                          "arguments": {"city": "Oslo"}}})
    tap.join(GUARD)
    assert status == [0], stderr.getvalue()
    os.close(agent_read)
    os.close(agent_write)
    assert "uncorrelated_response" not in stderr.getvalue()
    recorded = [(r["direction"], json.loads(r["line"]).get("id"))
                for r in map(json.loads, capture.read_text().splitlines()[1:])]
    assert recorded[recorded.index(("request", 1)) + 1] == ("response", 1), recorded
    [report] = reports(tmp_path)
    assert (report["outcome"], report["execution_summary"]["delivered"]) == ("resisted", True), report
