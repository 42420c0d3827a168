"""mitmdump script for the addon end-to-end tests: a remote control for what mitmdump has no prompt or view
for. Requests through the proxy to `http://oatf-control.test/…` are answered locally, never forwarded:
- `/?cmd=COMMAND` runs a mitmproxy command (e.g. `oatf.reload`, `oatf.status`, `set oatf_watch true`) and
  answers its result as text, a list one item a line (status 500 with the error if it raised);
- `/backlog` answers the OATF addon's events observed and not yet evaluated (`OatfAddon.waiting`), as text,
  without asking its monitor process (the load benchmark polls it);
- `/counts` answers, as JSON, the OATF monitor process's latest `counts` (what it holds in memory:
  `MonitorProcess.counts`, one request behind: each request asks for the next), with `waiting` (`/backlog`);
- `/marked` answers, as JSON, `{flow id: {"marked": …, "comment": …}}` for every flow marked or commented when an
  addon updated it (the `update` hook, which the OATF addon triggers when it marks and comments a flow that matched
  an indicator). Only those are kept: mitmproxy triggers `update` after every hook of every flow, and a soak's
  proxy would otherwise grow by a record per flow (tracemalloc in a soak's proxy: the largest growth there).
Any other flow is untouched."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mitmproxy import ctx, flow, http

CONTROL_HOST = "oatf-control.test"


class RemoteControl:
    def __init__(self) -> None:
        self.updated: dict[str, dict[str, str]] = {}

    def update(self, flows: Sequence[flow.Flow]) -> None:
        for updated in flows:
            if updated.marked or updated.comment:
                self.updated[updated.id] = {"marked": updated.marked, "comment": updated.comment}
            else:
                self.updated.pop(updated.id, None)

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.pretty_host != CONTROL_HOST:
            return
        if flow.request.path == "/marked":
            flow.response = http.Response.make(200, json.dumps(self.updated), {"content-type": "application/json"})
            return
        if flow.request.path == "/backlog":
            flow.response = http.Response.make(200, str(ctx.master.addons.get("oatfaddon").waiting()),
                                               {"content-type": "text/plain"})
            return
        if flow.request.path == "/counts":
            oatf = ctx.master.addons.get("oatfaddon")
            monitor = oatf.monitor
            if monitor is not None:
                monitor.ask_counts()
            counts = {**(monitor.counts if monitor is not None else {}), "waiting": oatf.waiting()}
            flow.response = http.Response.make(200, json.dumps(counts), {"content-type": "application/json"})
            return
        command = flow.request.query.get("cmd", "")
        try:
            result = ctx.master.commands.execute(command)
            text = "\n".join(result) if isinstance(result, list) else "" if result is None else str(result)
            flow.response = http.Response.make(200, text, {"content-type": "text/plain"})
        except Exception as exc:  # the test reads the failure
            flow.response = http.Response.make(500, f"{type(exc).__name__}: {exc}", {"content-type": "text/plain"})


addons = [RemoteControl()]
