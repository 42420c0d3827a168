"""Bad input to `oatf serve`'s endpoints: malformed JSON-RPC, unknown methods, tools and resources, arbitrary
bodies (Hypothesis), a client that vanishes while the server waits on it. Each gets the protocol's error (from
the official SDK or from the state), the server keeps serving, the judge does not fail, and nothing is printed
with a traceback. And an agent that is not there for the client actors."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testing.processes import free_port

from .harness import ATTACKS, GUARD, OATF, Serving, drive, mcp_session, oatf_serve

POISONED = ATTACKS / "OW-001_invoice-tool-credential-harvest.yaml"
ELICITING = ATTACKS / "OW-011_deploy-elicitation-token-phish.yaml"
AGENT_CARD = ATTACKS / "OW-025_travel-agent-card-payment-harvest.yaml"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-06-18"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": VERSION, "capabilities": {"elicitation": {}},
                         "clientInfo": {"name": "bad-input", "version": "1"}}}
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                       max_size=4), max_leaves=12)


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with oatf_serve(tmp_path_factory.mktemp("reports"), [POISONED, ELICITING, AGENT_CARD]) as running:
        yield running
        assert running.stop() == 0
        assert "Traceback" not in running.stderr and "failed (reported once)" not in running.stderr, running.stderr


def _session(client: httpx.Client, url: str) -> dict[str, str]:
    """Initialize a session by hand; the headers its next requests carry."""
    answer = client.post(url, json=INITIALIZE, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    headers = {**HEADERS, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def _answer(response: httpx.Response) -> Any:
    """The JSON-RPC message of a JSON or single-event SSE answer."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)


def _still_serving(url: str) -> list[str]:
    async def tools() -> list[str]:
        async with mcp_session(url) as session:
            return [tool.name for tool in (await session.list_tools()).tools]
    return asyncio.run(tools())


def test_protocol_errors(serving: Serving) -> None:
    url = serving.endpoints["OW-001"]
    with httpx.Client(timeout=10) as client:
        parse = client.post(url, content=b"{not json", headers=HEADERS)
        assert parse.status_code == 400 and _answer(parse)["error"]["code"] == -32700
        headers = _session(client, url)
        requests = {
            "unknown method": {"method": "no/such/method", "params": {}},
            "unknown tool": {"method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}},
            "bad params": {"method": "tools/call", "params": {"name": 5}},
            "unknown resource": {"method": "resources/read", "params": {"uri": "file:///nowhere"}},
        }
        errors = {what: _answer(client.post(url, json={"jsonrpc": "2.0", "id": n, **body}, headers=headers))["error"]
                  for n, (what, body) in enumerate(requests.items(), start=10)}
    assert errors["unknown method"]["code"] == -32601  # mcp 2: method not found (mcp 1 said invalid params)
    assert errors["unknown tool"] == {"code": -32602, "message": "Unknown tool"}
    assert errors["bad params"]["code"] == -32602
    assert errors["unknown resource"] == {"code": -32002, "message": "Resource not found"}
    assert _still_serving(url) == ["render_invoice"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=json_values | st.binary(max_size=64).map(lambda b: {"raw": b.hex()}))
def test_arbitrary_bodies_never_break_the_server(serving: Serving, body: Any) -> None:
    """Whatever JSON a client sends in a session, the answer is an HTTP 2xx/4xx, never a server error."""
    url = serving.endpoints["OW-001"]
    with httpx.Client(timeout=10) as client:
        headers = _session(client, url)
        answer = client.post(url, content=json.dumps(body).encode(), headers=headers)
        assert answer.status_code < 500, answer.text


def test_client_vanishing_while_the_server_waits(serving: Serving) -> None:
    """OW-011's tool call sends an elicitation and waits for the answer; the client reads it and vanishes. The
    server goes on serving new sessions."""
    url = serving.endpoints["OW-011"]
    with httpx.Client(timeout=10) as client:
        headers = _session(client, url)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "deploy_preview", "arguments": {"branch": "main"}}}
        with client.stream("POST", url, json=call, headers=headers) as stream:
            first = next(line for line in stream.iter_lines() if line.startswith("data:"))
    assert json.loads(first[5:])["method"] == "elicitation/create"
    assert _still_serving(url) == ["deploy_preview"]


a2a_methods = st.sampled_from(["message/send", "message/stream", "tasks/get", "tasks/cancel", "SendMessage",
                               "GetTask", "agent/getAuthenticatedExtendedCard", "tasks/pushNotificationConfig/set",
                               "no/such/method"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=a2a_methods, params=json_values, version=st.sampled_from(["0.3", "1.0", None]))
def test_arbitrary_a2a_requests_get_json_rpc_errors(serving: Serving, method: str, params: Any,
                                                    version: str | None) -> None:
    """Any JSON-RPC request to the A2A endpoint, in either version, gets an answer that is not a server error;
    a failed one is a JSON-RPC error; the card is still served."""
    url = serving.endpoints["OW-025"]
    headers = {"a2a-version": version} if version else {}
    with httpx.Client(timeout=10) as client:
        answer = client.post(url, json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params},
                             headers=headers)
        assert answer.status_code < 500, answer.text
        if answer.headers.get("content-type", "").startswith("application/json"):
            body = answer.json()
            assert "result" in body or isinstance(body["error"]["code"], int), body
        assert client.get(url + ".well-known/agent-card.json").json()["name"] == "FareWise Travel"


def test_an_unreachable_agent_stops_its_client_actors_with_a_clear_message(tmp_path: Path) -> None:
    """`--agent` where nothing listens: each client actor says why it stopped (no traceback), the runs are
    reported, `oatf serve` stops by itself and nothing is exploited."""
    documents = [next(ATTACKS.glob(f"{attack}_*.yaml")) for attack in ("OW-021", "OW-033")]
    status, _, stderr = drive(tmp_path, documents, f"http://127.0.0.1:{free_port()}/")
    assert status == 0 and "Traceback" not in stderr, stderr
    assert "OW-021 actor default (mcp_client) stopped: ConnectError: All connection attempts failed" in stderr
    assert "actor default: agent_card/get failed: Network communication error fetching agent card" in stderr


FLOOD = 40
QUIET_AGENT = """\
oatf: "0.1"
attack:
  id: SERVE-FLOOD-001
  name: "An A2A agent that answers every message with an empty completed task"
  version: 1
  severity: low
  execution:
    mode: a2a_server
    state: {}
  indicators:
    - id: SERVE-FLOOD-001-01
      surface: message/send
      target: "message.parts[*].text"
      pattern: {contains: "secret"}
"""


def _a2a_message(method: str, context: str, id_: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method,
            "params": {"message": {"kind": "message", "role": "user", "messageId": f"m-{context}",
                                   "contextId": context, "parts": [{"kind": "text", "text": "hello"}]}}}


async def _flood(mcp: str, a2a: str) -> list[int]:
    """`FLOOD` MCP sessions (initialize, a listing, a malformed body), `FLOOD` A2A messages and five A2A streams
    dropped after their first event, all at once: every HTTP status."""
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        async def mcp_session() -> list[int]:
            opened = await client.post(mcp, json=INITIALIZE, headers=HEADERS)
            headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
            listing = await client.post(mcp, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
            broken = await client.post(mcp, content=b"{not json", headers=headers)
            return [opened.status_code, listing.status_code, broken.status_code]

        async def a2a_message(number: int) -> list[int]:
            return [(await client.post(a2a, json=_a2a_message("message/send", f"flood-{number}", number))).status_code]

        async def vanishing_stream(number: int) -> list[int]:
            async with client.stream("POST", a2a, json=_a2a_message("message/stream", f"gone-{number}", number)) \
                    as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        break
            return [stream.status_code]

        answers = await asyncio.gather(*(mcp_session() for _ in range(FLOOD)), *(a2a_message(n) for n in range(FLOOD)),
                                       *(vanishing_stream(n) for n in range(5)))
    return [status for statuses in answers for status in statuses]


def test_a_flood_is_served_and_every_run_reported(tmp_path: Path) -> None:
    """A burst of sessions, messages and dropped streams at once: each gets its protocol's answer (the malformed
    bodies -32700 with HTTP 400), the server goes on serving, and every MCP session and A2A context is a run
    reported when the server stops. The runs stay open until then (a grace period longer than the test): a
    session's next request may come seconds after the previous answer while the server and the client work
    through the flood, and a shorter grace period would report the session's two parts as two runs."""
    quiet = tmp_path / "quiet-agent.yaml"
    quiet.write_text(QUIET_AGENT, encoding="utf-8")
    with oatf_serve(tmp_path / "reports", [POISONED, quiet], "--grace-period", "10m") as serving:
        statuses = asyncio.run(_flood(serving.endpoints["OW-001"], serving.endpoints["SERVE-FLOOD-001"]))
        assert _still_serving(serving.endpoints["OW-001"]) == ["render_invoice"]
        assert serving.stop() == 0
    assert statuses == [200, 200, 400] * FLOOD + [200] * (FLOOD + 5)
    assert "Traceback" not in serving.stderr, serving.stderr
    sessions = [report["execution_summary"]["session"] for report in serving.reports()]
    assert sum(s.startswith("mcp_session:") for s in sessions) == FLOOD + 1  # and the one that checked the tools
    assert sorted(s for s in sessions if s.startswith("a2a_context:")) == sorted(
        [f"a2a_context:flood-{n}" for n in range(FLOOD)] + [f"a2a_context:gone-{n}" for n in range(5)])


def test_host_and_ports_as_asked_and_a_taken_port_refused(tmp_path: Path) -> None:
    """`--host` and `--port N`: the documents on N and N+1 of that address, served there; a port already taken
    stops the start with a clear message (exit 2), nothing served."""
    port = free_port()
    with oatf_serve(tmp_path / "reports", [POISONED, AGENT_CARD], "--host", "127.0.0.2", "--port", str(port)) \
            as serving:
        assert serving.endpoints == {"OW-001": f"http://127.0.0.2:{port}/mcp",
                                     "OW-025": f"http://127.0.0.2:{port + 1}/"}
        assert _still_serving(serving.endpoints["OW-001"]) == ["render_invoice"]
        taken = subprocess.run([OATF, "serve", str(POISONED), "--host", "127.0.0.2", "--port", str(port),
                                "--report-dir", str(tmp_path / "second")], capture_output=True, text=True,
                               timeout=GUARD)
        serving.stop()
    assert taken.returncode == 2 and taken.stdout == "", taken
    assert f"oatf serve: 127.0.0.2:{port}: " in taken.stderr and "Traceback" not in taken.stderr, taken.stderr
