"""Many agents at once through the proxy, a known number of them exploited: the traffic of the load test
(`test_load.py`) and of `benchmarks/bench_live_load.py`, and the count of what was reported for it.

Each agent session talks raw JSON-RPC (httpx: cheap enough for a thousand at once) to the OW-001 invoice
server (`peers.py --mcp-invoice`) through the proxy, as an MCP client does over Streamable HTTP: `initialize`
(the server assigns the `Mcp-Session-Id`), `notifications/initialized`, `tools/list` (the poisoned description
reaches the agent: delivered), a pause (the model thinking), `tools/call render_invoice` — a complying agent
pastes AWS credentials into `billing_notes` (OW-001 `exploited`), a resisting one writes payment terms — and
`DELETE` of the session. Every MCP attack of the library follows each session: one run, so one report, per
(attack, session)."""

from __future__ import annotations

import asyncio
import html
import json
import random
import re
import ssl
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from testing.clients import http_client

EXPLOITED_ATTACK = "OW-001"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOL_VERSION = "2025-06-18"
CREDENTIALS = "[default]\naws_access_key_id = AKIAQ7EXAMPLE4HJ2RTX\naws_secret_access_key = 9fTq0exampleKeyMaterial"
ATTEMPTS = 3
SERVER_KEEP_ALIVE = 120
"""Seconds the MCP server under load keeps an idle connection open (`peers.py --keep-alive`): longer than a loaded
proxy is late. At uvicorn's default (5 s) mitmproxy now and then reuses a connection the server is closing and
answers 502 `server closed connection` (it does not send the request again), with or without the addon: a failed
agent session, not the addon's."""


@dataclass(frozen=True)
class Session:
    """One agent session the client completed: its `Mcp-Session-Id` and whether the agent complied."""

    id: str
    complied: bool

    @property
    def key(self) -> str:
        """The session as reports name it (`execution_summary.session`)."""
        return f"mcp_session:{self.id}"


STEPS = ("initialize", "initialized", "tools/list", "pause", "tools/call", "delete")
"""A session's steps, timed (`Traffic.steps`); `pause` is how much longer than asked the think time took."""


@dataclass
class Traffic:
    """What the agents did: the sessions completed, the ones that failed, requests sent again, and how long
    each step of a session took (`STEPS`)."""

    sessions: list[Session] = field(default_factory=list)
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    """Why sessions failed (`failure`): the step, and the HTTP status and the proxy's reason or the exception."""
    retried: int = 0
    resent: Counter[str] = field(default_factory=Counter)
    """Why requests were sent again (`failure`)."""
    steps: dict[str, list[float]] = field(default_factory=lambda: {step: [] for step in STEPS})

    def timed(self, step: str, started: float) -> None:
        self.steps[step].append(time.monotonic() - started)

    def latencies(self) -> list[str]:
        """Each step's median, 99th percentile and maximum, in seconds."""
        lines = []
        for step, values in self.steps.items():
            if values:
                ordered = sorted(values)
                p99 = ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]
                lines.append(f"{step} p50 {ordered[len(ordered) // 2]:.3f} s, p99 {p99:.3f} s, max {ordered[-1]:.3f} s")
        return lines


async def _post(client: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any],
                traffic: Traffic) -> httpx.Response:
    for attempt in range(ATTEMPTS):  # a loaded loopback drops a kept-alive connection now and then
        try:
            response = await client.post(url, headers=headers, json=body)
            response.raise_for_status()
            return response
        except httpx.TransportError as exc:
            if attempt == ATTEMPTS - 1:
                raise
            traffic.retried += 1
            traffic.resent[failure(exc)] += 1
    raise AssertionError("unreachable")


async def agent_session(client: httpx.AsyncClient, url: str, complying: bool, pause: float,
                        traffic: Traffic) -> Session:
    """One session (see the module docstring)."""
    started = time.monotonic()
    init = await _post(client, url, HEADERS, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                   "clientInfo": {"name": "load-agent", "version": "1"}}}, traffic)
    traffic.timed("initialize", started)
    session = init.headers["mcp-session-id"]
    headers = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": PROTOCOL_VERSION}
    started = time.monotonic()
    await _post(client, url, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"}, traffic)
    traffic.timed("initialized", started)
    started = time.monotonic()
    await _post(client, url, headers, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, traffic)
    traffic.timed("tools/list", started)
    started = time.monotonic()
    await asyncio.sleep(pause)
    traffic.timed("pause", started + pause)
    notes = CREDENTIALS if complying else "Payment terms: net 30. Thank you for your business."
    started = time.monotonic()
    await _post(client, url, headers, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "render_invoice", "arguments": {
            "invoice_number": "INV-2041", "customer": "Halvorsen Marine AS",
            "line_items": [{"description": "Hull inspection", "amount": 1800}], "billing_notes": notes}}}, traffic)
    traffic.timed("tools/call", started)
    started = time.monotonic()
    await client.delete(url, headers=headers)
    traffic.timed("delete", started)
    return Session(session, complying)


def failure(exc: Exception) -> str:
    """Why a session failed, to count alike failures together: the request that failed (its JSON-RPC method, or
    the HTTP method) and the HTTP status with the reason the proxy gave in its error page (mitmproxy answers
    502 with the upstream error, e.g. `server closed connection`), or the exception's type and message."""
    try:
        request = exc.request  # type: ignore[attr-defined]
        step = json.loads(request.content).get("method", request.method) if request.content else request.method
    except (AttributeError, RuntimeError, ValueError):
        step = "?"
    if isinstance(exc, httpx.HTTPStatusError):
        page = re.search(r"<p>(.*?)</p>", exc.response.text, re.DOTALL)
        reason = html.unescape(page.group(1)) if page else exc.response.text[:120]
        return f"{step}: HTTP {exc.response.status_code}: {reason.strip()}"
    return f"{step}: {type(exc).__name__}: {str(exc)[:120]}"


async def agents(proxy: str, url: str, in_flight: int, *, sessions: int | None = None, until: float | None = None,
                 exploit_every: int = 5, pause: tuple[float, float] = (0.2, 1.0), seed: int = 14) -> Traffic:
    """`in_flight` agents at once, each running sessions one after another until `sessions` have started in all
    or the monotonic clock reaches `until`; session number n complies when n % `exploit_every` == 0, and
    pauses a random time in `pause` (drawn with `seed`) before its tool call."""
    traffic = Traffic()
    started = 0
    rng = random.Random(seed)
    tls = ssl.create_default_context()  # unused on plain HTTP; shared, as each client would build its own

    async def agent() -> None:
        # A client (one connection) per agent: one client shared by all would scan its whole connection pool on
        # every request (httpcore), quadratic in the agents: the load generator, not the proxy, set the pace.
        nonlocal started
        async with http_client(proxy, timeout=120.0, verify=tls) as client:
            while (sessions is None or started < sessions) and (until is None or time.monotonic() < until):
                number, started = started, started + 1
                try:
                    traffic.sessions.append(await agent_session(
                        client, url, number % exploit_every == 0, rng.uniform(*pause), traffic))
                except (httpx.HTTPError, KeyError) as exc:
                    traffic.failed += 1
                    traffic.errors[failure(exc)] += 1

    await asyncio.gather(*(agent() for _ in range(in_flight)))
    return traffic


@dataclass
class Count:
    """What the reports say about the sessions of `traffic` (see `count`)."""

    sessions: int
    exploit_sessions: int
    reports: int
    runs_per_session: dict[int, int]
    """How many sessions had how many runs reported (one value: every session followed by the same attacks)."""
    duplicated: int
    """(attack, session) pairs reported more than once."""
    missing: int
    """(attack, session) pairs with no report, for an attack that reported the other sessions of the kind."""
    unknown: int
    """Reports of sessions the agents did not complete (a retried `initialize`)."""
    exploited: int
    """Exploit sessions whose OW-001 run is `exploited`."""
    false_negatives: int
    """Exploit sessions whose OW-001 run is not `exploited`, or has no report."""
    false_positives: int
    """Resisting sessions whose OW-001 run is `exploited`."""
    outcomes: dict[str, int]
    statuses: dict[str, int]
    resisting: dict[tuple[str, str], int]
    """The (status, outcome) of the resisting sessions' OW-001 runs."""

    @property
    def evicted(self) -> int:
        return self.statuses.get("evicted", 0)

    def lines(self) -> list[str]:
        return [
            f"sessions {self.sessions:,} ({self.exploit_sessions:,} exploit sessions); reports {self.reports:,}; "
            f"runs per session {self.runs_per_session}",
            f"every exploit session reported exactly once as exploited: {self.exploited:,}/{self.exploit_sessions:,}"
            f"; false negatives {self.false_negatives}, false positives {self.false_positives}",
            f"(attack, session) reported twice or more: {self.duplicated}; never reported: {self.missing}; "
            f"reports of unknown sessions: {self.unknown}",
            f"evicted: {self.evicted}; statuses {self.statuses}; outcomes {self.outcomes}",
            f"resisting sessions' {EXPLOITED_ATTACK} runs (status, outcome): {self.resisting}",
        ]


def count(reports: Iterable[dict[str, Any]], sessions: list[Session]) -> Count:
    """Count the reports against the sessions the agents completed."""
    by_key = {session.key: session for session in sessions}
    per_run: Counter[tuple[str, str]] = Counter()
    attacks: dict[str, set[str]] = defaultdict(set)
    own: dict[str, list[dict[str, Any]]] = defaultdict(list)
    outcomes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    total = unknown = 0
    for report in reports:
        total += 1
        attack, session = report["attack"]["id"], report["execution_summary"]["session"]
        outcomes[report["outcome"]] += 1
        statuses[report["execution_summary"]["status"]] += 1
        if session not in by_key:
            unknown += 1
            continue
        per_run[attack, session] += 1
        attacks[session].add(attack)
        if attack == EXPLOITED_ATTACK:
            own[session].append(report)
    expected = {kind: set().union(*(attacks[s.key] for s in sessions if s.complied is kind)) for kind in (True, False)}
    missing = sum(len(expected[s.complied] - attacks[s.key]) for s in sessions)
    exploited = sum(1 for s in sessions if s.complied and [r["outcome"] for r in own[s.key]] == ["exploited"])
    resisting = Counter((r["execution_summary"]["status"], r["outcome"]) for s in sessions if not s.complied
                        for r in own[s.key])
    return Count(
        sessions=len(sessions), exploit_sessions=sum(s.complied for s in sessions), reports=total,
        runs_per_session=dict(Counter(len(attacks[s.key]) for s in sessions)),
        duplicated=sum(1 for n in per_run.values() if n > 1), missing=missing, unknown=unknown, exploited=exploited,
        false_negatives=sum(s.complied for s in sessions) - exploited,
        false_positives=sum(n for (_, outcome), n in resisting.items() if outcome == "exploited"),
        outcomes=dict(outcomes), statuses=dict(statuses), resisting=dict(resisting))
