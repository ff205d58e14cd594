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

_SCALARS = frozenset({str, int, float, bool, type(None)})


@overload
def plain_data(value: Mapping[str, object]) -> dict[str, object]: ...
@overload
def plain_data(value: object) -> object: ...
def plain_data(value: object) -> object:
    """A fresh copy made of plain JSON-like types, as transformers gives templates.

    Templates never see (or mutate) the caller's objects; subclasses of str/int/float are
    reduced to the base type, dataclasses to dicts, anything else to a ``<TypeName>`` string.
    Plain dicts, lists and scalars (what JSON gives: all of a request's thousands of tool
    schema nodes) are copied inline, without a call per scalar.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {
            k if type(k) is str else plain_data(k): v if type(v) in _SCALARS else plain_data(v)
            for k, v in value.items()  # type: ignore[attr-defined]
        }
    if kind is list:
        return [v if type(v) in _SCALARS else plain_data(v) for v in value]  # type: ignore[attr-defined]
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


# The content a call turn gets when the template refuses an empty one and never prints it
# (Command-A reads ``message.content[0].thinking``, which raises on "" and on None).
CALL_TURN_TEXT = " "


def with_call_turn_text(message: dict[str, object]) -> dict[str, object]:
    """An assistant turn with calls and no content, given ``CALL_TURN_TEXT`` as content."""
    if (
        message.get("role") == "assistant"
        and message.get("tool_calls")
        and not message.get("content")
    ):
        return {**message, "content": CALL_TURN_TEXT}
    return message


# JSON Schema types as the Python type names Cohere's tool definitions use.
_PYTHON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def _python_type(schema: object) -> str:
    """A parameter's JSON Schema type as a Python type name (``List[str]``, ``Any``)."""
    if not isinstance(schema, Mapping):
        return "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        names = [_PYTHON_TYPES.get(k, "Any") for k in kind if isinstance(k, str)]
        return f"Union[{', '.join(names)}]" if len(names) > 1 else (names or ["Any"])[0]
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"List[{_python_type(schema['items'])}]"
    return _PYTHON_TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"


def parameter_definitions_tool(tool: Mapping[str, object]) -> dict[str, object]:
    """An OpenAI tool in Cohere's own shape, which Command-R v01's template reads:
    ``{"name", "description", "parameter_definitions": {NAME: {"description", "type",
    "required"}}}``, types as Python names (what Cohere's documentation writes)."""
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, Mapping):
        return dict(tool)
    parameters = function.get("parameters")
    if not isinstance(parameters, Mapping):
        parameters = {}
    properties = parameters.get("properties")
    required = parameters.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    definitions = {
        name: {
            "description": schema.get("description", "") if isinstance(schema, Mapping) else "",
            "type": _python_type(schema),
            "required": name in required_names,
        }
        for name, schema in (properties.items() if isinstance(properties, Mapping) else ())
    }
    return {
        "name": function.get("name", ""),
        "description": function.get("description", ""),
        "parameter_definitions": definitions,
    }
