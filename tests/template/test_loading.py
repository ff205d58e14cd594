"""Loading templates from every place a model ships them, with their BOS/EOS strings."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gguf
import pytest

from autoparser import ChatTemplate
from autoparser.errors import TemplateError

DEFAULT = "D[{{ bos_token }}|{{ eos_token }}]{% for m in messages %}{{ m.content }}{% endfor %}"
TOOL_USE = (
    "T[{{ bos_token }}]{% for t in tools %}{{ t.function.name }};{% endfor %}"
    "{% for m in messages %}{{ m.content }}{% endfor %}"
)
HELLO = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def write_config(folder: Path, chat_template: Any, **extra: Any) -> Path:
    path = folder / "tokenizer_config.json"
    path.write_text(json.dumps({"chat_template": chat_template, **extra}), encoding="utf-8")
    return path


def write_gguf(path: Path, templates: str | list[dict[str, str]]) -> Path:
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_chat_template(templates)
    writer.add_token_list(["<unk>", "<|begin|>", "<|end|>"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_jinja_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text(DEFAULT, encoding="utf-8")
    template = ChatTemplate.from_file(path)
    assert template.source == DEFAULT
    assert template.name == str(path)
    assert template.render(HELLO) == "D[|]hi"


def test_tokenizer_config_string_with_added_token_dicts(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        DEFAULT,
        bos_token={"content": "<s>", "lstrip": False, "__type": "AddedToken"},
        eos_token="</s>",
    )
    template = ChatTemplate.from_file(path)
    assert (template.bos_token, template.eos_token) == ("<s>", "</s>")
    assert template.render(HELLO) == "D[<s>|</s>]hi"


def test_tokenizer_config_named_templates_pick_tool_use_only_with_tools(tmp_path: Path) -> None:
    named = [{"name": "default", "template": DEFAULT}, {"name": "tool_use", "template": TOOL_USE}]
    template = ChatTemplate.from_file(write_config(tmp_path, named, bos_token="<s>"))
    assert template.render(HELLO) == "D[<s>|]hi"
    assert template.render(HELLO, tools=TOOLS) == "T[<s>]f;hi"
    assert template.render(HELLO, tools=[]) == "T[<s>]hi"  # transformers: `tools is not None`
    assert template.variant("tool_use").source == TOOL_USE


def test_named_templates_without_default(tmp_path: Path) -> None:
    named = [{"name": "rag", "template": DEFAULT}, {"name": "tool_use", "template": TOOL_USE}]
    with pytest.raises(TemplateError, match="none 'default'"):
        ChatTemplate.from_file(write_config(tmp_path, named))
    single = [{"name": "only", "template": DEFAULT}]
    assert ChatTemplate.from_file(write_config(tmp_path, single)).source == DEFAULT


def test_directory_prefers_chat_template_jinja(tmp_path: Path) -> None:
    write_config(tmp_path, "from-config", bos_token="<s>", eos_token="</s>")
    assert ChatTemplate.from_file(tmp_path).source == "from-config"
    (tmp_path / "chat_template.jinja").write_text(DEFAULT, encoding="utf-8")
    template = ChatTemplate.from_file(tmp_path)
    assert template.source == DEFAULT
    assert template.render(HELLO) == "D[<s>|</s>]hi"


def test_directory_with_only_jinja(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text(DEFAULT, encoding="utf-8")
    assert ChatTemplate.from_file(tmp_path).render(HELLO) == "D[|]hi"


def test_gguf_single_template(tmp_path: Path) -> None:
    template = ChatTemplate.from_file(write_gguf(tmp_path / "m.gguf", DEFAULT))
    assert (template.bos_token, template.eos_token) == ("<|begin|>", "<|end|>")
    assert template.render(HELLO) == "D[<|begin|>|<|end|>]hi"


def test_gguf_named_templates(tmp_path: Path) -> None:
    named = [{"name": "default", "template": DEFAULT}, {"name": "tool_use", "template": TOOL_USE}]
    template = ChatTemplate.from_file(write_gguf(tmp_path / "m.gguf", named))
    assert template.render(HELLO) == "D[<|begin|>|<|end|>]hi"
    assert template.render(HELLO, tools=TOOLS) == "T[<|begin|>]f;hi"


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="no such file"):
        ChatTemplate.from_file(tmp_path / "missing.jinja")
    with pytest.raises(TemplateError, match="no chat_template"):
        ChatTemplate.from_file(write_config(tmp_path, None))
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(TemplateError, match="invalid JSON"):
        ChatTemplate.from_file(tmp_path / "broken.json")
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(TemplateError, match="GGUF"):
        ChatTemplate.from_file(tmp_path / "bad.gguf")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TemplateError, match="no chat_template"):
        ChatTemplate.from_file(empty)


def _fake_hub(snapshot: Path, calls: list[tuple[str, str, str | None]]) -> Any:
    from huggingface_hub.errors import EntryNotFoundError

    def hf_hub_download(repo_id: str, filename: str, revision: str | None = None) -> str:
        calls.append((repo_id, filename, revision))
        path = snapshot / filename
        if not path.exists():
            raise EntryNotFoundError(f"{filename} not in {repo_id}")
        return str(path)

    return hf_hub_download


def test_from_pretrained_offline_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    huggingface_hub = pytest.importorskip("huggingface_hub")
    snapshot = tmp_path / "models--org--model" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    write_config(snapshot, "config-template", bos_token="<s>", eos_token={"content": "</s>"})
    (snapshot / "chat_template.jinja").write_text(DEFAULT, encoding="utf-8")
    calls: list[tuple[str, str, str | None]] = []
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _fake_hub(snapshot, calls))
    template = ChatTemplate.from_pretrained("org/model", revision="v1")
    assert template.name == "org/model"
    assert template.render(HELLO) == "D[<s>|</s>]hi"
    assert {c[1] for c in calls} == {"tokenizer_config.json", "chat_template.jinja"}
    assert {c[2] for c in calls} == {"v1"}


def test_from_pretrained_config_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    huggingface_hub = pytest.importorskip("huggingface_hub")
    write_config(tmp_path, DEFAULT, bos_token="<s>")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _fake_hub(tmp_path, []))
    assert ChatTemplate.from_pretrained("org/model").render(HELLO) == "D[<s>|]hi"


def test_from_pretrained_without_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(TemplateError, match="huggingface_hub"):
        ChatTemplate.from_pretrained("org/model")


def test_other_special_tokens_passed_like_transformers(tmp_path: Path) -> None:
    source = "{{ pad_token }}|{{ unk_token }}|{{ mask_token is defined }}"
    path = write_config(tmp_path, source, pad_token="<pad>", unk_token={"content": "<unk>"})
    template = ChatTemplate.from_file(path)
    assert template.special_tokens == {"pad_token": "<pad>", "unk_token": "<unk>"}
    assert template.render(HELLO) == "<pad>|<unk>|False"
    assert template.render(HELLO, pad_token="P") == "P|<unk>|False"


def test_gguf_without_vocabulary_or_with_bad_ids(tmp_path: Path) -> None:
    path = tmp_path / "novocab.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_chat_template(DEFAULT)
    writer.add_bos_token_id(7)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert ChatTemplate.from_file(path).bos_token == ""
    path = tmp_path / "badid.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_chat_template(DEFAULT)
    writer.add_token_list(["<unk>", "<s>"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(99)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    template = ChatTemplate.from_file(path)
    assert (template.bos_token, template.eos_token) == ("<s>", "")
