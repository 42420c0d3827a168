"""What the wire decoders hand the monitor: one `ObservedEvent` per protocol message seen on the wire.

This is the only contract between decoding (bytes → events) and monitoring (events → verdicts); neither side
imports the other's internals, and neither imports mitmproxy.

Perspective (format spec §5.3, §6.1 `indicator.direction`, §5.5 `extractor.source`, SDK spec §4.1):
- `direction` is the side of the exchange as format spec §6.1 defines it: "The perspective is that of the
  actor's protocol role: for server-mode actors, `request` means the incoming message from the agent, and
  `response` means the outgoing reply. For client-mode actors, `request` means the outgoing message to the
  agent, and `response` means the incoming reply." A server-mode actor is always the HTTP server and a
  client-mode actor the HTTP client, so in every binding `request` is a message that travels client→server
  over HTTP and `response` one that travels server→client, whatever its JSON-RPC role (`DIRECTION`): a
  server's `sampling/createMessage` or `elicitation/create` request (sent in an SSE stream to the agent) is a
  `response`, and the agent's JSON-RPC reply to it (POSTed) is a `request`; server notifications are
  `response`s, client notifications `request`s; the AG-UI `RunAgentInput` and the `tool_call_result` it carries
  are `request`s, its SSE events `response`s; the Agent Card fetch is a `request`, the card a `response`.
  The same reading serves `extractor.source` (§5.5: in server-mode actors "`request` is the message the agent
  sends to the tool […] and `response` is what the tool sends back"; in client-mode actors "`request` is the
  message the tool sends to the agent […] and `response` is what the agent returns"). §5.5 also calls the
  terms "protocol-level roles, not network direction"; the two readings differ only for server-initiated
  JSON-RPC requests, where the per-mode sentences (and §6.1) are followed.
- `sender` is the HTTP side that produced the message: `client` (it arrived in an HTTP request) or `server`
  (in an HTTP response, including SSE streams). Which one is the agent depends on the actor's mode (§5.3).
- `content` is the binding's content root: JSON-RPC `params` for JSON-RPC requests/notifications, `result`
  for JSON-RPC responses (enriched with the originating request's `params` where the binding says so), the
  `error` object for JSON-RPC errors (with `is_error=True`), the SSE event object for AG-UI, the card for
  `agent_card/get`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import Any, Literal

Protocol = Literal["mcp", "a2a", "ag_ui"]
Role = Literal["request", "response"]
Side = Literal["client", "server"]

DIRECTION: dict[Side, Role] = {"client": "request", "server": "response"}
"""The format spec §6.1 direction of a message sent by each HTTP side (see the module docstring)."""

UNINSPECTED_EVENT = "oatf/uninspected"
"""The `event_type` of the decoder's mark of a message (or part of one) it passed on without inspecting
(`oatf_engine.wire.decoder.UNINSPECTED`: over a size limit, not content-decodable, cut), or of an exchange whose
decoding a decoder failure cut off (`WireDecoder.cut_off`: code `decoder_failure`): no protocol message,
but where one was — its flow, time, sender and session keys, `content` `{"code", "message"}`. It is placed in its
session like any event; the monitor feeds it to no run and counts it in the session (`Monitor`), and a run of a
session with such a mark never reads `resisted` or `not_delivered` (`delivery.outcome`): what it held was never
seen."""


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
    """Format spec §6.1: `request` for a message the HTTP client sent, `response` for one the server sent."""
    sender: Side
    """The HTTP side that sent the message."""
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
    injected: tuple[str, ...] = ()
    """What the proxy's inject mode altered in the exchange this message belongs to (`addon.inject`), one
    printable line each; empty for traffic that passed as sent. Listed in the run's report."""

    def __reduce__(self) -> tuple[type[ObservedEvent], tuple[Any, ...]]:
        """Pickled as its fields in order: what `dataclasses` pickles of a slotted class, without finding the
        class's fields again for every event (the proxy pickles every event to its monitor process, a sharded
        replay every event to its workers)."""
        return ObservedEvent, event_values(self)


EVENT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ObservedEvent))
"""An event's fields, in declaration order (its constructor's positional order)."""
event_values = operator.attrgetter(*EVENT_FIELDS)
"""An event's field values, as a tuple in `EVENT_FIELDS` order."""


Call = tuple[str, str, str | int | None]
"""(flow id, the requesting side, JSON-RPC id): one request waiting for its answer, as its answer names it (an
HTTP request that is not JSON-RPC: its side, id None)."""


def awaits_answer(event: ObservedEvent) -> bool:
    """Whether a message is a request that expects an answer: a JSON-RPC request (both `method` and `id`, either
    side: a server's `sampling/createMessage` waits for the agent's answer), or any other message an HTTP client
    sends that is not MCP (an A2A REST call or Agent Card fetch, an AG-UI `RunAgentInput`: each HTTP request is
    answered by its response; an MCP message without its JSON-RPC envelope could be a notification, and the
    decoder never makes one)."""
    envelope = event.envelope
    if isinstance(envelope, dict) and "jsonrpc" in envelope:
        return "method" in envelope and "id" in envelope
    return event.sender == "client" and event.protocol != "mcp"


def may_answer(event: ObservedEvent) -> bool:
    """Whether a message can be an answer: anything but a JSON-RPC request or notification."""
    envelope = event.envelope
    return not (isinstance(envelope, dict) and "jsonrpc" in envelope and "method" in envelope)


@dataclass(frozen=True, slots=True)
class ExchangeEnded:
    """An HTTP exchange is over and requests of it were left without their answer: its response ended without
    one (an HTTP error without a JSON-RPC body — a 502 text, a 401 —, a stream closed before the answer), or the
    exchange failed (connection reset, timeout). Handed to the monitor in order with the events (`seq`), it only
    ends the waits of those requests (`oatf_engine.monitor.answers`): it is not a message, never evidence, and
    changes no verdict by itself. The decoder reports one only when something is left unanswered."""

    flow_id: str
    """The exchange that ended."""
    timestamp: float
    """When it ended (the response's end, or the failure's time, as mitmproxy stamped it)."""
    seq: int
    """The `seq` of the last event decoded before it: it comes after that event and before the next."""
    unanswered: tuple[Call, ...]
    """The requests left waiting: those its client sent in it, or, when a legacy HTTP+SSE stream closes, the
    requests POSTed to that session whose answers were still to come on the stream."""
