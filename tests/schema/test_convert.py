"""JSON Schema -> GBNF: portability of the text, errors, ranges, embedding, helpers."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from helpers.gbnf_oracle import accepts, assert_portable

from autoparser.errors import SchemaError
from autoparser.schema import (
    SchemaRules,
    Whitespace,
    schema_rules,
    schema_to_gbnf,
)


def corpus_schemas() -> dict[str, Any]:
    from helpers.schema_corpus import corpus

    return corpus()


@pytest.mark.parametrize("style", ["pretty", "compact"])
def test_corpus_grammars_are_portable(style: str) -> None:
    for schema in corpus_schemas().values():
        assert_portable(schema_to_gbnf(schema, whitespace=style))  # type: ignore[arg-type]


# ------------------------------------------------------------------ errors and lenient mode


def test_unsupported_keyword_names_keyword_and_pointer() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}
    with pytest.raises(SchemaError, match=r"'multipleOf' at /properties/n/multipleOf"):
        schema_to_gbnf(schema)
    with pytest.warns(UserWarning, match="multipleOf"):
        grammar = schema_to_gbnf(schema, lenient=True)
    assert accepts(grammar, '{"n": 4}')  # the constraint is dropped, the rest kept
    assert not accepts(grammar, '{"n": "4"}')


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "uniqueItems": True},
        {"type": "string", "pattern": "^a+$", "maxLength": 3},
        {"type": "array", "items": {"not": {"type": "string"}}},
        {"type": "object", "patternProperties": {"^x": {}}},
    ],
)
def test_inexpressible_constraints_raise_or_warn(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        schema_to_gbnf(schema)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_portable(schema_to_gbnf(schema, lenient=True))
    assert caught


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "https://example.com/s.json"},
        {"$ref": "#/$defs/missing"},
        {"type": "strng"},
        {"type": "integer", "minimum": 5, "maximum": 4},
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        {"allOf": [{"type": "string"}, {"type": "integer"}]},
        {"enum": []},
        False,
    ],
)
def test_invalid_schemas_raise(schema: Any) -> None:
    with pytest.raises(SchemaError):
        schema_to_gbnf(schema)


def test_ignored_keywords_do_not_change_the_grammar() -> None:
    plain = {"type": "object", "properties": {"a": {"type": "string"}}}
    noisy = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "x",
        "title": "T",
        "description": "D",
        "$comment": "C",
        "type": "object",
        "properties": {"a": {"type": "string", "examples": ["x"], "default": "y"}},
    }
    assert schema_to_gbnf(plain) == schema_to_gbnf(noisy)


# ------------------------------------------------------------------ numeric ranges


# ------------------------------------------------------------------ objects and whitespace
def test_key_order_required_then_optional() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "c": {"type": "integer"},
        },
        "required": ["c"],
        "additionalProperties": False,
    }
    grammar = schema_to_gbnf(schema)
    assert accepts(grammar, '{"c": 1, "a": 2, "b": 3}')
    assert accepts(grammar, '{"c": 1, "b": 3}')
    assert not accepts(grammar, '{"a": 2, "c": 1}')
    assert not accepts(grammar, '{"c": 1, "b": 3, "a": 2}')
    assert not accepts(grammar, '{"c": 1, "c": 1}')
    assert not accepts(grammar, '{"a": 2}')


def test_fifty_optional_parameters_grow_linearly() -> None:
    def size(count: int) -> int:
        props = {f"p{i}": {"type": "integer"} for i in range(count)}
        grammar = schema_to_gbnf({"type": "object", "properties": props})
        assert_portable(grammar)
        return len(grammar)

    assert size(100) < 2.3 * size(50)
    grammar = schema_to_gbnf(
        {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(50)}}
    )
    assert accepts(grammar, "{}")
    assert accepts(grammar, '{"p49": 1}')
    assert accepts(grammar, '{"p3": 1, "p17": 2, "p49": 3}')
    assert not accepts(grammar, '{"p17": 2, "p3": 1}')
    assert not accepts(grammar, '{"p3": 1,}')


def test_whitespace_styles() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
    }
    value = {"a": [1, 2]}
    compact = schema_to_gbnf(schema, whitespace="compact")
    pretty = schema_to_gbnf(schema)
    assert accepts(compact, json.dumps(value, separators=(",", ":")))
    assert not accepts(compact, json.dumps(value))
    for text in (json.dumps(value), json.dumps(value, indent=2), json.dumps(value, indent="\t")):
        assert accepts(pretty, text)
    assert not accepts(pretty, '{"a":  [1]}')  # two spaces: not a pretty-printer's output
    assert not accepts(pretty, ' {"a": [1]}')  # nothing around the value itself
    assert not accepts(pretty, '{"a": [1]}\n')
    crlf = Whitespace("crlf", '"" | "\\r\\n" [ ]{0,8}')
    custom = schema_to_gbnf(schema, whitespace=crlf)
    assert accepts(custom, '{\r\n  "a":[\r\n    1]\r\n}')
    assert not accepts(custom, '{"a": [1]}')


# ------------------------------------------------------------------ schema_rules embedding
def test_schema_rules_prefix_and_shared_rules() -> None:
    first = schema_rules({"type": "object", "properties": {"city": {"type": "string"}}}, "tool-a")
    second = schema_rules(
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        },
        "tool-b",
    )
    assert isinstance(first, SchemaRules) and first.root == "tool-a"
    for result in (first, second):
        for name in result.rules:
            assert name.startswith((result.root, "json-"))
    for name in set(first.rules) & set(second.rules):
        assert first.rules[name] == second.rules[name]
    merged = {**first.rules, **second.rules}
    grammar = "root ::= tool-a | tool-b\n" + "".join(f"{k} ::= {v}\n" for k, v in merged.items())
    assert_portable(grammar)
    assert accepts(grammar, '{"city": "Paris"}')
    assert accepts(grammar, '{"n": 3, "tags": ["x", "y"]}')
    assert not accepts(grammar, '{"city": 3}')
    assert (
        schema_to_gbnf({"type": "integer"})
        == "root ::= schema\n" + schema_rules({"type": "integer"}, "schema").gbnf()
    )


@pytest.mark.xfail(
    strict=True,
    reason="llguidance's GBNF import makes every non-recursive rule one greedy lexeme; a "
    "lexeme alternative ('{...}' closed object) shadows a parser-level one starting with "
    "the same '{' (an object with an any-JSON member), so the oracle rejects valid text. "
    "llama.cpp and xgrammar parse rules, not lexemes; not fixable in portable GBNF.",
)
def test_llguidance_lexeme_alternatives() -> None:
    closed = schema_rules({"type": "object", "properties": {"city": {"type": "string"}}}, "a")
    open_ = schema_rules({"type": "object", "properties": {"n": {"type": "integer"}, "x": {}}}, "b")
    merged = {**closed.rules, **open_.rules}
    grammar = "root ::= a | b\n" + "".join(f"{k} ::= {v}\n" for k, v in merged.items())
    assert accepts(grammar, '{"n": 3}')


def test_schema_rules_rejects_bad_prefix() -> None:
    for prefix in ("json-string", "json-pretty-value", "has space", "under_score", "", "9a"):
        with pytest.raises(ValueError):
            schema_rules({}, prefix)


def test_compact_and_pretty_shared_rules_do_not_clash() -> None:
    pretty = schema_rules({}, "a")
    compact = schema_rules({}, "b", whitespace="compact")
    for name in set(pretty.rules) & set(compact.rules):
        assert pretty.rules[name] == compact.rules[name]


# ------------------------------------------------------------------ parameter_is_string


def test_undeclared_required_key() -> None:
    open_value = schema_to_gbnf({"type": "object", "properties": {"b": {}}, "required": ["a"]})
    assert accepts(open_value, '{"a": [1], "b": 2}') and not accepts(open_value, '{"b": 2}')
    typed = {
        "properties": {"b": {}},
        "required": ["a"],
        "additionalProperties": {"type": "integer"},
    }
    grammar = schema_to_gbnf({"type": "object", **typed})
    assert accepts(grammar, '{"a": 1}') and not accepts(grammar, '{"a": "x"}')


def test_built_in_whitespace_tags_are_reserved() -> None:
    with pytest.raises(ValueError):
        Whitespace("pretty", '" "')
    with pytest.raises(ValueError):
        Whitespace("bad tag", None)
    assert Whitespace("compact", None) == Whitespace("compact", None)


def test_allof_type_intersection() -> None:
    grammar = schema_to_gbnf({"allOf": [{"type": ["number", "string"]}, {"type": "integer"}]})
    assert accepts(grammar, "3") and not accepts(grammar, "3.5") and not accepts(grammar, '"x"')


def test_prefix_may_start_with_json() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}
    prefixed = schema_rules(schema, "json")
    plain = schema_rules(schema, "x")
    shared = set(prefixed.rules) & set(plain.rules)
    assert shared == {"json-char", "json-pretty-ws"}
    assert all(prefixed.rules[n] == plain.rules[n] for n in shared)
    grammar = "root ::= json\n" + prefixed.gbnf()
    assert_portable(grammar)
    assert accepts(grammar, '{"s": "abc"}') and not accepts(grammar, '{"s": "b"}')


def test_enum_and_const_values_must_meet_sibling_constraints() -> None:
    grammar = schema_to_gbnf({"type": "string", "enum": ["a", "bbbb", "cc"], "maxLength": 2})
    assert accepts(grammar, '"a"') and accepts(grammar, '"cc"') and not accepts(grammar, '"bbbb"')
    grammar = schema_to_gbnf({"enum": [1, 5, 10, "x"], "exclusiveMaximum": 10, "minimum": 2})
    assert accepts(grammar, "5") and accepts(grammar, '"x"')
    assert not accepts(grammar, "1") and not accepts(grammar, "10")
    with pytest.raises(SchemaError):
        schema_to_gbnf({"const": "abc", "pattern": "^z"})


def test_generic_branches_absorb_narrower_ones() -> None:
    """anyOf [closed object, any object]: one object rule, which llguidance also reads right."""
    closed = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
    }
    grammar = schema_to_gbnf({"anyOf": [closed, {"type": "object"}, {"type": "integer"}]})
    for text in ('{"a": "x"}', '{"b": 1}', "{}", "3"):
        assert accepts(grammar, text), text
    assert not accepts(grammar, '"s"')
    assert schema_to_gbnf({"oneOf": [{"type": "string"}, {"description": "anything"}]}) == (
        schema_to_gbnf({})
    )
    arrays = schema_to_gbnf(
        {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array"}]}
    )
    assert accepts(arrays, '[1, "x", {}]')


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("{}", True),
        ('{"a": 1}', True),
        ('{"a": true}', False),  # a declared key cannot come back as an additional one
        ('{"ab": true}', False),
        ('{"abc": true}', True),
        ('{"": true}', True),
        ('{"q\\"x": true}', False),
        ('{"q\\"y": true}', True),
        ('{"\\u0061": true}', False),  # "a" spelled with an escape
        ('{"\\n": true}', True),
        ('{"a": 1, "zz": false}', True),
        ('{"zz": false, "a": 1}', False),
    ],
)
def test_additional_keys_exclude_declared_names(text: str, valid: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "ab": {"type": "string"}, 'q"x': {"type": "null"}},
        "additionalProperties": {"type": "boolean"},
    }
    assert accepts(schema_to_gbnf(schema), text) is valid


def test_object_shapes_llguidance_reads_right() -> None:
    """Open values (recursive rules) among optional keys, with and without required keys."""
    props: dict[str, Any] = {f"p{i}": {"type": "integer"} for i in range(20)}
    props["p5"] = {"type": "object"}
    for required in ([], ["p0"]):
        grammar = schema_to_gbnf({"type": "object", "properties": props, "required": required})
        head = '"p0": 0, ' if required else ""
        for body in (
            '"p5": {}',
            '"p3": 1, "p5": {"x": 1}',
            '"p3": 1, "p5": {}, "p9": 3',
            '"p9": 3',
        ):
            assert accepts(grammar, "{" + head + body + "}"), body
        value = {"p0": 0, "p3": 1, "p5": {"a": [1]}, "p19": 2}
        assert accepts(grammar, json.dumps(value, indent=2))
