"""``loosen_schema``: what the grammar cannot express is dropped at its node, named by its
JSON pointer; the rest converts, and the loosened grammar still takes what the original
schema allows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import TESTS_DIR

from autoparser import SchemaError, loosen_schema
from autoparser.schema import schema_rules

SHAPES = TESTS_DIR / "data" / "agent_shapes"


def _claude_tools() -> list[dict[str, Any]]:
    body = json.loads(Path(SHAPES / "claude_code_messages.json").read_text(encoding="utf-8"))
    tools: list[dict[str, Any]] = body["tools"]
    return tools


def test_claude_code_tools_convert_once_loosened() -> None:
    """Every schema Claude Code sends converts after loosening; what was dropped is exactly
    the bound above the limit and the always-true ``propertyNames``."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for tool in _claude_tools():
        schema = tool["input_schema"]
        loose, findings = loosen_schema(schema, max_count=10_000)
        schema_rules(loose, "t")
        if findings:
            found[tool["name"]] = [(f.pointer, f.keyword, f.reason) for f in findings]
    assert found == {
        "Write": [("#/properties/content/maxLength", "maxLength", "above_limit")],
        "mcp__tasks__create": [
            ("#/properties/labels/propertyNames", "propertyNames", "always_true")
        ],
        "Agent": [("#/properties/env/propertyNames", "propertyNames", "always_true")],
    }
    agent = next(t for t in _claude_tools() if t["name"] == "Agent")
    with pytest.raises(SchemaError, match="propertyNames"):
        schema_rules(agent["input_schema"], "t")  # what serve answered with a 400


def test_every_kind_of_finding_names_its_pointer() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "multipleOf": 2},
            "names": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$", "maxLength": 3},
            "day": {"type": "string", "format": "date", "minLength": 3},
            "look": {"type": "string", "pattern": "(?=a)a"},
            "a/b": {"type": "array", "items": [{"type": "string", "maxLength": 10**6}]},
        },
        "$defs": {"Tags": {"type": "array", "uniqueItems": True, "minItems": 1}},
        "anyOf": [{"required": ["n"]}, {"not": {"required": ["code"]}}],
    }
    loose, findings = loosen_schema(schema, max_count=1000)
    assert [(f.pointer, f.reason) for f in findings] == [
        ("#/properties/n/multipleOf", "unsupported"),
        ("#/properties/names/propertyNames", "unsupported"),
        ("#/properties/code/maxLength", "combined"),
        ("#/properties/day/minLength", "combined"),
        ("#/properties/look/pattern", "bad_pattern"),
        ("#/properties/a~1b/items/0/maxLength", "above_limit"),
        ("#/$defs/Tags/uniqueItems", "unsupported"),
        ("#/anyOf/1/not", "unsupported"),
    ]
    assert isinstance(loose, dict)
    assert loose["properties"]["code"] == {"type": "string", "pattern": "^[A-Z]{3}$"}
    assert loose["$defs"]["Tags"] == {"type": "array", "minItems": 1}
    assert schema["properties"]["n"] == {"type": "integer", "multipleOf": 2}  # not mutated
    schema_rules(loose, "t")
    described = [f.describe() for f in findings]
    assert described[5] == (
        "#/properties/a~1b/items/0/maxLength: maxLength 1000000 is above the limit: left unbounded"
    )
    assert described[0].endswith("unsupported keyword 'multipleOf': dropped")


def test_a_convertible_schema_is_returned_as_it_was() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "maxLength": 1000}, "x": {"$ref": "#/$defs/X"}},
        "$defs": {"X": {"type": "array", "items": {"type": "integer"}, "maxItems": 5}},
        "required": ["s"],
    }
    loose, findings = loosen_schema(schema, max_count=1000)
    assert (loose, findings) == (schema, ())
    assert loosen_schema(True) == (True, ())


def test_strict_raises_on_the_first_finding_naming_its_pointer() -> None:
    schema = {"type": "object", "properties": {"p": {"type": "string", "maxLength": 524288}}}
    with pytest.raises(SchemaError) as info:
        loosen_schema(schema, max_count=10_000, strict=True)
    assert str(info.value) == ("maxLength 524288 is above the limit at #/properties/p/maxLength")
    assert "lenient" not in str(info.value)
    assert loosen_schema(schema, strict=True) == (schema, ())  # no limit given


def test_the_loosened_grammar_accepts_what_the_schema_allowed() -> None:
    """Loosening only widens: a value valid for the original schema is still valid for
    the loosened one (checked with the jsonschema validator on both)."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {
            "labels": {"type": "object", "propertyNames": {"type": "string"}},
            "text": {"type": "string", "maxLength": 50},
            "n": {"type": "integer", "multipleOf": 3},
        },
    }
    loose, _ = loosen_schema(schema, max_count=10)
    for value in ({"labels": {"a": 1}, "text": "x" * 40, "n": 9}, {"text": "", "n": 0}):
        jsonschema.validate(value, schema)
        jsonschema.validate(value, loose)
    jsonschema.validate({"text": "x" * 60, "n": 4}, loose)  # wider where it was loosened


def test_what_only_the_converter_finds_is_loosened_at_the_node_it_names() -> None:
    """Claude Code's SendMessage tool (captured): two ``allOf`` patterns the converter
    cannot merge; the second is dropped, the first still holds (and the same answer comes
    from the cache). A malformed or unsatisfiable schema is no such thing: left for the
    converter to name (a client's 400)."""
    captured = TESTS_DIR / "data" / "agent_requests" / "messages_claude_code_first_all_tools.json"
    tools = json.loads(captured.read_text(encoding="utf-8"))["body"]["tools"]
    send = next(t for t in tools if t["name"] == "SendMessage")["input_schema"]
    with pytest.raises(SchemaError, match="cannot merge"):
        schema_rules(send, "t")
    loose, findings = loosen_schema(send, max_count=10_000)
    assert [(f.pointer, f.keyword, f.reason) for f in findings] == [
        ("#/properties/to/allOf/1/pattern", "pattern", "unconvertible")
    ]
    assert isinstance(loose, dict)
    assert loose["properties"]["to"]["allOf"] == [send["properties"]["to"]["allOf"][0], {}]
    schema_rules(loose, "t")
    assert loosen_schema(send, max_count=10_000) == (loose, findings)
    for broken in (
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}},
        {"type": 5},
        {"properties": {"a": {"$ref": "#/$defs/missing"}}},
    ):
        assert loosen_schema(broken) == (broken, ())
        with pytest.raises(SchemaError):
            schema_rules(broken, "t")
