"""Hub model ids wherever a template is named (issue 37 §5): ``autoparser analyze
Qwen/Qwen3-0.6B``, ``serve --template``, ``python -m autoparser``. Offline: a fake Hugging
Face cache (``HF_HOME``) with ``HF_HUB_OFFLINE=1``, so the cache and offline mode are what
is tested, never the network."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.hf_cache import fake_hf_home
from helpers.paths import REPO_ROOT
from helpers.processes import free_port

pytest.importorskip("huggingface_hub", reason="the hub extra is not installed")

from autoparser.cli import is_hub_id

EXAMPLE = REPO_ROOT / "src/autoparser/examples/chatml_tools.jinja"


@pytest.fixture
def hf_home(tmp_path: Path) -> Path:
    """A Hugging Face cache holding ``acme/tiny``'s tokenizer_config.json."""
    config = {"chat_template": EXAMPLE.read_text(encoding="utf-8"), "eos_token": "<|im_end|>"}
    return fake_hf_home(tmp_path, "acme/tiny", config)


def _env(hf_home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT / "src"),
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
    }


def _run(hf_home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autoparser", *args],
        capture_output=True,
        text=True,
        env=_env(hf_home),
        timeout=300,
        cwd=cwd,
    )


def test_python_dash_m_runs_the_cli(hf_home: Path) -> None:
    done = _run(hf_home, "--version")
    assert done.returncode == 0 and done.stdout.startswith("autoparser ")


def test_analyze_takes_a_hub_id_from_the_cache(hf_home: Path, tmp_path: Path) -> None:
    done = _run(hf_home, "analyze", "acme/tiny", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tools: json_native" in done.stdout
    local = _run(hf_home, "analyze", str(EXAMPLE), cwd=tmp_path)
    assert local.stdout == done.stdout  # the same template, by id or by path


def test_a_hub_id_not_in_the_cache_offline_is_one_clear_error(
    hf_home: Path, tmp_path: Path
) -> None:
    done = _run(hf_home, "analyze", "acme/absent", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("autoparser: error: acme/absent")
    assert "Traceback" not in done.stderr


def test_serve_takes_a_hub_id(hf_home: Path, tmp_path: Path) -> None:
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    dead, port = f"http://127.0.0.1:{free_port()}", str(free_port())  # no engine: not needed
    args = ["serve", "--backend", dead, "--backend-kind", "llama.cpp", "--port", port]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "autoparser", *args, "--template", "acme/tiny"],
            stdout=out,
            stderr=out,
            env=_env(hf_home),
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 120
        while "starting:" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert "template=tiny" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_what_counts_as_a_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert is_hub_id("Qwen/Qwen3-0.6B") and is_hub_id("meta-llama/Llama-3.1-8B-Instruct")
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "model").mkdir()
    assert not is_hub_id("local/model")  # a path that exists is a path
    assert not is_hub_id("templates/chat.jinja")  # a mistyped file says "no such file"
    assert not is_hub_id("a/b/c") and not is_hub_id("model.jinja") and not is_hub_id("-")
