"""Requests waiting for their answer (the README's "How traffic becomes runs": a run does not go quiet while a
request of its traffic waits for its answer; issue 12).

A request and its answer belong to one run, however late the answer comes: an MCP `tools/call` whose tool
takes a minute, an A2A `message/send` to an agent that answers after its work, an AG-UI `RunAgentInput`
whose stream starts late. The answer is often where the evidence is (a tool's result, an agent's reply), so a
run that concluded while the request was in flight would judge without it — and the answer would open, or
fall into, the next run. So a run's grace period does not end while a request it saw waits for its answer, up
to `episodes.MAX_ANSWER_WAIT` after it was sent (an answer that never comes — a connection reset, an HTTP
error without a body, a lost stream — holds the run that long at most: the decoder reports no message for a
failed exchange).

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

An answer in another flow may be placed before its request: the session resolver holds a keyless POST of
the legacy transport until its own exchange answers (`sessions` rule 1), while the answer on the GET stream
is placed at once. So a JSON-RPC response that answers no followed request is remembered (its requester, id
and time; the latest `limit`), and a request of that side and id sent no later than it is answered already:
it is not followed (else it would hold its run `MAX_ANSWER_WAIT` for an answer that came).
"""

from __future__ import annotations

from ..events import ObservedEvent
from .episodes import MAX_ANSWER_WAIT

Call = tuple[str, str, str | int | None]
"""(flow id, the requesting side, JSON-RPC id): one request, as its answer names it."""


def awaits_answer(event: ObservedEvent) -> bool:
    """Whether a message is a request that expects an answer (see the module docstring): a JSON-RPC request
    (both `method` and `id`), or any message an HTTP client sends that is not JSON-RPC."""
    envelope = event.envelope
    if isinstance(envelope, dict) and "jsonrpc" in envelope:
        return "method" in envelope and "id" in envelope
    return event.sender == "client" and event.protocol != "mcp"


def _may_answer(event: ObservedEvent) -> bool:
    """Whether a message can be an answer: anything but a JSON-RPC request or notification."""
    envelope = event.envelope
    return not (isinstance(envelope, dict) and "jsonrpc" in envelope and "method" in envelope)


class Unanswered[V]:
    """Requests waiting for their answer, by `Call`: when each was sent, and what its follower keeps with it.
    At most `limit`; with `forget_stale`, the requests that waited `MAX_ANSWER_WAIT` already (they hold nothing
    any more: an answer that never came) are forgotten to make room; beyond that a request is not followed."""

    __slots__ = ("calls", "early", "forget_stale", "limit")

    def __init__(self, limit: int, forget_stale: bool = False) -> None:
        self.limit = limit
        self.forget_stale = forget_stale
        self.calls: dict[Call, tuple[float, V]] = {}
        self.early: dict[tuple[str, str | int], float] = {}
        """JSON-RPC answers placed before their request (see the module docstring), by (requester, id): when
        each was sent."""

    def answered(self, event: ObservedEvent) -> bool:
        """Forget the request `event` answers, if it is followed; True when there was one."""
        if not _may_answer(event):
            return False
        requester = "client" if event.sender == "server" else "server"
        calls = self.calls
        if calls and calls.pop((event.flow_id, requester, event.jsonrpc_id), None) is not None:
            return True
        if event.jsonrpc_id is None:
            return False
        other = next((call for call in calls if call[1] == requester and call[2] == event.jsonrpc_id), None)
        if other is not None and calls.pop(other, None) is not None:
            return True
        early = self.early
        early.pop((requester, event.jsonrpc_id), None)
        early[requester, event.jsonrpc_id] = event.timestamp
        if len(early) > self.limit:
            del early[next(iter(early))]
        return False

    def admit(self, event: ObservedEvent, value: V) -> None:
        """Follow `event` if it is a request waiting for its answer (see the module docstring)."""
        if not awaits_answer(event):
            return
        if event.jsonrpc_id is not None:
            answered_at = self.early.pop((event.sender, event.jsonrpc_id), None)
            if answered_at is not None:
                if answered_at >= event.timestamp:
                    return
                self.early[event.sender, event.jsonrpc_id] = answered_at  # an answer to an earlier request
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
