"""MCP onto the OATF MCP binding (format spec §7.1.2 events, §7.1.3 content; SDK spec §4.1), over the
Streamable HTTP transport and the legacy HTTP+SSE transport (MCP 2025-11-25 "Transports", 2024-11-05 "HTTP
with SSE").

Event names are the JSON-RPC method names; a response is named after the request it answers. Content:
`params` for requests and notifications, `result` (or the `error` object) for responses. A correlated
response's content is enriched with the originating request's `params` under the key `params` (SDK spec §4.1:
"the Value MUST be an enriched object that includes the originating request's params"; SDK draft §2.25
resolves the `tools/call` / `prompts/get` qualifier at `params.name`), for every method, so that
`params.name` of a `tools/call` response is the tool that was called and `params.uri` of a `resources/read`
response the resource read. The request's `params` win over a `params` member of the result itself.

Sessions: Streamable HTTP names them with the `Mcp-Session-Id` header (set on the `initialize` response, sent
on every later request, GET stream and DELETE). The legacy transport opens a GET `text/event-stream` whose
first event, `endpoint`, gives the URI the client POSTs its messages to; the answers come back on that stream.
`legacy_endpoint` reads that event; the session id is the URI's `session_id` / `sessionId` query parameter.
The stateless revision 2026-07-28 has neither: no `initialize`, no session; what the server asks of the client
(sampling, elicitation, roots) comes embedded in a result and is answered in the retried request
(`input_requests`, `input_responses`), each decoded as the standalone request and answer it stands for.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import parse_qs, urljoin, urlsplit

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
ENDPOINT_EVENT = "endpoint"
HANDSHAKE_REVISIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
"""The revisions negotiated by the `initialize` handshake; a request whose `MCP-Protocol-Version` names a later
one speaks the stateless revision (2026-07-28: `server/discover`, no `initialize`, no session)."""


def result_for(result: dict[str, Any], version: str | None) -> dict[str, Any]:
    """A result as a server answers a request of revision `version` (its `MCP-Protocol-Version` header, None
    when absent): the stateless revision 2026-07-28 requires every result to carry `resultType` (`complete`
    for a result that is the answer; its clients refuse one without it), the handshake revisions know none."""
    if version is None or version in HANDSHAKE_REVISIONS or "resultType" in result:
        return result
    return {**result, "resultType": "complete"}


class InputRequest(NamedTuple):
    """A server-to-client request embedded in a result (MCP 2026-07-28, multi round-trip requests)."""

    key: str
    """The server-assigned key its answer comes back under."""
    method: str
    params: Any
    message: Any
    """The embedded request as sent (`{"method": …, "params": …}`)."""


def input_requests(result: Any) -> list[InputRequest]:
    """The requests a result asks the client to fulfil (MCP 2026-07-28, SEP-2322 "multi round-trip requests"):
    a server does not send `sampling/createMessage`, `elicitation/create` or `roots/list` on a stream of its
    own in the stateless revision, it answers `tools/call`, `prompts/get` or `resources/read` with an
    `InputRequiredResult` (`resultType: input_required`) whose `inputRequests` maps keys to such requests; the
    tasks extension's results carry the same map. Each member with a string `method`; none for other results."""
    requests = result.get("inputRequests") if isinstance(result, dict) else None
    if not isinstance(requests, dict):
        return []
    return [InputRequest(str(key), request["method"], request.get("params", {}), request)
            for key, request in requests.items()
            if isinstance(request, dict) and isinstance(request.get("method"), str)]


def input_responses(params: Any) -> list[tuple[str, Any]]:
    """The client's answers to embedded requests (`input_requests`), carried by the retried request's params
    (`inputResponses`, keyed as the requests were): (key, the result as the standalone request's answer)."""
    responses = params.get("inputResponses") if isinstance(params, dict) else None
    return [(str(key), value) for key, value in responses.items()] if isinstance(responses, dict) else []


def input_id(key: str, params_or_result: Any) -> str:
    """The correlation id of an embedded request: its key and the `requestState` the result carried, which the
    retry echoes verbatim (two rounds may reuse a key; their states tell them apart)."""
    state = params_or_result.get("requestState") if isinstance(params_or_result, dict) else None
    return f"{key}\x1f{state}" if isinstance(state, str) else key


CLOSE_METHOD = "DELETE"
"""The HTTP method with which an MCP client closes its session (`closed_session`)."""


def closed_session(method: str, session: str | None, status: int | None) -> str | None:
    """The MCP session an HTTP exchange closed, or None: a client's `DELETE` carrying its `Mcp-Session-Id` that the
    server accepted (2xx; a server may refuse with 405) — MCP Streamable HTTP transport, session management."""
    if method.upper() == CLOSE_METHOD and session and status is not None and 200 <= status < 300:
        return session
    return None


def response_content(payload: Any, request_params: Any) -> Any:
    """A correlated response's content Value: the result (or error) object plus the request's `params`."""
    if isinstance(payload, dict) and isinstance(request_params, dict):
        return {**payload, "params": request_params}
    return payload


class LegacyEndpoint(NamedTuple):
    """Where a legacy HTTP+SSE client POSTs its messages, and the session id that URI carries."""

    host: str
    port: int
    target: str
    """Path and query, as the client requests it."""
    session_id: str


def legacy_endpoint(stream_url: str, data: str) -> LegacyEndpoint | None:
    """The endpoint announced by an `endpoint` event's data (a URI relative to the stream's URL), or None
    when it is not a usable http(s) URI."""
    try:
        parts = urlsplit(urljoin(stream_url, data.strip()))
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    query = parse_qs(parts.query)
    session = (query.get("session_id") or query.get("sessionId") or [target])[0]
    return LegacyEndpoint(parts.hostname, port, target, session)
