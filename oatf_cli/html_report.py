"""`oatf evaluate --html FILE`: one static, self-contained page a person reads instead of the JSON reports.

- the overview: the count of each outcome, and of attacks;
- one card per attack, the attacks whose runs fared worst first (`OUTCOMES` order): its name, severity,
  description and outcome counts; then each run that reached the agent (the attack over one session or
  episode), open when exploited or partial, with its verdict (outcome, tier, status, times), its delivery
  (what reached the agent: actor, phase, flow, event, payload, excerpt), its evidence (each matched indicator:
  description, event, flow, endpoint, path, excerpt, the readable verdict, the false positives the document
  names), its phase timeline, and the flows it cites; the runs never delivered are only listed by session.

No script, no stylesheet or font fetched (a Content-Security-Policy forbids any load): `<details>` folds the
runs. Every value from the traffic or the documents is HTML-escaped and shown printable (`printable`).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import oatf
from oatf_engine.reports import OUTCOMES, outcome_counts, outcome_summary
from oatf_engine.text import printable

Report = dict[str, Any]

NOT_DELIVERED_LISTED = 200
"""Most sessions listed under an attack's runs that were never delivered (the rest counted)."""

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222;line-height:1.4}
h1{margin-bottom:.2em}.overview{display:flex;flex-wrap:wrap;gap:.5em;margin:1em 0}
.chip{border-radius:1em;padding:.2em .8em;border:1px solid #bbb}.attack{border:1px solid #ccc;border-radius:.5em;
margin:1.2em 0;padding:0 1em 1em}.attack>h2{font-size:1.15em;margin:.8em 0 .3em}.meta{color:#555;font-size:.9em}
details.run{border-top:1px solid #eee;padding:.4em 0}details.run>summary{cursor:pointer;font-weight:600}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;margin:.5em 0}dt{color:#555}dd{margin:0}
code,.excerpt{font-family:ui-monospace,monospace;font-size:.9em;word-break:break-all}.excerpt{background:#f6f6f6;
padding:.1em .3em;white-space:pre-wrap}ol.timeline{margin:.3em 0}h3{font-size:1em;margin:.8em 0 .2em}
.exploited{background:#fbe3e3}.partial{background:#fdf0dc}.resisted{background:#e5f5e5}
.inconclusive{background:#eef}.not_delivered{background:#f3f3f3}.error{background:#f0e0f5}"""

_LABEL = {"not_delivered": "not delivered"}


def _e(value: object, limit: int = 2000) -> str:
    """A value from the reports, printable and HTML-escaped."""
    return html.escape(printable(value, limit))


def _t(value: object) -> str | None:
    """`_e` of a value that may be missing (None when it is)."""
    return None if value is None or value == "" else _e(value)


def _label(outcome: str) -> str:
    return _LABEL.get(outcome, outcome)


def _badge(outcome: str) -> str:
    return f'<span class="chip {_e(outcome)}">{_e(_label(outcome))}</span>'


def _rank(outcome: str) -> int:
    return OUTCOMES.index(outcome) if outcome in OUTCOMES else len(OUTCOMES)


def _key(report: Report) -> str:
    return str(report["attack"]["id"] or report["attack"]["file"])


def _fields(pairs: Iterable[tuple[str, object]]) -> str:
    """A definition list of the pairs whose value is set."""
    rows = "".join(f"<dt>{_e(name)}</dt><dd>{value}</dd>" for name, value in pairs if value not in (None, ""))
    return f"<dl>{rows}</dl>" if rows else ""


def _code(value: object) -> str | None:
    return f"<code>{_e(value)}</code>" if value not in (None, "") else None


def _excerpt(value: object) -> str | None:
    return f'<span class="excerpt">{_e(value, 600)}</span>' if value not in (None, "") else None


def _verdict(report: Report) -> str:
    summary, verdict = report["execution_summary"], report["verdict"]
    counts = verdict.get("evaluation_summary") or {}
    return _fields([
        ("outcome", _badge(report["outcome"])), ("OATF result", _code(verdict.get("result"))),
        ("max tier", _code(verdict.get("max_tier"))), ("status", _code(summary.get("status"))),
        ("indicators", _e(", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in counts)) if counts else None),
        ("started", _t(summary.get("started_at"))), ("ended", _t(summary.get("ended_at"))),
        ("messages seen", _t(summary.get("messages_seen"))),
    ])


def _delivery(report: Report) -> str:
    summary = report["execution_summary"]
    items = "".join(
        "<li>" + _fields([("actor", _t(d.get("actor"))), ("phase", _t(d.get("phase"))), ("at", _t(d.get("at"))),
                          ("flow", _code(d.get("flow"))), ("event", _code(d.get("event"))),
                          ("payload", _code(d.get("payload"))), ("excerpt", _excerpt(d.get("excerpt")))]) + "</li>"
        for d in summary.get("delivery_evidence") or ())
    said = ("yes: the payload reached the agent" if summary.get("delivered")
            else "no: no message the agent received carried the payload")
    return f"<h3>Delivery</h3><p>{_e(said)}</p>" + (f"<ul>{items}</ul>" if items else "")


def _evidence(report: Report) -> str:
    structured = report.get("evidence") or []
    readable = {v["indicator_id"]: v.get("evidence") for v in report["verdict"].get("indicator_verdicts") or ()
                if v.get("result") in ("matched", "error")}
    if not structured and not readable:
        return "<h3>Evidence</h3><p>no indicator matched</p>"
    items = []
    for item in structured:
        false_positives = "; ".join(printable(f, 300) for f in item.get("false_positives") or ())
        items.append("<li>" + _fields([
            ("indicator", _code(item.get("indicator_id"))), ("what it means", _t(item.get("indicator_description"))),
            ("event", _t(f"{item.get('event') or ''} {item.get('direction') or ''}".strip())),
            ("at", _t(item.get("at"))), ("flow", _code(item.get("flow"))), ("endpoint", _code(item.get("endpoint"))),
            ("path", _code(item.get("path"))), ("excerpt", _excerpt(item.get("excerpt"))),
            ("verdict", _excerpt(readable.pop(item.get("indicator_id"), None))),
            ("may also be", html.escape(false_positives) or None),
        ]) + "</li>")
    items += [f"<li>{_fields([('indicator', _code(key)), ('verdict', _excerpt(text))])}</li>"
              for key, text in readable.items()]
    return f"<h3>Evidence</h3><ul>{''.join(items)}</ul>"


def _timeline(report: Report) -> str:
    summary = report["execution_summary"]
    changes = "".join(
        f"<li>{_e(c.get('at') or '')} · {_e(c.get('actor') or '')}: {_e(c.get('from') or '')} → {_e(c.get('to') or '')}"
        + (f" ({_e(c.get('reason') or '')})" if c.get("reason") else "")
        + (f" · flow {_code(c.get('flow'))}" if c.get("flow") else "") + "</li>"
        for c in summary.get("phase_changes") or ())
    reached = "".join(
        f"<li>{_e(a.get('name') or '')} ({_e(a.get('mode') or '')}): "
        f"{_e(' → '.join(map(str, a.get('phases_reached') or ())) or '-')}"
        + (" · terminal phase reached" if a.get("terminal_reached") else "") + "</li>"
        for a in summary.get("actors") or ())
    return ("<h3>Phase timeline</h3>"
            + (f'<ol class="timeline">{changes}</ol>' if changes else "<p>no phase change</p>")
            + (f"<ul>{reached}</ul>" if reached else ""))


def _flows(report: Report) -> str:
    cited = report["execution_summary"].get("flows_cited") or []
    if not cited:
        return "<h3>Flows cited</h3><p>none</p>"
    return "<h3>Flows cited</h3><ul>" + "".join(f"<li>{_code(flow)}</li>" for flow in cited) + "</ul>"


def _run(report: Report) -> str:
    summary = report["execution_summary"]
    opened = " open" if report["outcome"] in ("exploited", "partial", "error") else ""
    return (f'<details class="run"{opened}><summary>{_badge(report["outcome"])} session '
            f"<code>{_e(summary.get('session'), 300)}</code></summary>"
            f"{_verdict(report)}{_delivery(report)}{_evidence(report)}{_timeline(report)}{_flows(report)}</details>")


def _card(key: str, runs: Sequence[Report], attack: oatf.Attack | None) -> str:
    first = runs[0]["attack"]
    severity = (first.get("severity") or {}).get("level")
    counts = outcome_counts(runs)
    shown = sorted((r for r in runs if r["outcome"] != "not_delivered"), key=lambda r: _rank(r["outcome"]))
    undelivered = [r["execution_summary"].get("session") for r in runs if r["outcome"] == "not_delivered"]
    description = " ".join((attack.description or "").split()) if attack is not None else ""
    parts = [
        f'<section class="attack" id="attack-{_e(key, 200)}"><h2>{_e(key, 200)} · {_e(first.get("name") or "")}</h2>',
        f'<p class="meta">severity {_e(severity or "not given")} · {_e(first.get("file") or "")} · '
        + ", ".join(f"{counts[o]} {_e(_label(o))}" for o in OUTCOMES if counts.get(o)) + "</p>",
        f"<p>{_e(description)}</p>" if description else "",
        *(_run(report) for report in shown),
    ]
    if undelivered:
        listed = "".join(f"<li><code>{_e(s, 300)}</code></li>" for s in undelivered[:NOT_DELIVERED_LISTED])
        more = len(undelivered) - NOT_DELIVERED_LISTED
        parts.append(f'<details class="run"><summary>{_badge("not_delivered")} {len(undelivered)} run(s): the '
                     f"attack never reached the agent (nothing was tested)</summary><ul>{listed}</ul>"
                     + (f"<p>and {more} more</p>" if more > 0 else "") + "</details>")
    return "".join(parts) + "</section>"


def to_html(reports: Sequence[Report], attacks: Mapping[str, oatf.Attack] | None = None,
            title: str = "oatf evaluate report") -> str:
    """The page (see the module docstring); `attacks` (by key) give the cards their descriptions."""
    by_attack: dict[str, list[Report]] = {}
    for report in reports:
        by_attack.setdefault(_key(report), []).append(report)
    order = sorted(by_attack, key=lambda k: (min(_rank(r["outcome"]) for r in by_attack[k]), k))
    counts = outcome_counts(reports)
    chips = "".join(f'<span class="chip {o}">{counts.get(o, 0)} {_e(_label(o))}</span>' for o in OUTCOMES)
    cards = "\n".join(_card(key, by_attack[key], (attacks or {}).get(key)) for key in order)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_STYLE}</style></head>
<body><h1>{_e(title)}</h1>
<p class="summary">{_e(outcome_summary(reports))} · {len(by_attack)} attack(s)</p>
<div class="overview">{chips}</div>
{cards or "<p>no run: no recorded traffic matched a loaded attack</p>"}
</body></html>
"""
