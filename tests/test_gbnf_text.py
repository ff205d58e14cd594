"""The shared GBNF text primitives: escaping, classes, grouping, repetition, rule names.

Texts are checked with llguidance (tests/helpers/gbnf_oracle.py) against what they should match,
and the range helpers against Python sets.
"""

from __future__ import annotations

import itertools
import re

import pytest
from helpers.gbnf_oracle import accepts
from hypothesis import given, settings
from hypothesis import strategies as st

from autoparser.errors import GrammarError
from autoparser.gbnf_text import (
    ANY_CHAR,
    alternatives,
    fresh_name,
    gbnf_char_class,
    gbnf_literal,
    gbnf_optional,
    gbnf_repeat,
    group,
    merge_ranges,
    name_part,
    rule_name,
    rules_text,
    sequence,
    subtract_ranges,
    unwrap,
    without_surrogates,
)

TRICKY = ['a"b', "back\\slash", "tab\tnl\nret\r", "\x01\x7f", "é→€😀", "[x]-^/", ""]


def root(expr: str) -> str:
    return rules_text({"root": expr})


@pytest.mark.parametrize("text", TRICKY)
def test_literal_matches_exactly_its_text(text: str) -> None:
    grammar = root(gbnf_literal(text) if text else f'"x" {gbnf_literal(text)}')
    expected = text or "x"
    assert accepts(grammar, expected)
    assert not accepts(grammar, expected + "a")
    assert "\\u" not in grammar


def test_literal_and_class_refuse_lone_surrogates() -> None:
    with pytest.raises(GrammarError):
        gbnf_literal("a\ud800")
    with pytest.raises(GrammarError):
        gbnf_char_class([(0xD800, 0xD800)])


def test_char_class_escapes_specials_and_skips_surrogates() -> None:
    specials = [(ord(c), ord(c)) for c in '\\]^-["/\n']
    cls = gbnf_char_class([*specials, (0x30, 0x31), (0xD000, 0xE000)])
    for ch in '\\]^-["/\n01\ud7ff\ue000':
        assert accepts(root(cls), ch), ch
    for ch in "a2\ue001":
        assert not accepts(root(cls), ch), ch
    negated = gbnf_char_class(specials, negated=True)
    assert accepts(root(negated), "a") and not accepts(root(negated), "^")
    assert gbnf_char_class([], negated=True) == ANY_CHAR
    assert accepts(root(ANY_CHAR), "😀") and accepts(root(ANY_CHAR), "\x00")
    with pytest.raises(GrammarError):
        gbnf_char_class([])


RANGES = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 8)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=6,
)


def as_set(ranges: list[tuple[int, int]]) -> set[int]:
    return {c for lo, hi in ranges for c in range(lo, hi + 1)}


@settings(max_examples=150, deadline=None)
@given(RANGES, RANGES)
def test_range_helpers_agree_with_sets(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    merged = merge_ranges(a)
    assert as_set(merged) == as_set(a)
    assert all(hi + 1 < lo for (_, hi), (lo, _) in itertools.pairwise(merged))
    difference = subtract_ranges(a, b)
    assert as_set(difference) == as_set(a) - as_set(b)
    assert difference == merge_ranges(difference)


def test_without_surrogates_splits_a_spanning_range() -> None:
    assert without_surrogates([(0xD000, 0xE100), (0xD900, 0xDA00)]) == [
        (0xD000, 0xD7FF),
        (0xE000, 0xE100),
    ]


def test_grouping() -> None:
    assert group("name") == "name" and group('"a b"') == '"a b"' and group("[ |]") == "[ |]"
    assert group("( a | b )") == "( a | b )"
    assert group("( a ) ( b )") == "( ( a ) ( b ) )"
    assert group("a*") == "( a* )"
    assert unwrap("( a | ( b ) )") == "a | ( b )"
    assert unwrap("( a ) | ( b )") == "( a ) | ( b )"
    assert alternatives(["a", "b", "a"]) == "( a | b )" and alternatives(["a", "a"]) == "a"
    assert sequence(['""', None, "a | b", '"|"', "( c | d )"]) == '( a | b ) "|" ( c | d )'
    assert sequence([None, '""']) == '""'


# A reference reading of an expression's top level, one lexical piece at a time.
_PIECE = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[()| ]|[^"\[()| ]+', re.DOTALL)


def _reference_outline(expr: str) -> tuple[int, set[str]]:
    """(end of the first top-level group or -1, the separators outside every group)."""
    depth, first_end, separators = 0, -1, set()
    for piece in _PIECE.finditer(expr):
        text = piece.group()
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0 and first_end < 0:
                first_end = piece.end()
        elif depth == 0 and text in (" ", "|"):
            separators.add(text)
    return first_end, separators


_ATOMS = st.sampled_from(
    ["a", "b-c", '"x"', '"("', '")"', '"|"', '" "', "[()| ]", '[^"]', '"\\""', "x*", '"a b"']
)
_EXPRS = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4).map(" ".join),
        st.lists(inner, min_size=2, max_size=4).map(lambda xs: "( " + " | ".join(xs) + " )"),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: "( " + " ".join(xs) + " )*"),
    ),
    max_leaves=30,
)


@settings(max_examples=300)
@given(_EXPRS, st.integers(0, 400))
def test_top_level_reading_matches_a_piece_by_piece_one(expr: str, repeat: int) -> None:
    """``unwrap`` and ``sequence`` read an expression's top level as a scan of its pieces
    does, short (memoised) or long (a choice of hundreds of calls, read again each time)."""
    for text in (expr, alternatives([f'"t{i}" {expr}' for i in range(repeat + 1)])):
        end, separators = _reference_outline(text)
        whole = text.startswith("( ") and text.endswith(" )") and end == len(text)
        assert unwrap(text) == (text[2:-2] if whole else text)
        assert sequence([text, "z"]) == (f"( {text} ) z" if "|" in separators else f"{text} z")


ITEMS = ['"a"', '"a" "b"', '"a"+', '"a"*', '"a"?', '"a"{2,3}', '( "a" | "b" "b" )']
BOUNDS = [(0, 1), (0, None), (1, None), (2, None), (1, 1), (2, 2), (0, 2), (1, 3), (0, 0)]
ITEM_REGEX = {'"a"': "a", '"a" "b"': "ab", '( "a" | "b" "b" )': "(?:a|bb)"}


@pytest.mark.parametrize("item", ITEMS)
@pytest.mark.parametrize(("low", "high"), BOUNDS)
def test_repeat_matches_the_regex_repetition(item: str, low: int, high: int | None) -> None:
    text = gbnf_repeat(item, low, high)
    assert not re.search(r"\{\s*,", text), text
    # no group of one quantified atom under a quantifier: llguidance would print `X+?`
    assert not re.search(r'\( "a"(\+|\*|\?|\{[0-9,]+\}) \)[*+?{]', text), text
    inner = ITEM_REGEX.get(item) or "(?:" + item.replace('"', "").replace(" ", "") + ")"
    pattern = re.compile(f"(?:{inner}){{{low},{'' if high is None else high}}}")
    grammar = root(f'"<" {text} ">"')
    for count in range(5):
        for unit in ("a", "ab", "bb"):
            candidate = unit * count
            expected = pattern.fullmatch(candidate) is not None
            assert accepts(grammar, f"<{candidate}>") == expected, (text, candidate)


def test_optional_of_a_quantified_atom_is_rewritten() -> None:
    assert gbnf_optional('"a"+') == '"a"*' and gbnf_optional('"a"*') == '"a"*'
    assert gbnf_optional('"a"{2,3}') == '( "" | "a"{2,3} )'
    assert gbnf_repeat('"a"+', 2, 3) == '( "a"+ "" ){2,3}'


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("getWeather", "get-weather"),
        ("my_rule.Item", "my-rule-item"),
        ("1st", "r-1st"),
        ("", "rule"),
    ],
)
def test_rule_name_examples(text: str, name: str) -> None:
    assert rule_name(text) == name


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_rule_names_are_portable(text: str) -> None:
    assert re.fullmatch(r"[a-z][a-z0-9-]*", rule_name(text))
    assert re.fullmatch(r"([a-z0-9]+(-[a-z0-9]+)*)?", name_part(text))


def test_fresh_name_skips_taken_names() -> None:
    taken = {"x", "x-2"}
    assert fresh_name("x", taken.__contains__) == "x-3"
    assert fresh_name("y", taken.__contains__) == "y"
