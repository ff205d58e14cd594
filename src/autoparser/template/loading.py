"""Reading chat templates and their special tokens from the places models ship them.

A model ships its template as a ``.jinja`` file, inside ``tokenizer_config.json`` (one string,
or a list of named templates such as ``default`` and ``tool_use``), next to it as
``chat_template.jinja``, or in a GGUF file's metadata. This module turns each of those into
one plain :class:`TemplateSource`; choosing among named variants happens at render time.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autoparser.errors import TemplateError

DEFAULT_VARIANT = "default"
TOOL_USE_VARIANT = "tool_use"


@dataclasses.dataclass(frozen=True)
class TemplateSource:
    """Template texts by variant name, plus the BOS/EOS strings they are rendered with."""

    variants: Mapping[str, str]
    bos_token: str = ""
    eos_token: str = ""
    name: str = "<template>"
    special_tokens: Mapping[str, str] = dataclasses.field(default_factory=dict)


# Further named tokens transformers passes to every template (see ``special_tokens_map``).
OTHER_TOKEN_KEYS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _other_tokens(config: Mapping[str, object]) -> dict[str, str]:
    found = {key: _token_text(config.get(key)) for key in OTHER_TOKEN_KEYS}
    return {key: text for key, text in found.items() if config.get(key) is not None}


def _token_text(value: object) -> str:
    """A special token from tokenizer_config.json: a plain string or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return ""


def _variants_from_config_value(value: object, where: str) -> dict[str, str]:
    if isinstance(value, str):
        return {DEFAULT_VARIANT: value}
    if isinstance(value, list):
        variants: dict[str, str] = {}
        for entry in value:
            if not (
                isinstance(entry, Mapping)
                and isinstance(entry.get("name"), str)
                and isinstance(entry.get("template"), str)
            ):
                raise TemplateError(
                    f"{where}: chat_template list entries need 'name' and 'template'"
                )
            variants[entry["name"]] = entry["template"]
        return variants
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}
    raise TemplateError(f"{where}: chat_template must be a string or a list of named templates")


def _read_text(path: Path) -> str:
    """The file's text; a file that is not UTF-8 is a TemplateError naming the first bad byte."""
    return decode_text(path.read_bytes(), str(path))


def decode_text(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text, or a TemplateError naming ``name`` and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(
            f"{name}: not UTF-8 text (byte {exc.start}: {exc.object[exc.start]:#04x})"
        ) from None


def _read_config(path: Path) -> dict[str, object]:
    return _config_from_text(_read_text(path), str(path))


def _config_from_text(text: str, name: str) -> dict[str, object]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(f"{name}: invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise TemplateError(f"{name}: expected a JSON object")
    return data


def _from_config(config: Mapping[str, object], name: str) -> TemplateSource:
    if "chat_template" not in config or config["chat_template"] is None:
        raise TemplateError(f"{name}: no chat_template in tokenizer config")
    return TemplateSource(
        variants=_variants_from_config_value(config["chat_template"], name),
        bos_token=_token_text(config.get("bos_token")),
        eos_token=_token_text(config.get("eos_token")),
        name=name,
        special_tokens=_other_tokens(config),
    )


def load_tokenizer_config(path: Path) -> TemplateSource:
    return _from_config(_read_config(path), str(path))


def load_text(text: str, name: str = "<template>") -> TemplateSource:
    """Template text that was not read from a named file (stdin, a paste): a
    tokenizer_config.json's text when it is a JSON object, else the Jinja source itself."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # Jinja text that starts with "{{" or "{%"
        if isinstance(data, dict):
            return _from_config(data, name)
    return TemplateSource(variants={DEFAULT_VARIANT: text}, name=name)


def load_directory(path: Path) -> TemplateSource:
    """A model directory: ``chat_template.jinja`` wins over the config's template, as in HF."""
    config_path = path / "tokenizer_config.json"
    jinja_path = path / "chat_template.jinja"
    config = _read_config(config_path) if config_path.is_file() else {}
    variants: dict[str, str] = {}
    if config.get("chat_template") is not None:
        variants = _variants_from_config_value(config["chat_template"], str(config_path))
    extra = sorted((path / "additional_chat_templates").glob("*.jinja"))
    if jinja_path.is_file() or extra:
        variants = {}
        if jinja_path.is_file():
            variants[DEFAULT_VARIANT] = _read_text(jinja_path)
        for file in extra:
            variants[file.stem] = _read_text(file)
    if not variants:
        raise TemplateError(f"{path}: no chat_template.jinja and no chat_template in config")
    return TemplateSource(
        variants=variants,
        bos_token=_token_text(config.get("bos_token")),
        eos_token=_token_text(config.get("eos_token")),
        name=str(path),
        special_tokens=_other_tokens(config),
    )


def _gguf_value(field: Any) -> Any:
    # gguf ships no types: its fields are the one ``Any`` of template loading.
    return field.contents()


def load_gguf(path: Path) -> TemplateSource:
    """GGUF metadata: ``tokenizer.chat_template[.<name>]`` and BOS/EOS from the vocabulary."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path), "r")
    except (ValueError, OSError) as exc:
        raise TemplateError(f"{path}: cannot read GGUF: {exc}") from exc
    fields = reader.fields
    prefix = "tokenizer.chat_template"
    variants: dict[str, str] = {}
    for key, field in fields.items():
        if key == prefix:
            variants[DEFAULT_VARIANT] = str(_gguf_value(field))
        elif key.startswith(prefix + "."):
            variants[key[len(prefix) + 1 :]] = str(_gguf_value(field))
    if not variants:
        raise TemplateError(f"{path}: GGUF has no tokenizer.chat_template")
    tokens = fields.get("tokenizer.ggml.tokens")

    def token(key: str) -> str:
        field = fields.get(key)
        if field is None or tokens is None:
            return ""
        index = int(_gguf_value(field))
        # Decode just this entry: vocabularies hold 100k+ tokens.
        return str(tokens.contents(index)) if 0 <= index < len(tokens.data) else ""

    return TemplateSource(
        variants=variants,
        bos_token=token("tokenizer.ggml.bos_token_id"),
        eos_token=token("tokenizer.ggml.eos_token_id"),
        name=str(path),
    )


def load_path(path: str | Path) -> TemplateSource:
    """Dispatch on what ``path`` is: directory, ``.gguf``, ``.json`` config, or template text."""
    p = Path(path)
    if p.is_dir():
        return load_directory(p)
    if not p.is_file():
        raise TemplateError(f"{p}: no such file or directory")
    if p.suffix == ".gguf":
        return load_gguf(p)
    if p.suffix == ".json":
        return load_tokenizer_config(p)
    return TemplateSource(variants={DEFAULT_VARIANT: _read_text(p)}, name=str(p))


HUB_FILES = ("tokenizer_config.json", "chat_template.jinja")


def load_pretrained(repo_id: str, revision: str | None = None) -> TemplateSource:
    """Fetch a model's template files from the Hugging Face Hub (optional dependency)."""
    try:
        import huggingface_hub
    except ImportError as exc:
        raise TemplateError(
            "from_pretrained needs huggingface_hub: pip install 'autoparser[hub]'"
        ) from exc
    from huggingface_hub.errors import EntryNotFoundError

    folder: Path | None = None
    for filename in HUB_FILES:
        try:
            local = huggingface_hub.hf_hub_download(repo_id, filename, revision=revision)
        except EntryNotFoundError:
            continue
        except Exception as exc:
            raise TemplateError(f"{repo_id}: cannot fetch {filename}: {exc}") from exc
        folder = Path(local).parent
    if folder is None:
        raise TemplateError(f"{repo_id}: neither {' nor '.join(HUB_FILES)} found")
    source = load_directory(folder)
    return dataclasses.replace(source, name=repo_id)
