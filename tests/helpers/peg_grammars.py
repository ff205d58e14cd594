"""Random grammars from the fragment where PEG and CFG agree, and their mutations
(tests/peg/test_core_gbnf_props.py, tests/peg/test_oneshot.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, composite

from autoparser.peg import (
    Parser,
    Rules,
    char_class,
    chars,
    choice,
    end,
    json_value,
    literal,
    optional,
    repeat,
    seq,
    space,
    tag,
    until_one_of,
)

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
