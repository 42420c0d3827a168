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
over; `flush` writes every deferred flow (shutdown: the `save` addon's own `done` closes the file after this
addon's). Everything runs on the event loop, where mitmproxy calls the hooks. The file's order is the order of
writes; `oatf evaluate` and mitmproxy's readers order flows by time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mitmproxy import flow as mitmflow

log = logging.getLogger("oatf")


class SaveDeferral:
    """Holds back the `save` addon's write of a flow OATF is not done with (see the module docstring)."""

    def __init__(self, busy: Callable[[str], bool]) -> None:
        self.busy = busy
        self.wait = 0.0
        """`oatf_save_wait` in seconds; 0: every flow is written at once."""
        self.deferred: dict[str, tuple[mitmflow.Flow, asyncio.TimerHandle]] = {}
        self._write: Callable[[mitmflow.Flow], None] | None = None
        self._timeouts_logged = False

    def install(self, save: Any) -> None:
        """Route the `save` addon's writes through `write_or_defer` (once)."""
        if self._write is None and save is not None:
            self._write = save.save_flow
            save.save_flow = self.write_or_defer

    def write_or_defer(self, flow: mitmflow.Flow) -> None:
        if flow.id in self.deferred:
            return  # written once, when released (as it is then: the same flow object)
        if self.wait > 0 and self.busy(flow.id):
            timer = asyncio.get_running_loop().call_later(self.wait, self._timed_out, flow.id)
            self.deferred[flow.id] = (flow, timer)
            return
        self._save(flow)

    def settled(self, flow_id: str) -> None:
        """The flow may be done with: written if it was deferred and is no longer busy."""
        if flow_id in self.deferred and not self.busy(flow_id):
            self._release(flow_id)

    def flush(self) -> None:
        """Write every deferred flow now."""
        for flow_id in list(self.deferred):
            self._release(flow_id)

    def _timed_out(self, flow_id: str) -> None:
        if flow_id in self.deferred:
            if not self._timeouts_logged:
                self._timeouts_logged = True
                log.info("oatf: flow %s was saved before the evaluation of its messages ended (oatf_save_wait %g s;"
                         " logged once): its mark and comment are only in the UIs", flow_id, self.wait)
            self._release(flow_id)

    def _release(self, flow_id: str) -> None:
        flow, timer = self.deferred.pop(flow_id)
        timer.cancel()
        self._save(flow)

    def _save(self, flow: mitmflow.Flow) -> None:
        if self._write is not None:
            self._write(flow)
