"""Re-record the wire fixtures (`tests/oatf_engine/wire/fixtures/*.mitm`): every session of `sessions.py` through
mitmdump with the tap, against the real peers, one flow file per peer (streamed bodies and chunk timing included).

    .venv/bin/python -m tests.e2e.wire.record_fixtures [PEER…]   # only these peers' fixtures (default: all)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from mitmproxy import io

from testing.paths import ROOT, WIRE_FIXTURES
from testing.processes import PEER_KINDS, mitmdump, peers
from tests.oatf_engine.wire.expected import PEER

from .sessions import SESSIONS

FIXTURES = WIRE_FIXTURES


def record(target: Path = FIXTURES, kinds: tuple[str, ...] = PEER_KINDS) -> dict[str, Path]:
    """Run the sessions of the peers `kinds` through a recording proxy; write one fixture per peer; return
    them by peer."""
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        capture = workdir / "all.mitm"
        with peers(workdir, kinds) as running, mitmdump(workdir, flows=capture) as proxy:
            for name, session in SESSIONS.items():
                if PEER[name] in kinds:
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
    for kind, path in record(kinds=tuple(sys.argv[1:]) or PEER_KINDS).items():
        print(f"{kind}: {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")
