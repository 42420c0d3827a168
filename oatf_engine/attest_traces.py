"""Observed agent sessions → Attest protocol v1 traces (Attest protocol v1 §3), so Attest assertions run on
traffic the proxy captured. Sans-I/O: events in, trace dicts out (validated with the engine's own rules).

One trace per agent session (the monitor's `auto` session key: MCP session, A2A context, AG-UI thread, else
the client connection), steps in the order the agent made them:
- MCP `tools/call` request + its result → a `tool_call` step (`name` = tool, `args` = arguments,
  `result` = the CallToolResult; `metadata`: server, duration_ms, is_error);
- A2A `message/send` / `message/stream` the agent sent to a remote agent → an `agent_call` step named after
  the remote agent (its card's name when the card was fetched, else its host), with the final Task or
  Message as `result` and a `sub_trace` holding the remote agent's output (status message, artifacts);
- AG-UI: the run's `RunAgentInput` becomes the trace `input`; the agent's `tool_call_start/args/end` become
  `tool_call` steps (args parsed from the streamed JSON), and its `text_message_content` deltas the
  `output.message`.
`output` always has `message` (the agent's text where the protocol carries it, else "") and `structured`
(counts per protocol), as §3.2 requires at least one field.

Bounded memory (a proxy runs for days): at most `max_sessions` sessions are kept, the least recently active
evicted beyond it (counted in `evicted`, and handed to `on_evict` as a finished trace: the addon writes it to
`oatf_trace_dir` then); per session at most `max_steps` steps (later ones counted as `dropped_steps`),
`MAX_PENDING` unanswered calls (the oldest forgotten) and `MAX_TEXT` characters of agent text and of each
streamed tool call's arguments (the rest cut);
at most `max_sessions` remote agents' card names.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from attest_engine.trace_builder import build_trace, make_step
from oatf_engine.events import UNINSPECTED_EVENT, ObservedEvent
from oatf_engine.monitor.options import SessionKey
from oatf_engine.monitor.sessions import SessionResolver

MAX_STEPS = 10_000
"""Attest v1 §7: at most 10,000 steps per trace; later steps of a longer session are dropped (counted)."""
MAX_SESSIONS = 1_000
"""Sessions kept at once by default; the least recently active is evicted beyond it."""
MAX_PENDING = 1_000
"""Calls awaiting their answer per session (MCP, A2A and AG-UI each); the oldest is forgotten beyond it."""
MAX_TEXT = 1 << 20
"""Characters of agent text kept per session (`output.message`), and of one AG-UI tool call's streamed arguments;
later text is cut."""


@dataclass
class _Pending:
    name: str
    args: dict[str, Any]
    started: float
    endpoint: str


@dataclass
class _SessionTrace:
    session: str
    started: float
    ended: float = 0.0
    input: dict[str, Any] | None = None
    max_steps: int = MAX_STEPS
    steps: list[dict[str, Any]] = field(default_factory=list)
    dropped_steps: int = 0
    text: list[str] = field(default_factory=list)
    text_size: int = 0
    pending: OrderedDict[tuple[str, Any], _Pending] = field(default_factory=OrderedDict)
    ag_ui_calls: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)
    counts: dict[str, int] = field(default_factory=dict)
    clients: set[str] = field(default_factory=set)

    def add_step(self, step: dict[str, Any]) -> None:
        if len(self.steps) < self.max_steps:
            self.steps.append(step)
        else:
            self.dropped_steps += 1

    def add_text(self, text: str) -> None:
        kept = text[:MAX_TEXT - self.text_size]
        if kept:
            self.text.append(kept)
            self.text_size += len(kept)


def _bounded_put[K, V](table: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    """`table[key] = value`, forgetting the oldest entries beyond `limit`."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)


class TraceCollector:
    """Collects observed events per agent session and builds one Attest v1 trace per session (bounded: see the
    module docstring)."""

    def __init__(self, session_key: SessionKey = SessionKey.AUTO, *, max_sessions: int = MAX_SESSIONS,
                 max_steps: int = MAX_STEPS, on_evict: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.resolver = SessionResolver(session_key)
        self.max_sessions = max_sessions
        self.max_steps = max_steps
        self.on_evict = on_evict
        self.sessions: OrderedDict[str, _SessionTrace] = OrderedDict()
        """Least recently active first."""
        self.evicted = 0
        """Sessions evicted to stay within `max_sessions`."""
        self.card_names: OrderedDict[str, str] = OrderedDict()  # "host:port" → the remote agent's card name

    def observe(self, event: ObservedEvent) -> None:
        """Add one event (keyless messages join their session as the monitor's `SessionResolver` decides); the
        decoder's marks of what it did not inspect are no messages (`UNINSPECTED_EVENT`)."""
        if event.event_type == UNINSPECTED_EVENT:
            return
        for placed, session in self.resolver.resolve(event):
            self._place(placed, session)

    def _place(self, event: ObservedEvent, session: str) -> None:
        trace = self.sessions.get(session)
        if trace is None:
            trace = self.sessions[session] = _SessionTrace(session, event.timestamp, max_steps=self.max_steps)
            self._evict()
        else:
            self.sessions.move_to_end(session)
        trace.ended = max(trace.ended, event.timestamp)
        trace.clients.add(event.client)
        trace.counts[event.protocol] = trace.counts.get(event.protocol, 0) + 1
        if event.protocol == "mcp":
            self._mcp(trace, event)
        elif event.protocol == "a2a":
            self._a2a(trace, event)
        elif event.protocol == "ag_ui":
            self._ag_ui(trace, event)

    def _evict(self) -> None:
        while len(self.sessions) > self.max_sessions:
            _, oldest = self.sessions.popitem(last=False)
            self.evicted += 1
            if self.on_evict is not None:
                self.on_evict(self._build(oldest))

    def _server(self, event: ObservedEvent) -> str:
        return f"{event.endpoint.host}:{event.endpoint.port}"

    def _mcp(self, trace: _SessionTrace, event: ObservedEvent) -> None:
        if event.event_type != "tools/call" or not isinstance(event.content, dict):
            return
        key = (event.flow_id if event.jsonrpc_id is None else self._server(event), event.jsonrpc_id)
        if event.direction == "request":
            arguments = event.content.get("arguments")
            _bounded_put(trace.pending, key, _Pending(str(event.content.get("name", "")),
                                                      arguments if isinstance(arguments, dict) else {},
                                                      event.timestamp, self._server(event)), MAX_PENDING)
            return
        pending = trace.pending.pop(key, None)
        if pending is None:
            return
        result = {k: v for k, v in event.content.items() if k not in ("name", "arguments")}
        if event.is_error:
            result = {"error": event.content}
        trace.add_step(make_step("tool_call", pending.name or "tool", args=pending.args, result=result, metadata={
            "duration_ms": round((event.timestamp - pending.started) * 1000, 3),
            "server": pending.endpoint, "protocol": "mcp", "is_error": bool(event.is_error)}))

    def _a2a(self, trace: _SessionTrace, event: ObservedEvent) -> None:
        server = self._server(event)
        content = event.content
        if event.event_type == "agent_card/get":
            if event.direction == "response" and isinstance(content, dict) and isinstance(content.get("name"), str):
                _bounded_put(self.card_names, server, content["name"], self.max_sessions)
        elif event.direction == "request" and event.event_type in ("message/send", "message/stream"):
            message = content.get("message") if isinstance(content, dict) else None
            _bounded_put(trace.pending, (server, event.jsonrpc_id), _Pending(
                self.card_names.get(server, server), {"message": message} if message is not None else {},
                event.timestamp, server), MAX_PENDING)
        elif event.direction == "response" and event.event_type in (
                "message/send", "message/stream", "task/status", "task/artifact"):
            self._a2a_result(trace, event)

    def _a2a_result(self, trace: _SessionTrace, event: ObservedEvent) -> None:
        key = (self._server(event), event.jsonrpc_id)
        pending = trace.pending.get(key)
        if pending is None:
            return
        content = event.content if isinstance(event.content, dict) else {"value": event.content}
        final = event.event_type in ("message/send", "message/stream") and content.get("kind") in ("task", "message")
        final = final or bool(content.get("final")) or event.is_error
        if not final:
            return
        trace.pending.pop(key)
        output = _a2a_output(content)
        sub_trace = {"schema_version": 1, "trace_id": _trace_id(f"{trace.session}/{key}"),
                     "agent_id": pending.name, "steps": [], "output": output, "parent_trace_id": None}
        trace.add_step(make_step("agent_call", pending.name, args=pending.args, result=content, sub_trace=sub_trace,
                                 metadata={"duration_ms": round((event.timestamp - pending.started) * 1000, 3),
                                           "server": pending.endpoint, "protocol": "a2a"}))

    def _ag_ui(self, trace: _SessionTrace, event: ObservedEvent) -> None:
        content = event.content if isinstance(event.content, dict) else {}
        kind = event.event_type
        if kind == "run_agent_input":
            trace.input = {k: content.get(k) for k in ("messages", "tools", "context", "state") if k in content}
        elif kind == "text_message_content" and isinstance(content.get("delta"), str):
            trace.add_text(content["delta"])
        elif kind == "tool_call_start":
            call_id = str(content.get("toolCallId", ""))
            _bounded_put(trace.ag_ui_calls, call_id, {"name": content.get("toolCallName", "tool"), "args": [],
                                                      "size": 0, "started": event.timestamp}, MAX_PENDING)
        elif kind == "tool_call_args":
            call = trace.ag_ui_calls.get(str(content.get("toolCallId", "")))
            delta = content.get("delta")
            if call is not None and isinstance(delta, str) and call["size"] < MAX_TEXT:
                call["args"].append(delta[:MAX_TEXT - call["size"]])
                call["size"] += len(call["args"][-1])
        elif kind == "tool_call_end":
            call = trace.ag_ui_calls.pop(str(content.get("toolCallId", "")), None)
            if call is not None:
                text = "".join(call["args"])
                try:
                    args = json.loads(text) if text else {}
                except ValueError:
                    args = {"raw": text}
                trace.add_step(make_step("tool_call", str(call["name"]),
                                         args=args if isinstance(args, dict) else {"value": args},
                                         metadata={"duration_ms": round((event.timestamp - call["started"]) * 1000, 3),
                                                   "protocol": "ag_ui"}))

    def traces(self) -> list[dict[str, Any]]:
        """One validated Attest v1 trace per session observed so far."""
        for placed, session in self.resolver.flush():
            self._place(placed, session)
        return [self._build(trace) for trace in self.sessions.values()]

    def _build(self, trace: _SessionTrace) -> dict[str, Any]:
        structured: dict[str, Any] = {"messages_by_protocol": dict(trace.counts), "tool_calls": sum(
            1 for s in trace.steps if s["type"] == "tool_call")}
        if trace.dropped_steps:
            structured["dropped_steps"] = trace.dropped_steps
        return build_trace(
            trace_id=_trace_id(trace.session),
            agent_id=sorted(trace.clients)[0] if len(trace.clients) == 1 else "agent",
            input=trace.input,
            steps=trace.steps,
            output={"message": "".join(trace.text), "structured": structured},
            metadata={"timestamp": datetime.fromtimestamp(trace.started, UTC).isoformat().replace("+00:00", "Z"),
                      "latency_ms": round((trace.ended - trace.started) * 1000, 3),
                      "session": trace.session, "source": "oatf-watch"},
        )


def write_traces(traces: list[dict[str, Any]], directory: str) -> list[str]:
    """One `<trace_id>.json` per trace in `directory` (created); returns the paths written."""
    from pathlib import Path

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for trace in traces:
        path = out / f"{trace['trace_id']}.json"
        path.write_text(json.dumps(trace, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


def _a2a_output(content: dict[str, Any]) -> dict[str, Any]:
    """The remote agent's output: the text of its message or task status, and its artifacts."""
    message = content if content.get("kind") == "message" else (content.get("status") or {}).get("message")
    texts = [p.get("text", "") for p in (message or {}).get("parts", []) if isinstance(p, dict)] \
        if isinstance(message, dict) else []
    output: dict[str, Any] = {"message": "".join(t for t in texts if isinstance(t, str))}
    if isinstance(content.get("artifacts"), list):
        output["structured"] = {"artifacts": content["artifacts"]}
    return output


def _trace_id(session: str) -> str:
    return "trc_" + hashlib.sha256(session.encode()).hexdigest()[:24]
