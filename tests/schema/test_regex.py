"""JSON Schema patterns translated to GBNF: what matches, what cannot be expressed."""

from __future__ import annotations

import json
import re

import pytest
from helpers.gbnf_oracle import accepts, assert_portable

from autoparser.errors import SchemaError
from autoparser.schema import schema_to_gbnf
from autoparser.schema.regex import complement, translate_pattern


def _string_grammar(pattern: str) -> str:
    """The grammar of a string schema with this pattern; it embeds ``translate_pattern``'s
    body (checked below), so what it accepts is what the translation matches."""
    grammar = schema_to_gbnf({"type": "string", "pattern": pattern})
    assert translate_pattern(pattern, "/pattern")[0] in grammar
    return grammar


@pytest.mark.parametrize(
    ("pattern", "texts"),
    [
        ("^[a-c]{2,3}$", ["ab", "abc", "a", "abcd", "ad"]),
        ("^x.y$", ["xzy", "x\ny", "xy", 'x"y']),
        ("^(foo|ba+r)$", ["foo", "bar", "baaar", "br", "foobar"]),
        ("^\\d+-\\w?$", ["12-", "1-a", "-a", "1-ab"]),
        ("^[^a]$", ["b", "a", "\\", "bb"]),
    ],
)
def test_translated_patterns_match_as_python_does(pattern: str, texts: list[str]) -> None:
    grammar = _string_grammar(pattern)
    for text in texts:
        assert accepts(grammar, json.dumps(text)) == bool(re.search(pattern, text)), text


def test_dot_is_reported_so_the_shared_rule_is_added() -> None:
    assert translate_pattern("^a.$", "/p")[1] is True
    assert translate_pattern("^a$", "/p")[1] is False


def test_complement_covers_what_the_ranges_leave_out() -> None:
    assert complement([(0x00, 0x40), (0x5B, 0x10FFFF)]) == [(0x41, 0x5A)]
    assert complement([])[0][0] == 0


def test_untranslatable_pattern_errors_name_the_pointer() -> None:
    with pytest.raises(SchemaError, match="/properties/q/pattern"):
        translate_pattern(r"(a)\1", "/properties/q/pattern")


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
