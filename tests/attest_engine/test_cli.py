"""The `attest-engine` command line and its `--config` file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from attest_engine.cli import parse_duration
from attest_engine.config import ConfigError, EngineConfig, config_from_mapping

from .conftest import ROOT, assertion, batch, engine_env, error_of, refund_trace


def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "attest_engine", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        env=engine_env(),
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30.0), ("2.5", 2.5), ("500ms", 0.5), ("30s", 30.0), ("2m", 120.0), (" 1s ", 1.0)]
)
def test_eval_timeout_values(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["0", "-1", "1h", "fast", "", "1.5.2s"])
def test_bad_eval_timeout_values(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    "args",
    [("--log-level=loud",), ("--log-level",), ("--eval-timeout=0",), ("--eval-timeout", "soon"), ("--bogus",)],
)
def test_bad_command_lines_exit_2_without_touching_stdout(args: tuple[str, ...]) -> None:
    completed = run_cli(*args)
    assert completed.returncode == 2
    assert completed.stdout == b""
    assert b"usage: attest-engine" in completed.stderr


def test_version_and_help() -> None:
    assert run_cli("--version").stdout.decode().strip() == "attest-engine 0.1.0"
    helptext = run_cli("--help").stdout.decode()
    assert "--log-level" in helptext and "--config" in helptext and "--eval-timeout" in helptext


def test_log_level_aliases_and_case() -> None:
    for level in ("WARN", "warning", "Debug"):
        assert run_cli(f"--log-level={level}").returncode == 0


def test_unreadable_config(tmp_path: Path) -> None:
    completed = run_cli("--config", str(tmp_path / "missing.json"))
    assert completed.returncode == 2 and completed.stdout == b""
    record = json.loads(completed.stderr.decode().splitlines()[0])
    assert record["level"] == "error" and record["msg"].startswith("cannot read engine config")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "is not valid JSON"),
        (
            '{"max_concurent_requests": 3}',
            "invalid engine config at the top level: Additional properties are not allowed "
            "('max_concurent_requests' was unexpected)",
        ),
        ('{"max_concurrent_requests": 0}', "invalid engine config at $.max_concurrent_requests: 0 is less than"),
        (
            '{"providers": {"llm_judge": {"model": "m"}}}',
            "invalid engine config at $.providers.llm_judge: 'base_url' is a required property",
        ),
    ],
)
def test_invalid_config(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "engine.json"
    path.write_text(content)
    completed = run_cli("--config", str(path))
    assert completed.returncode == 2 and completed.stdout == b""
    assert message in json.loads(completed.stderr.decode().splitlines()[0])["msg"]


def test_config_mapping() -> None:
    config = config_from_mapping(
        {
            "max_concurrent_requests": 8,
            "strict_step_types": True,
            "providers": {"embedding": {"base_url": "http://x/v1", "model": "e", "cost_per_1k_tokens": 0.1}},
        }
    )
    assert config.max_concurrent_requests == 8 and config.strict_step_types is True
    assert config.embedding is not None and config.embedding.input_cost_per_1k_tokens == 0.1
    assert config.llm_judge is None
    assert config_from_mapping({}) == EngineConfig()
    with pytest.raises(ConfigError):
        config_from_mapping([])


def test_config_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "engine.json"
    path.write_text(json.dumps({"max_concurrent_requests": 3, "strict_step_types": True}))
    trace = refund_trace()
    trace["steps"][0]["type"] = "memory_write"
    messages: list[Any] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "sdk_name": "t",
                "sdk_version": "0",
                "protocol_version": 1,
                "required_capabilities": [],
                "preferred_encoding": "json",
            },
        },
        batch(1, trace, assertion("a", "trace", check="no_duplicates")),
    ]
    stdin = b"".join(json.dumps(message).encode() + b"\n" for message in messages)
    completed = run_cli("--log-level=warn", "--config", str(path), stdin=stdin)
    assert completed.returncode == 0
    initialized, evaluated = (json.loads(line) for line in completed.stdout.splitlines())
    assert initialized["result"]["max_concurrent_requests"] == 3
    assert error_of(evaluated, 1001)["message"] == "trace step 'reasoning' has unknown type 'memory_write'"


def test_stdin_may_be_a_file(tmp_path: Path) -> None:
    requests = tmp_path / "requests.ndjson"
    requests.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}) + "\n")
    with requests.open("rb") as stdin:
        completed = subprocess.run(
            [sys.executable, "-m", "attest_engine"],
            stdin=stdin,
            capture_output=True,
            timeout=60,
            env=engine_env(),
            cwd=ROOT,
        )
    assert completed.returncode == 0
    assert json.loads(completed.stdout)["result"] == {"sessions_completed": 0, "assertions_evaluated": 0}
