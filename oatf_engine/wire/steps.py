"""The exchange API's calls (`WireDecoder`'s `request_headers` … `abort`) as data: what the live proxy hands its
monitor process instead of decoded events, so that decoding — JSON parsing, content decoding, building events —
runs beside the monitor, not on mitmproxy's event loop (issue 15). Sans-I/O.

A `WireStep` is one call: which, the exchange (flow) id, its time, and its other arguments as plain values — a
request's method, URL, raw header fields (`(name, value)` byte pairs, as mitmproxy keeps them) and client, a
response's status and raw header fields, or a chunk of body bytes. Pickled cheaply to the monitor process and
journaled as they are taken in (`encode_step`: a JSON object, bytes in base64, header fields in Latin-1, which maps
each byte to one character): the journal holds the monitor process's inputs, and a recovery decodes them as the
monitor process did (`decoded`), so live and recovered runs see the same events.

**Priming.** A decoder is stateful per exchange: a new monitor process (the old one died or stalled) or a
recovery that reads only the journal after a cut has not seen the steps of the exchanges still under way. The
proxy keeps each open exchange's steps already handed over (`OpenSteps`) and gives them first, as a `Prime`:
fed to a decoder that does not know those exchanges, their events dropped (the lost process judged them), so
the rest of each exchange decodes as it would have.
"""

from __future__ import annotations

import base64
import binascii
import traceback
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from .decoder import Decoded, WireDecoder

CALLS = ("request_headers", "request_data", "request_end", "response_headers", "response_data", "response_unrecorded",
         "response_end", "abort", "cut_off")
"""The exchange API's calls, in the order an exchange makes them (`response_end` or `abort` is its last); `cut_off
(sender)`: the proxy's tap failed on the exchange (a bug) at a step `sender` sent, and hands no more of it but its
end (`WireDecoder.cut_off`); `response_unrecorded`: a recording holds the response's first bytes only (replay's, never
the proxy's: `WireDecoder.response_unrecorded`)."""
FINAL_CALLS = frozenset({"response_end", "abort"})
_ENDS = frozenset({"request_end", "response_end"})
STEP_SEQ_BASE = 1 << 44
"""The `seq` of the events decoded from handed-over steps count from here (the monitor process's decoder, and a
recovery's): above every number the proxy's own decoder gives, below the shared monitor's feed
(`oatf_engine.feed.REMOTE_SEQ_BASE`)."""


class WireStep(NamedTuple):
    """One call of the exchange API: `call` (one of `CALLS`), its exchange, its time, and its other arguments in
    the call's order: `(method, url, header fields, client)`, `(status, header fields)`, `(data,)` or `()`. An end
    (`request_end`, `response_end`) may carry `(data,)`: a buffered body, handed with its end in one step (they come
    together, at one time), decoded as its data call and then the end."""

    call: str
    flow_id: str
    timestamp: float
    args: tuple[Any, ...] = ()


class Prime(NamedTuple):
    """Steps of exchanges under way already judged elsewhere: fed to a decoder that has not seen them, their
    events dropped (see the module docstring)."""

    steps: tuple[WireStep, ...]


def feed(decoder: WireDecoder, step: WireStep) -> Sequence[Decoded]:
    """What `decoder` decodes from `step`: the call made, with the step's arguments (an end that carries its side's
    last bytes: their `request_data` or `response_data` first)."""
    call, flow_id, timestamp, args = step
    if args and call in _ENDS:
        data = decoder.request_data if call == "request_end" else decoder.response_data
        return [*data(flow_id, args[0], timestamp), *getattr(decoder, call)(flow_id, timestamp)]
    decoded: Sequence[Decoded] = getattr(decoder, call)(flow_id, *args, timestamp)
    return decoded


class StepDecoder:
    """A decoder fed steps, as the proxy's tap feeds its own (`addon.mitm_tap`): a step that makes the decoder
    raise (a bug) stops the decoding of its exchange — the step gives the decoder's mark of an exchange cut off
    there (`WireDecoder.cut_off`: the runs of its session read `inconclusive`, never `resisted` for want of what
    came after), the exchange's later steps are dropped, and its last step is fed as an `abort` (its unanswered
    requests are reported as they would be). `failures`: how many steps raised; `raised`: the traceback of the
    latest, for the caller to report (and clear)."""

    def __init__(self, decoder: WireDecoder) -> None:
        self.decoder = decoder
        self.failures = 0
        self.raised: str | None = None
        self._failed: set[str] = set()

    def feed(self, step: WireStep) -> Sequence[Decoded]:
        if step.flow_id in self._failed:
            if step.call not in FINAL_CALLS:
                return ()
            self._failed.discard(step.flow_id)
            step = step._replace(call="abort", args=())
        try:
            return feed(self.decoder, step)
        except Exception:
            self.failures += 1
            self.raised = traceback.format_exc(limit=8)
            if step.call not in FINAL_CALLS:
                self._failed.add(step.flow_id)
            return self.decoder.cut_off(step.flow_id, "client" if step.call.startswith("request") else "server",
                                        step.timestamp)

    def prime(self, steps: Iterable[WireStep]) -> None:
        """`prime` the decoder; a step that raises is dropped (the exchange is not decoded further)."""
        known: dict[str, bool] = {}
        for step in steps:
            if step.flow_id not in known:
                known[step.flow_id] = self.decoder.is_open(step.flow_id)
            if not known[step.flow_id]:
                self.feed(step)

    def decoded[T](self, items: Iterable[T | WireStep | Prime]) -> Iterator[T | Decoded]:
        """`items` with each step replaced by what it decodes to (when it raises: counted in `failures`), and each
        `Prime` fed and dropped."""
        for item in items:
            if isinstance(item, WireStep):
                yield from self.feed(item)
            elif isinstance(item, Prime):
                self.prime(item.steps)
            else:
                yield item


class OpenSteps:
    """The steps handed over of each exchange still under way, for a `Prime`: an exchange is forgotten at its last
    step (`FINAL_CALLS`); of its body chunks, at most `max_bytes` are kept (a longer stream primes from its
    headers and first chunks: the decoder reads the rest as it comes)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._steps: dict[str, list[WireStep]] = {}
        self._bytes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._steps)

    def add(self, step: WireStep) -> None:
        flow = step.flow_id
        if step.call in FINAL_CALLS:
            self._steps.pop(flow, None)
            self._bytes.pop(flow, None)
            return
        kept = self._steps.get(flow)
        if kept is None:
            if step.call != "request_headers":  # its start was not handed over here: nothing to prime from
                return
            kept = self._steps[flow] = []
            self._bytes[flow] = 0
        if step.args and step.call in ("request_data", "response_data", "request_end"):
            size = len(step.args[0])
            if self._bytes[flow] + size > self.max_bytes:
                return
            self._bytes[flow] += size
        kept.append(step)

    def prime(self) -> Prime:
        """Every open exchange's steps, exchange by exchange in the order they started."""
        return Prime(tuple(step for steps in self._steps.values() for step in steps))


# --- the journal's encoding ------------------------------------------------------------------------------------

def encode_step(step: WireStep) -> dict[str, Any]:
    """`{"step": [call, flow, time, argument, ...]}`: bytes in base64, header fields as `[name, value]` Latin-1
    strings (the bytes as they were)."""
    args: list[Any]
    if step.call == "request_headers":
        method, url, fields, client = step.args
        args = [method, url, _encode_fields(fields), client]
    elif step.call == "response_headers":
        status, fields = step.args
        args = [status, _encode_fields(fields)]
    elif step.call == "cut_off":
        args = list(step.args)
    elif step.args:
        args = [base64.b64encode(step.args[0]).decode("ascii")]
    else:
        args = []
    return {"step": [step.call, step.flow_id, step.timestamp, *args]}


def decode_step(record: Any) -> WireStep:
    """A step from `encode_step`'s JSON; ValueError when it is not one (every value is checked: a damaged journal
    record never reaches a decoder)."""
    fields = record.get("step") if isinstance(record, dict) else None
    if not (isinstance(fields, list) and len(fields) >= 3 and fields[0] in CALLS and isinstance(fields[1], str)
            and _is_number(fields[2])):
        raise ValueError('a step is {"step": [call, flow, time, argument, ...]}')
    call, flow, at, args = fields[0], fields[1], float(fields[2]), fields[3:]
    if call == "request_headers":
        if not (len(args) == 4 and isinstance(args[0], str) and isinstance(args[1], str)
                and isinstance(args[3], str)):
            raise ValueError("a request's step is [method, url, header fields, client]")
        return WireStep(call, flow, at, (args[0], args[1], _decode_fields(args[2]), args[3]))
    if call == "response_headers":
        if not (len(args) == 2 and isinstance(args[0], int) and not isinstance(args[0], bool)):
            raise ValueError("a response's step is [status, header fields]")
        return WireStep(call, flow, at, (args[0], _decode_fields(args[1])))
    if call == "cut_off":
        if args not in (["client"], ["server"]):
            raise ValueError("a cut_off step is [sender]: client or server")
        return WireStep(call, flow, at, (args[0],))
    if call in ("request_data", "response_data") or (call in _ENDS and args):
        if not (len(args) == 1 and isinstance(args[0], str)):
            raise ValueError("a data step (or an end with its body) is [base64 bytes]")
        try:
            return WireStep(call, flow, at, (base64.b64decode(args[0], validate=True),))
        except (binascii.Error, ValueError):
            raise ValueError("a data step's bytes are not base64") from None
    if args:
        raise ValueError(f"a {call} step has no arguments")
    return WireStep(call, flow, at)


def _encode_fields(fields: Iterable[tuple[bytes, bytes]]) -> list[list[str]]:
    return [[name.decode("latin-1"), value.decode("latin-1")] for name, value in fields]


def _decode_fields(encoded: Any) -> tuple[tuple[bytes, bytes], ...]:
    if not (isinstance(encoded, list) and all(isinstance(field, list) and len(field) == 2
                                              and all(isinstance(part, str) for part in field) for field in encoded)):
        raise ValueError("header fields are [[name, value], ...]")
    try:
        return tuple((name.encode("latin-1"), value.encode("latin-1")) for name, value in encoded)
    except UnicodeEncodeError:
        raise ValueError("a header field holds a character that is not a byte") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = ["CALLS", "FINAL_CALLS", "STEP_SEQ_BASE", "OpenSteps", "Prime", "StepDecoder", "WireStep", "decode_step",
           "encode_step", "feed"]
