"""The vLLM plug-in package without vLLM: its entry point and its tested range."""

from __future__ import annotations

import importlib

import pytest
from helpers.paths import REPO_ROOT

from autoparser.integrations import vllm as plugin


def test_entry_point_names_the_register_function() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    target = project["entry-points"]["vllm.general_plugins"]["autoparser"]
    module, _, name = target.partition(":")
    assert callable(getattr(importlib.import_module(module), name))
    assert project["optional-dependencies"]["vllm"] == [f"vllm{plugin.TESTED_RANGE}"]
    low, high = plugin.TESTED_MIN, plugin.TESTED_BELOW
    assert f">={low[0]}.{low[1]},<{high[0]}.{high[1]}" == plugin.TESTED_RANGE
