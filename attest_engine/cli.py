"""The `attest-engine` command (Attest protocol v1 §1.3 `--log-level`, §1.4 `--config`, §5 `--eval-timeout`).

    attest-engine [--log-level debug|info|warn|error] [--config PATH] [--eval-timeout DURATION]

Both `--log-level=warn` (how the attest-ai SDK starts the engine) and `--log-level warn` are accepted.
`--eval-timeout` is seconds (`30`, `2.5`) or a duration with a unit (`500ms`, `30s`, `2m`). Exit status:
0 after `shutdown` or end of input, 2 for a bad command line or config.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal

import re2

from .assertions import Providers
from .config import ConfigError, EngineConfig, load_config
from .logs import LEVEL_ALIASES, LEVELS, JsonLogger
from .session import ENGINE_VERSION
from .stdio import serve

_DURATION = re2.compile(r"\A([0-9]+(?:\.[0-9]+)?)(ms|s|m)?\z")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration(text: str) -> float:
    """Seconds from `30`, `2.5`, `500ms`, `30s` or `2m`; argparse reports a ValueError as a usage error."""
    match = _DURATION.match(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(text)
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


parse_duration.__name__ = "duration"  # how argparse names the type in its error message


def _log_level(text: str) -> str:
    level = LEVEL_ALIASES.get(text.lower(), text.lower())
    if level not in LEVELS:
        raise ValueError(text)
    return level


_log_level.__name__ = "log level (debug, info, warn, error)"


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attest-engine",
        description="Attest protocol v1 evaluation engine: JSON-RPC 2.0 over NDJSON on stdin/stdout.",
    )
    parser.add_argument("--log-level", type=_log_level, default="warn", help="stderr log level (default: warn)")
    parser.add_argument("--config", help="engine config file (JSON; see attest_engine/README.md)")
    parser.add_argument("--eval-timeout", type=parse_duration, help="time limit per evaluate_batch (default: 30s)")
    parser.add_argument("--version", action="version", version=f"attest-engine {ENGINE_VERSION}")
    return parser


def _providers(config: EngineConfig) -> Providers:
    if config.embedding is None and config.llm_judge is None:
        return Providers()
    from .providers import OpenAICompatible  # needs httpx, only when a provider is configured

    return Providers(
        embedding=None if config.embedding is None else OpenAICompatible(config.embedding, "embedding"),
        judge=None if config.llm_judge is None else OpenAICompatible(config.llm_judge, "llm_judge"),
    )


async def _run(config: EngineConfig, logger: JsonLogger) -> None:
    await serve(config, logger, _providers(config))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `attest-engine` console script."""
    args = _arguments().parse_args(argv)
    logger = JsonLogger(args.log_level)
    try:
        config = load_config(args.config) if args.config else EngineConfig()
    except ConfigError as exc:
        logger.error(str(exc))
        logger.close()
        return 2
    if args.eval_timeout is not None:
        config = dataclasses.replace(config, eval_timeout_s=args.eval_timeout)
    try:
        asyncio.run(_run(config, logger))
        # The protocol is over; a client that terminates us right after `shutdown` (attest-ai does) must
        # not turn the clean exit into a death by signal while the last log lines are flushed.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    finally:
        logger.close()
    return 0
