"""Property tests: the PEG parser and its emitted GBNF accept the same strings.

PEG and CFG disagree in general (ordered choice commits, repetition is greedy), so random
grammars are drawn from a fragment where they agree, by construction:

- every decision point (choice alternative, repetition/optional body, `chars` class) starts
  with a *fresh* character used nowhere else in the grammar, so the next input character
  alone decides it and nothing that may follow can start the same way (LL(1));
- non-decision classes never contain fresh characters or whitespace (they may follow a
  greedy construct); literals never start with whitespace (they may follow `space()`);
- `until(d)` is always preceded by a literal (its free-form content must not be what follows
  a decision point) and followed by its delimiter; delimiters are border-free and none is a
  substring of another (where the exclusion automaton is exact);
- recursion goes through named rules of the shape ``open (self)? inner close`` with fresh
  open/close characters;
- a JSON value is always followed by ``!`` (a number must not be extended by what follows).

Oracle: llguidance with the byte tokenizer, whole-string match (tests/helpers/gbnf_oracle.py).
"""

from __future__ import annotations

import pytest
from helpers.peg_grammars import SETTINGS, anchored, grammars, mutated
from hypothesis import given
from hypothesis import strategies as st

from autoparser.peg import (
    ParseStatus,
    grammar,
)

gbnf_oracle = pytest.importorskip("helpers.gbnf_oracle", reason="llguidance oracle unavailable")


@SETTINGS
@given(data=st.data())
def test_parse_agrees_with_llguidance(data: st.DataObject) -> None:
    g = data.draw(grammars())
    p = anchored(g)
    text = grammar(p).text
    s = g.sample(data.draw)
    assert p.parse(s).status is ParseStatus.SUCCESS, (s, text)
    assert gbnf_oracle.accepts(text, s), (s, text)
    for _ in range(3):
        m = data.draw(mutated(s))
        ours = p.parse(m).status is ParseStatus.SUCCESS
        assert ours == gbnf_oracle.accepts(text, m), (m, ours, text)


@SETTINGS
@given(data=st.data())
def test_prefixes_of_accepted_strings_never_fail(data: st.DataObject) -> None:
    g = data.draw(grammars())
    p = anchored(g)
    s = g.sample(data.draw)
    assert p.parse(s).status is ParseStatus.SUCCESS
    for k in range(len(s) + 1):
        r = p.parse(s[:k], partial=True)
        assert r.status is not ParseStatus.FAIL, (s[:k], s)
    # More generally: any prefix llguidance can still complete must not FAIL here.
    text = grammar(p).text
    m = data.draw(mutated(s))
    for k in range(len(m) + 1):
        if gbnf_oracle.accepts_prefix(text, m[:k]):
            assert p.parse(m[:k], partial=True).status is not ParseStatus.FAIL, (m[:k], text)


@SETTINGS
@given(data=st.data())
def test_incremental_feeds_equal_one_shot(data: st.DataObject) -> None:
    g = data.draw(grammars())
    p = anchored(g)
    s = g.sample(data.draw)
    if data.draw(st.booleans()):
        s = data.draw(mutated(s))
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(s)), max_size=8))))
    inc = p.incremental()
    prev = 0
    for cut in [*cuts, len(s)]:
        got = inc.feed(s[prev:cut])
        assert got == p.parse(s[:cut], partial=True), s[:cut]
        prev = cut
    assert inc.finish() == p.parse(s)


@SETTINGS
@given(data=st.data())
def test_small_feeds_equal_one_shot(data: st.DataObject) -> None:
    """Feeds of 1-3 characters: most resume the one unfinished leaf (a literal, run,
    until or JSON scan) of the last parse instead of parsing again; each result must be
    the one-shot partial parse of the text so far, trees included."""
    g = data.draw(grammars())
    p = anchored(g)
    s = g.sample(data.draw)
    if data.draw(st.booleans()):
        s = data.draw(mutated(s))
    inc = p.incremental()
    prev = 0
    while prev < len(s):
        cut = min(len(s), prev + data.draw(st.integers(1, 3)))
        got = inc.feed(s[prev:cut])
        assert got == p.parse(s[:cut], partial=True), s[:cut]
        prev = cut
    assert inc.finish() == p.parse(s)
