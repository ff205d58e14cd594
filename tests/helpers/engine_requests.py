"""Request bodies read by the engines' own request models (vLLM's and SGLang's pydantic
classes), in the engines' environments: vLLM's is built by scripts/setup_vllm.sh
(``$AUTOPARSER_VLLM_PYTHON`` or ~/.cache/autoparser/vllm-venv), SGLang's is
``$AUTOPARSER_SGLANG_PYTHON`` or ~/.cache/autoparser/sglang-venv (only the protocol modules
are imported: no GPU needed). A test without the environment, or in one that cannot import
the engine's request models, is skipped, naming it; a body the models refuse fails it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

PYTHONS = {
    "vllm": os.environ.get(
        "AUTOPARSER_VLLM_PYTHON",
        str(Path.home() / ".cache" / "autoparser" / "vllm-venv" / "bin" / "python"),
    ),
    "sglang": os.environ.get(
        "AUTOPARSER_SGLANG_PYTHON",
        str(Path.home() / ".cache" / "autoparser" / "sglang-venv" / "bin" / "python"),
    ),
}

# Each body is read by ``module:Class(**body)`` and dumped back as JSON (what the engine
# kept of it: unknown fields dropped or kept, defaults filled).
_READ = """
import importlib, json, sys
requests = json.load(sys.stdin)
try:
    places = [where.split(":") for where, _ in requests]
    models = [getattr(importlib.import_module(module), name) for module, name in places]
except ImportError as exc:
    print(json.dumps({"unavailable": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
print(json.dumps([m(**body).model_dump(mode="json") for m, (_, body) in zip(models, requests)]))
"""


def engine_reads(engine: str, requests: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each ``(module:Class, body)`` as the engine's request model reads it."""
    python = PYTHONS[engine]
    if not Path(python).exists():
        pytest.skip(f"no {engine} environment at {python}")
    done = subprocess.run(
        [python, "-c", _READ],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if isinstance(answer, dict):  # the environment cannot import the engine's models
        pytest.skip(f"the {engine} environment at {python} is incomplete: {answer['unavailable']}")
    read: list[dict[str, Any]] = answer
    return read
