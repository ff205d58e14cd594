"""Whether a tool parameter is written as raw text or as JSON."""

from __future__ import annotations

from typing import Any

import pytest

from autoparser.schema import parameter_is_string
from autoparser.schema.argument_types import json_type, value_types


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "null"),
        (True, "boolean"),
        ("x", "string"),
        (3, "integer"),
        (3.0, "integer"),
        (3.5, "number"),
        ([1], "array"),
        ((1, 2), "array"),
        ({"a": 1}, "object"),
    ],
)
def test_json_type_names_a_values_schema_type(value: Any, kind: str) -> None:
    assert json_type(value) == kind


def test_value_types_reads_types_enums_and_refs() -> None:
    assert value_types({"type": ["string", "integer"]}) == {"string", "integer"}
    assert value_types({"enum": ["a", 1, None]}) == {"string", "integer", "null"}
    assert value_types({}) is None  # any value
    root = {"$defs": {"n": {"type": "number"}}}
    assert value_types({"$ref": "#/$defs/n"}, root) == {"number"}
    assert value_types({"$ref": "#/$defs/nothing"}, root) is None


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, True),
        ({"type": ["string", "null"]}, True),
        ({"type": "string", "nullable": True}, True),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True),
        ({"oneOf": [{"type": "string", "format": "date"}, {"enum": ["x"]}]}, True),
        ({"enum": ["a", "b"]}, True),
        ({"const": "x"}, True),
        ({"pattern": "^a"}, True),
        ({"type": ["string", "number"]}, False),
        ({"enum": ["a", 1]}, False),
        ({"type": "integer"}, False),
        ({"type": "array", "items": {"type": "string"}}, False),
        ({"type": "null"}, False),
        ({}, False),
        (True, False),
        ({"anyOf": [{"type": "string"}, {}]}, False),
        ({"allOf": [{"type": ["string", "integer"]}, {"type": "string"}]}, True),
    ],
)
def test_parameter_is_string(schema: Any, expected: bool) -> None:
    assert parameter_is_string(schema) is expected


def test_parameter_is_string_follows_refs() -> None:
    root = {"$defs": {"name": {"type": "string"}, "n": {"type": "integer"}}}
    assert parameter_is_string({"$ref": "#/$defs/name"}, root)
    assert not parameter_is_string({"$ref": "#/$defs/n"}, root)
    assert not parameter_is_string({"$ref": "#/$defs/missing"}, root)
