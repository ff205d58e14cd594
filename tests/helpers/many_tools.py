"""Deterministic sets of many tools with varied schemas, for grammar pinning and scaling.

The schemas cycle through the shapes requests carry (strings, numbers, enums, arrays,
nested objects, optional and required properties, descriptions, odd names) so that a
grammar built from them exercises schema conversion, rule naming and deduplication.
"""

from __future__ import annotations

import random
from typing import Any

_SHAPES: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a"],
    },
    {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["location"],
    },
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 40},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["query", "limit"],
    },
    {"type": "object", "properties": {}},
    {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            },
            "visible": {"type": "boolean"},
        },
        "required": ["point"],
    },
    {
        "type": "object",
        "properties": {
            "mode": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "count": {"type": "number"},
            "ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
        },
        "required": ["mode", "count", "ids"],
    },
]


def many_tools(n: int, prefix: str = "tool") -> list[dict[str, Any]]:
    """``n`` function tools named ``{prefix}_{i}`` (every fifth with a dash or dot kind of
    name) whose parameters cycle through the shapes above."""
    tools: list[dict[str, Any]] = []
    for i in range(n):
        name = f"{prefix}_{i}" if i % 5 else f"{prefix}-ns.{i}"
        shape = _SHAPES[i % len(_SHAPES)]
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"Tool number {i}.",
                    "parameters": shape,
                },
            }
        )
    return tools


_VERBS = ["get", "list", "create", "update", "delete", "search", "send", "fetch", "run", "set"]
_NOUNS = ["weather", "issue", "file", "user", "order", "email", "event", "repo", "page", "task"]
_PARAMS = [
    "query", "limit", "path", "city", "unit", "id", "name", "tags", "count", "verbose",
    "start", "end", "owner", "title", "body", "labels", "lat", "lon", "mode", "format",
]  # fmt: skip
_WORDS = ["red", "green", "blue", "fast", "slow", "asc", "desc", "json", "text", "auto"]


def _varied_schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    """One parameter's schema, of a kind real tools use, with a description mostly."""
    kind = rng.choice(
        ["string"] * 5
        + ["integer", "number", "boolean", "enum", "array", "nullable"]
        + (["object"] if depth == 0 else [])
    )
    schema: dict[str, Any]
    if kind == "enum":
        schema = {"type": "string", "enum": rng.sample(_WORDS, rng.randint(2, 4))}
    elif kind == "array":
        schema = {"type": "array", "items": {"type": rng.choice(["string", "integer"])}}
        if rng.random() < 0.3:
            schema["maxItems"] = rng.randint(1, 5)
    elif kind == "nullable":
        schema = {"anyOf": [{"type": rng.choice(["string", "integer"])}, {"type": "null"}]}
    elif kind == "object":
        inner = rng.sample(_PARAMS, 2)
        schema = {
            "type": "object",
            "properties": {n: _varied_schema(rng, depth + 1) for n in inner},
            "required": inner[:1],
        }
    elif kind == "integer" and rng.random() < 0.4:
        schema = {"type": "integer", "minimum": rng.randint(0, 5), "maximum": rng.randint(10, 99)}
    else:
        schema = {"type": kind}
    if rng.random() < 0.7:
        schema["description"] = f"The {rng.choice(_NOUNS)} {rng.choice(_PARAMS)}."
    return schema


def varied_tools(n: int, seed: int = 0, prefix: str = "") -> list[dict[str, Any]]:
    """``n`` tools as real tool sets have them, deterministic by ``seed``: distinct names
    (snake_case, camelCase, dotted and dashed), 0-6 parameters of varied kinds with their
    own names and descriptions, some required, some objects closed with
    ``additionalProperties: false``; a few parameter names that are not plain text."""
    rng = random.Random(seed)
    tools: list[dict[str, Any]] = []
    for i in range(n):
        verb, noun = rng.choice(_VERBS), rng.choice(_NOUNS)
        style = i % 4
        if style == 0:
            name = f"{verb}_{noun}_{i}"
        elif style == 1:
            name = f"{verb}{noun.capitalize()}{i}"
        elif style == 2:
            name = f"{noun}.{verb}-{i}"
        else:
            name = f"{verb}-{noun}{i}"
        count = rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 6])
        names = rng.sample(_PARAMS, count)
        if count and rng.random() < 0.3:
            names[0] = f"{names[0]}_{rng.randint(1, 9)}"
        if count and i % 50 == 7:
            names[-1] = "first name"  # not plain text: its call is built on its own
        params: dict[str, Any] = {
            "type": "object",
            "properties": {p: _varied_schema(rng) for p in names},
        }
        required = [p for p in names if rng.random() < 0.5]
        if required:
            params["required"] = required
        if rng.random() < 0.25:
            params["additionalProperties"] = False
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": prefix + name,
                    "description": f"{verb.capitalize()} the {noun} (tool {i}).",
                    "parameters": params,
                },
            }
        )
    return tools
