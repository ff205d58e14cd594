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

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, composite

from autoparser.peg import (
    Parser,
    ParseStatus,
    Rules,
    char_class,
    chars,
    choice,
    end,
    grammar,
    json_value,
    literal,
    optional,
    repeat,
    seq,
    space,
    tag,
    until_one_of,
)

gbnf_oracle = pytest.importorskip("helpers.gbnf_oracle", reason="llguidance oracle unavailable")

FRESH = "ABCDEFGHIJKLMNOPQRSTUVWXYZΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ"
SHARED = "ab</>é→"  # non-decision characters (no whitespace, nothing fresh)
DELIMITER_SETS = [("</t>",), ("<|e|>",), ("END",), ("→|",), ("</t>", "<|e|>")]
WS = " \t\n\r"
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class G:
    """A random grammar node: builds its parser and samples strings of its language."""

    def parser(self) -> Parser:
        raise NotImplementedError

    def sample(self, draw: DrawFn) -> str:
        raise NotImplementedError


@dataclass
class Lit(G):
    text: str

    def parser(self) -> Parser:
        return literal(self.text)

    def sample(self, draw: DrawFn) -> str:
        return self.text


@dataclass
class Cls(G):
    spec: str
    members: str

    def parser(self) -> Parser:
        return char_class(self.spec)

    def sample(self, draw: DrawFn) -> str:
        return str(draw(st.sampled_from(self.members)))


@dataclass
class Chars(G):
    letters: str
    lo: int
    hi: int | None

    def parser(self) -> Parser:
        return chars(self.letters, self.lo, self.hi)

    def sample(self, draw: DrawFn) -> str:
        k = draw(st.integers(self.lo, self.hi if self.hi is not None else self.lo + 4))
        return "".join(draw(st.lists(st.sampled_from(self.letters), min_size=k, max_size=k)))


@dataclass
class Space(G):
    def parser(self) -> Parser:
        return space()

    def sample(self, draw: DrawFn) -> str:
        return str(draw(st.text(alphabet=WS, max_size=3)))


@dataclass
class Seq(G):
    items: list[G]

    def parser(self) -> Parser:
        return seq(*(i.parser() for i in self.items))

    def sample(self, draw: DrawFn) -> str:
        return "".join(i.sample(draw) for i in self.items)


@dataclass
class Alt(G):
    alts: list[G]

    def parser(self) -> Parser:
        return choice(*(a.parser() for a in self.alts))

    def sample(self, draw: DrawFn) -> str:
        return draw(st.sampled_from(self.alts)).sample(draw)


@dataclass
class Rep(G):
    body: G
    lo: int
    hi: int | None

    def parser(self) -> Parser:
        return repeat(self.body.parser(), self.lo, self.hi)

    def sample(self, draw: DrawFn) -> str:
        k = draw(st.integers(self.lo, self.hi if self.hi is not None else self.lo + 3))
        return "".join(self.body.sample(draw) for _ in range(k))


@dataclass
class Until(G):
    """lead + until(delims) + one delimiter; the lead literal keeps the free-form content
    out of the follow set of any decision point."""

    lead: str
    delims: tuple[str, ...]

    def parser(self) -> Parser:
        return self.lead + until_one_of(*self.delims) + choice(*self.delims)

    def sample(self, draw: DrawFn) -> str:
        body = str(draw(st.text(alphabet=SHARED + WS + "|tEND" + FRESH[:3], max_size=12)))
        while any(d in body for d in self.delims):
            for d in self.delims:
                body = body.replace(d, "")
        d = draw(st.sampled_from(self.delims))
        return self.lead + body + d


@dataclass
class Json(G):
    def parser(self) -> Parser:
        return json_value() + "!"

    def sample(self, draw: DrawFn) -> str:
        doc = draw(JSON_DOCS)
        indent = draw(st.sampled_from([None, 1]))
        ascii_ = draw(st.booleans())
        return json.dumps(doc, indent=indent, ensure_ascii=ascii_) + "!"


@dataclass
class Named(G):
    """A child behind a named rule (each in its own registry, so names collide)."""

    child: G

    def parser(self) -> Parser:
        rules = Rules()
        rules["item"] = self.child.parser()
        return rules.ref("item")

    def sample(self, draw: DrawFn) -> str:
        return self.child.sample(draw)


@dataclass
class Nested(G):
    """A recursive rule: open + optional(self) + inner + close (balanced nesting)."""

    open: str
    inner: G
    close: str

    def parser(self) -> Parser:
        rules = Rules()
        rules["nest"] = self.open + optional(rules.ref("nest")) + self.inner.parser() + self.close
        return rules.ref("nest")

    def sample(self, draw: DrawFn) -> str:
        depth = draw(st.integers(1, 4))
        inner = [self.inner.sample(draw) for _ in range(depth)]
        return self.open * depth + "".join(i + self.close for i in inner)


@dataclass
class Tagged(G):
    name: str
    child: G

    def parser(self) -> Parser:
        return tag(self.name, self.child.parser())

    def sample(self, draw: DrawFn) -> str:
        return self.child.sample(draw)


JSON_DOCS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=5),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3)
    ),
    max_leaves=6,
)


@dataclass
class Fresh:
    """Allocator of characters used by exactly one decision point."""

    pool: list[str] = field(default_factory=lambda: list(FRESH))

    def take(self, n: int = 1) -> str:
        out = "".join(self.pool[:n])
        del self.pool[:n]
        return out


@composite
def nodes(draw: DrawFn, fresh: Fresh, depth: int) -> G:
    """A node whose first character set avoids every fresh character and whitespace."""
    leaf_kinds = ["lit", "cls", "neg", "until", "json"]
    inner_kinds = ["seq", "alt", "rep", "opt", "chars", "tag", "named", "nested"]
    kinds = leaf_kinds + (inner_kinds if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind in ("alt", "rep", "opt", "chars", "nested") and len(fresh.pool) < 4:
        kind = "lit"
    if kind == "lit":
        head = draw(st.sampled_from(SHARED))
        return Lit(head + draw(st.text(alphabet=SHARED + " ", max_size=3)))
    if kind == "cls":
        members = "".join(sorted(set(draw(st.text(alphabet=SHARED, min_size=1, max_size=3)))))
        return Cls(members, members)
    if kind == "neg":
        excluded = "".join(sorted(set(draw(st.text(alphabet=SHARED, max_size=2)))))
        allowed = "".join(c for c in SHARED + "xyz0" if c not in excluded)
        return Cls("^" + excluded + FRESH + "\\ \\t\\n\\r", allowed)
    if kind == "until":
        return Until(draw(st.sampled_from(SHARED)), draw(st.sampled_from(DELIMITER_SETS)))
    if kind == "json":
        return Json()
    if kind == "tag":
        return Tagged(draw(st.sampled_from(["t1", "t2"])), draw(nodes(fresh, depth - 1)))
    if kind == "named":
        return Named(draw(nodes(fresh, depth - 1)))
    if kind == "nested":
        # The open char decides the optional recursion; the close char follows it, so
        # neither may appear anywhere else: both are fresh. The inner part must not
        # start with the open char (it is built from non-fresh items).
        opener, closer = fresh.take(), fresh.take()
        return Nested(opener, draw(nodes(fresh, depth - 1)), closer)
    if kind == "seq":
        return Seq(draw(st.lists(items(fresh, depth - 1), min_size=2, max_size=4)))
    if kind == "alt":
        n = draw(st.integers(2, 3))
        return Alt([decided(draw, fresh, depth - 1) for _ in range(n)])
    if kind == "chars":
        lo = draw(st.integers(0, 2))
        hi = draw(st.sampled_from([None, lo, lo + 1, lo + 3]))
        return Chars(fresh.take(2), lo, hi)
    lo, hi = (
        (0, 1) if kind == "opt" else (draw(st.integers(0, 2)), draw(st.sampled_from([None, 3])))
    )
    return Rep(decided(draw, fresh, depth - 1), lo, hi)


def decided(draw: DrawFn, fresh: Fresh, depth: int) -> G:
    """A node that starts with its own fresh character (a decision point)."""
    head = Lit(fresh.take() + draw(st.text(alphabet=SHARED, max_size=2)))
    tail = draw(st.lists(items(fresh, depth), max_size=2))
    return Seq([head, *tail]) if tail else head


@composite
def items(draw: DrawFn, fresh: Fresh, depth: int) -> G:
    """A sequence item: a node, or (rarely) whitespace."""
    if draw(st.integers(0, 5)) == 0:
        return Space()
    return draw(nodes(fresh, depth))


@composite
def grammars(draw: DrawFn) -> G:
    return draw(nodes(Fresh(), 3))


MUTATION_ALPHABET = SHARED + 'ABCΑ {}[]"!0,|tEND '


@composite
def mutated(draw: DrawFn, s: str) -> str:
    for _ in range(draw(st.integers(1, 2))):
        op = draw(st.sampled_from(["del", "ins", "sub", "dup"]))
        i = draw(st.integers(0, len(s)))
        ch = draw(st.sampled_from(MUTATION_ALPHABET))
        if op == "del" and s:
            i = min(i, len(s) - 1)
            s = s[:i] + s[i + 1 :]
        elif op == "ins":
            s = s[:i] + ch + s[i:]
        elif op == "sub" and s:
            i = min(i, len(s) - 1)
            s = s[:i] + ch + s[i + 1 :]
        else:
            j = draw(st.integers(i, min(len(s), i + 4)))
            s = s[:j] + s[i:j] + s[j:]
    return s


def anchored(g: G) -> Parser:
    return g.parser() + end()


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
