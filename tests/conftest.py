"""Test-suite-wide settings.

Hypothesis: CI shares a small machine with other work, so data generation and examples can be slow for
reasons that say nothing about the code under test. The profile below turns off the timing health check
and the per-example deadline for every property test (a test's own `@settings` still sets its example
count); correctness checks are unchanged."""

from hypothesis import HealthCheck, settings

settings.register_profile("oatf", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("oatf")
