"""The README's main command: examples/demo.sh runs offline on the shipped example."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO_ROOT

DEMO = REPO_ROOT / "examples" / "demo.sh"


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell on this machine")
def test_demo_script_runs_and_parses_the_example_output() -> None:
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "autoparser").exists():
        pytest.skip("the autoparser console script is not installed next to this Python")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["sh", str(DEMO)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "supports_tool_calls" in out
    assert "<|im_start|>assistant" in out  # the rendered prompt ends with the generation prompt
    assert "root ::=" in out  # a grammar was printed
    # The whole-output parse is a JSON object between the parse header and the stream header.
    parsed = out.split("== autoparser parse\n", 1)[1].split("\n== autoparser parse --stream", 1)[0]
    message = json.loads(parsed)
    assert message["reasoning_content"] == "The user wants the weather in Paris."
    assert message["content"] == "Let me check."
    [call] = message["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    # The streamed deltas accumulate to the same message.
    deltas = [
        json.loads(line)
        for line in out.split("== autoparser parse --stream\n", 1)[1].splitlines()
        if line.strip()
    ]
    content = "".join(d.get("content") or "" for d in deltas)
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    arguments = "".join(
        tc["function"].get("arguments", "")
        for d in deltas
        for tc in d.get("tool_calls", [])
        if "function" in tc
    )
    assert (content, reasoning) == (message["content"], message["reasoning_content"])
    assert json.loads(arguments) == json.loads(call["function"]["arguments"])
