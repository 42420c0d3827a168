"""With `-w`: mitmproxy's `save` addon writes a flow when the flow ends (its `response`, `error` or
`websocket_end` hook), before the OATF monitor, in its own process, has evaluated the flow's messages — the mark
and comment of a match would never reach the file. `SaveDeferral` holds the *write* of such a flow back, never the
flow itself: the agent gets its response at once, and the flow is written once OATF is done with it, or after
`oatf_save_wait` at most.

How: the `save` addon's hooks all write through its `save_flow` method; `install` routes that method through
`write_or_defer`, which writes a flow at once unless `busy(flow id)` — events of the flow still queued or being
evaluated, marks of it scheduled and not applied, or events of it the monitor holds to place them in a session
(a keyless exchange, `oatf_engine.monitor.sessions`: placed when a later message of the agent comes, which
blocking the response would have held back, so the agent's traffic and so the sessions would have changed).
`settled` writes a deferred flow once it is no longer busy; the event loop's timer writes it when the wait is
over.

Then the verdicts: a flow that took part in runs still live (an indicator of theirs matched on it, an actor
changed phase there: `addon.flow_marks.open_runs`) is held (`addon.verdict_hold`, at most `oatf_save_hold`
flows and `oatf_save_hold_size` bytes) until each of those runs has concluded (`concluded`, after the verdict
marked the flow), then written: its comment names the attack, the indicator and the run's result, its mark the
outcome. Beyond the bounds the oldest held flow is written with what is known of it (logged once).

`flush` writes every deferred and held flow, in the order mitmproxy created them (shutdown: after the runs
concluded then have marked their flows; the `save` addon's own `done` closes the file after this addon's). Only
flows the `save` addon writes to a file wait (`-w`); a flow is written once: one handed over again while it
waits is not written apart. Everything runs on the event loop, where mitmproxy calls the hooks. The file's order
is the order of writes; `oatf evaluate` and mitmproxy's readers order flows by time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mitmproxy import flow as mitmflow
from mitmproxy import http
from mitmproxy.utils import human

from addon.flow_marks import open_runs
from addon.verdict_hold import VerdictHold

log = logging.getLogger("oatf")

HOLD_FLOWS = 1000
"""`oatf_save_hold`'s default: flows held for their runs' verdicts at most."""
HOLD_SIZE = "64m"
"""`oatf_save_hold_size`'s default: bytes (bodies and headers) of the flows held for their verdicts at most."""


class SaveDeferral:
    """Holds back the `save` addon's write of a flow OATF is not done with (see the module docstring)."""

    def __init__(self, busy: Callable[[str], bool]) -> None:
        self.busy = busy
        self.wait = 0.0
        """`oatf_save_wait` in seconds; 0: no write waits for the evaluation of its flow."""
        self.deferred: dict[str, tuple[mitmflow.Flow, asyncio.TimerHandle]] = {}
        self.hold: VerdictHold[mitmflow.Flow] = VerdictHold(HOLD_FLOWS, human.parse_size(HOLD_SIZE) or 0)
        """Flows evaluated whose runs have not all concluded (`max_flows`, `max_bytes`: `oatf_save_hold`,
        `oatf_save_hold_size`)."""
        self._write: Callable[[mitmflow.Flow], None] | None = None
        self._save_addon: Any = None
        self._timeouts_logged = False
        self._evictions_logged = False

    def install(self, save: Any) -> None:
        """Route the `save` addon's writes through `write_or_defer` (once)."""
        if self._write is None and save is not None:
            self._save_addon = save
            self._write = save.save_flow
            save.save_flow = self.write_or_defer

    def write_or_defer(self, flow: mitmflow.Flow) -> None:
        if flow.id in self.deferred or flow.id in self.hold:
            return  # written once, when released (as it is then: the same flow object)
        if getattr(self._save_addon, "stream", None) is None:
            self._save(flow)  # no `-w` file (the `save` addon writes nothing): nothing to wait for
        elif self.wait > 0 and self.busy(flow.id):
            timer = asyncio.get_running_loop().call_later(self.wait, self._timed_out, flow.id)
            self.deferred[flow.id] = (flow, timer)
        else:
            self._evaluated(flow)

    def settled(self, flow_id: str) -> None:
        """The flow may be done with: written if it was deferred and is no longer busy."""
        if flow_id in self.deferred and not self.busy(flow_id):
            self._release(flow_id)

    def concluded(self, run: str) -> None:
        """`run` (its key, `addon.flow_marks.run_key`) concluded, and its verdict marked its flows: those held
        for it alone are written."""
        for flow in self.hold.concluded(run):
            self._save(flow)

    def flush(self) -> None:
        """Write every deferred and held flow now, in the order mitmproxy created them."""
        flows = [self._pop(flow_id) for flow_id in list(self.deferred)] + self.hold.drain()
        for flow in sorted(flows, key=lambda f: f.timestamp_created):
            self._save(flow)

    def _timed_out(self, flow_id: str) -> None:
        if flow_id in self.deferred:
            if not self._timeouts_logged:
                self._timeouts_logged = True
                log.info("oatf: flow %s was saved before the evaluation of its messages ended (oatf_save_wait %g s;"
                         " logged once): its mark and comment are only in the UIs", flow_id, self.wait)
            self._release(flow_id)

    def _release(self, flow_id: str) -> None:
        self._evaluated(self._pop(flow_id))

    def _pop(self, flow_id: str) -> mitmflow.Flow:
        flow, timer = self.deferred.pop(flow_id)
        timer.cancel()
        return flow

    def _evaluated(self, flow: mitmflow.Flow) -> None:
        """OATF is done with the flow's messages (or the wait is over): held while runs it took part in are live,
        else written."""
        evicted = self.hold.evicted
        for written in self.hold.hold(flow.id, flow, open_runs(flow), size(flow)):
            self._save(written)
        if self.hold.evicted > evicted and not self._evictions_logged:
            self._evictions_logged = True
            log.warning("oatf: a flow was saved before the verdict of its run (oatf_save_hold %d flows, "
                        "oatf_save_hold_size %d bytes reached; logged once): the oldest flows waiting for "
                        "verdicts are written with what is known, their verdicts are only in the UIs and the "
                        "reports", self.hold.max_flows, self.hold.max_bytes)

    def _save(self, flow: mitmflow.Flow) -> None:
        if self._write is not None:
            self._write(flow)


def size(flow: mitmflow.Flow) -> int:
    """The bytes a flow holds, roughly: its bodies and headers (what a held flow keeps in memory)."""
    if not isinstance(flow, http.HTTPFlow):
        return 0
    return sum(len(message.raw_content or b"") + len(bytes(message.headers))
               for message in (flow.request, flow.response) if message is not None)
