"""Re-record the wire fixtures (`tests/wire/fixtures/*.mitm`): every session of `sessions.py` through mitmdump
with the tap, against the real peers, one flow file per peer (streamed bodies and chunk timing included).

    .venv/bin/python -m tests.e2e_wire.record_fixtures
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from mitmproxy import io

from .harness import ROOT, mitmdump, peers
from .sessions import SESSIONS

FIXTURES = ROOT / "tests" / "wire" / "fixtures"


def record(target: Path = FIXTURES) -> dict[str, Path]:
    """Run every session through a recording proxy; write one fixture per peer; return them by peer."""
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        capture = workdir / "all.mitm"
        with peers(workdir) as running, mitmdump(workdir, flows=capture) as proxy:
            for session in SESSIONS.values():
                asyncio.run(session(running, proxy.url))
            by_port = {port: kind for kind, port in running.ports.items()}
        with open(capture, "rb") as handle:
            flows = list(io.FlowReader(handle).stream())
    target.mkdir(parents=True, exist_ok=True)
    written = {}
    for kind in sorted(set(by_port.values())):
        path = written[kind] = target / f"{kind}.mitm"
        with open(path, "wb") as out:
            writer = io.FlowWriter(out)
            for flow in flows:
                if by_port.get(flow.request.port) == kind:
                    writer.add(flow)
    return written


if __name__ == "__main__":
    for kind, path in record().items():
        print(f"{kind}: {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")
