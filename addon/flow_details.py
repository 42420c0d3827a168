"""What `oatf.flow` answers about a flow: the protocol messages decoded from it, and every OATF run it took part
in — attack, state or verdict (outcome, status, report file), each indicator that matched on it (path and
excerpt of the traffic) and each phase change it caused.

The messages are decoded again from the flow alone by the project's `WireDecoder` (`addon.views.decode`, as the
content views do: bounded, and a recognition that needs earlier flows, such as a generic A2A REST route, does not
happen); the runs are those the addon recorded on the flow (`addon.flow_marks`, saved with it by `-w`, so a flow
file opened later in mitmweb still answers), each live one with its state from the monitor's `oatf.status`
snapshot. One line an item, every line printable and bounded (`MAX_MESSAGES`, `CONTENT`): mitmweb's command bar
shows them as a list, the console's data viewer one a row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mitmproxy import flow as mitmflow
from mitmproxy import http

from addon import flow_marks
from addon.views import NAMES, decode
from oatf_engine.text import printable

MAX_MESSAGES = 50
"""Decoded messages listed per flow, at most."""
CONTENT = 200
"""Characters of a message's content shown, at most."""
ARROWS = {"client": "client → server", "server": "server → client"}


def flow_lines(flow: mitmflow.Flow, live: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """The lines `oatf.flow` answers for `flow`; `live`: run id → the monitor's snapshot of each live run
    (`Monitor.status`), None when the monitor did not answer."""
    if not isinstance(flow, http.HTTPFlow):
        return [f"flow {flow.id} · {type(flow).__name__}: not HTTP, never decoded by OATF"]
    request, response = flow.request, flow.response
    answer = f"{response.status_code}" if response is not None else "no response" if flow.error is None \
        else f"error: {flow.error.msg}"
    events, _ = decode(flow)
    protocol = NAMES[events[0].protocol] if events else "not an agent protocol"
    lines = [printable(f"flow {flow.id} · {request.method} {request.pretty_url} · {answer} · {protocol}", 1000)]
    lines.append(f"{len(events)} message(s) decoded" + (":" if events else ""))
    for event in events[:MAX_MESSAGES]:
        ident = f" · id {json.dumps(event.jsonrpc_id)}" if event.jsonrpc_id is not None else ""
        error = " · error" if event.is_error else ""
        content = json.dumps(event.content, ensure_ascii=False, separators=(",", ":"), default=str)
        lines.append(printable(f"  {event.direction} {event.event_type}{ident}{error} ({ARROWS[event.sender]}): "
                               f"{content}", CONTENT + 120))
    if len(events) > MAX_MESSAGES:
        lines.append(f"  … {len(events) - MAX_MESSAGES} more message(s) (the content views show all)")
    lines += _runs(flow, live)
    return lines


def _runs(flow: http.HTTPFlow, live: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    runs = flow_marks.runs(flow)
    if not runs:
        return ["no OATF run took part in this flow (so far)"]
    lines = [f"{len(runs)} OATF run(s) took part in this flow:"]
    matches = flow_marks.matches(flow)
    for name, run in runs.items():
        lines.append(printable(f"  run {name} · attack {run.get('attack')} · {_verdict(name, run, live)}", 1000))
        for match in (m for m in matches if m.get("run") == name):
            where = f" at {match['path']}" if match.get("path") else ""
            excerpt = f': "{match["excerpt"]}"' if match.get("excerpt") is not None \
                else f": {match.get('evidence', '')}"  # both printable already (`flow_marks.record_match`)
            lines.append(printable(f"    indicator {match.get('indicator')} matched{where}{excerpt}", 1000))
        if run.get("delivered"):
            lines.append("    an actor's payload reached the agent in this flow")
        for phase in run.get("phases") or ():
            lines.append(printable(f"    phase change {phase}", 1000))
    return lines


def _verdict(name: str, run: Mapping[str, Any], live: Mapping[str, Mapping[str, Any]] | None) -> str:
    """The run's outcome and report when concluded, else its live state."""
    if run.get("outcome"):
        report = f" · report {run['report']}" if run.get("report") else " · report not written"
        return f"{run['outcome']} ({run.get('status')}){report}"
    if live is None:
        return "live (the monitor did not answer)"
    snapshot = live.get(name)
    if snapshot is None:
        return "not live, and no verdict recorded on this flow yet (see oatf.verdicts or the reports)"
    delivered = "delivered" if snapshot.get("delivered") else "not delivered yet"
    return f"{snapshot.get('state')}, {snapshot.get('messages')} message(s), {delivered}, verdict pending"
