"""Saved analyses: read back equal, and ignored (logged) when stale or corrupt."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import pytest

import autoparser
from autoparser import ChatTemplate
from autoparser.analysis import saved
from autoparser.analysis.analyzer import clear_cache
from autoparser.cache import CACHES
from autoparser.template.environment import Clock

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# The generation prompt prints the date (as vllm-muse_glimmer does).
DATED = (
    "{% set opener = '<|assistant ' + strftime_now('%Y-%m-%d') + '|>' %}"
    "{% for m in messages %}{% if m.role == 'assistant' %}{{ opener }}"
    "{% else %}<|{{ m.role }}|>{% endif %}{{ m.content }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}{{ opener }}{% endif %}"
)


def _clock(day: int) -> Clock:
    return lambda: dt.datetime(2030, 1, day, 12, 0, 0)


def _forget() -> None:
    """A new process: nothing in memory."""
    CACHES.clear()
    clear_cache()


@pytest.fixture(autouse=True)
def _fresh_process() -> None:
    """Each test starts as a new process would: analyses saved by others are not in memory."""
    CACHES.clear()
    clear_cache()


def test_the_library_version_in_the_key_is_the_packages() -> None:
    assert autoparser.__version__ == saved.LIBRARY_VERSION


def test_a_saved_analysis_reads_back_equal_and_is_used(tmp_path: Path) -> None:
    path = ChatTemplate(CHATML).save_analysis(tmp_path / "a.json")
    computed = ChatTemplate(CHATML).analyze()
    _forget()
    template = ChatTemplate(CHATML)
    assert template.load_analysis(path)
    loaded = template.analyze()
    assert loaded == computed
    assert loaded.verification is not None and loaded.verification == computed.verification
    # Used, not recomputed: the analysis store answers without a miss, and the caps are
    # not probed again (the caps store neither).
    stats = CACHES.stats()
    assert template.analyze() is loaded
    assert template.caps == ChatTemplate(CHATML).caps
    after = CACHES.stats()
    assert after["analysis"].misses == stats["analysis"].misses
    assert after["caps"].misses == stats["caps"].misses


def test_the_cache_directory_is_filled_once_then_read(tmp_path: Path) -> None:
    first = ChatTemplate(CHATML, analysis_cache=tmp_path).analyze()
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1
    _forget()
    files[0].write_text(files[0].read_text().replace('"<|im_end|>', '"<|IM_END|>'))
    # The (altered) file is what the next process uses: proof it is read, not recomputed.
    second = ChatTemplate(CHATML, analysis_cache=tmp_path).analyze()
    assert "<|IM_END|>" in second.end_of_turn
    assert first.end_of_turn != second.end_of_turn


def test_another_template_or_token_is_a_different_key(tmp_path: Path) -> None:
    path = ChatTemplate(CHATML).save_analysis(tmp_path / "a.json")
    assert not ChatTemplate(CHATML + " ").load_analysis(path)
    assert not ChatTemplate(CHATML, eos_token="</s>").load_analysis(path)
    assert saved.cache_path(tmp_path, ChatTemplate(CHATML).renderer) != saved.cache_path(
        tmp_path, ChatTemplate(CHATML, bos_token="<s>").renderer
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("library", "0.0.0-old"), ("jinja2", "2.0"), ("format", 0), ("template_hash", "0" * 64)],
)
def test_a_stale_key_is_ignored_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, value: object
) -> None:
    path = ChatTemplate(CHATML).save_analysis(tmp_path / "a.json")
    data = json.loads(path.read_text())
    data["key"][field] = value
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.INFO, logger="autoparser.analysis.saved"):
        assert not ChatTemplate(CHATML).load_analysis(path)
    assert f"stale ({field} differs)" in caplog.text


def test_a_dated_template_is_keyed_by_the_render_date(tmp_path: Path) -> None:
    assert saved.render_date(ChatTemplate(CHATML, clock=_clock(4)).renderer) == ""
    day4 = ChatTemplate(DATED, clock=_clock(4), analysis_cache=tmp_path).analyze()
    assert "2030-01-04" in day4.generation_prompt
    _forget()
    # Another day: the saved analysis (which printed the 4th) is not used.
    day5 = ChatTemplate(DATED, clock=_clock(5), analysis_cache=tmp_path).analyze()
    assert "2030-01-05" in day5.generation_prompt
    # A pinned date is the render date too.
    pinned = ChatTemplate(DATED, now=dt.datetime(2031, 5, 6))
    assert saved.render_date(pinned.renderer) == "2031-05-06"


@pytest.mark.parametrize(
    "text",
    ["", "{", "[]", '{"key": {}}', '{"key": 1, "analysis": {}}', "\udcff", "CAPS"],
    ids=["empty", "truncated", "list", "no-fields", "bad-key", "not-utf8", "bad-caps"],
)
def test_a_corrupt_file_is_ignored_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    path = tmp_path / "a.json"
    if text == "CAPS":  # a good file but for one unknown capability
        ChatTemplate(CHATML).save_analysis(path)
        data = json.loads(path.read_text())
        data["caps"]["supports_teleportation"] = True
        text = json.dumps(data)
        _forget()
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with caplog.at_level(logging.INFO, logger="autoparser.analysis.saved"):
        template = ChatTemplate(CHATML)
        assert not template.load_analysis(path)
    assert "ignored" in caplog.text
    assert template.analyze().end_of_turn == ("<|im_end|>",)


def test_a_corrupt_file_in_the_cache_is_replaced(tmp_path: Path) -> None:
    path = saved.cache_path(tmp_path, ChatTemplate(CHATML).renderer)
    path.write_text("{not json")
    ChatTemplate(CHATML, analysis_cache=tmp_path).analyze()
    assert ChatTemplate(CHATML).load_analysis(path)


def test_a_missing_file_is_no_analysis(tmp_path: Path) -> None:
    assert not ChatTemplate(CHATML).load_analysis(tmp_path / "none.json")


def test_the_default_directory_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(saved.ENV_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert saved.default_analysis_cache() == tmp_path / "autoparser" / "analysis"
    monkeypatch.setenv(saved.ENV_VARIABLE, str(tmp_path / "mine"))
    assert saved.default_analysis_cache() == tmp_path / "mine"
    monkeypatch.setenv(saved.ENV_VARIABLE, "off")
    assert saved.default_analysis_cache() is None
