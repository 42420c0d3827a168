"""Recorded sessions for the attack library: each document's complying and resisting agent, as mitmproxy flows.

What this simulates
    Nothing here runs an agent or a model. Each document `attacks/<ID>_<slug>.yaml` has a session script
    `tests/attacks/sessions/<ID>.yaml` that spells out, message by message, the HTTP traffic a proxy would
    record between the agent and its peers in two runs of the attack:

    - `complying`: an agent that follows the planted instructions (the vulnerable behaviour the document's
      indicators are written to detect), and
    - `resisting`: the same agent and peers, but the agent ignores, refuses or reports the planted content.

    The peers play the attacker's side exactly as the document's execution profile describes it (the
    poisoned tool list, the injected tool result, the malicious Agent Card, the fabricated RunAgentInput),
    and the agent's side is written by hand to be what a real agent of that kind sends. Scripts are written
    to be realistic on the wire, so the flows exercise the same decoders as a live capture:

    - MCP Streamable HTTP (2025-11-25): JSON-RPC POSTs to `/mcp` with `Accept: application/json,
      text/event-stream`, an `Mcp-Session-Id` assigned by the `initialize` answer and sent on every later
      request together with `MCP-Protocol-Version`; answers as `application/json`, or as
      `text/event-stream` when the server interleaves requests/notifications (sampling, elicitation,
      progress) before the result; the client's answers to server requests as POSTs answered `202`; server
      notifications on the long-lived `GET /mcp` stream.
    - A2A v0.3.0 JSON-RPC: `GET /.well-known/agent-card.json`, `POST /` with `message/send` (JSON answer)
      or `message/stream` (SSE of `SendStreamingMessageResponse` envelopes), `tasks/*` methods.
    - AG-UI over HTTP: `POST` of a `RunAgentInput` answered by `text/event-stream` of `data: {...}` events
      (wire event types in SCREAMING_SNAKE_CASE).

    Timestamps start at 2026-03-02T09:00:00Z and advance by `wait` (seconds, default 0.4 before every
    step), so `after` triggers and grace periods see realistic gaps.

Script format (YAML)
    simulates: prose       what the session is
    servers: {mcp: host:port, a2a: host:port, ag_ui: host:port}   default peer per protocol
    client: ip              the HTTP client's address (the agent in server-mode attacks, else the attacker)
    steps: [...]            played first in both variants
    complying: {agent: prose, steps: [...]}
    resisting: {agent: prose, steps: [...]}
    closing: [...]          optional, played last in both variants

    A mapping `{$repeat: text, times: n}` anywhere stands for `text` repeated n times.

    Steps (one key names the kind; `wait` and `server` are allowed on every step):
    - mcp_init: {session, server_info?, instructions?, capabilities?, protocol_version?, client_info?,
      client_capabilities?}
    - mcp: {method, params?} with `result`, `error`, or `sse: [message | {reply: {...}}]` where a message
      with `method` is a server request/notification and `{result}`/`{error}` is this request's answer,
      and `{reply: {to: id, result|error}}` is the client's answer to a server request posted mid-stream
    - mcp_reply: {to, result | error}
    - mcp_listen: {messages: [...]}  (the GET stream)
    - a2a_card: {card, path?}
    - a2a: {method, params} with `result`, `error` or `stream: [result, ...]`
    - ag_ui: {input, events: [...], path?, raw_events?}  events may use the shorthand items
      `{text: str | [chunks]}` and `{tool_call: name, id, args: str | [chunks]}`; RUN_STARTED and
      RUN_FINISHED are added unless `raw_events: true`; an item `{during: [steps]}` plays those steps (the
      agent's outbound MCP/A2A calls) while the stream is open, at that point of it, and the steps after the
      `ag_ui` step start when its stream ends. Each streamed event is recorded with its arrival time (as
      `addon.mitm_tap.MitmTap` records `wire_chunks`), so a replay sees the run open while its calls happen
    - repeat: {times, from?, steps: [...]}  the steps again for n = from… ("$n" is n in them)

The same scripts also give the expected protocol events (`expected_events`), decoded here by the binding's
rules independently of `oatf_engine.wire`, so the documents can be checked against the monitor without the
decoders (fast unit tests), and a decoder disagreement shows up as a test difference.

Usage: `python -m testing.sessions OUTDIR [ID ...]` writes `OUTDIR/<ID>.complying.mitm` and
`OUTDIR/<ID>.resisting.mitm`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mitmproxy import connection, http, io

from oatf_engine.events import DIRECTION, Endpoint, ObservedEvent, Side
from testing.paths import ROOT

ATTACKS = ROOT / "attacks"
SCRIPTS = ROOT / "tests" / "attacks" / "sessions"
VARIANTS = ("complying", "resisting")
START = 1772442000.0  # 2026-03-02T09:00:00Z
DEFAULT_WAIT = 0.4
MCP_PROTOCOL_VERSION = "2025-11-25"
DEFAULT_SERVERS = {"mcp": "mcp.tools.example:8080", "a2a": "remote-agent.example:9000",
                   "ag_ui": "agent.example:8000"}
STEP_KINDS = ("mcp_init", "mcp", "mcp_reply", "mcp_listen", "a2a_card", "a2a", "ag_ui", "repeat")


def _yaml() -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True)


def _expand(value: Any) -> Any:
    """Script macros: `{$repeat: text, times: n}` is `text` repeated n times (long model outputs)."""
    if isinstance(value, dict):
        if "$repeat" in value:
            return str(value["$repeat"]) * int(value.get("times", 1))
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value


def _substitute(value: Any, n: int) -> Any:
    """`repeat` steps: the string "$n" becomes the integer n; "$n" inside a longer string is replaced."""
    if isinstance(value, dict):
        return {k: _substitute(v, n) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, n) for v in value]
    if value == "$n":
        return n
    if isinstance(value, str) and "$n" in value:
        return value.replace("$n", str(n))
    return value


def load_script(attack_id: str) -> dict[str, Any]:
    with (SCRIPTS / f"{attack_id}.yaml").open() as handle:
        data = _expand(_yaml().load(handle))
    if not isinstance(data, dict):
        raise ValueError(f"{attack_id}: session script is not a mapping")
    return data


def script_ids() -> list[str]:
    return sorted(p.stem for p in SCRIPTS.glob("*.yaml"))


def attack_files() -> dict[str, Path]:
    """Attack id → document path, from the `<ID>_<slug>.yaml` file names."""
    return {p.name.split("_", 1)[0]: p for p in sorted(ATTACKS.glob("*.yaml"))}


# --- one HTTP exchange, and the protocol messages it carries ------------------------------------------------


@dataclass
class Message:
    """One protocol message of an exchange, as the binding names it (the expected decoder output)."""

    protocol: str
    event_type: str
    sender: Side
    """The HTTP side that sends it; its format spec §6.1 direction follows (`oatf_engine.events.DIRECTION`)."""
    content: Any
    at: float
    session_keys: dict[str, str] = field(default_factory=dict)
    jsonrpc_id: Any = None
    is_error: bool = False


@dataclass
class Exchange:
    """One HTTP request/response, with its wire form and the messages it carries in order."""

    server: str
    method: str
    path: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int
    response_headers: dict[str, str]
    response_body: bytes
    request_at: float
    response_start: float
    response_end: float
    messages: list[Message] = field(default_factory=list)
    chunks: list[tuple[float, int]] = field(default_factory=list)
    """(arrival time, size) of each streamed response chunk, when recorded."""


def _jsonrpc(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _sse(items: list[dict[str, Any]], *, event_name: str | None = None) -> bytes:
    out = []
    for item in items:
        head = f"event: {event_name}\n" if event_name else ""
        out.append(f"{head}data: {json.dumps(item, separators=(',', ':'))}\n\n")
    return "".join(out).encode()


def _enriched(answer: Any, request_params: Any) -> Any:
    """MCP correlated responses carry the originating request's params under `params` (SDK spec §4.1; the
    convention of `oatf_engine.wire.mcp.response_content`)."""
    if isinstance(answer, dict) and isinstance(request_params, dict):
        return {**answer, "params": request_params}
    return answer


def _snake(event_type: str) -> str:
    return event_type.lower()


class Player:
    """Turns a script variant into exchanges, keeping the per-peer state (ids, sessions, pending requests)."""

    def __init__(self, script: dict[str, Any]) -> None:
        self.servers = {**DEFAULT_SERVERS, **(script.get("servers") or {})}
        self.client = str(script.get("client", "10.20.0.15"))
        self.now = START
        self.exchanges: list[Exchange] = []
        self.mcp_sessions: dict[str, str] = {}
        self.mcp_ids: dict[str, Iterator[int]] = {}
        self.mcp_pending: dict[tuple[str, Any], tuple[str, Any]] = {}  # (server, id) → server request
        self.a2a_ids = itertools.count(1)
        self.ag_ui_calls: dict[tuple[str, str], str] = {}  # (thread, toolCallId) → tool name, awaiting a result

    # -- helpers

    def _tick(self, step: dict[str, Any]) -> float:
        self.now += float(step.get("wait", DEFAULT_WAIT))
        return self.now

    def _server(self, step: dict[str, Any], protocol: str) -> str:
        return str(step.get("server") or self.servers[protocol])

    def _mcp_headers(self, server: str, *, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": accept,
                   "mcp-protocol-version": MCP_PROTOCOL_VERSION, "user-agent": "agent-host/2.3 (mcp-client)"}
        if server in self.mcp_sessions:
            headers["mcp-session-id"] = self.mcp_sessions[server]
        return headers

    def _mcp_keys(self, server: str) -> dict[str, str]:
        return {"mcp_session": self.mcp_sessions[server]} if server in self.mcp_sessions else {}

    # -- steps

    def play(self, steps: list[dict[str, Any]]) -> None:
        for step in steps or ():
            kinds = [k for k in STEP_KINDS if k in step]
            if len(kinds) != 1:
                raise ValueError(f"a step needs exactly one of {STEP_KINDS}: {step!r}")
            getattr(self, f"_step_{kinds[0]}")(step)

    def _step_repeat(self, step: dict[str, Any]) -> None:
        spec = step["repeat"]
        start = int(spec.get("from", 1))
        for n in range(start, start + int(spec["times"])):
            self.play(_substitute(spec["steps"], n))

    def _step_mcp_init(self, step: dict[str, Any]) -> None:
        spec = step["mcp_init"] or {}
        server = self._server(step, "mcp")
        self.mcp_sessions.pop(server, None)
        self.mcp_ids[server] = itertools.count(0)
        params = {"protocolVersion": MCP_PROTOCOL_VERSION,
                  "capabilities": spec.get("client_capabilities", {"sampling": {}, "elicitation": {"form": {}},
                                                                   "roots": {"listChanged": True}}),
                  "clientInfo": spec.get("client_info", {"name": "agent-host", "version": "2.3.0"})}
        result: dict[str, Any] = {
            "protocolVersion": spec.get("protocol_version", MCP_PROTOCOL_VERSION),
            "capabilities": spec.get("capabilities", {"tools": {"listChanged": True}, "resources": {},
                                                      "prompts": {}}),
            "serverInfo": spec.get("server_info", {"name": "tools", "version": "1.0.0"}),
        }
        if spec.get("instructions") is not None:
            result["instructions"] = spec["instructions"]
        at = self._tick(step)
        request_id = next(self.mcp_ids[server])
        exchange = self._exchange(server, "POST", "/mcp", self._mcp_headers(server),
                                  _jsonrpc({"jsonrpc": "2.0", "id": request_id, "method": "initialize",
                                            "params": params}), at)
        self.mcp_sessions[server] = str(spec["session"])
        exchange.response_headers = {"content-type": "application/json", "mcp-session-id": str(spec["session"])}
        exchange.response_body = _jsonrpc({"jsonrpc": "2.0", "id": request_id, "result": result})
        exchange.messages = [
            Message("mcp", "initialize", "client", params, at, {}, request_id),
            Message("mcp", "initialize", "server", _enriched(result, params), exchange.response_start,
                    self._mcp_keys(server), request_id)]
        self._step_mcp({"mcp": {"method": "notifications/initialized"}, "server": server, "wait": 0.15})

    def _step_mcp(self, step: dict[str, Any]) -> None:
        spec = step["mcp"]
        server = self._server(step, "mcp")
        method = spec["method"]
        params = spec.get("params")
        content_params = params if params is not None else {}
        at = self._tick(step)
        envelope: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        notification = method.startswith("notifications/")
        request_id = None
        if not notification:
            request_id = next(self.mcp_ids.setdefault(server, itertools.count(1)))
            envelope["id"] = request_id
        if params is not None:
            envelope["params"] = params
        keys = self._mcp_keys(server)
        exchange = self._exchange(server, "POST", "/mcp", self._mcp_headers(server), _jsonrpc(envelope), at)
        exchange.messages.append(Message("mcp", method, "client", content_params, at, keys, request_id))
        if notification:
            exchange.status, exchange.response_headers, exchange.response_body = 202, {}, b""
            return
        if "sse" in step:
            raise ValueError("`sse` belongs inside the `mcp` mapping")
        if "sse" in spec:
            self._mcp_sse_answer(exchange, server, method, request_id, content_params, spec["sse"], keys)
            return
        answer, is_error = (spec["error"], True) if "error" in spec else (spec.get("result", {}), False)
        body = {"jsonrpc": "2.0", "id": request_id, ("error" if is_error else "result"): answer}
        exchange.response_headers = {"content-type": "application/json"}
        exchange.response_body = _jsonrpc(body)
        exchange.messages.append(Message("mcp", method, "server", _enriched(answer, content_params),
                                         exchange.response_start, keys, request_id, is_error))

    def _mcp_sse_answer(self, exchange: Exchange, server: str, method: str, request_id: int, params: Any,
                        items: list[dict[str, Any]], keys: dict[str, str]) -> None:
        """An SSE answer: server requests/notifications, client replies posted meanwhile, then the result."""
        envelopes: list[dict[str, Any]] = []
        t = exchange.response_start
        replies: list[tuple[float, dict[str, Any]]] = []
        for item in items:
            t += 0.3
            if "reply" in item:
                replies.append((t, item["reply"]))
                self._reply(server, item["reply"], t, keys)
                continue
            if "method" in item:
                env = {"jsonrpc": "2.0", **item}
                if "id" in item:
                    self.mcp_pending[(server, item["id"])] = (item["method"], item.get("params", {}))
                event, content, rid, is_error = item["method"], item.get("params", {}), item.get("id"), False
            else:
                is_error = "error" in item
                answer = item["error"] if is_error else item.get("result", {})
                env = {"jsonrpc": "2.0", "id": request_id, ("error" if is_error else "result"): answer}
                event, content, rid = method, _enriched(answer, params), request_id
            envelopes.append(env)
            exchange.messages.append(Message("mcp", event, "server", content, t, keys, rid, is_error))
        exchange.response_end = t + 0.05
        exchange.response_headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        exchange.response_body = _sse(envelopes, event_name="message")

    def _reply(self, server: str, spec: dict[str, Any], at: float, keys: dict[str, str]) -> None:
        rid = spec["to"]
        if (server, rid) not in self.mcp_pending:
            raise ValueError(f"reply to unknown server request id {rid!r}")
        method, request_params = self.mcp_pending[(server, rid)]
        is_error = "error" in spec
        answer = spec["error"] if is_error else spec.get("result", {})
        body = _jsonrpc({"jsonrpc": "2.0", "id": rid, ("error" if is_error else "result"): answer})
        exchange = self._exchange(server, "POST", "/mcp", self._mcp_headers(server), body, at)
        exchange.status, exchange.response_headers, exchange.response_body = 202, {}, b""
        exchange.messages.append(Message("mcp", method, "client", _enriched(answer, request_params), at,
                                         keys, rid, is_error))

    def _step_mcp_reply(self, step: dict[str, Any]) -> None:
        server = self._server(step, "mcp")
        at = self._tick(step)
        self._reply(server, step["mcp_reply"], at, self._mcp_keys(server))

    def _step_mcp_listen(self, step: dict[str, Any]) -> None:
        server = self._server(step, "mcp")
        at = self._tick(step)
        keys = self._mcp_keys(server)
        headers = self._mcp_headers(server, accept="text/event-stream")
        headers.pop("content-type")
        exchange = self._exchange(server, "GET", "/mcp", headers, b"", at)
        envelopes = []
        t = exchange.response_start
        for item in step["mcp_listen"]["messages"]:
            t += 0.2
            envelopes.append({"jsonrpc": "2.0", **item})
            if "id" in item:
                self.mcp_pending[(server, item["id"])] = (item["method"], item.get("params", {}))
            exchange.messages.append(Message("mcp", item["method"], "server", item.get("params", {}), t,
                                             keys, item.get("id")))
        exchange.response_end = t + 0.05
        exchange.response_headers = {"content-type": "text/event-stream", "cache-control": "no-cache",
                                     "mcp-session-id": self.mcp_sessions.get(server, "")}
        exchange.response_body = _sse(envelopes, event_name="message")

    def _step_a2a_card(self, step: dict[str, Any]) -> None:
        spec = step["a2a_card"]
        server = self._server(step, "a2a")
        at = self._tick(step)
        path = spec.get("path", "/.well-known/agent-card.json")
        exchange = self._exchange(server, "GET", path, {"accept": "application/json",
                                                        "user-agent": "orchestrator/1.8 a2a-client"}, b"", at)
        card = spec["card"]
        exchange.response_headers = {"content-type": "application/json"}
        exchange.response_body = json.dumps(card).encode()
        exchange.messages = [Message("a2a", "agent_card/get", "client", {}, at),
                             Message("a2a", "agent_card/get", "server", card, exchange.response_start)]

    @staticmethod
    def _a2a_context(value: Any) -> dict[str, str]:
        if isinstance(value, dict):
            for candidate in (value.get("contextId"), (value.get("message") or {}).get("contextId")
                              if isinstance(value.get("message"), dict) else None):
                if isinstance(candidate, str) and candidate:
                    return {"a2a_context": candidate}
        return {}

    def _step_a2a(self, step: dict[str, Any]) -> None:
        spec = step["a2a"]
        server = self._server(step, "a2a")
        method, params = spec["method"], spec.get("params", {})
        at = self._tick(step)
        rid = f"req-{next(self.a2a_ids)}"
        headers = {"content-type": "application/json", "user-agent": "orchestrator/1.8 a2a-client",
                   "accept": "text/event-stream" if "stream" in spec else "application/json"}
        exchange = self._exchange(server, "POST", spec.get("path", "/"), headers,
                                  _jsonrpc({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}), at)
        exchange.messages.append(Message("a2a", method, "client", params, at,
                                         self._a2a_context(params), rid))
        if "stream" in spec:
            t = exchange.response_start
            envelopes = []
            for result in spec["stream"]:
                t += 0.25
                envelopes.append({"jsonrpc": "2.0", "id": rid, "result": result})
                kind = result.get("kind") if isinstance(result, dict) else None
                exchange.messages.append(Message("a2a", method, "server", result, t,
                                                 self._a2a_context(result), rid))
                synthetic = {"status-update": "task/status", "artifact-update": "task/artifact"}.get(kind)
                if synthetic:  # format spec §7.2.2: the item also fires its synthetic event
                    exchange.messages.append(Message("a2a", synthetic, "server", result, t,
                                                     self._a2a_context(result), rid))
            exchange.response_end = t + 0.05
            exchange.response_headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
            exchange.response_body = _sse(envelopes)
            return
        is_error = "error" in spec
        answer = spec["error"] if is_error else spec.get("result", {})
        exchange.response_headers = {"content-type": "application/json"}
        exchange.response_body = _jsonrpc({"jsonrpc": "2.0", "id": rid, ("error" if is_error else "result"): answer})
        exchange.messages.append(Message("a2a", method, "server", answer, exchange.response_start,
                                         self._a2a_context(answer) or self._a2a_context(params), rid, is_error))

    def _step_ag_ui(self, step: dict[str, Any]) -> None:
        spec = step["ag_ui"]
        server = self._server(step, "ag_ui")
        at = self._tick(step)
        body = spec["input"]
        keys = {"ag_ui_thread": body["threadId"]} if body.get("threadId") else {}
        headers = {"content-type": "application/json", "accept": "text/event-stream",
                   "user-agent": "copilot-ui/0.9 (ag-ui)"}
        exchange = self._exchange(server, "POST", spec.get("path", "/agent"), headers, json.dumps(body).encode(), at)
        exchange.messages.append(Message("ag_ui", "run_agent_input", "client", body, at, keys))
        thread = str(body.get("threadId", ""))
        for message in body.get("messages") or ():
            # §7.3.2: over HTTP a client returns a tool result as a `tool` message of its next input; one that
            # answers a call seen on an earlier stream of the thread is the `tool_call_result` event.
            if isinstance(message, dict) and message.get("role") == "tool":
                name = self.ag_ui_calls.pop((thread, str(message.get("toolCallId"))), None)
                if name is not None:
                    exchange.messages.append(Message("ag_ui", "tool_call_result", "client", {
                        "type": "TOOL_CALL_RESULT", "messageId": message.get("id"),
                        "toolCallId": message.get("toolCallId"), "content": message.get("content"), "role": "tool",
                        "toolCallName": name}, at, keys))
        t = exchange.response_start
        names: dict[str, str] = {}
        wire = []
        during = False
        for item in _ag_ui_events(body, spec["events"], bool(spec.get("raw_events"))):
            if "during" in item:
                self.now, during = t, True
                self.play(item["during"])
                t = self.now
                continue
            t += 0.05
            wire.append(item)
            exchange.chunks.append((t, len(_sse([item]))))
            content = dict(item)
            if item.get("type") == "TOOL_CALL_START":
                names[item["toolCallId"]] = item.get("toolCallName", "")
                self.ag_ui_calls[(thread, item["toolCallId"])] = item.get("toolCallName", "")
            elif item.get("type") in ("TOOL_CALL_ARGS", "TOOL_CALL_END") and item.get("toolCallId") in names:
                content.setdefault("toolCallName", names[item["toolCallId"]])
            exchange.messages.append(Message("ag_ui", _snake(item["type"]), "server", content, t, keys))
        exchange.response_end = t + 0.05
        if during:
            self.now = exchange.response_end
        exchange.response_headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        exchange.response_body = _sse(wire)

    def _exchange(self, server: str, method: str, path: str, headers: dict[str, str], body: bytes,
                  at: float) -> Exchange:
        exchange = Exchange(server, method, path, headers, body, 200, {}, b"", at, at + 0.08, at + 0.1)
        self.exchanges.append(exchange)
        return exchange


def _chunks(value: Any) -> list[str]:
    return [str(c) for c in value] if isinstance(value, list) else [str(value)]


def _ag_ui_events(body: dict[str, Any], items: list[dict[str, Any]], raw: bool) -> list[dict[str, Any]]:
    """Expand the script's shorthand into AG-UI wire events: `{text: str | [chunks]}` is a text message
    (START, one CONTENT per chunk, END), `{tool_call: name, id, args: str | [chunks]}` a tool call (START, ARGS
    per chunk, END); other items are events as they are. RUN_STARTED / RUN_FINISHED are added unless `raw`."""
    events: list[dict[str, Any]] = []
    if not raw:
        events.append({"type": "RUN_STARTED", "threadId": body.get("threadId"), "runId": body.get("runId")})
    for n, item in enumerate(items):
        if "text" in item and "type" not in item:
            message_id = item.get("id", f"msg-{body.get('runId')}-{n}")
            events.append({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"})
            events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": c}
                       for c in _chunks(item["text"])]
            events.append({"type": "TEXT_MESSAGE_END", "messageId": message_id})
        elif "during" in item:
            events.append(item)
        elif "tool_call" in item and "type" not in item:
            call_id = item.get("id", f"call-{body.get('runId')}-{n}")
            events.append({"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": item["tool_call"]})
            events += [{"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": c} for c in _chunks(item["args"])]
            events.append({"type": "TOOL_CALL_END", "toolCallId": call_id})
        else:
            events.append(item)
    if not raw:
        events.append({"type": "RUN_FINISHED", "threadId": body.get("threadId"), "runId": body.get("runId")})
    return events


def play(script: dict[str, Any], variant: str) -> list[Exchange]:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}")
    player = Player(script)
    player.play(script.get("steps") or [])
    player.play((script.get(variant) or {}).get("steps") or [])
    player.play(script.get("closing") or [])
    return player.exchanges


# --- outputs: mitmproxy flows, and the expected protocol events ------------------------------------------------


def _split(hostport: str) -> tuple[str, int]:
    host, _, port = hostport.partition(":")
    return host, int(port or 80)


def to_flows(exchanges: list[Exchange], client: str = "10.20.0.15", seed: str = "") -> list[http.HTTPFlow]:
    """One HTTPFlow per exchange (HTTP/1.1, plain http through a regular proxy), ids and timestamps set. The
    exchanges of one client port share their connection (`client_port`: kept alive), as in a flow file mitmproxy
    writes: the same client connection state on each of its flows."""
    flows = []
    connections: dict[int, connection.Client] = {}
    for n, ex in enumerate(exchanges):
        host, port = _split(ex.server)
        source = client_port(exchanges, ex)
        client_conn = connections.get(source)
        if client_conn is None:
            client_conn = connections[source] = connection.Client(
                peername=(client, source), sockname=("10.20.0.1", 8080), timestamp_start=ex.request_at - 0.01,
                state=connection.ConnectionState.CLOSED)
        server_conn = connection.Server(address=(host, port), peername=("198.51.100.7", port),
                                        sockname=("10.20.0.1", 40000 + n), timestamp_start=ex.request_at - 0.005,
                                        timestamp_tcp_setup=ex.request_at - 0.004)
        headers = {"host": ex.server, **ex.request_headers}
        if ex.request_body:
            headers["content-length"] = str(len(ex.request_body))
        request = http.Request(host, port, ex.method.encode(), b"http", b"", ex.path.encode(), b"HTTP/1.1",
                               http.Headers([(k.encode(), v.encode()) for k, v in headers.items()]),
                               ex.request_body, None, ex.request_at, ex.request_at + 0.002)
        response_headers = dict(ex.response_headers)
        if not response_headers.get("content-type", "").startswith("text/event-stream"):
            response_headers["content-length"] = str(len(ex.response_body))
        response = http.Response(b"HTTP/1.1", ex.status, _reason(ex.status),
                                 http.Headers([(k.encode(), v.encode()) for k, v in response_headers.items()]),
                                 ex.response_body, None, ex.response_start, ex.response_end)
        flow = http.HTTPFlow(client_conn, server_conn)
        flow.id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"oatf-watch/attacks/{seed}/{n}"))
        flow.request, flow.response = request, response
        flow.timestamp_created = ex.request_at
        if ex.chunks:
            flow.metadata["wire_chunks"] = [list(chunk) for chunk in ex.chunks]
        flow.live = False
        flows.append(flow)
    return flows


def client_port(exchanges: list[Exchange], exchange: Exchange) -> int:
    """The client's source port: one kept-alive connection per peer, and one more for a GET stream."""
    peers: list[tuple[str, bool]] = []
    for ex in exchanges:
        key = (ex.server, ex.method == "GET" and ex.path == "/mcp")
        if key not in peers:
            peers.append(key)
    return 51000 + peers.index((exchange.server, exchange.method == "GET" and exchange.path == "/mcp"))


def _reason(status: int) -> bytes:
    return {200: b"OK", 202: b"Accepted"}.get(status, b"")


def expected_events(exchanges: list[Exchange], client: str = "10.20.0.15") -> list[ObservedEvent]:
    """The protocol events a decoder following the bindings should produce, in observation order."""
    messages = [(m, n, ex) for n, ex in enumerate(exchanges) for m in ex.messages]
    messages.sort(key=lambda item: item[0].at)
    events = []
    for seq, (m, n, ex) in enumerate(messages):
        host, port = _split(ex.server)
        events.append(ObservedEvent(m.protocol, m.event_type, DIRECTION[m.sender], m.sender,  # type: ignore[arg-type]
                                    m.content, f"flow-{n}", seq, m.at, Endpoint(host, port, ex.path),
                                    f"{client}:{client_port(exchanges, ex)}", dict(m.session_keys), m.jsonrpc_id,
                                    m.is_error))
    return events


def decoded_events(attack_id: str, variant: str) -> list[ObservedEvent]:
    """The events of a scripted session as the wire decoder reads its recorded flows (`addon.recordings`,
    as `oatf evaluate` does): JSON-RPC envelopes included, which `expected_events` leaves out."""
    from addon.recordings import decode_flows
    from oatf_engine.wire import WireDecoder

    script = load_script(attack_id)
    return decode_flows(WireDecoder(), to_flows(play(script, variant), str(script.get("client", "10.20.0.15"))))


def slow_answers(events: list[ObservedEvent], delay: float) -> list[ObservedEvent]:
    """`events` as a slow peer makes them: each message a server sends comes `delay` seconds later than
    recorded, after the messages before it (every later message moves as much), so each answer follows its
    request by more than a grace period when `delay` exceeds it."""
    shift = 0.0
    slowed = []
    for event in events:
        shift += delay if event.sender == "server" else 0.0
        slowed.append(dataclasses.replace(event, timestamp=event.timestamp + shift))
    return slowed


def write_flows(path: Path, flows: list[http.HTTPFlow]) -> None:
    with path.open("wb") as handle:
        writer = io.FlowWriter(handle)
        for flow in flows:
            writer.add(flow)


def write_session(attack_id: str, variant: str, out_dir: Path) -> Path:
    script = load_script(attack_id)
    client = str(script.get("client", "10.20.0.15"))
    path = out_dir / f"{attack_id}.{variant}.mitm"
    write_flows(path, to_flows(play(script, variant), client, f"{attack_id}/{variant}"))
    return path


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.split("Usage:")[1].strip() if __doc__ else "")
        return 0 if args else 2
    out_dir = Path(args[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    for attack_id in args[1:] or script_ids():
        for variant in VARIANTS:
            print(write_session(attack_id, variant, out_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
