"""GBNF grouping: a quantifier must bind to the whole sequence, never to its last group."""

from __future__ import annotations

import pytest
from helpers.gbnf_oracle import accepts

from autoparser.peg import choice, grammar, seq, zero_or_more

REPEATED = zero_or_more(seq(choice("x", "a"), "b", choice("c", "d")))


@pytest.mark.parametrize("text", ["", "xbc", "abd", "xbcabdxbd"])
def test_repeated_sequence_of_groups_accepts_whole_items(text: str) -> None:
    assert REPEATED.parse(text).pos == len(text)
    assert accepts(grammar(REPEATED).text, text)


@pytest.mark.parametrize("text", ["xbcc", "xbcd", "xb"])
def test_repeated_sequence_of_groups_rejects_partial_items(text: str) -> None:
    assert not accepts(grammar(REPEATED).text, text)


def test_choice_of_sequences_keeps_each_alternative_whole() -> None:
    parser = seq(choice("x", "a"), "b") | "q"
    text = grammar(parser).text
    assert all(accepts(text, s) for s in ("xb", "ab", "q"))
    assert not any(accepts(text, s) for s in ("x", "qb", "xbq"))
