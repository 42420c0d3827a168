"""Recorded traffic read for offline replay (`oatf evaluate`): mitmproxy flow files and HAR files (read with
mitmproxy's own formats, `addon.flow_file`) and `oatf tap --record` stdio captures, decoded into the engine's
events with their recorded timestamps as the clock, then evaluated by `oatf_engine.replay` exactly as the live
addon evaluates them.

This is the offline front door's reading side; it lives with the mitmproxy-facing code because mitmproxy's
flow formats are read through mitmproxy. `decode_flows` feeds recorded flows through a decoder in wire order;
`addon.mitm_tap.MitmTap` records each streamed response chunk's arrival in `flow.metadata["wire_chunks"]` for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mitmproxy.exceptions import FlowReadException

from addon.flow_file import AnyHTTPFlow, client_address, read_flow_file
from addon.inject_tags import METADATA_KEY as INJECTED
from addon.inject_tags import tagged
from oatf_engine.engine_config import EngineConfig, engine_config
from oatf_engine.events import ExchangeEnded, ObservedEvent
from oatf_engine.monitor import load_library
from oatf_engine.progress import UPDATE_EVERY, Progress, file_size, size
from oatf_engine.replay import ReplayResult, SessionClose, collector_paused, evaluate_events, worker_count
from oatf_engine.semantic import load_semantic_evaluator
from oatf_engine.wire import DecoderConfig, WireDecoder, is_streamed, kept_header
from oatf_engine.wire.decoder import Decoded
from oatf_engine.wire.mcp import SESSION_HEADER, closed_session
from oatf_engine.wire.ndjson import Capture, decode_capture, is_capture, read_capture


class ReplayError(Exception):
    """A flow file that cannot be read."""


def read_flows(path: str, position: Callable[[int], None] | None = None) -> list[AnyHTTPFlow]:
    """The HTTP flows of a mitmproxy flow file or a HAR file, in recorded order (`addon.flow_file`; `position`:
    the bytes read so far, as it goes)."""
    try:
        with open(path, "rb") as handle:
            flows = read_flow_file(handle.read(), position)
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
            if not is_capture(handle.readline()):
                return None
            handle.seek(0)
            return read_capture(handle.read())
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReplayError(f"{path}: not an oatf tap capture: {exc}") from None


def decode_recordings(flow_paths: list[str], config: DecoderConfig | None = None,
                      origins: dict[str, str] | None = None, progress: Progress | None = None,
                      closes: list[SessionClose] | None = None,
                      endings: list[ExchangeEnded] | None = None) -> tuple[list[ObservedEvent], int]:
    """Every event of every recording, in time order, and the number of flows (`config`: the decoder's
    limits and protocol pins, as the live tap has them). A recording is a mitmproxy flow file, a HAR, or an
    `oatf tap --record` capture of a stdio session (each of its messages counts as a flow). `origins`, when
    given, receives each flow's recording (flow id → path); `progress` the stages `reading recordings` (in
    bytes) and `decoding` (in flows); `closes` the MCP sessions the agent closed (`session_closes`); `endings`
    the ends of exchanges that left requests unanswered, in the order the live tap reports them (`decode_flows`)."""
    decoder = WireDecoder(config or engine_config({}).decoder)
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
    messages = sum(len(capture.messages) for capture in captures)
    if progress is not None:
        stdio = f" and {messages:,} stdio message(s)" if captures else ""
        progress.finish(f"read {len(flows):,} flow(s){stdio} from {len(flow_paths):,} recording(s), "
                        f"{size(read_bytes)}")
        progress.start("decoding", len(flows) + messages, "flows")
    # One decoder over all flows, interleaved by recorded time: exchanges answer each other (the legacy MCP
    # transport answers POSTs on its SSE stream), so flows cannot be decoded one by one.
    events = decode_flows(decoder, flows, progress.update if progress is not None else None, endings)
    decoded = len(flows)
    for capture in captures:
        events.extend(decode_capture(decoder, capture))
        decoded += len(capture.messages)
        if progress is not None:
            progress.update(decoded)
    events.sort(key=lambda e: (e.timestamp, e.seq))
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
    when the configured semantic evaluator does not load."""
    config = config or engine_config({})
    semantic = load_semantic_evaluator(config.semantic_evaluator)
    origins: dict[str, str] = {}
    with collector_paused():
        library = load_library(attack_paths, config.lenient, progress)
        closes: list[SessionClose] = []
        endings: list[ExchangeEnded] = []
        events, flow_count = decode_recordings(flow_paths, config.decoder, origins, progress, closes, endings)
        reports = evaluate_events(list(library.attacks), events, config.monitor, workers, semantic, progress, closes,
                                  endings)
    return ReplayResult(reports, list(library.problems), len(events), flow_count,
                        worker_count(len(events), workers), attack_ids=tuple(a.key for a in library.attacks),
                        waived=list(library.waived), attacks={a.key: a.attack for a in library.attacks},
                        flow_files=origins)


def replay_flows(attack_paths: list[str], flow_paths: list[str], *, grace_period: float | None = None) -> list[dict]:
    """The per-run reports of `replay` (the attack library's tests use this)."""
    config = engine_config({} if grace_period is None else {"grace_period": f"{grace_period}s"})
    return replay(attack_paths, flow_paths, config).reports


def decode_flows(decoder: WireDecoder, flows: Iterable[AnyHTTPFlow], decoded: Callable[[int], None] | None = None,
                 endings: list[ExchangeEnded] | None = None) -> list[ObservedEvent]:
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
    response or stream that ended without the answer, a flow that failed), as the live tap reports them."""
    steps: list[_Step] = []
    injected: dict[str, Any] = {}
    for flow in flows:
        steps += _flow_steps(decoder, flow)
        if flow.metadata.get(INJECTED):
            injected[flow.id] = flow.metadata[INJECTED]
    steps.sort(key=_step_time)  # stable
    events: list[ObservedEvent] = []
    last_steps = (decoder.response_end, decoder.abort)  # a flow's last step is one of these, and only its last
    through = 0
    for _, feed, args in steps:
        for item in feed(*args):
            if isinstance(item, ObservedEvent):
                events.append(item)
            elif endings is not None:
                endings.append(item)
        if decoded is not None and feed in last_steps:
            through += 1
            if through % UPDATE_EVERY == 0:
                decoded(through)
    if decoded is not None:
        decoded(through)
    return [tagged(event, injected[event.flow_id]) if event.flow_id in injected else event for event in events]


def decode_flow(decoder: WireDecoder, flow: AnyHTTPFlow) -> list[ObservedEvent]:
    """All events of one recorded flow (`decode_flows` of that flow alone)."""
    return decode_flows(decoder, [flow])


_Step = tuple[float, Callable[..., Sequence[Decoded]], tuple[Any, ...]]
"""When, which decoder call, and its arguments."""


def _step_time(step: _Step) -> float:
    return step[0]


def _flow_steps(decoder: WireDecoder, flow: AnyHTTPFlow) -> list[_Step]:
    """The steps of one recorded flow, in wire order, their times made non-decreasing (each call still gets
    its recorded time)."""
    request, response, fid = flow.request, flow.response, flow.id
    start, end = request.timestamp_start, request.timestamp_end or request.timestamp_start
    if response is not None:  # a request ends before its answer begins (a HAR ends it with the whole entry)
        end = min(end, max(start, response.timestamp_start))
    steps: list[_Step] = [
        (start, decoder.request_headers,
         (fid, request.method, request.url, request.headers, client_address(flow), start)),
        (end, decoder.request_data, (fid, request.raw_content or b"", end)),
        (end, decoder.request_end, (fid, end)),
    ]
    if response is not None:
        began = response.timestamp_start
        steps.append((began, decoder.response_headers, (fid, response.status_code, response.headers, began)))
        body, offset = response.raw_content or b"", 0
        chunks = flow.metadata.get("wire_chunks")
        for at, size in chunks or ():
            steps.append((at, decoder.response_data, (fid, body[offset:offset + size], at)))
            offset += size
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
                steps.append((began, decoder.response_data, (fid, rest[:cut], began)))
            if rest[cut:]:
                steps.append((finished, decoder.response_data, (fid, rest[cut:], finished)))
        elif rest:  # a buffered body is fed at the response's end, as the live tap feeds it
            steps.append((finished, decoder.response_data, (fid, rest, finished)))
        if flow.error is None:
            steps.append((finished, decoder.response_end, (fid, finished)))
    if response is None or flow.error is not None:
        failed = flow.error.timestamp if flow.error is not None else max(step[0] for step in steps)
        steps.append((failed, decoder.abort, (fid, failed)))
    latest = start
    for n, (at, feed, args) in enumerate(steps):
        latest = max(latest, at)
        if at != latest:
            steps[n] = (latest, feed, args)
    return steps


def _last_event_start(stream: bytes, content_type: str) -> int:
    """Where the last event of a recorded stream begins: after the last blank line of a server-sent event
    stream, after the last line break of a line-delimited one (0: a single event)."""
    body = stream.rstrip(b"\r\n")
    separators = (b"\n\n", b"\r\n\r\n", b"\r\r") if "event-stream" in content_type.lower() else (b"\n",)
    return max((body.rfind(sep) + len(sep) for sep in separators if sep in body), default=0)


__all__ = ["ReplayError", "decode_flow", "decode_flows", "decode_recordings", "read_capture_file", "read_flows",
           "replay", "replay_flows", "session_closes"]
