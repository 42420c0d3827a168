"""Test-suite-wide settings.

Hypothesis: CI shares a small machine with other work, so data generation and examples can be slow for
reasons that say nothing about the code under test. The profile below turns off the timing health check
and the per-example deadline for every property test (a test's own `@settings` still sets its example
count); correctness checks are unchanged. Under `CI=true` the examples are derandomized (the same ones every
run, so a landing is never decided by a new random draw); a developer's runs keep exploring new ones, and a
failure they find becomes an `@example` of its test.

mitmproxy's certificate authority: every mitmdump and mitmweb the tests start makes it in `~/.mitmproxy` when it is
not there yet. The suite runs on several pytest-xdist workers (`scripts/test.sh`), so on a fresh machine two of
them could write it at once, or one read it half written; it is made once here, before the workers start."""

import os

import pytest
from hypothesis import HealthCheck, settings
from mitmproxy import certs
from mitmproxy.options import CONF_BASENAME, CONF_DIR, KEY_SIZE

settings.register_profile("oatf", suppress_health_check=[HealthCheck.too_slow], deadline=None,
                          derandomize=os.environ.get("CI") == "true")
settings.load_profile("oatf")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # pytest-xdist's controller, or a run without workers
        certs.CertStore.from_store(os.path.expanduser(CONF_DIR), CONF_BASENAME, KEY_SIZE)
