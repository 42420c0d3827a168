"""With `-w`, a flow whose runs are still live when OATF is done with its messages is written once they have
concluded, with their verdicts in its comment and mark (`addon.deferred_save`, `addon.verdict_hold`): through
the addon's own handling of the monitor's outputs and mitmproxy's real `save` addon, in mitmproxy's test context
(a real monitor process, which knows none of these runs: their conclusions are the `Reported` the test hands
over)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest
from mitmproxy import exceptions, http
from mitmproxy.addons.save import Save
from mitmproxy.io import FlowReader
from mitmproxy.test import taddons, tflow

from addon.oatf_addon import OatfAddon
from oatf_engine.monitor import IndicatorMatched
from oatf_engine.reports import Reported
from tests.addon.test_inspection import reported, saving, until


def file_order(path: Path) -> list[tuple[str, str, str]]:
    """(id, mark, comment) of each flow in the `-w` file, in the file's order."""
    with path.open("rb") as handle:
        return [(f.id, f.marked, f.comment) for f in FlowReader(handle).stream()]


def matched(run: str, flow: http.HTTPFlow, evidence: str = "matched") -> IndicatorMatched:
    return IndicatorMatched(run, "ACME-001", "ACME-001-01", flow.id, evidence)


def concluded(run: str, result: str, *flows: http.HTTPFlow) -> Reported:
    """`run` concluded with `result`; its report names `flows`."""
    return dataclasses.replace(reported(result, run), run=run, flows=tuple(f.id for f in flows))


def test_a_flow_is_written_once_every_run_it_took_part_in_has_concluded(tmp_path: Path) -> None:
    """`a` took part in two runs, `b` in the first, `c` in none: `c` is written at once, `b` once the first run
    concluded (its report does not name `b`: the held flow gets the verdict all the same), `a` once both did,
    with both verdicts; each once, although the `save` addon hands `a` over again while it is held."""
    addon, save = OatfAddon(), Save()
    a, b, c = (tflow.tflow(resp=True) for _ in range(3))
    seen: dict[str, list[str]] = {}
    path = tmp_path / "flows.mitm"

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        for flow in (a, b, c):
            addon.flows[flow.id] = flow
        addon._handle([matched("ACME-001@one", a), matched("ACME-001@two", a), matched("ACME-001@one", b)])
        await until(lambda: not addon.marking)
        for flow in (a, b, c):
            save.response(flow)
        seen["written"] = [i for i, _, _ in file_order(path)]
        seen["held"] = list(addon.saving.hold.held)
        addon._handle([concluded("ACME-001@one", "exploited", a)])
        await until(lambda: b.id not in addon.saving.hold)
        seen["after one"] = [i for i, _, _ in file_order(path)]
        save.response(a)
        addon._handle([concluded("ACME-001@two", "not_exploited", a)])
        await until(lambda: a.id not in addon.saving.hold)

    saving(addon, save, tmp_path, "2s", proxy())
    assert seen == {"written": [c.id], "held": [a.id, b.id], "after one": [c.id, b.id]}
    assert [i for i, _, _ in file_order(path)] == [c.id, b.id, a.id]
    (_, mark_c, comment_c), (_, mark_b, comment_b), (_, mark_a, comment_a) = file_order(path)
    assert (mark_c, comment_c) == ("", "")
    assert mark_b == ":red_circle:" and comment_b.split("\n") == [
        "OATF ACME-001-01 matched: matched", "OATF ACME-001: exploited (completed), run ACME-001@one"]
    assert mark_a == ":red_circle:" and comment_a.split("\n") == [
        "OATF ACME-001-01 matched: matched", "OATF ACME-001: exploited (completed), run ACME-001@one",
        "OATF ACME-001: resisted (completed), run ACME-001@two"]


def test_beyond_the_hold_the_oldest_flow_is_written_with_what_is_known_and_logged_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`oatf_save_hold` 2: the third flow waiting for a verdict has the first written at once, with its match
    only; the fourth the second; one warning says so. The two still held when the proxy stops are written
    then, with what is known (their run never concluded): every flow once, in order."""
    addon, save = OatfAddon(), Save()
    flows = [tflow.tflow(resp=True) for _ in range(4)]
    seen: dict[str, list[str]] = {}
    path = tmp_path / "flows.mitm"

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        for flow in flows:
            addon.flows[flow.id] = flow
        addon._handle([matched("ACME-001@live", flow) for flow in flows])
        await until(lambda: not addon.marking)
        for flow in flows:
            save.response(flow)
        seen["written"] = [i for i, _, _ in file_order(path)]

    with caplog.at_level(logging.INFO, "oatf"):
        saving(addon, save, tmp_path, "2s", proxy(), oatf_save_hold=2)
    ids = [flow.id for flow in flows]
    assert seen == {"written": ids[:2]}
    assert file_order(path) == [(i, ":warning:", "OATF ACME-001-01 matched: matched") for i in ids]
    assert [r.getMessage() for r in caplog.records if "oatf_save_hold" in r.getMessage()] == [
        "oatf: a flow was saved before the verdict of its run (oatf_save_hold 2 flows, oatf_save_hold_size "
        "67108864 bytes reached; logged once): the oldest flows waiting for verdicts are written with what is "
        "known, their verdicts are only in the UIs and the reports"]


def test_a_flow_larger_than_the_hold_is_written_at_once(tmp_path: Path) -> None:
    """`oatf_save_hold_size` 1k: a flow of 2 KB waiting for a verdict is written at once, the small one held
    before it stays held."""
    addon, save = OatfAddon(), Save()
    small, large = tflow.tflow(resp=True), tflow.tflow(resp=True)
    large.response.content = b"x" * 2048  # type: ignore[union-attr]
    seen: dict[str, list[str]] = {}
    path = tmp_path / "flows.mitm"

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        for flow in (small, large):
            addon.flows[flow.id] = flow
        addon._handle([matched("ACME-001@live", small), matched("ACME-001@live", large)])
        await until(lambda: not addon.marking)
        save.response(small)
        save.response(large)
        seen["written"] = [i for i, _, _ in file_order(path)]
        seen["held"] = list(addon.saving.hold.held)

    saving(addon, save, tmp_path, "2s", proxy(), oatf_save_hold_size="1k")
    assert seen == {"written": [large.id], "held": [small.id]}


def test_without_w_no_flow_is_held(tmp_path: Path) -> None:
    """The `save` addon is always loaded; without `-w` it writes nothing, and no flow waits."""
    addon, save = OatfAddon(), Save()
    flow = tflow.tflow(resp=True)

    async def proxy() -> None:
        addon.loop = asyncio.get_running_loop()
        addon.flows[flow.id] = flow
        addon._handle([matched("ACME-001@live", flow)])
        await until(lambda: not addon.marking)
        save.response(flow)
        assert not addon.saving.hold and not addon.saving.deferred

    with taddons.context(save, addon) as context:
        context.configure(addon, oatf_save_wait="2s", oatf_report_dir=str(tmp_path / "reports"))
        asyncio.run(proxy())
        addon.done()


@pytest.mark.parametrize("options", [{"oatf_save_hold": -1}, {"oatf_save_hold_size": "lots"},
                                     {"oatf_save_hold_size": "-5"}])
def test_bad_hold_options_are_refused(options: dict[str, object]) -> None:
    addon = OatfAddon()
    with taddons.context(addon) as context, pytest.raises(exceptions.OptionsError, match="oatf_save_hold"):
        context.configure(addon, **options)
