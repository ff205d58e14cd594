"""Local $ref resolution, shared by the grammar converter and the argument typing."""

from __future__ import annotations

import json

import pytest
from helpers.gbnf_oracle import accepts, assert_portable

from autoparser.errors import SchemaError
from autoparser.schema import schema_to_gbnf
from autoparser.schema.refs import resolve_ref

DOCUMENT = {
    "$defs": {"a/b": {"type": "integer"}, "t~x": {"type": "string"}},
    "items": [{"type": "null"}, {"type": "boolean"}],
}


@pytest.mark.parametrize(
    ("ref", "target"),
    [
        ("#", DOCUMENT),
        ("#/$defs/a~1b", {"type": "integer"}),
        ("#/$defs/t~0x", {"type": "string"}),
        ("#/items/1", {"type": "boolean"}),
    ],
)
def test_local_references_resolve_with_pointer_escapes(ref: str, target: object) -> None:
    assert resolve_ref(ref, DOCUMENT) == (ref[1:], target)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("https://example.com/s.json", "only local"),
        ("#anchor", "anchors are not supported"),
        ("#/$defs/missing", "points to nothing"),
        ("#/items/7", "points to nothing"),
        (3, "only local"),
    ],
)
def test_bad_references_are_named_with_where_they_appear(ref: object, message: str) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        resolve_ref(ref, DOCUMENT, "/properties/x")
    assert "/properties/x" in str(info.value)


def test_recursive_refs_and_root_ref() -> None:
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    grammar = schema_to_gbnf(tree)
    assert_portable(grammar)
    deep = {"kids": [{"kids": [{"kids": [{}]}]}, {}]}
    assert accepts(grammar, json.dumps(deep)) and not accepts(grammar, '{"kids": [1]}')
    lst = {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}}
    grammar = schema_to_gbnf(lst)
    assert accepts(grammar, "[1, [2, [[]]], 3]") and not accepts(grammar, '[1, ["x"]]')
