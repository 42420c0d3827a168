"""Requests waiting for their answer (the README's "How traffic becomes runs": a run does not go quiet while a
request of its traffic waits for its answer; issue 12).

A request and its answer belong to one run, however late the answer comes: an MCP `tools/call` whose tool
takes a minute, an A2A `message/send` to an agent that answers after its work, an AG-UI `RunAgentInput`
whose stream starts late. The answer is often where the evidence is (a tool's result, an agent's reply), so a
run that concluded while the request was in flight would judge without it — and the answer would open, or
fall into, the next run. So a run's grace period does not end while a request it saw waits for its answer, up
to `episodes.MAX_ANSWER_WAIT` after it was sent, or until its exchange ends without it (below).

What is a request waiting for an answer (`awaits_answer`): a JSON-RPC request (MCP, A2A; `method` and `id`,
either side: a server's `sampling/createMessage` waits for the agent's answer as a `tools/call` waits for the
server's), and every other message an HTTP client sends (an A2A REST call or Agent Card fetch, an AG-UI
`RunAgentInput`: each HTTP request is answered by its response). JSON-RPC notifications and responses, and
the messages of a server's stream, wait for nothing; nor does an MCP message without its JSON-RPC envelope
(the decoder never makes one: it could be a notification).

What answers it (`Unanswered.answered`): the first message the other side sends in the same exchange (its
flow) with the same JSON-RPC id — a JSON-RPC response, an A2A REST answer, the first event of an AG-UI stream
— or, for a JSON-RPC response answering no request of its own flow, the request of the other side with that
id in another flow of the session (the legacy HTTP+SSE transport answers a POST on the GET stream; the agent
answers a server's request in a POST of its own). A server's notification in the exchange (progress, a log
line) answers nothing: the result is still to come.

What else ends a wait:
- the end of its exchange without an answer (`oatf_engine.events.ExchangeEnded`: an HTTP error without a
  JSON-RPC body, a stream closed before the answer, a connection reset or timeout), which the decoder reports
  with the requests it left unanswered (`Unanswered.release`);
- a JSON-RPC cancellation: `notifications/cancelled` whose `requestId` names a request its sender sent (MCP
  "Cancellation": the receiver does not answer a cancelled request).
Neither is an answer: the run is then quiet from its last message, as if the request had been answered then.

A request is placed before its answer when the answer is in another flow: the episode rules place a JSON-RPC
answer of another flow where its request's exchange was placed, with it (`episodes`, rule 1 across flows).
"""

from __future__ import annotations

from typing import Any

from ..events import Call, ObservedEvent, awaits_answer, may_answer
from .episodes import MAX_ANSWER_WAIT

CANCELLED = "notifications/cancelled"


def cancelled(event: ObservedEvent) -> str | int | None:
    """The id of the request a JSON-RPC cancellation cancels (`notifications/cancelled` with its `requestId`,
    a request of the cancellation's sender), else None."""
    envelope: Any = event.envelope
    if event.event_type != CANCELLED or not isinstance(envelope, dict) or "id" in envelope:
        return None
    params = envelope.get("params")
    found = params.get("requestId") if isinstance(params, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


class Unanswered[V]:
    """Requests waiting for their answer, by `Call`: when each was sent, and what its follower keeps with it.
    At most `limit`; with `forget_stale`, the requests that waited `MAX_ANSWER_WAIT` already (they hold nothing
    any more: an answer that never came) are forgotten to make room; beyond that a request is not followed."""

    __slots__ = ("calls", "forget_stale", "limit")

    def __init__(self, limit: int, forget_stale: bool = False) -> None:
        self.limit = limit
        self.forget_stale = forget_stale
        self.calls: dict[Call, tuple[float, V]] = {}

    def answered(self, event: ObservedEvent) -> bool:
        """Forget the request `event` answers, or cancels, if it is followed; True when there was one."""
        calls = self.calls
        if not calls:
            return False
        if not may_answer(event):
            cancelled_id = cancelled(event)
            return cancelled_id is not None and self._pop_other(event.sender, cancelled_id)
        requester = "client" if event.sender == "server" else "server"
        if calls.pop((event.flow_id, requester, event.jsonrpc_id), None) is not None:
            return True
        return event.jsonrpc_id is not None and self._pop_other(requester, event.jsonrpc_id)

    def _pop_other(self, requester: str, jsonrpc_id: str | int) -> bool:
        """Forget the followed request of `requester` with `jsonrpc_id`, in any flow; True when there was one."""
        calls = self.calls
        other = next((call for call in calls if call[1] == requester and call[2] == jsonrpc_id), None)
        return other is not None and calls.pop(other, None) is not None

    def release(self, call: Call) -> bool:
        """Stop following `call`: its exchange ended without its answer (`ExchangeEnded`); True when it was
        followed."""
        return self.calls.pop(call, None) is not None

    def admit(self, event: ObservedEvent, value: V) -> None:
        """Follow `event` if it is a request waiting for its answer (see the module docstring)."""
        if not awaits_answer(event):
            return
        call = (event.flow_id, event.sender, event.jsonrpc_id)
        calls = self.calls
        if call in calls:
            return
        if len(calls) >= self.limit and self.forget_stale:
            stale = event.timestamp - MAX_ANSWER_WAIT
            for old in [c for c, (at, _value) in calls.items() if at <= stale]:
                del calls[old]
        if len(calls) >= self.limit:
            return
        calls[call] = (event.timestamp, value)

    def latest(self) -> float:
        """When the latest of the followed requests was sent (-inf when none is)."""
        return max((at for at, _value in self.calls.values()), default=float("-inf"))
