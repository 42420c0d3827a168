"""Protocol of a mode (SDK spec §5.9 `extract_protocol`)."""

from __future__ import annotations

_ROLE_SUFFIXES = ("_server", "_client")


def extract_protocol(mode: str) -> str:
    """SDK spec §5.9 `extract_protocol`: `mode` without its `_server` / `_client` suffix
    (`"ag_ui_client"` → `"ag_ui"`); a mode with neither suffix (invalid, V-034) is returned unchanged."""
    for suffix in _ROLE_SUFFIXES:
        if mode.endswith(suffix):
            return mode[: -len(suffix)]
    return mode
