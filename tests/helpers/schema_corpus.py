"""The schema corpus: tests/data/schemas/corpus.json and the schemas built here
(tests/schema/test_convert_schema_corpus.py, tests/schema/test_convert.py).
"""

from __future__ import annotations

import json
from typing import Any

from helpers.paths import TESTS_DIR

CORPUS_FILE = TESTS_DIR / "data" / "schemas" / "corpus.json"


PARAM_TYPES: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "integer", "minimum": 0, "maximum": 1000},
    {"type": "boolean"},
    {"type": "number"},
    {"type": "string", "enum": ["low", "medium", "high"]},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
]

NODE = {
    "type": "object",
    "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3},
    },
    "required": ["value"],
    "additionalProperties": False,
}
EXPR = {
    "anyOf": [
        {"type": "number"},
        {
            "type": "object",
            "properties": {
                "op": {"enum": ["+", "-", "*", "/"]},
                "args": {
                    "type": "array",
                    "items": {"$ref": "#/$defs/expr"},
                    "minItems": 2,
                    "maxItems": 2,
                },
            },
            "required": ["op", "args"],
            "additionalProperties": False,
        },
    ]
}  # fmt: skip


def built_schemas() -> dict[str, Any]:
    """Schemas easier to build than to write: 50 optional parameters, recursive trees."""
    many = {
        "type": "object",
        "properties": {f"param_{i:02d}": PARAM_TYPES[i % len(PARAM_TYPES)] for i in range(50)},
        "additionalProperties": False,
    }
    return {
        "tool-50-optional": many,
        "tool-50-optional-2-required": {**many, "required": ["param_07", "param_31"]},
        "recursive-tree": {"$defs": {"node": NODE}, "$ref": "#/$defs/node"},
        "recursive-root-list": {
            "type": "object",
            "properties": {
                "v": {"type": "string", "maxLength": 3},
                "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
            },
            "required": ["v", "next"],
            "additionalProperties": False,
        },
        "recursive-expression": {"$defs": {"expr": EXPR}, "$ref": "#/$defs/expr"},
    }


def corpus() -> dict[str, Any]:
    schemas: dict[str, Any] = json.loads(CORPUS_FILE.read_text(encoding="utf-8"))
    schemas.update(built_schemas())
    return schemas
