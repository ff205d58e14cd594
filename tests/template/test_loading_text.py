"""``load_text`` (a template that is text, not a named file: stdin, a paste) and the
non-UTF-8 error of every file a template is read from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoparser.errors import TemplateError
from autoparser.template.loading import DEFAULT_VARIANT, decode_text, load_path, load_text


def test_jinja_text_starting_with_a_brace_is_jinja() -> None:
    for text in ("{{ bos_token }}{% for m in messages %}{% endfor %}", "{%- set x = 1 -%}", "hi"):
        assert load_text(text).variants == {DEFAULT_VARIANT: text}


def test_config_text_brings_variants_and_tokens() -> None:
    config = {
        "chat_template": [{"name": "default", "template": "D"}, {"name": "rag", "template": "R"}],
        "bos_token": {"content": "<s>"},
        "eos_token": "</s>",
    }
    loaded = load_text(json.dumps(config), "cfg")
    assert dict(loaded.variants) == {"default": "D", "rag": "R"}
    assert (loaded.bos_token, loaded.eos_token, loaded.name) == ("<s>", "</s>", "cfg")
    with pytest.raises(TemplateError, match="cfg: no chat_template"):
        load_text('{"bos_token": "<s>"}', "cfg")


def test_non_utf8_files_name_the_byte(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=r"x: not UTF-8 text \(byte 2: 0xff\)"):
        decode_text(b"ab\xff", "x")
    jinja = tmp_path / "t.jinja"
    jinja.write_bytes(b"\xfe{{ 1 }}")
    with pytest.raises(TemplateError, match=r"t\.jinja: not UTF-8 text"):
        load_path(jinja)
    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").write_bytes(b"{{ '\xe9' }}")
    with pytest.raises(TemplateError, match=r"chat_template\.jinja: not UTF-8 text"):
        load_path(model)
