"""The attack library (`attacks/`): every document is valid, and each is proven on two recorded sessions.

For every document `attacks/<ID>_<slug>.yaml` the session script `tests/attacks/sessions/<ID>.yaml` describes
an agent that complies with the attack and one that resists it (see `testing/sessions.py` for what is
simulated). The scripts are written out as mitmproxy flow files and replayed through the real decoders and
monitor (`addon.recordings.replay_flows`, the engine behind `oatf evaluate`): the complying session must be
judged `exploited`, the resisting one `not_exploited`. A faster check feeds the scripts' expected events
straight to the monitor, and another asserts the decoders produce exactly those events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import oatf
from testing import sessions
from testing.paths import WIRE_FIXTURES

from . import catalogue, harness

DOCUMENTS = sessions.attack_files()
IDS = sorted(DOCUMENTS)
CASES = [(attack_id, variant) for attack_id in IDS for variant in sessions.VARIANTS]
EXPECTED = {"complying": "exploited", "resisting": "not_exploited"}
CHAINS = [i for i in IDS if "actors" in catalogue.raw(DOCUMENTS[i])["attack"]["execution"]]


@pytest.fixture(scope="module")
def flow_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every session of the library written as mitmproxy flow files, once per test module."""
    out = tmp_path_factory.mktemp("attack-sessions")
    for attack_id in IDS:
        for variant in sessions.VARIANTS:
            sessions.write_session(attack_id, variant, out)
    return out


def _warnings(path: Path) -> tuple[list[oatf.Diagnostic], list[oatf.Diagnostic]]:
    document = oatf.parse(path.read_bytes())
    result = oatf.validate(document)
    return list(result.errors), list(result.warnings)


# --- the documents ----------------------------------------------------------------------------------------


def test_the_library_has_at_least_forty_documents_each_with_a_session_script() -> None:
    assert len(DOCUMENTS) >= 40
    assert sorted(sessions.script_ids()) == IDS, "every document needs tests/attacks/sessions/<ID>.yaml and back"


@pytest.mark.parametrize("attack_id", IDS)
def test_document_is_valid_with_no_warnings_but_the_semantic_advisory(attack_id: str) -> None:
    """No errors and no warnings, except W-007, which the spec attaches to every semantic indicator
    ("experimental and model-dependent"): a document can only avoid it by having no semantic indicator."""
    path = DOCUMENTS[attack_id]
    errors, warnings = _warnings(path)
    assert errors == []
    attack = oatf.load(path.read_bytes()).document.attack
    assert attack is not None
    semantic = sum(1 for i in attack.indicators or () if i.semantic is not None)
    assert [w.code for w in warnings] == ["W-007"] * semantic, [str(w) for w in warnings]


@pytest.mark.parametrize("attack_id", IDS)
def test_document_follows_the_library_conventions(attack_id: str) -> None:
    path = DOCUMENTS[attack_id]
    attack = oatf.load(path.read_bytes()).document.attack
    assert attack is not None
    assert attack.id == attack_id and path.name.startswith(f"{attack_id}_")
    assert attack.name and attack.description and attack.severity and attack.impact
    assert attack.classification and attack.classification.category and attack.classification.mappings
    assert attack.references, "every document cites at least one reference"
    indicators = attack.indicators or ()
    assert [i.id for i in indicators] == [f"{attack_id}-{n:02d}" for n in range(1, len(indicators) + 1)]
    for indicator in indicators:
        assert indicator.surface, f"{indicator.id}: indicators are scoped to an operation"
        assert indicator.direction, f"{indicator.id}: indicators say which side of the exchange they read"
        assert indicator.tier, f"{indicator.id}: indicators carry a tier"
        assert indicator.description, f"{indicator.id}: indicators say what they detect"
    assert any(i.semantic is None for i in indicators), "a verdict never rests on semantic indicators alone"


def test_oatf_validate_cli_accepts_the_library() -> None:
    oatf_script = Path(sys.executable).parent / "oatf"
    result = subprocess.run([str(oatf_script), "validate", "--format", "json", str(sessions.ATTACKS)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    records = json.loads(result.stdout)["files"]
    assert len(records) == len(DOCUMENTS) and all(r["valid"] for r in records)
    assert {d["rule"] for r in records for d in r["diagnostics"]} <= {"W-007"}


def test_the_library_covers_the_format() -> None:
    """Every category, mode and execution form, every indicator method and pattern operator, every tier."""
    found = catalogue.coverage()
    assert found["categories"] >= {"capability_poisoning", "response_fabrication", "context_manipulation",
                                   "oversight_bypass", "temporal_manipulation", "availability_disruption",
                                   "cross_protocol_chain"}
    assert found["modes"] >= {"mcp_server", "mcp_client", "a2a_server", "a2a_client", "ag_ui_client"}
    assert found["forms"] >= {"single-phase", "multi-phase", "multi-actor"}
    assert found["triggers"] >= {"event", "match", "count", "after"}
    assert found["methods"] >= {"pattern", "expression", "semantic"}
    assert found["operators"] >= {"equals", "contains", "starts_with", "ends_with", "regex", "any_of", "gt", "lt",
                                  "gte", "lte", "exists"}
    assert found["tiers"] >= {"ingested", "local_action", "boundary_breach"}
    assert found["features"] >= {"extractors", "interpolation", "cross-actor-interpolation", "grace_period",
                                 "on_enter", "correlation-all", "actor-scoped-indicator"}


def test_catalogue_is_up_to_date() -> None:
    readme = sessions.ATTACKS / "README.md"
    assert readme.read_text() == catalogue.render(), "run `python -m tests.attacks.catalogue` to regenerate"


# --- the proofs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("attack_id", "variant"), CASES)
def test_monitor_judges_the_scripted_events(attack_id: str, variant: str) -> None:
    """Fast, decoder-independent: the script's expected events straight into the monitor."""
    reports = harness.monitor_reports(DOCUMENTS[attack_id], variant)
    assert harness.outcome(reports, attack_id) == EXPECTED[variant], harness.describe(reports)


@pytest.mark.parametrize(("attack_id", "variant"), CASES)
def test_decoders_produce_the_scripted_events(attack_id: str, variant: str, flow_dir: Path) -> None:
    """The wire decoders read the recorded flows as the scripts say (order aside: a flow file has no
    per-chunk timing, so a replayed SSE answer is stamped with its response's end)."""
    from addon.recordings import decode_recordings

    script = sessions.load_script(attack_id)
    expected = sessions.expected_events(sessions.play(script, variant), str(script.get("client", "10.20.0.15")))
    decoded, _ = decode_recordings([str(flow_dir / f"{attack_id}.{variant}.mitm")])
    assert Counter(_shape(e) for e in decoded) == Counter(_shape(e) for e in expected)


def _shape(event: Any) -> str:
    keys = {k: v for k, v in event.session_keys.items() if k in ("mcp_session", "a2a_context", "ag_ui_thread")}
    return json.dumps([event.protocol, event.event_type, event.direction, event.sender, keys, event.content,
                       event.is_error], sort_keys=True)


@pytest.mark.parametrize(("attack_id", "variant"), CASES)
def test_replayed_session_verdict(attack_id: str, variant: str, flow_dir: Path) -> None:
    """The proof: the recorded session replayed through decoders and monitor (`oatf evaluate`)."""
    from addon.recordings import replay_flows

    reports = replay_flows([str(DOCUMENTS[attack_id])], [str(flow_dir / f"{attack_id}.{variant}.mitm")])
    assert harness.outcome(reports, attack_id) == EXPECTED[variant], harness.describe(reports)
    assert any(r["execution_summary"]["delivered"] for r in reports), "the session carries the attack's payload"


def test_no_document_fires_on_any_resisting_session(flow_dir: Path) -> None:
    """The whole library over every resisting session at once: no false positive anywhere, and no other
    attack counts as delivered (its `not_exploited` says `not_delivered`, never `resisted`)."""
    from addon.recordings import replay_flows

    exploited, delivered = [], []
    for attack_id in IDS:
        reports = replay_flows([str(sessions.ATTACKS)], [str(flow_dir / f"{attack_id}.resisting.mitm")])
        exploited += [f"{r['attack']['id']} on {attack_id}'s resisting session"
                      for r in reports if r["verdict"]["result"] not in ("not_exploited",)]
        delivered += [f"{r['attack']['id']} on {attack_id}'s resisting session: {r['execution_summary']}"
                      for r in reports if r["attack"]["id"] != attack_id and r["outcome"] != "not_delivered"]
    assert exploited == []
    assert delivered == []


@pytest.mark.parametrize("recording", ["mcp_http", "mcp_sse", "a2a_v1", "a2a_v03", "ag_ui"])
def test_the_library_over_honest_traffic_is_not_delivered_not_resisted(recording: str, tmp_path: Path) -> None:
    """Real SDK peers with honest tools (`tests/oatf_engine/wire/fixtures`): no attack reached the agent. Every run says
    `delivered: false`, the summary counts them as not delivered, and `--require-delivered` exits 3."""
    oatf_script = Path(sys.executable).parent / "oatf"
    flows = WIRE_FIXTURES / f"{recording}.mitm"
    result = subprocess.run([str(oatf_script), "evaluate", "--attacks", str(sessions.ATTACKS), "--flows", str(flows),
                             "--report-dir", str(tmp_path), "--require-delivered"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 3, result.stdout + result.stderr
    reports = [json.loads(line) for line in (tmp_path / "verdicts.jsonl").read_text().splitlines()]
    assert reports and all(r["execution_summary"]["delivered"] is False for r in reports)
    assert {r["outcome"] for r in reports} == {"not_delivered"}
    assert f"{len(reports)} run(s): 0 exploited, 0 partial, 0 resisted, 0 inconclusive, {len(reports)} not delivered" \
        in result.stdout
    assert result.stderr.count("never delivered") == len(IDS)


def test_oatf_evaluate_exit_status(flow_dir: Path, tmp_path: Path) -> None:
    """`oatf evaluate` as CI runs it: 1 when something was exploited, 0 when the agent resisted."""
    oatf_script = Path(sys.executable).parent / "oatf"
    attack = str(DOCUMENTS[IDS[0]])
    for variant, status in (("complying", 1), ("resisting", 0)):
        result = subprocess.run([str(oatf_script), "evaluate", "--attacks", attack, "--flows",
                                 str(flow_dir / f"{IDS[0]}.{variant}.mitm"), "--report-dir",
                                 str(tmp_path / variant)], capture_output=True, text=True, timeout=120)
        assert result.returncode == status, result.stdout + result.stderr
        assert (tmp_path / variant / "verdicts.jsonl").exists()


def test_server_request_ids_that_collide_with_client_request_ids(tmp_path: Path) -> None:
    """OW-022 with the elicitation request numbered like the open `tools/call` (id 1 on both sides)."""
    from addon.recordings import replay_flows

    script = sessions.load_script("OW-022")
    sse = script["complying"]["steps"][0]["mcp"]["sse"]
    sse[0]["id"], sse[1]["reply"]["to"] = 1, 1
    flows = tmp_path / "collide.mitm"
    sessions.write_flows(flows, sessions.to_flows(sessions.play(script, "complying"), "203.0.113.66"))
    reports = replay_flows([str(DOCUMENTS["OW-022"])], [str(flows)])
    assert harness.outcome(reports, "OW-022") == "exploited", harness.describe(reports)


@pytest.mark.parametrize("attack_id", CHAINS)
def test_cross_protocol_chain_is_one_run_under_the_global_session_key(attack_id: str, flow_dir: Path) -> None:
    """With `--session-key global` a multi-actor document is followed as one run over all its protocols:
    every actor's phases and every indicator in one verdict (the README's advice for chains)."""
    from addon.recordings import replay
    from oatf_engine.engine_config import engine_config

    for variant in sessions.VARIANTS:
        result = replay([str(DOCUMENTS[attack_id])], [str(flow_dir / f"{attack_id}.{variant}.mitm")],
                        engine_config({"session_key": "global"}))
        [report] = result.reports
        assert report["verdict"]["result"] == EXPECTED[variant], harness.describe(result.reports)




def _all_across_protocols(attack_id: str) -> bool:
    attack = catalogue.raw(DOCUMENTS[attack_id])["attack"]
    protocols = {actor["mode"].split("_")[0] for actor in attack["execution"]["actors"]}
    return attack.get("correlation", {}).get("logic") == "all" and len(protocols) > 1


EPISODE_CHAINS = [i for i in CHAINS if _all_across_protocols(i)]


@pytest.mark.parametrize("attack_id", EPISODE_CHAINS)
def test_cross_protocol_all_chain_is_one_run_of_the_agent_episode(attack_id: str, flow_dir: Path) -> None:
    """A `correlation.logic: all` chain across protocols (the agent's MCP and A2A calls made during its AG-UI
    run): the replayed complying session is one run, of the AG-UI thread's episode, exploited; per protocol
    session (`--session-key ag_ui_thread`) the same traffic cannot be exploited."""
    from addon.recordings import replay
    from oatf_engine.engine_config import engine_config

    flows = [str(flow_dir / f"{attack_id}.complying.mitm")]
    [report] = replay([str(DOCUMENTS[attack_id])], flows, engine_config({})).reports
    assert report["execution_summary"]["session"].startswith("ag_ui_thread:")
    assert report["verdict"]["result"] == "exploited", harness.describe([report])
    split = replay([str(DOCUMENTS[attack_id])], flows, engine_config({"session_key": "ag_ui_thread"})).reports
    assert len(split) > 1 and "exploited" not in {r["verdict"]["result"] for r in split}
