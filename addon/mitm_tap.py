"""mitmproxy glue for the wire decoders: hooks in, `ObservedEvent`s out through `on_event` (and the ends of
exchanges that left requests unanswered, `ExchangeEnded`, through `on_ended`: at `response`, at `error`, and at the
end of a streamed response, which is its `response` or `error`), or the decoder's calls as data through `on_step`
(see "Where decoding runs" below). Decoding only.

`MitmTap` is owned by an addon, which forwards its hooks (`load`, `configure`, `requestheaders`, `request`,
`responseheaders`, `response`, `error`). Guarantees:
- traffic is never altered: every body chunk is returned to mitmproxy as it came;
- streaming responses (`text/event-stream`, NDJSON, or any response mitmproxy already decided to stream)
  are streamed: `flow.response.stream` is set in `responseheaders` to a function that hands each chunk on
  at once and decodes it as it passes, so events are reported when they happen, not when the stream ends.
  Bare mitmdump holds a whole response until it ends: MCP's GET stream never delivers, a server request
  (sampling) inside a tools/call deadlocks, the legacy HTTP+SSE transport never connects. Request bodies the
  client streams (no Content-Length), or that mitmproxy decided to stream, are streamed the same way;
- a streamed body keeps what passed with the flow: mitmproxy stores a streamed body only when the stream
  ends cleanly and `store_streamed_bodies` is set, so a stream the client or server closed early (the legacy
  HTTP+SSE transport always, an MCP POST stream the client drops after its result), or any request body a
  client streams (no Content-Length) without that option, would be saved by `-w` and shown in the UIs without a
  byte of it, and replayed as silence (a request's answer then answers nothing seen). The bytes forwarded (at most
  `oatf_wire_max_body` of them) become the body at `request`, `response` or `error` when mitmproxy stored none,
  and a response longer than that says how many bytes went on in all (`flow.metadata["wire_forwarded"]`: its
  replay cannot read the rest, and marks it not inspected; a request over the limit, which live decoding did not
  inspect, keeps one byte more, and its replay does not inspect it either); hooks run in addon order and script
  addons come before mitmproxy's `save` addon, which writes the flow at those hooks, so the saved flow holds them;
- no exception escapes a hook or a stream function: it is caught at the boundary, logged once per place
  and kind, and the flow goes on (its decoding stops).
`MitmTap` records each streamed response chunk's arrival in `flow.metadata["wire_chunks"]` for offline replay
(`addon.recordings.decode_flows`): every chunk the flow keeps bytes of, so each event a replay reads carries the time
it carried live, however long the stream (the record grows with what the flow keeps: mitmproxy's whole body with
`store_streamed_bodies`, else the first `oatf_wire_max_body` bytes; a chunk past those is not noted, its bytes are
not in the flow).

**Where decoding runs.** Given `on_step`, the tap decodes nothing itself: each decoder call is handed on as a
`WireStep` (raw header fields, body bytes, times: `oatf_engine.wire.steps`), for the monitor process to decode
beside the monitor — JSON parsing and building events are the bulk of the addon's cost on mitmproxy's event loop
(issue 15). A flow is decoded here instead when `decode_here()` says so as it starts (the OATF addon: when inject
mode or Attest traces need its events in this process). Either way the same decoder calls are made, in the same
order, with the same arguments and times: the same events. A flow an `ignore` override covers
(`oatf_wire_protocols`) is neither decoded nor handed on.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mitmproxy import ctx, exceptions, http

from addon.flow_file import client_address
from oatf_engine.engine_config import SETTINGS, ConfigError, engine_config
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.text import printable
from oatf_engine.wire import DecoderConfig, Diagnostic, WireDecoder, is_streamed
from oatf_engine.wire.decoder import Decoded
from oatf_engine.wire.steps import FINAL_CALLS, WireStep, feed

log = logging.getLogger("oatf.wire")

FORWARDED = "wire_forwarded"
"""`flow.metadata` key: how many bytes of a streamed response went on in all, when its flow keeps fewer (the first
`oatf_wire_max_body`: see the module docstring)."""


class _Kept:
    """The bytes of a streamed body kept for its flow (its first `oatf_wire_max_body`; for a request, one more: see
    `MitmTap._keep_streamed_body`), and how many went on."""

    __slots__ = ("data", "forwarded")

    def __init__(self) -> None:
        self.data = bytearray()
        self.forwarded = 0

_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"})

StreamFunction = Callable[[bytes], bytes | Iterable[bytes]]


def _has_content_length(fields: tuple[tuple[bytes, bytes], ...]) -> bool:
    """Whether raw header fields carry a `Content-Length` (a scan of mitmproxy's fields: its `Headers` mapping
    decodes every name it compares; a plain loop, lowering only names of its length: ~6× faster than `any` over a
    generator, once per request on the event loop)."""
    for name, _ in fields:  # noqa: SIM110 (a generator costs more than the scan: see above)
        if len(name) == 14 and name.lower() == b"content-length":
            return True
    return False


class MitmTap:
    """Feeds mitmproxy flows to a `WireDecoder` and each decoded event to `on_event`."""

    def __init__(self, on_event: Callable[[ObservedEvent], None], config: DecoderConfig | None = None,
                 clock: Callable[[], float] = time.time,
                 on_ended: Callable[[ExchangeEnded], None] | None = None,
                 on_step: Callable[[WireStep], None] | None = None,
                 decode_here: Callable[[], bool] = lambda: False) -> None:
        """`on_step`: when given, a flow is handed on as `WireStep`s, undecoded, unless `decode_here()` says, as
        the flow starts, that it is decoded here (see the module docstring)."""
        self.on_event = on_event
        self.on_ended = on_ended
        self.on_step = on_step
        self.decode_here = decode_here
        self.clock = clock
        self.decoder = WireDecoder(config, on_diagnostic=self.diagnosed)
        self._raw: set[str] = set()  # flows handed on as steps (`on_step`)
        self._ignored: set[str] = set()  # flows an `ignore` override leaves undecoded: neither decoded nor handed on
        self.diagnostics: Counter[str] = Counter()
        """How many diagnostics of each code the decoder reported."""
        self._streamed: set[tuple[str, str]] = set()  # (flow id, "request" | "response") we stream
        self._kept: dict[tuple[str, str], _Kept] = {}  # (flow id, side) → the streamed bytes forwarded (bounded)
        self._failed: set[str] = set()  # flows whose decoding raised: not decoded any further
        self._logged: set[tuple[str, str]] = set()  # (place, exception type) already logged
        self.stores_streamed_bodies = False
        """mitmproxy's `store_streamed_bodies` (`configure`): whether a stream that ends cleanly keeps all its bytes."""

    # --- options ----------------------------------------------------------------------------------------

    def load(self, loader: Any) -> None:
        """Declare the `oatf_wire_*` options (`oatf_engine.engine_config.SETTINGS`, shared with `oatf evaluate`)."""
        for setting in SETTINGS:
            if setting.name.startswith("wire_"):
                loader.add_option(setting.option, setting.kind, setting.default, setting.help)

    def configure(self, updated: set[str]) -> None:
        """Apply changed `oatf_wire_*` options, and note mitmproxy's `store_streamed_bodies` (a stream that ends
        cleanly keeps all its bytes: all its chunks' times are noted); a bad value is an OptionsError, which
        mitmproxy rejects."""
        if "store_streamed_bodies" in updated:
            self.stores_streamed_bodies = bool(ctx.options.store_streamed_bodies)
        if not updated & {"oatf_wire_max_body", "oatf_wire_protocols"}:
            return
        try:
            wire = engine_config({"wire_max_body": ctx.options.oatf_wire_max_body,
                                  "wire_protocols": ctx.options.oatf_wire_protocols}).decoder
        except ConfigError as exc:
            raise exceptions.OptionsError(str(exc)) from None
        self.decoder.config = dataclasses.replace(self.decoder.config, max_body_size=wire.max_body_size,
                                                  max_event_size=wire.max_event_size, overrides=wire.overrides)

    # --- hooks ------------------------------------------------------------------------------------------

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """Start the exchange; stream the request body if the client streams it."""
        try:
            request = flow.request
            url, method, fields = request.url, request.method, request.headers.fields  # (mitmproxy builds each)
            if self.decoder.ignores(url):
                self._ignored.add(flow.id)
            elif self.on_step is not None and not self.decode_here():
                self._raw.add(flow.id)
            self._step("request_headers", flow.id, self._at(request.timestamp_start), method, url, fields,
                       client_address(flow))
            client_streams = method.upper() not in _NO_BODY_METHODS and not _has_content_length(fields)
            if request.stream or client_streams:  # mitmproxy's own choice (stream_large_bodies) included
                request.stream = self._stream_function(flow, "request", request.stream)
        except Exception as exc:
            self._fail("requestheaders", flow.id, exc)

    def request(self, flow: http.HTTPFlow) -> None:
        """The request is complete: decode a buffered body."""
        try:
            self._keep_streamed_body(flow, "request")
            if flow.id in self._failed:
                return
            ended = self._at(flow.request.timestamp_end)
            body = flow.request.raw_content if (flow.id, "request") not in self._streamed else None
            self._streamed.discard((flow.id, "request"))
            self._step("request_end", flow.id, ended, *((body,) if body else ()))  # a buffered body with its end
        except Exception as exc:
            self._fail("request", flow.id, exc)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Start the response; stream it if it is a streaming type (or mitmproxy already streams it)."""
        try:
            response = flow.response
            if flow.id in self._failed or response is None:
                return
            self._step("response_headers", flow.id, self._at(response.timestamp_start), response.status_code,
                       response.headers.fields)
            if (response.stream or is_streamed(response.headers)) and not response.raw_content:
                # (a response an addon completed in `request` has its body already: decoded at `response`)
                response.stream = self._stream_function(flow, "response", response.stream)
        except Exception as exc:
            self._fail("responseheaders", flow.id, exc)

    def response(self, flow: http.HTTPFlow) -> None:
        """The response is complete: decode a buffered body and close the exchange."""
        try:
            self._keep_streamed_body(flow, "response")
            ended = self._at(flow.response.timestamp_end if flow.response is not None else None)
            if flow.id in self._failed:
                self._failed.discard(flow.id)
                self._step("abort", flow.id, ended)
                return
            streamed = (flow.id, "response") in self._streamed
            self._streamed.discard((flow.id, "response"))
            body = flow.response.raw_content if not streamed and flow.response is not None else None
            self._step("response_end", flow.id, ended, *((body,) if body else ()))
        except Exception as exc:
            self._fail("response", flow.id, exc)

    def error(self, flow: http.HTTPFlow) -> None:
        """The flow failed (connection lost, killed, refused, timed out): forget it; its end is reported if it
        left requests unanswered."""
        try:
            self._keep_streamed_body(flow, "request")
            self._keep_streamed_body(flow, "response")
            self._failed.discard(flow.id)
            self._streamed.discard((flow.id, "request"))
            self._streamed.discard((flow.id, "response"))
            self._step("abort", flow.id, self._at(flow.error.timestamp if flow.error else None))
        except Exception as exc:
            self._fail("error", flow.id, exc)

    # --- internals --------------------------------------------------------------------------------------

    def _at(self, recorded: float | None) -> float:
        """An event's time: mitmproxy's own timestamp of the step (the one saved with the flow, which offline
        replay reads: `addon.recordings`), so live and replayed reports carry the same times; the clock where
        mitmproxy has none."""
        return recorded if recorded is not None else self.clock()

    def _stream_function(self, flow: http.HTTPFlow, side: str, inner: Any) -> StreamFunction:
        """A `stream` callable for mitmproxy: returns each chunk unchanged (after `inner`, a stream function
        another addon set, if any) and feeds it to the decoder; keeps the bytes forwarded (up to
        `oatf_wire_max_body`, `_keep_streamed_body`) and, for a response, notes the arrival time and size of each
        chunk the flow keeps bytes of in `flow.metadata["wire_chunks"]` for offline replay (see the module
        docstring)."""
        flow_id = flow.id
        self._streamed.add((flow_id, side))
        call = "request_data" if side == "request" else "response_data"
        previous = inner if callable(inner) else None
        times: list[list[float]] | None = flow.metadata.setdefault("wire_chunks", []) if side == "response" else None
        kept = self._kept[(flow_id, side)] = _Kept()
        limit = self.decoder.config.max_body_size
        keep = limit if side == "response" else limit + 1

        def stream(data: bytes) -> bytes | Iterable[bytes]:
            out = previous(data) if previous is not None else data
            try:
                chunk = out if isinstance(out, bytes) else b"".join(out := list(out))
                kept.forwarded += len(chunk)
                if len(kept.data) < keep:
                    kept.data.extend(chunk[:keep - len(kept.data)])
                if chunk and flow_id not in self._failed:
                    now = self.clock()
                    if times is not None and (  # the flow keeps bytes of this chunk
                            self.stores_streamed_bodies or kept.forwarded - len(chunk) < limit):
                        times.append([now, len(chunk)])
                    self._step(call, flow_id, now, chunk)
            except Exception as exc:
                self._fail(f"{side} stream", flow_id, exc)
            return out

        return stream

    def _keep_streamed_body(self, flow: http.HTTPFlow, side: str) -> None:
        """At `request` (`side` "request"), `response` or `error`: a streamed body mitmproxy stored none of gets
        the bytes forwarded (see the module docstring); one it stored (a clean end with `store_streamed_bodies`)
        is left alone. A response keeps at most `oatf_wire_max_body` bytes, and the count of all of them when
        more went on (`FORWARDED`: its replay marks the rest not inspected); a request, one byte more, so that
        its replay finds it over the limit when it was, and marks it not inspected as live decoding did."""
        kept = self._kept.pop((flow.id, side), None)
        message = flow.request if side == "request" else flow.response
        if kept is not None and message is not None and message.raw_content is None:
            message.raw_content = bytes(kept.data)
            if side == "response" and kept.forwarded > len(kept.data):
                flow.metadata[FORWARDED] = kept.forwarded

    def _step(self, call: str, flow_id: str, at: float, *args: Any) -> None:
        """One call of the decoder's exchange API: made here, handed on as a `WireStep` for a flow decoded
        elsewhere (`on_step`), or dropped for a flow an override ignores; a flow's last call (`FINAL_CALLS`)
        forgets which it is."""
        if flow_id in self._raw:
            if call in FINAL_CALLS:
                self._raw.discard(flow_id)
            self.on_step(WireStep(call, flow_id, at, args))  # type: ignore[misc]  # set for every flow in `_raw`
        elif flow_id in self._ignored:
            if call in FINAL_CALLS:
                self._ignored.discard(flow_id)
        else:
            self._emit(feed(self.decoder, WireStep(call, flow_id, at, args)))

    def _emit(self, events: Sequence[Decoded]) -> None:
        for event in events:
            try:
                if isinstance(event, ObservedEvent):
                    self.on_event(event)
                elif self.on_ended is not None:
                    self.on_ended(event)
            except Exception as exc:
                self._log_once("on_event", event.flow_id, exc)

    def diagnosed(self, diagnostic: Diagnostic) -> None:
        """A diagnostic of this tap's decoder, or of the monitor process's (its steps): counted and logged."""
        self.diagnostics[diagnostic.code] += 1
        log.info("oatf wire: flow %s: %s: %s", diagnostic.flow_id, diagnostic.code, printable(diagnostic.message, 300))

    def _fail(self, place: str, flow_id: str, exc: Exception) -> None:
        """Decoding raised: stop decoding this flow, let it go on untouched. The decoder, here or in the monitor
        process, marks its exchange cut off (a `cut_off` step: `WireDecoder.cut_off`), so that the runs of its
        session read `inconclusive`, never `resisted` for want of the rest of it."""
        self._failed.add(flow_id)
        self._log_once(place, flow_id, exc)
        try:
            self._step("cut_off", flow_id, self.clock(), "client" if place.startswith("request") else "server")
        except Exception as again:
            self._log_once("cut_off", flow_id, again)

    def _log_once(self, place: str, flow_id: str, exc: Exception) -> None:
        key = (place, type(exc).__name__)
        if key in self._logged:
            log.debug("oatf wire: %s failed again on flow %s: %r", place, flow_id, exc)
            return
        self._logged.add(key)
        log.error("oatf wire: %s failed on flow %s (logged once; the flow passes unaltered)", place, flow_id,
                  exc_info=exc)
