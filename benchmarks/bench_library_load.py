"""Loading a large attack library (issue 15: 2,000 documents loaded in ≤ 2 s, never blocking traffic).

    .venv/bin/python benchmarks/bench_library_load.py [--sizes 51,2000] [--repeats 3] [--against DIR] [--live]

Offline: libraries of `--sizes` documents (re-identified copies of `attacks/`, `testing.library_copies`) loaded
by `load_library` — read, parsed, validated, strictly checked, normalized and planned, as `oatf evaluate`, `oatf
tap` and the addon load them, the cyclic collector on as in the proxy — each load in a fresh process (a start of
the tool), its wall seconds and its CPU seconds (with those of the child processes a large library also loads in,
`oatf_engine.monitor.load_workers`):
- `none`: without the cache of loaded documents (`OATF_CACHE_DIR=off`);
- `cold`: with an empty cache, which the load writes (the first start over these documents);
- `warm`: with the cache the cold load wrote (every later start);
- `DIR` (`--against`, e.g. `/work/main`): the engine of the checkout at DIR, in the same run.
Each `--repeats` times, interleaved, so every ratio compares figures measured seconds apart; printed: the range
(min–max) of each, and the ratios of the wall medians to `DIR`'s. Every load's attacks, problems and diagnostics must
be identical (a digest of them per load, with `PYTHONHASHSEED=0`): the cache never changes a result.

`--live`: mitmdump with the addon and the largest library, without cache, with a cold one and a warm one, and
(`--against`) DIR's addon: seconds from its start until its port accepts connections, until a request through it
is first answered, and until the library is loaded; HTTP requests (a GET the MCP server answers 404: no session,
so no run) are sent through it one after another from the moment the port accepts connections, and their latency
while the library loads is printed (count, p50, p99, max): the proxy forwards while it loads.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("OATF_ENGINE_ROOT") or Path(__file__).resolve().parents[1])
"""The checkout whose engine is measured (`--against` sets it for its child processes)."""
HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from oatf_engine.monitor import Library, load_library  # noqa: E402

CACHE_ENV = "OATF_CACHE_DIR"  # `oatf_engine.monitor.document_cache.CACHE_ENV` (not in an engine without the cache)


def digest(library: Library) -> str:
    """What a caller reads of a load (each attack's path, document, warnings and plan; the problems and strict
    findings), as one digest: equal digests, identical loads. A plan's sets are compared as sets (sorted): their
    order of iteration is not kept by pickling (the addon's monitor process has always judged with unpickled
    plans) and nothing depends on it."""
    state = [(a.path, a.document, a.warnings, {name: sorted(map(repr, value)) if isinstance(value, frozenset) else value
                                               for name, value in a.plan.__getstate__().items()})
             for a in library.attacks]
    return hashlib.sha256(repr((state, library.problems, library.waived)).encode()).hexdigest()[:16]


def child(directory: str) -> None:
    """One load of `directory` in this process: its figures as JSON on stdout."""
    cpu, wall, children = time.process_time(), time.perf_counter(), _children_cpu()
    library = load_library([directory])
    cpu, wall, children = time.process_time() - cpu, time.perf_counter() - wall, _children_cpu() - children
    print(json.dumps({"cpu": cpu, "children": children, "wall": wall, "digest": digest(library),
                      "attacks": len(library.attacks), "problems": len(library.problems)}))


def _children_cpu() -> float:
    """CPU seconds of this process's ended children (the loading children: `load_workers`)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_in_child(directory: Path, root: Path, cache: str) -> dict[str, Any]:
    environment = {**os.environ, "OATF_ENGINE_ROOT": str(root), CACHE_ENV: cache, "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, __file__, "--child", str(directory)], capture_output=True, text=True,
                          env=environment, check=False)
    if done.returncode:
        raise SystemExit(f"loading in {root} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout))


def offline(sizes: list[int], repeats: int, against: Path | None, work: Path) -> None:
    sys.path.insert(0, str(HERE))
    from testing.library_copies import write_library

    kinds = ["none", "cold", "warm"] + ([against.name] if against is not None else [])
    print(f"load_library, a fresh process per load, {repeats} repeat(s): wall s and CPU s, min–max")
    for size in sizes:
        library = work / f"library-{size}"
        library.mkdir()
        write_library(size, library)
        figures: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
        for repeat in range(repeats):
            cache = work / f"cache-{size}-{repeat}"
            figures["none"].append(load_in_child(library, HERE, "off"))
            figures["cold"].append(load_in_child(library, HERE, str(cache)))
            figures["warm"].append(load_in_child(library, HERE, str(cache)))
            if against is not None:
                figures[against.name].append(load_in_child(library, against, "off"))
        digests = {f["digest"] for runs in figures.values() for f in runs}
        counts = {(f["attacks"], f["problems"]) for runs in figures.values() for f in runs}
        print(f"  {size:,} documents (attacks, problems: {sorted(counts)}; identical loads: "
              f"{'yes' if len(digests) == 1 else 'NO: ' + ', '.join(sorted(digests))})")
        base = statistics.median(f["wall"] for f in figures[against.name]) if against is not None else None
        for kind, runs in figures.items():
            cpu = sorted(f["cpu"] for f in runs)
            children = sorted(f.get("children", 0.0) for f in runs)
            wall = sorted(f["wall"] for f in runs)
            ratio = f"  {statistics.median(wall) / base:.2f}× {against.name if against else ''}'s wall" if base else ""
            helped = f" (+ children {children[0]:.2f}–{children[-1]:.2f} s)" if children[-1] else ""
            print(f"    {kind:>10}: wall {wall[0]:.2f}–{wall[-1]:.2f} s, CPU {cpu[0]:.2f}–{cpu[-1]:.2f} s"
                  f"{helped}{ratio}", flush=True)
        if len(digests) != 1:
            raise SystemExit("the loads differ")


async def start_up(root: Path, library: Path, cache: str, url: str, work: Path) -> str:
    """mitmdump with the addon of `root` and `library` (cache `cache`), from its start until the library is
    loaded: seconds until its port accepts connections, until the first answer through it and until the library
    is loaded; the latency of the requests (`url`) sent one after another through it meanwhile."""
    import signal

    import httpx

    from testing.processes import MITMDUMP, free_port

    work.mkdir()
    port, log = free_port(), work / "mitmdump.log"
    args = [str(MITMDUMP), "--listen-host", "127.0.0.1", "--listen-port", str(port), "--set", "flow_detail=0",
            "-s", str(root / "addon" / "oatf_addon.py"), "--set", f"oatf_attacks={library}",
            "--set", f"oatf_report_dir={work / 'reports'}", "--set", "oatf_watch=false"]
    environment = {**os.environ, "PYTHONPATH": str(root), CACHE_ENV: cache}
    started = time.perf_counter()
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=root, env=environment,
                                   start_new_session=True)
    listening = answered = loaded = None
    latencies: list[float] = []
    try:
        async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", trust_env=False, timeout=60) as client:
            while loaded is None:
                if process.poll() is not None:
                    raise SystemExit(f"mitmdump ended:\n{log.read_text()[-2000:]}")
                sent = time.perf_counter()
                try:
                    await client.get(url)
                except httpx.TransportError:  # not listening yet
                    await asyncio.sleep(0.01)
                else:
                    now = time.perf_counter()
                    listening = listening or sent - started
                    answered = answered or now - started
                    latencies.append(now - sent)
                if "attack(s) loaded" in log.read_text(errors="replace"):
                    loaded = time.perf_counter() - started
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=300)
    during = sorted(latencies[:-1])  # the last one may have been answered after the library was loaded
    spread = (f"{len(during)} answered while loading: p50 {1000 * during[len(during) // 2]:.0f} ms, p99 "
              f"{1000 * during[len(during) * 99 // 100]:.0f} ms, max {1000 * during[-1]:.0f} ms" if during
              else "none answered while loading")
    return (f"listening after {listening or 0:.2f} s, first answer {answered or 0:.2f} s, loaded {loaded:.2f} s; "
            f"{spread}")


def live(size: int, against: Path | None, work: Path) -> None:
    from testing.oatf_proxy import ADDON_PEERS
    from testing.processes import peer_process

    library = work / f"library-{size}"
    print(f"\nmitmdump with the addon and {size:,} documents, from its start (wall s)")
    runs = [("none", HERE, "off"), ("cold", HERE, str(work / "live-cache")), ("warm", HERE, str(work / "live-cache"))]
    if against is not None:
        runs.append((against.name, against, "off"))
    with peer_process(ADDON_PEERS / "peers.py", ("mcp_invoice",), work / "peer.log") as server:
        url = server.url("mcp_invoice", "/not-mcp")  # a 404: no MCP session (each would open a run per attack)
        for kind, root, cache in runs:
            figures = asyncio.run(start_up(root, library, cache, url, work / f"live-{kind}"))
            print(f"  {kind:>10}: {figures}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="51,2000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", metavar="DIR", help="also measure the engine of the checkout at DIR")
    parser.add_argument("--live", action="store_true", help="also start mitmdump with the largest library")
    parser.add_argument("--child", metavar="LIBRARY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    against = Path(args.against).resolve() if args.against else None
    with tempfile.TemporaryDirectory() as directory:
        offline(sizes, args.repeats, against, Path(directory))
        if args.live:
            live(max(sizes), against, Path(directory))


if __name__ == "__main__":
    main()
