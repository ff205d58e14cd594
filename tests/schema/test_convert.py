"""JSON Schema -> GBNF: portability of the text, errors, ranges, embedding, helpers."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest
from helpers.gbnf_oracle import accepts, check_grammar

from autoparser.errors import SchemaError
from autoparser.schema import (
    SchemaRules,
    Whitespace,
    parameter_is_string,
    schema_rules,
    schema_to_gbnf,
)

RULE_LINE = re.compile(r"^([A-Za-z0-9-]+) ::= (.+)$")
# literals and classes removed, what remains is names and operators
UNICODE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\[uU]")  # an odd run of backslashes, then u
LITERALS = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')


def rules_of(grammar: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in grammar.rstrip("\n").split("\n"):
        match = RULE_LINE.match(line)
        assert match, f"not a one-line GBNF rule: {line!r}"
        assert match.group(1) not in out, f"rule defined twice: {match.group(1)}"
        out[match.group(1)] = match.group(2)
    return out


def assert_portable(grammar: str) -> None:
    """The portability rules every engine (llama.cpp, xgrammar, llguidance) needs."""
    rules = rules_of(grammar)
    assert "root" in rules
    assert not UNICODE_ESCAPE.search(grammar), "\\u or \\U escape in the grammar"
    for name, body in rules.items():
        bare = LITERALS.sub(" L ", body)
        assert "." not in bare, f"{name}: '.' outside a literal"
        assert not re.search(r"\{\s*,", bare), f"{name}: repetition without lower bound"
        assert not re.search(r"(^|\(|\|)\s*(\||\)|$)", bare), f"{name}: empty alternative"
        for ref in re.findall(r"[A-Za-z][A-Za-z0-9-]*", bare):
            if ref != "L":
                assert ref in rules, f"{name} references undefined {ref}"
    check_grammar(grammar)


def corpus_schemas() -> dict[str, Any]:
    from helpers.schema_corpus import corpus

    return corpus()


@pytest.mark.parametrize("style", ["pretty", "compact"])
def test_corpus_grammars_are_portable(style: str) -> None:
    for schema in corpus_schemas().values():
        assert_portable(schema_to_gbnf(schema, whitespace=style))  # type: ignore[arg-type]


# ------------------------------------------------------------------ errors and lenient mode
@pytest.mark.parametrize(
    ("pattern", "what"),
    [
        (r"^(a)\1$", "backreference"),
        (r"^(?P<x>a)(?P=x)$", "backreference"),
        (r"^a(?=b)", "lookaround"),
        (r"^a(?!b)", "lookaround"),
        (r"(?<=a)b", "lookaround"),
        (r"(?<!a)b", "lookaround"),
        (r"\bword\b", "word boundary"),
        (r"(?i)abc", "inline flag"),
        (r"a^b", "'^' after the start"),
        (r"a$b", "'$' before the end"),
        (r"\p{L}", "escape"),
    ],
)
def test_untranslatable_patterns_raise(pattern: str, what: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(what)) as info:
        schema_to_gbnf(
            {"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}}
        )
    assert "/properties/p/pattern" in str(info.value)


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


def test_quantified_groups_stay_readable() -> None:
    """`(a+)?`-like groups are rewritten: llguidance's importer would print `a+?`."""
    for pattern in ("^(a+)?b$", "^(a*)?$", "^(a{2,3})?c$", "^(?:x+){2}$", "^(ab+)*$"):
        grammar = schema_to_gbnf({"type": "string", "pattern": pattern})
        assert_portable(grammar)
        for text in ("b", "ab", "aab", "", "aac", "c", "xx", "xxx", "abab", "abbab", "aaac"):
            assert accepts(grammar, json.dumps(text)) == bool(re.search(pattern, text)), (
                pattern,
                text,
            )


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
@pytest.mark.parametrize(
    ("schema", "window"),
    [
        ({"minimum": 3, "maximum": 250}, range(-20, 1100)),
        ({"minimum": -1234, "maximum": -17}, range(-1300, 30)),
        ({"exclusiveMinimum": -10, "exclusiveMaximum": 10}, range(-30, 30)),
        ({"minimum": 99}, range(0, 1200)),
        ({"maximum": -100}, range(-1200, 50)),
        ({"minimum": 0, "maximum": 0}, range(-5, 5)),
        ({"minimum": 1.5, "maximum": 20.5}, range(-5, 30)),
    ],
)
def test_integer_ranges_are_exact(schema: dict[str, Any], window: range) -> None:
    grammar = schema_to_gbnf({"type": "integer", **schema})
    lo = schema.get("minimum", schema.get("exclusiveMinimum", -(10**9)))
    hi = schema.get("maximum", schema.get("exclusiveMaximum", 10**9))
    wrong = []
    for n in window:
        inside = (n > lo if "exclusiveMinimum" in schema else n >= lo) and (
            n < hi if "exclusiveMaximum" in schema else n <= hi
        )
        if accepts(grammar, str(n)) != inside:
            wrong.append(n)
    assert not wrong
    assert not accepts(grammar, "007") and not accepts(grammar, "1.0")


@pytest.mark.parametrize(
    ("schema", "inside", "outside"),
    [
        (
            {"minimum": 0, "maximum": 1},
            ["0", "0.0", "0.5", "1", "1.0", "1.000", "5e-05", "0e-1", "9.99e-1"],
            ["-0.5", "1.01", "1.5", "2", "-1", "1e+16", "5e-0"],
        ),
        (
            {"exclusiveMinimum": 0},
            ["0.001", "1", "1e+16", "1.5e-07", "123456789.5"],
            ["0", "0.0", "-1", "-0.5", "0e-5"],
        ),
        (
            {"minimum": -50, "exclusiveMaximum": -2},
            ["-50", "-50.0", "-49.99", "-2.01", "-3"],
            ["-50.01", "-51", "-2", "-2.0", "-1.5", "0", "3"],
        ),
        (
            {"maximum": 7},
            ["7", "6.99", "0", "-1e+20", "-123.5", "1e-09"],
            ["7.01", "8", "1e+16"],
        ),
    ],
)
def test_number_bounds(schema: dict[str, Any], inside: list[str], outside: list[str]) -> None:
    grammar = schema_to_gbnf({"type": "number", **schema})
    assert [s for s in inside if not accepts(grammar, s)] == []
    assert [s for s in outside if accepts(grammar, s)] == []


FRACTIONAL_BOUNDS = [
    {"minimum": 0.1, "maximum": 2.5},
    {"exclusiveMinimum": -1.25, "exclusiveMaximum": 0.75},
    {"minimum": 3.14159},
    {"exclusiveMaximum": -0.001},
    {"minimum": 0.25, "exclusiveMaximum": 0.3},
    {"minimum": 1.5, "maximum": 1.5},
    {"exclusiveMinimum": 10.05, "maximum": 12},
]
PROBES = sorted(
    {f"{sign}{whole}{frac}" for sign in ("", "-") for whole in (0, 1, 2, 3, 10, 12)
     for frac in ("", ".0", ".001", ".05", ".1", ".14159", ".1416", ".24", ".25", ".2999",
                  ".3", ".5", ".75", ".7500", ".76", ".9", ".999")}
)  # fmt: skip


@pytest.mark.parametrize("bounds", FRACTIONAL_BOUNDS)
def test_fractional_number_bounds_are_exact(bounds: dict[str, float]) -> None:
    from decimal import Decimal

    grammar = schema_to_gbnf({"type": "number", **bounds})
    checks = {
        "minimum": lambda v, b: v >= b,
        "maximum": lambda v, b: v <= b,
        "exclusiveMinimum": lambda v, b: v > b,
        "exclusiveMaximum": lambda v, b: v < b,
    }
    wrong = [
        probe
        for probe in PROBES
        if accepts(grammar, probe)
        != all(checks[k](Decimal(probe), Decimal(str(b))) for k, b in bounds.items())
    ]
    assert wrong == []


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


def test_pattern_is_unanchored_unless_anchored() -> None:
    grammar = schema_to_gbnf({"type": "string", "pattern": "ab+c"})
    assert accepts(grammar, '"xxabbcyy"') and not accepts(grammar, '"ac"')
    anchored = schema_to_gbnf({"type": "string", "pattern": "^ab+c$|^z"})
    assert accepts(anchored, '"abbc"') and accepts(anchored, '"zoo"')
    assert not accepts(anchored, '"xabc"') and not accepts(anchored, '"abcx"')
    quoted = schema_to_gbnf({"type": "string", "pattern": '^"[^"]*"$'})
    assert accepts(quoted, json.dumps('"hi"')) and not accepts(quoted, json.dumps('"h"i"'))
    unicode = schema_to_gbnf({"type": "string", "pattern": "^[à-ÿ]{2}€$"})
    assert "€" in unicode
    assert accepts(unicode, '"éü€"') and not accepts(unicode, '"eu€"')


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
