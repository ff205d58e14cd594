"""``autoparser render`` and ``autoparser caps`` on every kind of template location."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gguf
import pytest

from autoparser import ChatTemplate
from autoparser.cli import main
from autoparser.examples import example_path

EXAMPLE = example_path()
SOURCE = EXAMPLE.read_text(encoding="utf-8")
MESSAGES = EXAMPLE.parent / "conversation.json"
TOOLS = EXAMPLE.parent / "tools.json"


def as_jinja(folder: Path) -> Path:
    path = folder / "example.jinja"
    path.write_text(SOURCE, encoding="utf-8")
    return path


def as_config(folder: Path) -> Path:
    path = folder / "tokenizer_config.json"
    config = {"chat_template": SOURCE, "bos_token": "<s>", "eos_token": {"content": "</s>"}}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def as_directory(folder: Path) -> Path:
    (folder / "chat_template.jinja").write_text(SOURCE, encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<s>"}), encoding="utf-8"
    )
    return folder


def as_gguf(folder: Path) -> Path:
    path = folder / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_chat_template(SOURCE)
    writer.add_token_list(["<unk>", "<s>", "</s>"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


KINDS = {"jinja": as_jinja, "config": as_config, "directory": as_directory, "gguf": as_gguf}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_render(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = KINDS[kind](tmp_path)
    code = main(["render", str(path), "--messages", str(MESSAGES), "--tools", str(TOOLS)])
    out = capsys.readouterr().out
    messages = json.loads(MESSAGES.read_text(encoding="utf-8"))
    tools = json.loads(TOOLS.read_text(encoding="utf-8"))
    assert code == 0
    assert out == ChatTemplate(SOURCE).render(messages, tools=tools)
    assert "<tool_call>" in out and "<think>" in out and '"get_weather"' in out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_caps(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = KINDS[kind](tmp_path)
    assert main(["caps", str(path), "--json"]) == 0
    caps = json.loads(capsys.readouterr().out)
    assert caps["supports_tools"] is True and caps["renders_reasoning"] is True
    assert caps["requires_typed_content"] is False
    assert main(["caps", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(caps)
    assert any(line.split() == ["supports_tool_calls", "yes"] for line in lines)


def test_render_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = as_jinja(tmp_path)
    assert main(["render", str(path), "--enable-thinking", "false"]) == 0
    assert capsys.readouterr().out.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert main(["render", str(path), "--no-generation-prompt"]) == 0
    assert capsys.readouterr().out == "<|im_start|>user\nHello!<|im_end|>\n"


def test_render_no_polyfills(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = tmp_path / "t.jinja"
    template.write_text(
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}"
        "{% endif %}[{{ m.content }}]{% endfor %}",
        encoding="utf-8",
    )
    messages = tmp_path / "m.json"
    messages.write_text(
        json.dumps([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    )
    assert main(["render", str(template), "--messages", str(messages)]) == 0
    assert capsys.readouterr().out == "[S\n\nU]"
    assert main(["render", str(template), "--messages", str(messages), "--no-polyfills"]) == 2
    assert "no system" in capsys.readouterr().err


def test_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for %}", encoding="utf-8")
    assert main(["caps", str(bad)]) == 2
    assert "syntax error at line 1" in capsys.readouterr().err
    assert main(["render", str(tmp_path / "missing.jinja")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_console_script_on_shipped_example() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "autoparser.cli", "render", str(EXAMPLE)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"
