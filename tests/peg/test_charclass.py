"""Character classes: one parsed set, rendered as a Python regex and as a GBNF class."""

from __future__ import annotations

import re

import pytest
from helpers.gbnf_oracle import accepts

from autoparser.errors import GrammarError
from autoparser.peg.charclass import CharSet, parse_class

PROBES = "aZ_-]^\\\n\t 09<>é€\x00\x7f"


@pytest.mark.parametrize(
    "spec",
    ["a-zA-Z_", "^<", "[0-9]", "\\-a", "^\\n\\t", "\\x41-\\x43", "\\u00e9", "\\]", "^", "a-a"],
)
def test_regex_and_grammar_agree_on_every_probe(spec: str) -> None:
    charset = parse_class(spec)
    pattern = re.compile(charset.regex())
    grammar = f"root ::= {charset.gbnf()}\n"
    for ch in PROBES:
        assert bool(pattern.fullmatch(ch)) == accepts(grammar, ch), (spec, ch)


def test_parsed_ranges_are_merged_and_escapes_read() -> None:
    assert parse_class("c-ea-d").ranges == ((ord("a"), ord("e")),)
    assert parse_class("\\-").ranges == ((ord("-"), ord("-")),)  # an escaped '-' is no range
    assert parse_class("^a").negated and not parse_class("a").negated
    assert parse_class("\\x41").ranges == ((0x41, 0x41),)
    assert CharSet.union([(5, 9), (1, 3), (4, 4)]).ranges == ((1, 9),)


def test_a_reversed_range_names_the_class() -> None:
    with pytest.raises(GrammarError, match=r"'z-a'.*reversed"):
        parse_class("z-a")


def test_the_empty_and_the_full_set() -> None:
    empty, everything = CharSet(()), CharSet((), negated=True)
    assert re.fullmatch(empty.regex(), "a") is None
    assert re.fullmatch(everything.regex(), "\n") is not None
