"""Recorded traffic read for offline replay (`oatf evaluate`): mitmproxy flow files and HAR files (read with
mitmproxy's own formats, `addon.flow_file`) and `oatf tap --record` stdio captures, decoded into the engine's
events with their recorded timestamps as the clock, then evaluated by `oatf_engine.replay` exactly as the live
addon evaluates them.

This is the offline front door's reading side; it lives with the mitmproxy-facing code because mitmproxy's
flow formats are read through mitmproxy. `decode_flows` feeds recorded flows through a decoder in wire order;
`addon.mitm_tap.MitmTap` records each streamed response chunk's arrival in `flow.metadata["wire_chunks"]` for it.
"""

from __future__ import annotations

import bisect
import logging
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext

from mitmproxy.exceptions import FlowReadException

from addon.flow_file import AnyHTTPFlow, client_address, read_flow_file
from addon.inject_tags import METADATA_KEY as INJECTED
from addon.inject_tags import tagged
from addon.mitm_tap import FORWARDED
from oatf_engine.engine_config import EngineConfig, engine_config
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.monitor import load_library
from oatf_engine.progress import UPDATE_EVERY, Progress, file_size, size
from oatf_engine.replay import (
    ReplayResult,
    SessionClose,
    collector_paused,
    evaluate_events,
    evaluate_stream,
    sharded_monitors,
    stream_workers,
)
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.wire import DecoderConfig, Unread, WireDecoder, is_streamed, kept_header
from oatf_engine.wire.decoder import Decoded
from oatf_engine.wire.mcp import SESSION_HEADER, closed_session
from oatf_engine.wire.ndjson import Capture, decode_capture, is_capture, read_capture
from oatf_engine.wire.steps import FINAL_CALLS, StepDecoder, WireStep


class ReplayError(Exception):
    """A flow file that cannot be read."""


log = logging.getLogger(__name__)


def read_flows(path: str, position: Callable[[int], None] | None = None) -> list[AnyHTTPFlow]:
    """The HTTP flows of a mitmproxy flow file or a HAR file, in recorded order (`addon.flow_file`; `position`:
    the bytes read so far, as it goes)."""
    try:
        with open(path, "rb") as handle:
            flows = read_flow_file(handle, position)
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except FlowReadException as exc:
        raise ReplayError(f"{path}: not a mitmproxy flow file or HAR: {exc}") from None
    try:
        return sorted(flows, key=lambda f: f.request.timestamp_start)
    except TypeError:
        raise ReplayError(f"{path}: not a mitmproxy flow file or HAR: a request without a start time") from None


def read_capture_file(path: str) -> Capture | None:
    """The `oatf tap --record` capture at `path` (`oatf_engine.wire.ndjson`), or None when it is not one."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).lstrip()
            if head and not head.startswith(b"{"):  # a flow file: not read line by line (it may hold no line break)
                return None
            handle.seek(0)
            if not is_capture(handle.readline()):
                return None
            handle.seek(0)
            return read_capture(handle.read())
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReplayError(f"{path}: not an oatf tap capture: {exc}") from None


def read_recordings(flow_paths: list[str], origins: dict[str, str] | None = None,
                    progress: Progress | None = None,
                    closes: list[SessionClose] | None = None) -> tuple[list[AnyHTTPFlow], list[Capture]]:
    """The flows and the stdio captures of the recordings (see `decode_recordings`), in the order of the paths;
    `progress`: the stage `reading recordings` (in bytes)."""
    captures = []
    flows: list[AnyHTTPFlow] = []
    if progress is not None:
        progress.start("reading recordings", sum(map(file_size, flow_paths)), "bytes")
    read_bytes = 0
    for path in flow_paths:
        capture = read_capture_file(path)
        if capture is not None:
            captures.append(capture)
        else:
            read = read_flows(path, _offset(progress.update, read_bytes) if progress is not None else None)
            flows += read
            if closes is not None:
                closes += session_closes(read)
            if origins is not None:
                origins.update((flow.id, path) for flow in read)
        read_bytes += file_size(path)
        if progress is not None:
            progress.update(read_bytes)
    if progress is not None:
        messages = sum(len(capture.messages) for capture in captures)
        stdio = f" and {messages:,} stdio message(s)" if captures else ""
        progress.finish(f"read {len(flows):,} flow(s){stdio} from {len(flow_paths):,} recording(s), "
                        f"{size(read_bytes)}")
    return flows, captures


def decode_recordings(flow_paths: list[str], config: DecoderConfig | None = None,
                      origins: dict[str, str] | None = None, progress: Progress | None = None,
                      closes: list[SessionClose] | None = None,
                      endings: list[ExchangeEnded] | None = None) -> tuple[list[ObservedEvent], int]:
    """Every event of every recording, in time order, and the number of flows (`config`: the decoder's
    limits and protocol pins, as the live tap has them). A recording is a mitmproxy flow file, a HAR, or an
    `oatf tap --record` capture of a stdio session (each of its messages counts as a flow). `origins`, when
    given, receives each flow's recording (flow id → path); `progress` the stages `reading recordings` (in
    bytes) and `decoding` (in flows); `closes` the MCP sessions the agent closed (`session_closes`); `endings`
    the ends of exchanges that left requests unanswered, as the live tap reports them (`decode_flows`)."""
    flows, captures = read_recordings(flow_paths, origins, progress, closes)
    return _decoded_recordings(WireDecoder(config or engine_config({}).decoder), flows, captures, progress, endings)


def _decoded_recordings(decoder: WireDecoder, flows: list[AnyHTTPFlow], captures: list[Capture],
                        progress: Progress | None, endings: list[ExchangeEnded] | None = None,
                        unread: Unread | None = None) -> tuple[list[ObservedEvent], int]:
    """`decode_recordings` of recordings read (`unread`: see `decode_flows`)."""
    messages = sum(len(capture.messages) for capture in captures)
    if progress is not None:
        progress.start("decoding", len(flows) + messages, "flows")
    # One decoder over all flows, interleaved by recorded time: exchanges answer each other (the legacy MCP
    # transport answers POSTs on its SSE stream), so flows cannot be decoded one by one.
    events = decode_flows(decoder, flows, progress.update if progress is not None else None, endings, unread)
    decoded = len(flows)
    for capture in captures:
        events.extend(decode_capture(decoder, capture))
        decoded += len(capture.messages)
        if progress is not None:
            progress.update(decoded)
    events.sort(key=_event_order)
    if progress is not None:
        progress.finish(f"decoded {len(events):,} event(s) from {decoded:,} flow(s)")
    return events, decoded


def _offset(update: Callable[[int], None], base: int) -> Callable[[int], None]:
    """`update`, told positions in a file that starts `base` bytes into the recordings."""
    return lambda position: update(base + position)


def session_closes(flows: list[AnyHTTPFlow]) -> list[SessionClose]:
    """The MCP sessions recorded flows closed, each at the time the live addon saw it closed (the response's
    end, saved with the flow): `oatf_engine.wire.mcp.closed_session`."""
    closes = []
    for flow in flows:
        response = flow.response
        status = response.status_code if response is not None else None
        session = closed_session(flow.request.method, kept_header(flow.request.headers, SESSION_HEADER), status)
        if session is not None and response is not None:
            closes.append((session, response.timestamp_end or response.timestamp_start))
    return closes


def replay(attack_paths: list[str], flow_paths: list[str], config: EngineConfig | None = None,
           workers: int = 1, progress: Progress | None = None) -> ReplayResult:
    """Evaluate the attacks under `attack_paths` over the recordings in `flow_paths`, with the engine built as
    the live addon builds it from the same settings (`oatf_engine.engine_config`; `workers`: see `evaluate_events`;
    `progress`: each stage as it goes: loading, reading, decoding, evaluating). Raises ImportError/AttributeError
    when the configured semantic evaluator does not load.

    Over flow files, events go from the decoder to the monitor as they come (`events_in_order`,
    `oatf_engine.replay.evaluate_stream`: the stage `evaluating`, in flows), so memory is bounded by the flows
    read and the live runs, not by the events of the recording. With `workers` > 1 (forking available, and
    recordings of at least `PARALLEL_MIN_BYTES`), that many processes are forked before the recordings are read,
    and each follows its share of the episodes as the events are placed (`oatf_engine.replay_shards`). With stdio
    captures, every event is decoded first (`decode_recordings`), then evaluated (`evaluate_events`)."""
    config = config or engine_config({})
    semantic = load_semantic_evaluator(config.semantic_evaluator)
    origins: dict[str, str] = {}
    with collector_paused():
        library = load_library(attack_paths, config.lenient, progress)
        attacks = list(library.attacks)
        used = stream_workers(sum(map(file_size, flow_paths)), workers)
        with (sharded_monitors(attacks, config.monitor, semantic, used) if used > 1 else nullcontext()) as pool:
            closes: list[SessionClose] = []
            flows, captures = read_recordings(flow_paths, origins, progress, closes)
            unread = Unread()  # said by the caller
            decoder = WireDecoder(config.decoder, on_diagnostic=unread.diagnosed)
            if captures:
                endings: list[ExchangeEnded] = []
                events, flow_count = _decoded_recordings(decoder, flows, captures, progress, endings, unread)
                del flows
                reports = evaluate_events(attacks, events, config.monitor, used, semantic, progress, closes, endings,
                                          pool)
                event_count = len(events)
            else:
                if progress is not None:
                    progress.start("evaluating", len(flows), "flows")
                stream = events_in_order(decoder, flows, progress.update if progress is not None else None, unread)
                flow_count = len(flows)
                reports, event_count = evaluate_stream(attacks, stream, config.monitor, semantic, closes, pool)
                if progress is not None:
                    progress.finish(f"decoded and evaluated {event_count:,} event(s) from {flow_count:,} flow(s) in "
                                    f"{used} process{'es' if used > 1 else ''}: {len(reports):,} run(s) concluded")
    return ReplayResult(reports, list(library.problems), event_count, flow_count, used,
                        attack_ids=tuple(a.key for a in library.attacks), waived=list(library.waived),
                        attacks={a.key: a.attack for a in library.attacks}, flow_files=origins,
                        unread=unread)


def replay_flows(attack_paths: list[str], flow_paths: list[str], *, grace_period: float | None = None) -> list[dict]:
    """The per-run reports of `replay` (the attack library's tests use this)."""
    config = engine_config({} if grace_period is None else {"grace_period": f"{grace_period}s"})
    return replay(attack_paths, flow_paths, config).reports


def decode_flows(decoder: WireDecoder, flows: Iterable[AnyHTTPFlow], decoded: Callable[[int], None] | None = None,
                 endings: list[ExchangeEnded] | None = None,
                 unread: Unread | None = None) -> list[ObservedEvent]:
    """All events of recorded flows (offline replay), each timestamped as recorded, fed to `decoder` in the
    order things happened on the wire across flows: request start, request end, response start, each
    streamed chunk at its recorded arrival (`flow.metadata["wire_chunks"]`, written by `MitmTap`; else the
    whole body as the response begins), then the end, or an abort for a flow that failed. The interleaving
    matters when one exchange answers another: the legacy MCP transport answers POSTs on its SSE stream.
    Streamed bodies are in a flow file when recorded through the tap (`-s addon/oatf_addon.py -w …`), whole
    with `store_streamed_bodies`; a stream that ended early holds the bytes forwarded (`MitmTap`).
    `flows` are mitmproxy's or `addon.flow_file`'s views of them; steps at the same time keep flow order. A flow
    inject mode altered carries what it injected on its answer, as live (`addon.inject_tags.tagged`). `decoded`,
    when given, is told how many flows are through (their last step fed) every `UPDATE_EVERY` flows; `endings`, when
    given, receives the ends of exchanges that left requests unanswered (`oatf_engine.events.ExchangeEnded`: a
    response or stream that ended without the answer, a flow that failed), as the live tap reports them; `unread`,
    when given, counts the steps that made the decoder raise (a bug: their exchanges cut off there; else a warning
    is logged)."""
    events: list[ObservedEvent] = []
    for items, _ in _decoded_windows(decoder, list(flows), decoded, unread):
        for item in items:
            if isinstance(item, ObservedEvent):
                events.append(item)
            elif endings is not None:
                endings.append(item)
    return events


def events_in_order(decoder: WireDecoder, flows: list[AnyHTTPFlow], decoded: Callable[[int], None] | None = None,
                    unread: Unread | None = None) -> Iterator[Decoded]:
    """`decode_flows` sorted by (timestamp, seq), as replay evaluates them (the ends of exchanges among them, each
    after the event it follows: `ExchangeEnded.seq`), each yielded as soon as no later step
    can give an earlier event: a step's events carry the step's own recorded time, which may be earlier than the
    time the step is fed at (`_flow_steps`), so an event waits until every flow with steps still to feed is
    known to carry no earlier time (its lowest: `_times`). Memory is then bounded by the flows in progress, not
    by the recording's size."""
    waiting: list[Decoded] = []
    for events, bound in _decoded_windows(decoder, flows, decoded, unread):
        waiting += events
        waiting.sort(key=_event_order)
        ready = bisect.bisect_right(waiting, bound, key=_timestamp)
        yield from waiting[:ready]
        del waiting[:ready]
    yield from waiting


def _event_order(item: Decoded) -> tuple[float, int, bool]:
    return item.timestamp, item.seq, isinstance(item, ExchangeEnded)



_timestamp = operator.attrgetter("timestamp")


def _times(flow: AnyHTTPFlow) -> list[float]:
    """The recorded times `_flow_steps` feeds the steps of `flow` with (each event carries one of them)."""
    request, response, error = flow.request, flow.response, flow.error
    times = [request.timestamp_start, request.timestamp_end or request.timestamp_start]
    if response is not None:
        times += [response.timestamp_start, response.timestamp_end or response.timestamp_start]
        times += [at for at, _ in flow.metadata.get("wire_chunks") or ()]
    if error is not None:
        times.append(error.timestamp)
    return times


def _decoded_windows(decoder: WireDecoder, flows: list[AnyHTTPFlow], decoded: Callable[[int], None] | None,
                     unread: Unread | None) -> Iterator[tuple[list[Decoded], float]]:
    """The events of the steps of each `_wire_windows` window (`decode_flows`), tagged, and the time no event of
    a later window can be earlier than; at the end, the steps that made the decoder raise, counted in `unread`
    (or logged)."""
    injected = {flow.id: flow.metadata[INJECTED] for flow in flows if flow.metadata.get(INJECTED)}
    steps_decoder = StepDecoder(decoder)  # a step the decoder raises at ends its exchange, as live
    through = 0
    for steps, bound in _wire_windows(flows):
        events: list[Decoded] = []
        for _, _, step in steps:
            if decoded is not None and step.call in FINAL_CALLS:  # a flow's last step, and only its last
                through += 1
                if through % UPDATE_EVERY == 0:
                    decoded(through)
            events += steps_decoder.feed(step)  # one that raises is counted in `failures` (said below), cut off
        if injected:
            events = [tagged(event, injected[event.flow_id])
                      if isinstance(event, ObservedEvent) and event.flow_id in injected else event for event in events]
        yield events, bound
    if decoded is not None:
        decoded(through)
    if unread is not None:
        unread.failures += steps_decoder.failures
    elif steps_decoder.failures:
        log.warning("oatf replay: %d step(s) made the wire decoder raise (a bug): their exchanges were cut off there, "
                    "as the live proxy cuts them off", steps_decoder.failures)


_WINDOW = 512
"""How many flows (by request start) `_wire_windows` makes the steps of at a time."""
_Placed = tuple[float, int, WireStep]
"""A step (`_Step`) with the position of its flow."""
_step_order = operator.itemgetter(0, 1)


def _wire_steps(flows: list[AnyHTTPFlow]) -> list[_Placed]:
    """Every step of `flows` (with its flow's position) in wire order: by time, then flow order, then a flow's own
    order (the sort is stable)."""
    steps = [(at, n, step) for n, flow in enumerate(flows) for at, step in _flow_steps(flow)]
    steps.sort(key=_step_time)
    return steps


def _wire_windows(flows: list[AnyHTTPFlow]) -> Iterator[tuple[list[_Placed], float]]:
    """`_wire_steps` in windows, each with the lowest time any event of a later window can carry: the flows are
    taken `_WINDOW` at a time by request start, the earliest of their steps' times, so a step earlier than the
    next window's first start can come from no later flow and is fed in this window (the others wait for the
    next one). Only the steps of the flows in progress are held. Times that do not compare (NaN) are sorted
    whole, as a list would be."""
    times = [_times(flow) for flow in flows]
    if any(total != total for total in map(sum, times)):  # a NaN (or both infinities: sorted whole too)
        yield _wire_steps(flows), math.inf
        return
    order = sorted(range(len(flows)), key=lambda n: flows[n].request.timestamp_start)
    lows = [min(flow_times) for flow_times in times]
    later = [*(lows[n] for n in order), math.inf]  # later[k]: the lowest time of the k-th flow to start and after
    for k in range(len(order) - 1, -1, -1):
        later[k] = min(later[k], later[k + 1])
    del times
    pending: list[_Placed] = []
    for first in range(0, len(order), _WINDOW):
        window = order[first:first + _WINDOW]
        pending += [(at, n, step) for n in window for at, step in _flow_steps(flows[n])]
        pending.sort(key=_step_order)
        following = first + len(window)
        start = flows[order[following]].request.timestamp_start if following < len(order) else math.inf
        ready = bisect.bisect_left(pending, start, key=_step_time)
        steps, pending = pending[:ready], pending[ready:]
        yield steps, min(later[following], min((lows[n] for _, n, _ in pending), default=math.inf))


_step_time = operator.itemgetter(0)


def decode_flow(decoder: WireDecoder, flow: AnyHTTPFlow) -> list[ObservedEvent]:
    """All events of one recorded flow (`decode_flows` of that flow alone)."""
    return decode_flows(decoder, [flow])


_Step = tuple[float, WireStep]
"""When a step is fed (its own time, or a later one: `_flow_steps`), and the step."""


def _flow_steps(flow: AnyHTTPFlow) -> list[_Step]:
    """The steps of one recorded flow, in wire order, as the live tap hands them to the monitor process
    (`addon.mitm_tap`: a buffered body with its end, a stream's chunks as they came), so a recording decodes as
    its traffic did live; the times they are fed at made non-decreasing (each step keeps its recorded time)."""
    request, response, fid = flow.request, flow.response, flow.id
    start, end = request.timestamp_start, request.timestamp_end or request.timestamp_start
    if response is not None:  # a request ends before its answer begins (a HAR ends it with the whole entry)
        end = min(end, max(start, response.timestamp_start))
    steps: list[_Step] = [
        (start, WireStep("request_headers", fid, start, (request.method, request.url, request.headers,
                                                         client_address(flow)))),
        (end, WireStep("request_end", fid, end, (request.raw_content,) if request.raw_content else ())),
    ]
    if response is not None:
        began = response.timestamp_start
        steps.append((began, WireStep("response_headers", fid, began, (response.status_code, response.headers))))
        body, offset = response.raw_content or b"", 0
        chunks = flow.metadata.get("wire_chunks")
        forwarded = flow.metadata.get(FORWARDED)  # more went on than the flow kept: `response_unrecorded`
        unrecorded = type(forwarded) is int and forwarded > len(body)
        for at, size in chunks or ():
            steps.append((at, WireStep("response_data", fid, at, (body[offset:offset + size],))))
            offset += size
            if unrecorded and offset > len(body):  # this chunk's bytes were kept in part: no more from here
                steps.append((at, WireStep("response_unrecorded", fid, at)))
                unrecorded = False
                break
        finished = response.timestamp_end or max(step[0] for step in steps)
        rest = body[offset:]
        if rest and chunks is None and is_streamed(response.headers):
            # A stream recorded without chunk times (not through the tap) is fed as the response begins: its
            # messages are sent from then on, and replies to them (POSTed while the stream is open) must come
            # after them. The last event of a POST's stream is fed at the response's end: it is what ends the
            # exchange's work (an AG-UI RUN_FINISHED, an A2A stream's final status), sent no earlier than the
            # others and no later than the stream closed, so the window of an AG-UI run (or A2A task) is its
            # flow's own span (README "Recordings without chunk times"). A GET's stream (the legacy MCP
            # transport's) carries answers to other flows' POSTs, which keep their place.
            media = kept_header(response.headers, "content-type") or ""
            cut = _last_event_start(rest, media) if request.method == "POST" else len(rest)
            if rest[:cut]:
                steps.append((began, WireStep("response_data", fid, began, (rest[:cut],))))
            rest = rest[cut:]
        if unrecorded:  # kept in part past the chunks whose times were noted: the rest, then no more
            if rest:
                steps.append((finished, WireStep("response_data", fid, finished, (rest,))))
            steps.append((finished, WireStep("response_unrecorded", fid, finished)))
            rest = b""
        if flow.error is None:  # a buffered body (or a stream's last event) goes with the end, as live
            steps.append((finished, WireStep("response_end", fid, finished, (rest,) if rest else ())))
        elif rest:
            steps.append((finished, WireStep("response_data", fid, finished, (rest,))))
    if response is None or flow.error is not None:
        failed = flow.error.timestamp if flow.error is not None else max(step[0] for step in steps)
        steps.append((failed, WireStep("abort", fid, failed)))
    latest = start
    for n, (at, step) in enumerate(steps):
        latest = max(latest, at)
        if at != latest:
            steps[n] = (latest, step)
    return steps


def _last_event_start(stream: bytes, content_type: str) -> int:
    """Where the last event of a recorded stream begins: after the last blank line of a server-sent event
    stream, after the last line break of a line-delimited one (0: a single event)."""
    body = stream.rstrip(b"\r\n")
    separators = (b"\n\n", b"\r\n\r\n", b"\r\r") if "event-stream" in content_type.lower() else (b"\n",)
    return max((body.rfind(sep) + len(sep) for sep in separators if sep in body), default=0)


__all__ = ["ReplayError", "decode_flow", "decode_flows", "decode_recordings", "events_in_order", "read_capture_file",
           "read_flows", "read_recordings",
           "replay", "replay_flows", "session_closes"]
