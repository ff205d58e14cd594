"""The detectors module outside SGLang's environment (inside it, the contract suite
tests/integrations/test_adapter_contract.py drives the real SGLang classes): it refuses to
load (SGLang's plug-in loader logs it and goes on) with an IntegrationError naming the tested
range, before importing SGLang."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.paths import REPO_ROOT

from autoparser.integrations import sglang as plugin


def test_loading_without_sglang_is_an_integration_error() -> None:
    code = (
        "try:\n"
        "    from autoparser.integrations.sglang.detectors import register\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    env.pop(plugin.ANY_VERSION_ENV, None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("IntegrationError")
    assert f"sglang {plugin.TESTED_RANGE}" in out.stdout
