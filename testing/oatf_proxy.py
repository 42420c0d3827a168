"""mitmdump running the OATF addon (`addon/oatf_addon.py`) for the end-to-end tests, on top of the wire tests'
process harness (`testing.processes`: free ports, readiness, process-group shutdown): its options, its
report directory and flow recording, polling for report files, its log, mitmproxy commands through
`command_script.py`, SIGINT shutdown, and `oatf evaluate` over the recording."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testing.clients import http_client
from testing.processes import (
    MITMDUMP,
    PYTHON,
    ROOT,
    Peers,
    Proxy,
    free_port,
    mitmdump,
    peer_process,
    stop,
    wait_for_port,
)
from testing.processes import _start as start_process

from .command_script import CONTROL_HOST

ADDON_PEERS = ROOT / "tests" / "e2e" / "addon"
"""The addon suite's peers (attacker servers, agents) run as processes by path."""
COMMAND_SCRIPT = Path(__file__).with_name("command_script.py")
"""The remote-control mitmdump script (`testing.command_script`)."""
ADDON = ROOT / "addon" / "oatf_addon.py"
OATF = PYTHON.parent / "oatf"
PEER_KINDS = ("mcp_poisoned", "mcp_rugpull", "a2a", "ag_ui")

Report = dict[str, Any]


def run[T](coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
    """Run one agent session (a coroutine) to completion, within `timeout` seconds."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


@contextlib.contextmanager
def attacker_peers(workdir: Path) -> Iterator[Peers]:
    """Every peer of `peers.py`, each on a free port, in one process."""
    with peer_process(ADDON_PEERS / "peers.py", PEER_KINDS, workdir / "attacker-peers.log") as running:
        yield running


@contextlib.contextmanager
def addon_peer(workdir: Path, script: str, kind: str, *args: str) -> Iterator[int]:
    """`tests/e2e/addon/SCRIPT KIND PORT ARGS…` (a peer process of the e2e tests) on a free loopback port, until
    it accepts connections there; yields the port."""
    with script_peer(workdir, kind, ADDON_PEERS / script, *args, before_port=(kind,)) as port:
        yield port


@contextlib.contextmanager
def fastmcp_server(workdir: Path, attack: Path | None, stateless: bool = False, json: bool = False,
                   slow: float = 0.0, elicit: bool = False) -> Iterator[int]:
    """`fastmcp_server.py` on a free loopback port, serving the attack's poisoned tool (None: an honest
    calculator); `json`: its answers are plain JSON, never SSE; `slow`: the tool answers that many seconds
    later, repeating the note it got; `elicit`: the tool asks the attack's elicitation first; yields the port."""
    with script_peer(workdir, "fastmcp", ADDON_PEERS / "fastmcp_server.py", *([str(attack)] if attack else []),
                     *(["--stateless"] * stateless), *(["--json"] * json),
                     *(["--slow", f"{slow:g}"] if slow else []), *(["--elicit"] * elicit)) as port:
        yield port


@contextlib.contextmanager
def script_peer(workdir: Path, name: str, script: Path, *args: str, before_port: tuple[str, ...] = ()) -> Iterator[int]:
    """`python SCRIPT [BEFORE_PORT…] PORT ARGS…` on a free loopback port, logging to `workdir/NAME-PORT.log`;
    yields the port once it accepts connections."""
    port = free_port()
    process = start_process([str(PYTHON), str(script), *before_port, str(port), *args], workdir / f"{name}-{port}.log")
    try:
        wait_for_port(port, process)
        yield port
    finally:
        stop(process)


def refused_start(workdir: Path, settings: dict[str, str]) -> str:
    """mitmdump with the addon and these `--set` options, expected to refuse to start; its log."""
    log = workdir / "refused-start.log"
    args = [str(MITMDUMP), "--listen-host", "127.0.0.1", "--listen-port", str(free_port()), "-s", str(ADDON)]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    process = start_process(args, log)
    try:
        assert process.wait(timeout=30) != 0
    finally:
        stop(process)
    return log.read_text(encoding="utf-8")


@dataclass
class OatfProxy:
    """A running mitmdump with the addon; reports land in `report_dir`, flows in `flows` (if recording)."""

    proxy: Proxy
    report_dir: Path
    flows: Path | None
    attacks: list[Path]

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self.proxy.process

    # --- reports ------------------------------------------------------------------------------------------
    def reports(self) -> list[Report]:
        """Every per-run JSON report written so far (never a half-written one: writes are atomic)."""
        if not self.report_dir.exists():
            return []
        return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(self.report_dir.glob("*.json"))
                if not p.name.startswith(".")]

    def jsonl(self) -> list[Report]:
        path = self.report_dir / "verdicts.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]

    def find(self, attack_id: str, session: str | None = None) -> list[Report]:
        """Reports of `attack_id`, of the run whose session key ends with `session` when given."""
        return [r for r in self.reports() if r["attack"]["id"] == attack_id
                and (session is None or r["execution_summary"]["session"].endswith(session))]

    def wait_for(self, attack_id: str, session: str | None = None, timeout: float = 10.0) -> Report:
        """The report of that run, polling until it is written."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.find(attack_id, session)
            if found:
                assert len(found) == 1, found
                return found[0]
            if time.monotonic() > deadline:
                have = [(r["attack"]["id"], r["execution_summary"]["session"]) for r in self.reports()]
                raise AssertionError(f"no report for {attack_id} session {session} after {timeout}s; have {have}"
                                     f"\n{self.log()[-3000:]}")
            time.sleep(0.05)

    # --- the process --------------------------------------------------------------------------------------
    def log(self) -> str:
        return self.proxy.log.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, predicate: Callable[[str], bool], timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.log()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"log condition not met after {timeout}s:\n{text[-3000:]}")
            time.sleep(0.05)

    def _control(self, path: str, params: dict[str, str] | None = None) -> str:
        async def call() -> tuple[int, str]:
            async with http_client(self.url) as client:
                response = await client.get(f"http://{CONTROL_HOST}{path}", params=params)
                return response.status_code, response.text

        status, text = asyncio.run(call())
        assert status == 200, text
        return text

    @staticmethod
    def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met after {timeout}s")
            time.sleep(0.05)

    def command(self, command: str) -> str:
        """Run a mitmproxy command inside the proxy (see `command_script.py`); its result as text."""
        return self._control("/", {"cmd": command})

    def backlog(self) -> int:
        """Events the addon observed and has not evaluated yet (`OatfAddon.waiting`)."""
        return int(self._control("/backlog"))

    def counts(self) -> dict[str, int]:
        """What the monitor process holds in memory, as of the previous call, and the backlog (`waiting`)."""
        return dict(json.loads(self._control("/counts")))

    def marked(self) -> dict[str, dict[str, str]]:
        """{flow id: {marked, comment}} of the flows an addon updated (the OATF addon marks matches)."""
        return json.loads(self._control("/marked"))

    def interrupt(self, timeout: float = 15.0, sig: signal.Signals = signal.SIGINT) -> int:
        """SIGINT (or `sig`) to mitmdump (its `done` hooks conclude every open run); its exit status."""
        os.killpg(self.process.pid, sig)
        return self.process.wait(timeout=timeout)


@contextlib.contextmanager
def oatf_proxy(workdir: Path, name: str, attacks: list[Path], *, grace: str = "1s", record: bool = True,
               watch: bool = False, options: dict[str, str] | None = None,
               scripts: tuple[Path, ...] = (), modes: tuple[str, ...] = (), loaded: bool = True,
               environment: dict[str, str] | None = None) -> Iterator[OatfProxy]:
    """mitmdump + the addon (+ the remote control), loading `attacks`, on a free loopback port; `scripts`
    are loaded before the addon (their hooks run first); `modes`: its `--mode`s, e.g. `regular` there and a
    `reverse:URL@PORT` listener beside it (default: regular only). Given once the attacks are loaded, or (not
    `loaded`) as soon as the port accepts connections; `environment`: more environment variables."""
    report_dir = workdir / f"{name}-reports"
    flows = workdir / f"{name}.mitm" if record else None
    settings = {"oatf_attacks": ",".join(map(str, attacks)), "oatf_report_dir": str(report_dir),
                "oatf_grace_period": grace, "oatf_watch": str(watch).lower(),
                **({"store_streamed_bodies": "true"} if flows is not None else {}), **(options or {})}
    # The remote control's requests are no traffic to evaluate: they would count as waiting while they ask.
    settings["oatf_wire_protocols"] = f"{CONTROL_HOST}=ignore {settings.get('oatf_wire_protocols', '')}".strip()
    extra = [*(arg for script in scripts for arg in ("-s", str(script))), "-s", str(ADDON), "-s", str(COMMAND_SCRIPT),
             *(arg for mode in modes for arg in ("--mode", mode))]
    for key, value in settings.items():
        extra += ["--set", f"{key}={value}"]
    if flows is not None:
        extra += ["-w", str(flows)]
    with mitmdump(workdir, tap=False, name=name, extra=tuple(extra), environment=environment) as proxy:
        running = OatfProxy(proxy, report_dir, flows, attacks)
        if loaded:
            running.wait_for_log(lambda text: "attack(s) loaded" in text)
        yield running


# --- comparing verdicts -------------------------------------------------------------------------------------
def verdict_of(report: Report) -> tuple[str, dict[str, str]]:
    """(result, {indicator id: result}) of a report."""
    verdict = report["verdict"]
    return verdict["result"], {v["indicator_id"]: v["result"] for v in verdict["indicator_verdicts"]}


def by_run(reports: list[Report]) -> dict[tuple[str, str], tuple[str, dict[str, str]]]:
    """(attack id, session) → verdict of each report."""
    keyed = {(r["attack"]["id"], r["execution_summary"]["session"]): verdict_of(r) for r in reports}
    assert len(keyed) == len(reports), "two reports for one run"
    return keyed


@dataclass
class Evaluation:
    status: int
    reports: list[Report]
    stderr: str


def evaluate(attacks: list[Path], flows: Path | Sequence[Path], report_dir: Path, grace: str = "1s",
             flags: tuple[str, ...] = ()) -> Evaluation:
    """`oatf evaluate` (the console script) over a recording, or several (flow files, `oatf tap` captures), as
    CI runs it (`flags` added to its command)."""
    recordings = [flows] if isinstance(flows, Path) else list(flows)
    done = subprocess.run([str(OATF), "evaluate", "--attacks", ",".join(map(str, attacks)), "--flows",
                           *map(str, recordings), "--report-dir", str(report_dir), "--grace-period", grace,
                           "--format", "json", *flags],
                          capture_output=True, cwd=ROOT, timeout=60, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    reports = json.loads(done.stdout) if done.stdout.strip() else []
    return Evaluation(done.returncode, reports, done.stderr)


def assert_replay_agrees(proxy: OatfProxy, workdir: Path, live: list[Report], grace: str = "1s",
                         flags: tuple[str, ...] = (), captures: Sequence[Path] = ()) -> Evaluation:
    """Stop the proxy if it runs, replay its recording (with the `captures` of the `oatf tap`s that fed it,
    `oatf_listen`) with `oatf evaluate`, and check that the replay agrees with `live` (`assert_reports_agree`)."""
    if proxy.process.poll() is None:
        proxy.interrupt()
    assert proxy.flows is not None and proxy.flows.exists()
    replayed = workdir / f"{proxy.flows.stem}-replay"
    offline = evaluate(proxy.attacks, [proxy.flows, *captures], replayed, grace, flags)
    assert_reports_agree(live, proxy.report_dir, offline, replayed)
    return offline


def assert_reports_agree(live: list[Report], live_dir: Path, offline: Evaluation, replayed: Path) -> None:
    """Every live run has the same verdict (and indicator results) offline, and the exit status is the one CI
    would see. One engine, two front doors: every run concluded live by itself (not `interrupted` by the
    shutdown of the proxy or tap, which is a moment the recording does not hold) has a byte-identical report
    file in `replayed`: same name, same content."""
    assert by_run(offline.reports) == by_run(live), offline.stderr
    concluded_live = [path for path in sorted(live_dir.glob("*.json")) if not path.name.startswith(".")
                      and json.loads(path.read_bytes())["execution_summary"]["status"] != "interrupted"]
    for path in concluded_live:
        assert (replayed / path.name).is_file(), f"{path.name}: no report of that name offline"
        assert (replayed / path.name).read_bytes() == path.read_bytes(), f"{path.name} differs offline"
    results = {verdict_of(r)[0] for r in live}
    unseen = any(r["execution_summary"].get("uninspected_messages") for r in live)  # traffic not inspected: 2
    expected = 2 if unseen else 1 if results & {"exploited", "partial"} else 2 if not live or "error" in results else 0
    assert offline.status == expected, offline.stderr


__all__ = ["OatfProxy", "Peers", "addon_peer", "assert_replay_agrees", "assert_reports_agree", "attacker_peers",
           "by_run", "evaluate", "fastmcp_server", "oatf_proxy", "refused_start", "run", "script_peer", "verdict_of"]
