"""The protocol engine: methods, concurrency and lifecycle (Attest protocol v1 §1.4, §1.5, §2, §5, §6).

`Engine` receives parsed messages in arrival order (`admit`) and emits compact response lines through a
callback; it does no I/O of its own (`stdio` connects it to stdin/stdout).

- Methods: `initialize`, `evaluate_batch`, `submit_plugin_result`, `shutdown`; any other method is
  -32601 method_not_found (§6 rule 2, in any session state). Notifications (no `id`) are not answered.
- Concurrency (§1.5): `evaluate_batch` requests run as concurrent tasks and are answered as they finish,
  out of order, each with its request's `id`. At most `max_concurrent_requests` (advertised, default 64)
  run at once, and their request lines total at most `max_inflight_bytes` (a single larger one runs
  alone). The excess is not rejected: the engine stops reading its input until a slot frees, so further
  requests wait in the pipe (back-pressure) and are served in order. A request whose `id` is already in
  flight is -32600. The other methods are answered at once, in order.
- Lines over `max_message_bytes` are not read into memory; they are answered from their first bytes:
  INVALID_TRACE (1001) for `evaluate_batch`, -32600 otherwise.
- `shutdown` (§2.3): stop reading, let in-flight evaluations finish for up to `drain_timeout_s` (30 s),
  answer those still running with TIMEOUT (3002), flush the report, answer `shutdown` with its counters,
  stop. End of input does the same without the `shutdown` answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from traceback import format_exc
from typing import Any

from .assertions import Providers
from .batch import BatchEvaluator
from .config import EngineConfig
from .errors import ErrorCode, RpcError, engine_error, invalid_trace, session_error, timeout_error
from .jsonrpc import (
    Malformed,
    Oversized,
    Request,
    RequestId,
    encode_error,
    encode_result,
    parse_message,
    parse_oversized,
)
from .ledger import Ledger, parse_plugin_result
from .logs import JsonLogger
from .ndjson import Line, OversizedLine
from .session import Session

Message = Request | Malformed | Oversized


class DaemonThreadExecutor(Executor):
    """Runs each call on a daemon thread of its own (at most one per in-flight batch).

    §2.3: the engine drains for up to 30 s "then exits regardless" — an evaluation still computing on a
    worker thread (the timeout answered it already) must not hold the process open, as the non-daemon
    workers of `ThreadPoolExecutor` would.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, name="attest-engine-eval", daemon=True).start()
        return future


def parse_item(item: Line | OversizedLine) -> Message:
    """A framed input line as a message (CPU work, done on the reading thread)."""
    if isinstance(item, OversizedLine):
        return parse_oversized(item.prefix, item.total_bytes)
    return parse_message(item.data)


class InFlightLimiter:
    """At most `max_requests` requests and `max_bytes` of request lines in flight (one oversized alone)."""

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self._max_requests = max_requests
        self._max_bytes = max_bytes
        self._condition = asyncio.Condition()
        self.count = 0
        self._bytes = 0

    def _fits(self, weight: int) -> bool:
        return self.count < self._max_requests and (self.count == 0 or self._bytes + weight <= self._max_bytes)

    async def acquire(self, weight: int) -> None:
        async with self._condition:
            await self._condition.wait_for(lambda: self._fits(weight))
            self.count += 1
            self._bytes += weight

    async def release(self, weight: int) -> None:
        async with self._condition:
            self.count -= 1
            self._bytes -= weight
            self._condition.notify_all()


class Engine:
    """One engine process's protocol state; `emit` receives each response line (bytes ending in `\\n`)."""

    def __init__(
        self,
        config: EngineConfig,
        logger: JsonLogger,
        emit: Callable[[bytes], None],
        providers: Providers | None = None,
    ) -> None:
        self._config = config
        self._logger = logger
        self._emit = emit
        self._providers = providers or Providers()
        capabilities = ["layers_1_4", "soft_failures"] + (["layers_5_6"] if self._providers.complete else [])
        self.session = Session(capabilities, config.max_concurrent_requests, config.limits)
        self._batches = BatchEvaluator(config, self._providers, logger, DaemonThreadExecutor())
        self._ledger = Ledger() if config.report_path else None  # results are kept only for a report
        self._limiter = InFlightLimiter(config.max_concurrent_requests, config.max_inflight_bytes)
        self._tasks: dict[asyncio.Task[None], RequestId] = {}
        self._stopping = False
        self._ending: asyncio.Task[None] | None = None
        self.stopped = asyncio.Event()

    @property
    def counters(self) -> dict[str, int]:
        """The §2.3 `shutdown` counters."""
        return {
            "sessions_completed": self.session.sessions_completed,
            "assertions_evaluated": self._batches.assertions_evaluated,
        }

    def _respond(self, request_id: RequestId, result: Any) -> None:
        self._emit(encode_result(request_id, result))

    def _fail(self, request_id: RequestId, error: RpcError) -> None:
        self._emit(encode_error(request_id, error))

    async def admit(self, message: Message) -> bool:
        """Handle one message in arrival order; False once the engine reads no more input."""
        if self._stopping:
            return False
        if isinstance(message, Malformed):
            self._fail(message.id, message.error)
            return True
        request_id = message.id
        try:
            if isinstance(message, Oversized):
                self._answer_oversized(message)
                return True
            if message.notification:
                self._logger.debug("notification ignored", method=message.method)
                return True
            return await self._dispatch(message)
        except RpcError as error:
            self._fail(request_id, error)
        except Exception as exc:  # an engine bug must not end the session
            self._logger.error(
                "internal error", method=getattr(message, "method", None), error=repr(exc), traceback=format_exc()
            )
            self._fail(request_id, engine_error(f"internal engine error: {type(exc).__name__}"))
        return True

    async def _dispatch(self, request: Request) -> bool:
        self._logger.debug("request", method=request.method, id=request.id, bytes=request.size_bytes)
        match request.method:
            case "initialize":
                self._respond(request.id, self.session.initialize(request.params))
            case "evaluate_batch":
                self.session.require_initialized("evaluate_batch")
                await self._start_batch(request)
            case "submit_plugin_result":
                self.session.require_initialized("submit_plugin_result")
                record = parse_plugin_result(request.params)
                self._logger.info("plugin result", **record)
                if self._ledger is not None:
                    self._ledger.record(record.pop("trace_id"), {**record, "plugin": True})
                self._respond(request.id, {"accepted": True})
            case "shutdown":
                await self._stop()
                self._respond(request.id, self.counters)
                self._finished()
                return False
            case _:
                raise RpcError(
                    ErrorCode.METHOD_NOT_FOUND,
                    f"method not found: {request.method[:100]}",
                    "This engine implements initialize, evaluate_batch, submit_plugin_result and shutdown "
                    "(protocol v1); gate newer methods on capabilities.",
                )
        return True

    def _answer_oversized(self, message: Oversized) -> None:
        limit = self._config.max_message_bytes
        if message.method == "evaluate_batch":
            self.session.require_initialized("evaluate_batch")
            max_trace = self._config.limits.max_trace_size_bytes
            raise invalid_trace(
                f"trace exceeds max size: request of {message.total_bytes} bytes > the {limit}-byte message "
                f"limit (max trace size {max_trace} bytes)",
                f"Reduce trace size by filtering steps or truncating tool results. Max allowed: {max_trace} bytes.",
            )
        raise RpcError(
            ErrorCode.INVALID_REQUEST,
            f"invalid request: message of {message.total_bytes} bytes exceeds the {limit}-byte limit",
            "Send smaller messages; the limit is max_message_bytes in the engine config.",
        )

    async def _start_batch(self, request: Request) -> None:
        if request.id is not None and request.id in self._tasks.values():
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"invalid request: id {str(request.id)[:100]} is already in flight",
                "Request ids must be unique among in-flight requests (§1.5).",
            )
        await self._limiter.acquire(request.size_bytes)
        if self._stopping:  # a termination signal arrived while this request waited for a slot
            await self._limiter.release(request.size_bytes)
            raise session_error("engine is shutting down", "Resubmit the request to a new engine process.")
        task = asyncio.create_task(self._run_batch(request))
        self._tasks[task] = request.id

    async def _run_batch(self, request: Request) -> None:
        try:
            result = await self._batches.evaluate(request.params, request.trace_size_bytes)
            if self._ledger is not None:
                for item in result["results"]:
                    self._ledger.record(request.params["trace"]["trace_id"], item)
            self._respond(request.id, result)
        except RpcError as error:
            self._fail(request.id, error)
        except asyncio.CancelledError:  # the shutdown drain deadline passed
            self._fail(
                request.id,
                timeout_error(
                    self._config.drain_timeout_s,
                    "The engine was shutting down and stopped waiting for this evaluation; resubmit it to a new "
                    "engine.",
                ),
            )
        except Exception as exc:
            self._logger.error(
                "internal error in evaluate_batch", id=request.id, error=repr(exc), traceback=format_exc()
            )
            self._fail(request.id, engine_error(f"internal engine error: {type(exc).__name__}"))
        finally:
            self._tasks.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            await self._limiter.release(request.size_bytes)

    async def _stop(self) -> None:
        """Stop reading, drain in-flight evaluations (bounded), flush the report, close providers."""
        self._stopping = True
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self._config.drain_timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._ledger is not None and self._config.report_path:
            try:
                self._ledger.write(self._config.report_path, self.counters)
            except OSError as exc:
                self._logger.error("cannot write report", path=self._config.report_path, error=str(exc))
        for provider in (self._providers.embedding, self._providers.judge):
            if provider is not None:
                await provider.aclose()

    def _finished(self) -> None:
        self._logger.info("engine stopped", **self.counters)
        self.stopped.set()

    async def end_of_input(self) -> None:
        """Input closed (or a termination signal): drain and stop, as `shutdown` does, without answering."""
        if self._stopping:
            return
        await self._stop()
        self._finished()

    def input_ended(self) -> None:
        """`end_of_input` as a callback (from the reader thread via the loop, or a signal handler)."""
        if self._ending is None:
            self._ending = asyncio.get_running_loop().create_task(self.end_of_input())
