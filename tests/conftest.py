"""Test-suite-wide settings.

Hypothesis: CI shares a small machine with other work, so data generation and examples can be slow for
reasons that say nothing about the code under test. The profile below turns off the timing health check
and the per-example deadline for every property test (a test's own `@settings` still sets its example
count); correctness checks are unchanged. Under `CI=true` the examples are derandomized (the same ones every
run, so a landing is never decided by a new random draw); a developer's runs keep exploring new ones, and a
failure they find becomes an `@example` of its test."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("oatf", suppress_health_check=[HealthCheck.too_slow], deadline=None,
                          derandomize=os.environ.get("CI") == "true")
settings.load_profile("oatf")
