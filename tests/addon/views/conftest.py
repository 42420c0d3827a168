"""mitmproxy (used here to read flow fixtures and drive the tap) imports pyparsing APIs that now warn."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", "ignore:.*deprecated.*:DeprecationWarning")
