"""The CLI saves a template's analysis in the default cache directory and reads it back."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoparser import CACHES
from autoparser.analysis.analyzer import clear_cache
from autoparser.analysis.saved import ENV_VARIABLE
from autoparser.cli import main

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(autouse=True)
def _fresh_process() -> None:
    """Each test starts as a new process would: analyses saved by others are not in memory."""
    CACHES.clear()
    clear_cache()


def test_the_cli_saves_the_analysis_and_uses_it_on_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_VARIABLE, str(cache))
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML, encoding="utf-8")
    assert main(["analyze", str(template)]) == 0
    (saved,) = cache.glob("*.json")
    first = capsys.readouterr().out
    assert "<|im_end|>" in first
    # The next run (a new process: nothing in memory) reads the file: an altered marker in
    # it shows through.
    CACHES.clear()
    clear_cache()
    saved.write_text(saved.read_text().replace('"<|im_end|>', '"<|IM_END|>'))
    assert main(["analyze", str(template)]) == 0
    assert "<|IM_END|>" in capsys.readouterr().out


def test_the_cli_saves_nothing_when_the_cache_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV_VARIABLE, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML, encoding="utf-8")
    assert main(["analyze", str(template)]) == 0
    capsys.readouterr()
    assert not list(tmp_path.rglob("*.json"))
