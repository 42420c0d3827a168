"""One configuration for both front doors (`oatf_engine.engine_config`): every engine setting is an `oatf_*` option
of the live addon and a flag of `oatf evaluate`, parsed by the same function."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mitmproxy.test import taddons

from oatf_engine.engine_config import SETTINGS, ConfigError, engine_config, parse_size
from oatf_engine.monitor import SessionKey
from testing.paths import ROOT


def test_every_setting_is_an_addon_option_and_an_evaluate_flag() -> None:
    sys.path.insert(0, str(ROOT / "addon"))
    from addon.oatf_addon import OatfAddon

    addon = OatfAddon()
    with taddons.context(addon) as context:
        declared = set(context.options.keys())
    help_text = subprocess.run([sys.executable, "-m", "oatf_cli.main", "evaluate", "--help"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout
    for setting in SETTINGS:
        assert setting.option in declared, setting.option
        assert setting.flag in help_text, setting.flag


def test_values_become_the_engine_configuration() -> None:
    config = engine_config({"session_key": "global", "grace_period": "3s", "idle_gap": "30s", "max_runs": 7,
                            "actor_bindings": "crm=crm.local:8080/mcp", "wire_max_body": "1k",
                            "wire_protocols": "api.local/x=a2a", "lenient": True})
    assert config.monitor.session_key is SessionKey.GLOBAL and config.monitor.grace_period == 3.0
    assert config.monitor.idle_gap == 30.0 and config.monitor.max_runs == 7
    assert config.monitor.bindings[0].actor == "crm" and config.monitor.bindings[0].port == 8080
    assert config.decoder.max_body_size == config.decoder.max_event_size == 1024
    assert config.decoder.overrides[0].protocol == "a2a" and config.lenient is True
    default = engine_config({})
    assert default.decoder.max_event_size == parse_size("16m"), "live and replay inspect the same event sizes"


@pytest.mark.parametrize(("name", "value"), [("session_key", "bogus"), ("grace_period", "1.5s"), ("max_runs", 0),
                                             ("actor_bindings", "nobody"), ("wire_max_body", "0"),
                                             ("wire_protocols", "nonsense")])
def test_a_bad_value_names_its_option(name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"^oatf_{name}:"):
        engine_config({name: value})
