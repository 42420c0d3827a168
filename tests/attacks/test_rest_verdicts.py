"""A2A attacks judged over the HTTP+JSON/REST binding: each A2A document's recorded sessions, with every
JSON-RPC call rewritten as the REST route it stands for (A2A 1.0 §11: `POST /message:send`, `GET /tasks/{id}`,
…; body the `params`, answer the `result`, SSE events the streamed results), replay to the same verdicts as
over JSON-RPC: the documents work unchanged over REST."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http

from addon.recordings import replay_flows
from testing import sessions

from . import catalogue, harness
from .test_library import DOCUMENTS, EXPECTED

A2A_IDS = [i for i in sorted(DOCUMENTS) if catalogue.raw(DOCUMENTS[i])["attack"]["execution"].get("mode", "")
           .startswith("a2a_") and "message/send" in DOCUMENTS[i].read_text(encoding="utf-8")]


def _route(method: str, params: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    """(HTTP method, path, body) of the REST call a JSON-RPC request stands for."""
    task = params.get("id", params.get("taskId", ""))
    return {
        "message/send": ("POST", "/message:send", params),
        "message/stream": ("POST", "/message:stream", params),
        "tasks/get": ("GET", f"/tasks/{task}", None),
        "tasks/cancel": ("POST", f"/tasks/{task}:cancel", params),
        "tasks/resubscribe": ("POST", f"/tasks/{task}:subscribe", None),
        "tasks/pushNotificationConfig/set": ("POST", f"/tasks/{task}/pushNotificationConfigs", params),
        "agent/getAuthenticatedExtendedCard": ("GET", "/extendedAgentCard", None),
    }[method]


def _sse_results(body: bytes) -> bytes:
    out = []
    for block in body.decode().split("\n\n"):
        data = "\n".join(line[6:] for line in block.splitlines() if line.startswith("data: "))
        if data:
            out.append(f"data: {json.dumps(json.loads(data)['result'])}\n\n")
    return "".join(out).encode()


def as_rest(flow: http.HTTPFlow) -> http.HTTPFlow:
    """A recorded A2A JSON-RPC exchange as its REST call; other exchanges (cards, other protocols) unchanged."""
    try:
        call = json.loads(flow.request.content or b"")
    except ValueError:
        return flow
    if not isinstance(call, dict) or "jsonrpc" not in call or flow.response is None:
        return flow
    rest = copy.deepcopy(flow)
    method, path, body = _route(call["method"], call.get("params") or {})
    rest.request.method, rest.request.path = method, flow.request.path.rstrip("/") + path
    rest.request.content = b"" if body is None else json.dumps(body).encode()
    rest.request.headers["content-type"] = "application/json"
    content = flow.response.content or b""
    if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
        rest.response.content = _sse_results(content)
    else:
        rest.response.content = json.dumps(json.loads(content)["result"]).encode()
    rest.metadata.pop("wire_chunks", None)
    return rest


@pytest.mark.parametrize(("attack_id", "variant"), [(i, v) for i in A2A_IDS for v in sessions.VARIANTS])
def test_a2a_attack_verdict_is_the_same_over_rest(attack_id: str, variant: str, tmp_path: Path) -> None:
    script = sessions.load_script(attack_id)
    flows = sessions.to_flows(sessions.play(script, variant), str(script.get("client", "10.20.0.15")), attack_id)
    rest = [as_rest(flow) for flow in flows]
    assert any(a.request.path != b.request.path for a, b in zip(rest, flows, strict=True))  # REST calls made
    sessions.write_flows(tmp_path / "rpc.mitm", flows)
    sessions.write_flows(tmp_path / "rest.mitm", rest)
    over_rpc = replay_flows([str(DOCUMENTS[attack_id])], [str(tmp_path / "rpc.mitm")])
    over_rest = replay_flows([str(DOCUMENTS[attack_id])], [str(tmp_path / "rest.mitm")])
    assert harness.outcome(over_rest, attack_id) == harness.outcome(over_rpc, attack_id) == EXPECTED[variant], \
        harness.describe(over_rest)
    assert [r["outcome"] for r in over_rest] == [r["outcome"] for r in over_rpc]
