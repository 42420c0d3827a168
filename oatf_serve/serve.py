"""`oatf serve DOC… [--host H] [--port N] [--report-dir DIR] [--agent [ACTOR=]URL…] [--stdio] [--stateless]`:
play the documents' attackers against a real agent and judge what was served (issue 19).

Each document is served on a port of its own (`--port N`: N, N+1, … in the order given; without it, free
ports), so that every endpoint sits where its protocol expects it — MCP at `/mcp`, A2A at `/` — and every
document's runs see only its own traffic. What is played is listed on stdout, one line per actor
(`OW-001 default mcp_server http://127.0.0.1:8000/mcp`; a client actor's line names the agent's URL), then an
empty line; what is not played, on stderr (`playable`).

All endpoints run in one uvicorn server (one socket per document; `Dispatcher` picks the document's app by
the port a request arrived on). Every exchange passes the `WireTap` (a client actor's, its `ClientTap`) to
the `Judge`, which writes per-run reports and `verdicts.jsonl` to the report directory as runs conclude. The
client actors (`ag_ui_client`, `mcp_client`, `a2a_client`, each with its `--agent` endpoint: `oatf_serve.agents`)
start once the servers accept connections; when every document has one, the server stops by itself once they are
done and their runs judged. SIGINT and SIGTERM stop the server; the runs still open are concluded (`interrupted`)
and reported, and a summary table of every run goes to stderr. `--stdio` serves one document's `mcp_server` actor on
stdin/stdout instead (`oatf_serve.stdio`); `--stateless` serves MCP without sessions, the phases following agent
episodes (`oatf_serve.mcp_server`). Exit status: as `oatf recover`'s (`oatf_engine.reports.exit_status`:
1 when a run was exploited or partial).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import anyio
import uvicorn
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Receive, Scope, Send

import oatf
from oatf_engine.engine_config import EngineConfig
from oatf_engine.monitor import LoadedAttack, Monitor, load_library
from oatf_engine.reports import ReportWriter, exit_status, summary_table
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.text import Once, describe, printable

from . import stdio
from .a2a_client import A2aClientActor
from .a2a_server import RPC_PATH as A2A_PATH
from .a2a_server import ActorHandler
from .ag_ui_client import AgUiActor
from .agents import AgentError, AgentUrls, check_names
from .client import ClientActor
from .judge import Judge, WireTap
from .mcp_client import McpClientActor
from .mcp_server import CLIENT_HOST, ActorServer
from .playable import limitations
from .player import SharedExtractors

EXIT_USAGE = 2
TICK_SECONDS = 0.5
"""How often `after` timers are checked."""
MCP_PATH = "/mcp"
SSE_PATH, MESSAGES_PATH = "/sse", "/messages/"
"""MCP's legacy HTTP+SSE transport: the stream, and where the client POSTs (served beside `MCP_PATH`)."""
SERVER_PATHS = {"mcp_server": MCP_PATH, "a2a_server": A2A_PATH}
"""Where each server mode is served (every actor of a document shares its port)."""
CLIENTS: dict[str, type[ClientActor]] = {"ag_ui_client": AgUiActor, "mcp_client": McpClientActor,
                                         "a2a_client": A2aClientActor}
"""The client mode each client actor plays, driven against the agent (`--agent URL`)."""
SETTLE_AFTER = 3.0
"""Seconds after the client actors are done before their runs can be settled (the engine may hold an
exchange up to 2 s to place it in a session)."""
SETTLE_SECONDS = 600.0
"""The longest wait for the runs of driven documents to conclude before `oatf serve` stops anyway."""


@dataclass(frozen=True)
class ServeOptions:
    """What `oatf serve` was asked to do."""

    documents: list[str]
    config: EngineConfig
    host: str = "127.0.0.1"
    port: int = 0
    report_dir: str = "oatf-reports"
    verbose: bool = False
    agents: AgentUrls = field(default_factory=AgentUrls)
    """The agent's endpoints the client actors drive (`oatf_serve.agents`): AG-UI for `ag_ui_client`, MCP
    (Streamable HTTP) for `mcp_client`, the A2A base URL (where its card is) for `a2a_client`."""
    stdio: bool = False
    """Serve the one document's `mcp_server` actor on stdin/stdout instead."""
    stateless: bool = False
    """Serve MCP Streamable HTTP without sessions (no `Mcp-Session-Id`): phases follow agent episodes."""


@dataclass
class Served:
    """One document being served: its app, its port, and the servers of its actors."""

    loaded: LoadedAttack
    port: int
    app: Starlette
    servers: list[ActorServer | ActorHandler]
    endpoints: list[str]
    clients: list[oatf.Actor]
    """The client-mode actors, run once the servers accept connections."""
    shared: SharedExtractors


class _Endpoint:
    """A raw ASGI endpoint for Starlette's `Route` (the session manager answers GET, POST and DELETE itself)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        CLIENT_HOST.set((scope.get("client") or ("", 0))[0])  # a stateless endpoint's agent (`mcp_server`)
        await self.manager.handle_request(scope, receive, send)


class _SseEndpoint:
    """MCP's legacy HTTP+SSE transport (MCP 2024-11-05 "Transports"), the `mcp` SDK's `SseServerTransport`: a
    GET of `SSE_PATH` opens one MCP session, its stream carrying the `endpoint` event and every server
    message; the client POSTs its messages to `MESSAGES_PATH?session_id=…`."""

    def __init__(self, server: ActorServer) -> None:
        self.server = server
        self.transport = SseServerTransport(MESSAGES_PATH)

    def routes(self) -> list[BaseRoute]:
        return [Route(SSE_PATH, endpoint=self, methods=["GET"]),
                Mount(MESSAGES_PATH, app=self.transport.handle_post_message)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.transport.connect_sse(scope, receive, send) as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())


def build(loaded: LoadedAttack, port: int, host: str, say: Callable[[str], None],
          idle_gap: float, agents: AgentUrls | None = None, stateless: bool = False) -> Served | None:
    """The app playing one document's server actors and the client actors it drives (those it can play), or
    None when it plays none; `stateless`: its MCP endpoint has no sessions, and `idle_gap` splits the agent
    episodes of sessionless traffic (`oatf_serve.mcp_server`)."""
    execution = loaded.attack.execution
    assert execution is not None
    shared = SharedExtractors()
    fatal = {limitation.actor for limitation in limitations(loaded.path, loaded.document, agents) if limitation.fatal}
    routes: list[BaseRoute] = []
    servers: list[ActorServer | ActorHandler] = []
    managers: list[StreamableHTTPSessionManager] = []
    endpoints: list[str] = []
    clients: list[oatf.Actor] = []
    taken: dict[str, str] = {}
    for actor in execution.actors or ():
        name = actor.name or "default"
        if name in fatal:
            continue
        if actor.mode not in SERVER_PATHS:
            clients.append(actor)
            endpoints.append(f"{loaded.key} {name} {actor.mode} {agents.url(name, actor.mode or '') if agents else ''}")
            continue
        path = SERVER_PATHS[actor.mode]
        if path in taken:
            say(f"{loaded.path}: actor {name}: a second {actor.mode} actor in one document is not played "
                f"(its endpoint {path} is taken by actor {taken[path]})")
            continue
        taken[path] = name
        url = f"http://{host}:{port}{path}"
        if actor.mode == "mcp_server":
            server = ActorServer(actor, shared, say, idle_gap, stateless)
            manager = StreamableHTTPSessionManager(app=server, stateless=stateless)
            if stateless and (len(actor.phases) > 1 or any(p.on_enter for p in actor.phases)):
                say(f"{loaded.path}: actor {name}: --stateless: the endpoint has no stream for the messages "
                    "it sends on its own (on_enter send, list_changed) nor for elicitation answers: not sent")
            routes += [Route(MCP_PATH, endpoint=_Endpoint(manager)), *_SseEndpoint(server).routes()]
            servers.append(server)
            managers.append(manager)
        else:
            handler = ActorHandler(actor, url, shared, say)
            routes += handler.routes()
            servers.append(handler)
        endpoints.append(f"{loaded.key} {name} {actor.mode} {url}")
    if not endpoints:
        return None

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for manager in managers:
                await stack.enter_async_context(manager.run())
            yield

    return Served(loaded, port, Starlette(routes=routes, lifespan=lifespan), servers, endpoints, clients, shared)


class Dispatcher:
    """One ASGI app for every document: a request goes to the app of the port it arrived on; the lifespan
    starts every document's app, a ticker fires the server actors' `after` timers, and once the servers accept
    connections the client actors run (`drive`)."""

    def __init__(self, served: list[Served], judge: Judge, say: Callable[[str], None],
                 options: ServeOptions) -> None:
        self.by_port = {s.port: WireTap(s.app, judge, s.port) for s in served}
        self.served = served
        self.judge = judge
        self.say = say
        self.options = options
        self.done: Callable[[], None] = lambda: None
        """Called when every document drove its client actors to the end and their runs were judged."""
        self._once = Once()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        port = (scope.get("server") or ("", 0))[1]
        await self.by_port[port](scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with contextlib.AsyncExitStack() as stack:
            for served in self.served:
                await stack.enter_async_context(served.app.router.lifespan_context(served.app))
            ticker = asyncio.create_task(self._tick())
            await receive()  # lifespan.startup
            await send({"type": "lifespan.startup.complete"})
            driver = asyncio.create_task(self.drive())
            await receive()  # lifespan.shutdown
            ticker.cancel()
            driver.cancel()
        await send({"type": "lifespan.shutdown.complete"})

    async def drive(self) -> None:
        """Run every client actor (format spec §5.1 readiness: the sockets listen and the apps have started);
        when every document has one, wait for their runs to be judged (at most `SETTLE_SECONDS`), then stop."""
        actors = [(f"{served.loaded.key} actor {actor.name or 'default'} ({actor.mode})",
                   CLIENTS[actor.mode or ""](actor, self.options.agents.url(actor.name or "default", actor.mode or "")
                                             or "", self.judge, served.port,
                                             self.options.config.decoder, served.shared, self.say))
                  for served in self.served for actor in served.clients]
        if not actors:
            return
        outcomes = await asyncio.gather(*(actor.run() for _, actor in actors), return_exceptions=True)
        for (name, _), outcome in zip(actors, outcomes, strict=True):
            while isinstance(outcome, BaseExceptionGroup) and outcome.exceptions:  # the SDKs' task groups
                outcome = outcome.exceptions[0]
            if isinstance(outcome, Exception):
                self.say(f"{name} stopped: {describe(outcome)}")
        if not all(served.clients for served in self.served):
            return
        await asyncio.sleep(SETTLE_AFTER)
        deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
        while not self.judge.settled() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(TICK_SECONDS)
        self.done()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            for served in self.served:
                for server in served.servers:
                    try:
                        await server.tick()
                    except Exception as exc:  # the timers of the other sessions must go on
                        if self._once.first("tick", type(exc).__name__):
                            self.say(f"after timers failed (reported once): {describe(exc)}")


class _Uvicorn(uvicorn.Server):
    """uvicorn without its re-raising of the stopping signal: `oatf serve` reports and summarizes after it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class _PrintableLog(logging.Handler):
    """Log records of the SDKs and servers (which quote the traffic: a request that failed validation) as one
    bounded, printable line each (`oatf_engine.text.printable`)."""

    def __init__(self, stderr: IO[str], level: int) -> None:
        super().__init__(level)
        self.stderr = stderr

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"oatf serve: {record.name}: {record.levelname.lower()}: {printable(record.getMessage(), 300)}",
                  file=self.stderr, flush=True)
        except Exception:  # never let a log line end a request
            self.handleError(record)


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def run_serve(options: ServeOptions, stdout: IO[str] = sys.stdout, stderr: IO[str] = sys.stderr) -> int:
    """Serve until SIGINT/SIGTERM, or until the driven documents are done (see the module docstring); the exit
    status."""

    def say(line: str) -> None:
        print(f"oatf serve: {printable(line, 500)}", file=stderr, flush=True)

    level = logging.WARNING if options.verbose else logging.ERROR
    logging.basicConfig(handlers=[_PrintableLog(stderr, level)], level=level, force=True)
    library = load_library(options.documents, options.config.lenient, long_lived=True)
    for problem in library.problems:
        say(f"not loaded: {problem}")
    try:
        check_names(options.agents, (loaded.document for loaded in library.attacks))
        semantic = load_semantic_evaluator(options.config.semantic_evaluator)
        writer = ReportWriter(options.report_dir)
    except (ImportError, AttributeError, OSError, AgentError) as exc:
        say(str(exc))
        return EXIT_USAGE
    if options.stdio:
        return _serve_stdio(options, library.attacks, semantic, writer, say, stderr)
    sockets: list[socket.socket] = []
    served: list[Served] = []
    for loaded in library.attacks:
        for limitation in limitations(loaded.path, loaded.document, options.agents):
            say(("not played: " if limitation.fatal else "played without: ") + str(limitation))
        try:
            sock = _bind(options.host, options.port + len(sockets) if options.port else 0)
        except OSError as exc:
            say(f"{options.host}:{options.port + len(sockets)}: {exc.strerror or exc}")
            return EXIT_USAGE
        document = build(loaded, sock.getsockname()[1], options.host, say, options.config.monitor.idle_gap,
                         options.agents, options.stateless)
        if document is None:
            sock.close()
            say(f"{loaded.path}: nothing to play")
            continue
        sockets.append(sock)
        served.append(document)
    if not served:
        say("no document has an actor oatf serve plays")
        return EXIT_USAGE
    monitors = {s.port: Monitor([s.loaded], options.config.monitor, semantic=semantic) for s in served}
    judge = Judge(options.config.decoder, monitors, writer, stderr, options.verbose)
    print("".join(f"{endpoint}\n" for document in served for endpoint in document.endpoints), file=stdout, flush=True)
    judge.start()
    dispatcher = Dispatcher(served, judge, say, options)
    config = uvicorn.Config(dispatcher, lifespan="on", log_config=None,
                            log_level="warning" if options.verbose else "error", timeout_graceful_shutdown=2)
    server = _Uvicorn(config)
    dispatcher.done = lambda: setattr(server, "should_exit", True)
    try:
        asyncio.run(server.serve(sockets=sockets))
    finally:
        for sock in sockets:
            sock.close()
    return _summarize(judge, options, say, stderr)


def _serve_stdio(options: ServeOptions, attacks: Sequence[LoadedAttack], semantic: Any, writer: ReportWriter,
                 say: Callable[[str], None], stderr: IO[str]) -> int:
    """`--stdio`: the one document's `mcp_server` actor on stdin/stdout (`oatf_serve.stdio`)."""
    if len(attacks) != 1:
        say(f"--stdio serves one document ({len(attacks)} loaded)")
        return EXIT_USAGE
    [loaded] = attacks
    assert loaded.attack.execution is not None
    actors = [actor for actor in loaded.attack.execution.actors or () if actor.mode == "mcp_server"]
    if not actors:
        say(f"{loaded.path}: --stdio plays an mcp_server actor, and the document has none")
        return EXIT_USAGE
    for limitation in limitations(loaded.path, loaded.document, options.agents):
        if limitation.actor == (actors[0].name or "default"):
            say(("not played: " if limitation.fatal else "played without: ") + str(limitation))
    for actor in loaded.attack.execution.actors or ():
        if actor is not actors[0]:
            say(f"{loaded.path}: actor {actor.name or 'default'} ({actor.mode}): not played with --stdio "
                "(it plays one mcp_server actor)")
    judge = Judge(options.config.decoder, {stdio.KEY: Monitor([loaded], options.config.monitor, semantic=semantic)},
                  writer, stderr, options.verbose)
    say(f"{loaded.key} {actors[0].name or 'default'} mcp_server stdio")
    judge.start()
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        anyio.run(stdio.serve_stdio, ActorServer(actors[0], SharedExtractors(), say, options.config.monitor.idle_gap),
                  judge, say)
    except KeyboardInterrupt:
        say("stopped")
    finally:
        signal.signal(signal.SIGTERM, previous)
    return _summarize(judge, options, say, stderr)


def _summarize(judge: Judge, options: ServeOptions, say: Callable[[str], None], stderr: IO[str]) -> int:
    """Conclude the runs still open, print the summary table; the exit status."""
    reports = judge.stop()
    if reports:
        print(summary_table(reports), file=stderr, flush=True)
    say(f"{len(reports)} run(s) reported in {options.report_dir}")
    return exit_status(reports)
