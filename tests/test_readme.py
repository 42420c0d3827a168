"""The README's SDK example runs as written."""

from __future__ import annotations

import re

import pytest

from testing.paths import ROOT


def test_readme_python_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "the README shows the SDK in a python block"
    monkeypatch.chdir(ROOT)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert "exploited" in capsys.readouterr().out
