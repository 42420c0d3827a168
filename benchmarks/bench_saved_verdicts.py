"""Cost of holding `-w` writes for their runs' verdicts (`addon.deferred_save`, `addon.verdict_hold`): the time
the event loop spends per saved flow, and the memory the held flows keep, against writing each flow at once.

    .venv/bin/python benchmarks/bench_saved_verdicts.py [--flows 20000] [--runs-per-flow 2] [--live 200]
        [--body 2000]

Both variants write the same `--flows` flows (a JSON-RPC request and response of `--body` bytes each, every flow
in `--runs-per-flow` runs) with mitmproxy's real `save` addon to a file in a temporary directory:
- baseline: `save_flow` straight to the file (what mitmproxy does without the addon);
- held: through `SaveDeferral` (`oatf_save_wait` 0, so only the verdict hold acts), each flow recorded in its
  runs as a match does, and each run concluded (`SaveDeferral.concluded`) once `--live` later flows have been
  handed over, so about `--live` flows are held at any time (within the default bounds, 1,000 flows, 64 MB).
Flows are made one at a time and recorded in their runs as a match does, in both variants. Printed: seconds
per 1,000 flows of each (measured without tracemalloc) and their ratio (held/baseline), the largest number of
flows held, and tracemalloc's peak of the held variant minus the baseline's (what the held flows keep alive
while they wait: the flows themselves, which mitmdump drops once written)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mitmproxy import http  # noqa: E402
from mitmproxy.addons.save import Save  # noqa: E402
from mitmproxy.test import taddons, tflow  # noqa: E402

from addon import flow_marks  # noqa: E402
from addon.deferred_save import SaveDeferral  # noqa: E402
from oatf_engine.monitor import IndicatorMatched  # noqa: E402


def make_flow(n: int, body: int) -> http.HTTPFlow:
    flow = tflow.tflow(resp=True)
    flow.request.content = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"note":"' % n \
        + b"x" * body + b'"}}'
    flow.response.content = b'{"jsonrpc":"2.0","id":%d,"result":{"content":"' % n + b"y" * body + b'"}}'  # type: ignore[union-attr]
    return flow


def flows_of(count: int, runs_per_flow: int, body: int) -> Iterator[http.HTTPFlow]:
    """The flows, made one at a time (mitmdump keeps none once written), each recorded in its runs as their
    matches record it (`addon.flow_marks`)."""
    for n in range(count):
        flow = make_flow(n, body)
        for r in range(runs_per_flow):
            flow_marks.record_match(flow, IndicatorMatched(f"BENCH@{n}-{r}", "BENCH", "BENCH-01", flow.id, "matched"))
        yield flow


def measure(variant: Callable[[Save, Iterator[http.HTTPFlow]], int], flows: Callable[[], Iterator[http.HTTPFlow]],
            path: Path, traced: bool) -> tuple[float, int, int]:
    """(seconds, tracemalloc peak over the start when `traced`, largest number of flows held) of writing
    `flows()`."""
    save = Save()
    with taddons.context(save) as context:
        context.configure(save, save_stream_file=str(path))
        gc.collect()
        if traced:
            tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0] if traced else 0
        start = time.perf_counter()
        held = variant(save, flows())
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base if traced else 0
        if traced:
            tracemalloc.stop()
        save.done()
    return elapsed, peak, held


def baseline(save: Save, flows: Iterator[http.HTTPFlow]) -> int:
    for flow in flows:
        save.save_flow(flow)
    return 0


def held(runs_per_flow: int, live: int) -> Callable[[Save, Iterator[http.HTTPFlow]], int]:
    def variant(save: Save, flows: Iterator[http.HTTPFlow]) -> int:
        deferral = SaveDeferral(lambda _flow_id: False)
        deferral.install(save)
        most = 0

        async def proxy() -> None:
            nonlocal most
            for n, flow in enumerate(flows):
                save.save_flow(flow)
                most = max(most, len(deferral.hold))
                if n >= live:
                    for r in range(runs_per_flow):
                        deferral.concluded(flow_marks.run_key(f"BENCH@{n - live}-{r}"))
            deferral.flush()

        asyncio.run(proxy())
        return most

    return variant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flows", type=int, default=20_000)
    parser.add_argument("--runs-per-flow", type=int, default=2)
    parser.add_argument("--live", type=int, default=200)
    parser.add_argument("--body", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results: dict[tuple[str, bool], tuple[float, int, int]] = {}
        for traced in (False, True):  # time untraced (tracemalloc slows allocation), then memory
            for name, variant in (("baseline", baseline), ("held", held(args.runs_per_flow, args.live))):
                results[name, traced] = measure(
                    variant, lambda: flows_of(args.flows, args.runs_per_flow, args.body), Path(tmp) / f"{name}.mitm",
                    traced)
    base_s, held_s = results["baseline", False][0], results["held", False][0]
    base_peak, (held_peak, most) = results["baseline", True][1], results["held", True][1:]
    per = 1000 / args.flows
    print(f"{args.flows} flows, {args.runs_per_flow} run(s) each, ~{args.live} held at a time, bodies "
          f"{args.body} B")
    print(f"baseline (written at once): {base_s * per:.3f} s per 1,000 flows")
    print(f"held for verdicts:          {held_s * per:.3f} s per 1,000 flows (ratio {held_s / base_s:.2f})")
    print(f"flows held at most: {most}; tracemalloc peak held minus baseline: "
          f"{(held_peak - base_peak) / 1e6:.1f} MB ({(held_peak - base_peak) / max(most, 1) / 1e3:.1f} KB per held "
          "flow)")


if __name__ == "__main__":
    main()
