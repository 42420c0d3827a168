"""What the wire decoders hand the monitor: one `ObservedEvent` per protocol message seen on the wire.

This is the only contract between decoding (bytes → events) and monitoring (events → verdicts); neither side
imports the other's internals, and neither imports mitmproxy.

Perspective (format spec §5.3, §6.1 `indicator.direction`, SDK spec §4.1):
- `direction` is the message's protocol-level role: `request` for JSON-RPC requests and notifications, the
  AG-UI `RunAgentInput`, and the Agent Card fetch; `response` for JSON-RPC results/errors, AG-UI SSE events
  and the Agent Card document. It does not depend on which side of the proxy is the agent.
- `sender` is the HTTP side that produced the message: `client` (it arrived in an HTTP request) or `server`
  (in an HTTP response, including SSE streams). Server-initiated JSON-RPC requests such as
  `sampling/createMessage` have `direction=request`, `sender=server`.
- `content` is the binding's content root: JSON-RPC `params` for requests/notifications, `result` for
  responses (enriched with the originating request's `params` where the binding says so), the `error` object
  for JSON-RPC errors (with `is_error=True`), the SSE event object for AG-UI, the card for `agent_card/get`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Protocol = Literal["mcp", "a2a", "ag_ui"]
Role = Literal["request", "response"]
Side = Literal["client", "server"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The HTTP endpoint an exchange was addressed to."""

    host: str
    port: int
    path: str


@dataclass(frozen=True, slots=True)
class ObservedEvent:
    """One protocol message observed on the wire, decoded to the binding's event vocabulary."""

    protocol: Protocol
    event_type: str
    """The binding's event name: an MCP/A2A method (`tools/call`, `message/send`), a synthetic name
    (`agent_card/get`, `task/status`, `run_agent_input`) or an AG-UI event type in snake_case."""
    direction: Role
    sender: Side
    content: Any
    """The content root an indicator's `target` and a trigger's `match` are resolved against."""
    flow_id: str
    """The proxy's id of the HTTP exchange (mitmproxy flow id, or the replayed flow's id)."""
    seq: int
    """Position of this event in the observation, strictly increasing across all flows."""
    timestamp: float
    """When the message was observed (seconds since the epoch; the recorded time when replaying)."""
    endpoint: Endpoint
    client: str
    """The HTTP client's address (`host:port`): the connection-level session key."""
    session_keys: dict[str, str] = field(default_factory=dict)
    """Candidate session keys found on the message: `mcp_session` (Mcp-Session-Id), `a2a_context`
    (contextId), `a2a_task` (taskId), `ag_ui_thread` (threadId), `ag_ui_run` (runId). The monitor chooses
    which one groups runs."""
    jsonrpc_id: str | int | None = None
    is_error: bool = False
    """A JSON-RPC error response (content is the `error` object)."""
    envelope: Any = None
    """The whole decoded message as sent (JSON-RPC envelope, AG-UI event object, HTTP JSON body)."""
