"""``autoparser studio ORG/NAME`` opens a Hub model's template from the Hugging Face cache,
offline (issue 37 §5), and prints the URL with the launch's token."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from helpers.hf_cache import fake_hf_home
from helpers.paths import REPO_ROOT
from helpers.processes import free_port

pytest.importorskip("aiohttp", reason="the studio extra (aiohttp) is not installed")
pytest.importorskip("huggingface_hub", reason="the hub extra is not installed")

EXAMPLE = REPO_ROOT / "src/autoparser/examples/chatml_tools.jinja"


def test_the_studio_opens_a_hub_id_from_the_cache(tmp_path: Path) -> None:
    source = EXAMPLE.read_text(encoding="utf-8")
    home = fake_hf_home(tmp_path, "acme/tiny", {"chat_template": source})
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT / "src"),
        "HF_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
    }
    port = str(free_port())
    cmd = [sys.executable, "-m", "autoparser", "studio", "acme/tiny", "--no-browser"]
    proc = subprocess.Popen(
        [*cmd, "--port", port], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/#token=([\w-]+)", line)
        assert found, line + proc.stderr.read()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/template", headers={"X-Studio-Token": found[1]}
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            initial = json.loads(answer.read())
        assert initial["name"].endswith("tiny") and initial["variants"]["default"] == source
    finally:
        proc.terminate()
        proc.wait(timeout=30)
