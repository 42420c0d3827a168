"""One configuration for every front door: the live addon's `oatf_*` options and `oatf evaluate`'s flags are
declared from the same `SETTINGS` and turned into an `EngineConfig` by the same `engine_config`, so one
capture gets the same verdicts live and in CI. Sans-I/O: no mitmproxy, no files.

A setting `grace_period` is the mitmproxy option `oatf_grace_period` and the flag `--grace-period`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import oatf

from .monitor.options import ActorBinding, MonitorOptions, SessionKey
from .wire import DecoderConfig, parse_overrides


@dataclass(frozen=True)
class Setting:
    """One engine setting, as both front doors declare it."""

    name: str
    kind: type
    default: str | int | bool
    help: str
    choices: tuple[str, ...] | None = None

    @property
    def option(self) -> str:
        """The mitmproxy option name."""
        return f"oatf_{self.name}"

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--" + self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("session_key", str, SessionKey.AUTO.value, "What groups traffic into runs.",
            tuple(k.value for k in SessionKey)),
    Setting("grace_period", str, "10s", "Quiet time after every actor is terminal before the verdict, when the "
            "attack sets no grace_period."),
    Setting("idle_gap", str, "2m", "Time without traffic after which a keyless route's next message starts a "
            "new agent episode."),
    Setting("max_run_lifetime", str, "1h", "Conclude a run still open after this long."),
    Setting("max_runs", int, 100_000, "Live runs kept at once (least recently active evicted; ~4 KB each)."),
    Setting("actor_bindings", str, "", "Bind actors to endpoints: name=host[:port][/path],..."),
    Setting("semantic_evaluator", str, "", "module:attribute of a SemanticEvaluator; without one, semantic "
            "indicators are skipped."),
    Setting("lenient", bool, False, "Load documents that fail the strict checks (an indicator or trigger that "
            "can never fire) anyway, with a warning, instead of refusing them."),
    Setting("wire_max_body", str, "16m", "Largest body (after content decoding) and SSE event the wire decoders "
            "inspect; larger ones pass through uninspected, with one diagnostic."),
    Setting("wire_protocols", str, "", "Pin traffic to a protocol: HOST[:PORT][/PATH]=mcp|a2a|ag_ui|ignore, "
            "comma-separated (HOST may use * wildcards). Unpinned traffic is recognized from its content."),
)
"""Every setting of the engine, in the order front doors list them."""


class ConfigError(ValueError):
    """A setting's value is invalid; the message names the setting's option."""


@dataclass(frozen=True)
class EngineConfig:
    """What the engine is built from, whichever front door builds it."""

    monitor: MonitorOptions
    decoder: DecoderConfig
    semantic_evaluator: str
    """`module:attribute` (loaded where the monitor runs: `oatf_engine.semantic`), or ""."""
    lenient: bool


_SIZE = re.compile(r"(\d+)\s*([kmg]?)b?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """`16m`, `512k`, `1g`, `4096` as bytes (binary multiples)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a size such as 16m, 512k or 4096")
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[match.group(2).lower()]


def _seconds(text: str) -> float:
    try:
        return oatf.parse_duration(text).total_seconds()
    except oatf.OATFParseError as exc:
        raise ValueError(exc.errors[0].message) from None


def engine_config(values: Mapping[str, Any]) -> EngineConfig:
    """The configuration from setting values by name (missing ones take their default). Raises
    `ConfigError` naming the option of the first invalid value."""
    value = {s.name: values.get(s.name, s.default) for s in SETTINGS}

    def parsed(name: str, parse: Any) -> Any:
        try:
            return parse(value[name])
        except ValueError as exc:
            raise ConfigError(f"oatf_{name}: {exc}") from None

    session_key = parsed("session_key", SessionKey)
    max_runs = int(value["max_runs"])
    if max_runs < 1:
        raise ConfigError("oatf_max_runs: must be at least 1")
    size = parsed("wire_max_body", parse_size)
    if not size:
        raise ConfigError("oatf_wire_max_body: must be a positive size, e.g. 16m")
    monitor = MonitorOptions(
        session_key=session_key,
        grace_period=parsed("grace_period", _seconds),
        max_run_lifetime=parsed("max_run_lifetime", _seconds),
        max_runs=max_runs,
        bindings=parsed("actor_bindings", lambda text: tuple(
            ActorBinding.parse(b) for b in text.split(",") if b.strip())),
        idle_gap=parsed("idle_gap", _seconds),
    )
    decoder = DecoderConfig(max_body_size=size, max_event_size=size,
                            overrides=parsed("wire_protocols", parse_overrides))
    return EngineConfig(monitor, decoder, str(value["semantic_evaluator"]), bool(value["lenient"]))
