"""The SGLang plug-in package without SGLang: its entry point and its tested range."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers.paths import REPO_ROOT

from autoparser.integrations import sglang as plugin


def test_entry_point_names_the_register_function() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    target = project["entry-points"]["sglang.srt.plugins"]["autoparser"]
    assert target == "autoparser.integrations.sglang.detectors:register"
    assert project["optional-dependencies"]["sglang"] == [f"sglang{plugin.TESTED_RANGE}"]
    low, high = plugin.TESTED_MIN, plugin.TESTED_BELOW
    assert f">={low[0]}.{low[1]},<{high[0]}.{high[1]}" == plugin.TESTED_RANGE


def test_the_package_imports_without_sglang() -> None:
    code = "import autoparser.integrations.sglang as m, sys; print('sglang' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
