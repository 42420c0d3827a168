"""`@modelcontextprotocol/server-everything` in stdio mode, started by an MCP client built on the official
TypeScript SDK (`tests/js/mcp_stdio_client.mjs`: it offers a root, which the server asks for with a
`roots/list` request of its own after `initialized`; then it lists the tools, calls `echo`, ends the server's
stdin and waits for it to exit), with `oatf tap --attacks … --record … --` in front of the server's command, as
a desktop agent's configuration puts it.

- **Transparent.** `tee` on both sides of the tap (`testing.taps.Tee`): the server received exactly the bytes
  the client sent, the client exactly those the server sent, and each stream equals, byte for byte, what the
  same session carries with no tap at all. No field is masked: this session has no nondeterministic byte
  (sequential request ids, no timestamps or random ids; the server's one timer, its `roots/list` 350 ms after
  `initialized`, is awaited by the client before it goes on, so the order of the messages is fixed too).
- **Judged.** The attack of `test_mcp_everything` (the `echo` tool's own description is its payload, delivered
  by `tools/list`): the client that passes an API key to `echo` is `exploited`, the one that does not
  `resisted`. The resisting one's message is 100 kB, so the relay and the tees see it in many chunks.
- **Replayed.** The tap's `--record` capture, replayed by `oatf evaluate`, gives the same reports, byte for
  byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.taps import Tee, assert_capture_replays, reports, tap_command

from .js_peers import JS, node, run_driver
from .test_mcp_everything import ATTACK, EVERYTHING, SECRET, summary

MESSAGES = {"complying": f"my key is {SECRET}", "resisting": "hello " + "x" * 100_000}
"""What each client asks `echo` to echo (at most 128 kB: it is one command-line argument of the driver)."""
EXPECTED = {"complying": ("exploited", "exploited", True, ["tools/list"]),
            "resisting": ("not_exploited", "resisted", True, ["tools/list"])}


def session(workdir: Path, attack: Path, behaviour: str, tapped: bool) -> tuple[Tee, Tee | None]:
    """One client session with server-everything, through the tap or not; the client side's tee, and the server
    side's under the tap."""
    directory = workdir / f"{behaviour}-{'tapped' if tapped else 'direct'}"
    server = [node(), str(JS / EVERYTHING), "stdio"]
    inner = Tee(directory / "server") if tapped else None
    if inner is not None:
        server = tap_command([attack], directory / "reports", inner.wrap(server),
                             record=directory / "capture.ndjson")
    client = Tee(directory / "client")
    result = run_driver("mcp_stdio_client.mjs", MESSAGES[behaviour], "roots", *client.wrap(server), timeout=120)
    assert result["exit"] == {"code": 0, "signal": None}, result  # the tap's status is the server's
    assert result["echo"] == [f"Echo: {MESSAGES[behaviour]}"] and "echo" in result["tools"]
    return client, inner


@pytest.mark.parametrize("behaviour", ["complying", "resisting"])
def test_everything_stdio_through_the_tap(tmp_path: Path, behaviour: str) -> None:
    attack = tmp_path / "echo-secret.yaml"
    attack.write_text(ATTACK, encoding="utf-8")
    direct, _ = session(tmp_path, attack, behaviour, tapped=False)
    client, server = session(tmp_path, attack, behaviour, tapped=True)
    assert server is not None

    # What each side received is what the other sent, and what it receives without the tap.
    sent, received = client.streams()
    assert server.streams() == (sent, received)
    assert (sent, received) == direct.streams()
    assert b'"method":"roots/list"' in received and b'"roots":[{"uri":"file:///work/notes"' in sent
    assert len(sent) > 100_000 if behaviour == "resisting" else len(received) > 10_000

    report_dir = tmp_path / f"{behaviour}-tapped" / "reports"
    live = reports(report_dir)
    assert [summary(r) for r in live] == [EXPECTED[behaviour]], live
    assert live[0]["execution_summary"]["status"] == "completed"  # the client ended the session
    offline = assert_capture_replays([attack], [tmp_path / f"{behaviour}-tapped" / "capture.ndjson"], report_dir,
                                     tmp_path)
    assert [summary(r) for r in offline.reports] == [EXPECTED[behaviour]]
