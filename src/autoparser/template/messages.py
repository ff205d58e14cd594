"""Messages as transformers hands them to a template, and the call ids probes write.

The bottom of the template package: the renderer, the probe and the caps use these, and
the polyfills (``template.polyfill``, above the caps) build on them. ``transformers_messages``
does exactly what transformers does to messages before rendering (drop ``None`` values, copy
to plain data, alias reasoning under ``thinking`` and ``reasoning_content``), so renders stay
byte-identical.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import overload

from autoparser.message import REASONING_KEYS


@overload
def plain_data(value: Mapping[str, object]) -> dict[str, object]: ...
@overload
def plain_data(value: object) -> object: ...
def plain_data(value: object) -> object:
    """A fresh copy made of plain JSON-like types, as transformers gives templates.

    Templates never see (or mutate) the caller's objects; subclasses of str/int/float are
    reduced to the base type, dataclasses to dicts, anything else to a ``<TypeName>`` string.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_data(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return plain_data(dump())
    return f"<{type(value).__name__}>"


def transformers_messages(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """Messages as transformers hands them to the template (see apply_chat_template)."""
    result: list[dict[str, object]] = []
    for message in messages:
        plain = {k: plain_data(v) for k, v in message.items() if v is not None}
        reasoning = next((plain[k] for k in REASONING_KEYS if plain.get(k) is not None), None)
        if reasoning is not None:
            plain = {"thinking": reasoning, **plain, "reasoning_content": reasoning}
        result.append(plain)
    return result


def named_call_id(name: str, index: int) -> str:
    """A call id that carries the call's name and position, ``functions.NAME:IDX``: the ids
    Kimi-K2 models write and templates of that family render in place of the name."""
    return f"functions.{name}:{index}"
