"""Deterministic sets of many tools with varied schemas, for grammar pinning and scaling.

The schemas cycle through the shapes requests carry (strings, numbers, enums, arrays,
nested objects, optional and required properties, descriptions, odd names) so that a
grammar built from them exercises schema conversion, rule naming and deduplication.
"""

from __future__ import annotations

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
