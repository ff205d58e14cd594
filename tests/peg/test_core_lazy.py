"""Lazy nodes and families (peg.core.Lazy, Family): a lazy node parses exactly as what it
builds, builds only when a match needs it, and keeps its first-text promise; an ordered
choice of a thousand of them builds the one the text names."""

from __future__ import annotations

import threading

import pytest

from autoparser.errors import GrammarError
from autoparser.peg import core, oneshot
from autoparser.peg.core import Family, Lazy, Name, placeholder

NAMES = ["get", "get_weather", "search", "send_mail", "sum"]


def _call(name: str) -> core.Parser:
    """A call ``<f=NAME>{json}</f>``, its name tagged and atomic as the builders write it."""
    head = core.atomic(core.seq("<f=", core.tag("name", core.literal(name)), ">"))
    args = core.tag("args", core.json_value())
    return core.tag("call", core.seq(head, core.space(), args, core.space(), "</f>"))


def _eager() -> core.Parser:
    calls = [_call(n) for n in sorted(NAMES, key=len, reverse=True)]
    return core.seq(core.zero_or_more(core.seq(core.choice(*calls), core.space())), core.end())


def _lazy(built: list[str]) -> core.Parser:
    def build(name: str) -> core.Parser:
        built.append(name)
        return _call(name)

    calls = [
        core.lazy(lambda n=n: build(n), f"<f={n}") for n in sorted(NAMES, key=len, reverse=True)
    ]
    return core.seq(core.zero_or_more(core.seq(core.choice(*calls), core.space())), core.end())


TEXTS = [
    "",
    "<f=get_weather>{}</f>",
    '<f=get>{"a": 1}</f> <f=sum>[1, 2]</f>',
    "<f=get_weather>{",
    "<f=get_wea",
    "<f=",
    "<f=nope>{}</f>",
    "<f=search>{} </f><f=sen",
    "<f=send_mail>{}</x>",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("partial", [False, True])
def test_a_lazy_choice_parses_as_the_built_one(text: str, partial: bool) -> None:
    expected = _eager().parse(text, partial)
    got = _lazy([]).parse(text, partial)
    assert got.status == expected.status
    assert got.tree == expected.tree or expected.fail
    # The one-shot compiled form too.
    shot = oneshot.compiled(_lazy([]))
    assert shot is not None
    status, tree = shot.parse(text, partial)
    assert status == expected.status.value or status == expected.status
    assert tree == expected.tree or expected.fail


@pytest.mark.parametrize("text", TEXTS)
def test_a_stream_of_lazy_calls_ends_as_the_whole_parse(text: str) -> None:
    whole = _eager().parse(text, True)
    stream = _lazy([]).incremental()
    last = stream.feed("")
    for ch in text:
        last = stream.feed(ch)
    assert last.status == whole.status
    assert last.tree == whole.tree or whole.fail
    assert stream.finish().status == _eager().parse(text).status


def test_only_the_named_call_is_built() -> None:
    built: list[str] = []
    parser = _lazy(built)
    assert parser.parse('<f=send_mail>{"to": "x"}</f>').success
    assert built == ["send_mail"]
    # At the end of the input, in full mode, every call fails unbuilt (none can be there).
    built.clear()
    assert parser.parse("").success
    assert _lazy(built).parse("<f=").fail
    assert built == []
    # The one-shot form keeps the promise too.
    shot = oneshot.compiled(_lazy(built))
    assert shot is not None
    shot.parse('<f=get>{"a": 1}</f>')
    assert built == ["get"]


def test_a_broken_promise_shows_where_the_built_parser_differs() -> None:
    """The first text is a promise whoever makes the node keeps: a lazy node answers from it
    unbuilt (here wrongly, as this test's node lies), so a wrong promise is a wrong parse."""
    liar = core.lazy(lambda: core.literal("abc"), "abd")
    assert liar.parse("abc").fail  # as promised: "abc" differs from "abd"
    assert core.literal("abc").parse("abc").success


def test_a_builder_making_a_foreign_node_is_refused() -> None:
    class Stray(core.Parser):
        def _match(self, ctx: core._Ctx, pos: int) -> core.Res:
            return (core.OK, pos, (), False, "")

    node = core.lazy(lambda: Stray(), "x")
    with pytest.raises(GrammarError, match="outside NODE_TYPES"):
        node.parse("x")


def test_a_stand_in_has_no_parser() -> None:
    family = Family("f", (placeholder(0),), lambda slots: core.literal(placeholder(0)))
    stand_in = Lazy(None, family=family, names=(Name("a", "a"),), slot=0)
    with pytest.raises(GrammarError, match="stands in for a part"):
        stand_in.target()
    with pytest.raises(GrammarError, match="not both"):
        Lazy(lambda: core.literal("a"), slot=0)
    with pytest.raises(GrammarError, match="0 names for a family of 1"):
        Lazy(lambda: core.literal("a"), family=family, names=())


def test_a_family_builds_its_representative_once_across_threads() -> None:
    calls: list[int] = []

    def build(slots: tuple[core.Parser, ...]) -> core.Parser:
        calls.append(1)
        return core.literal(placeholder(0))

    family = Family("once", (placeholder(0),), build)
    found: list[core.Parser] = []
    threads = [
        threading.Thread(target=lambda: found.append(family.representative())) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(p) for p in found}) == 1
    assert family.kept("x", lambda: 1) == 1 and family.kept("x", lambda: 2) == 1


def test_placeholders_are_distinct_lowercase_names() -> None:
    made = [placeholder(i) for i in range(500)]
    assert len(set(made)) == 500
    assert all(p.isalpha() and p.islower() and p.startswith("qjwq") for p in made)
    # None is a prefix of another (a longer one is always matched first anyway).
    assert not any(a != b and b.startswith(a) for a in made[:40] for b in made[:40])


def test_first_text_runs_through_fixed_items() -> None:
    head = core.atomic(core.seq("<f=", core.tag("name", core.literal("go")), ">"))
    assert core.seq(head, core.space(), "x").first_text() == "<f=go>"
    assert core.seq("a", core.optional("b"), "c").first_text() == "a"
    # An ordered choice promises what all its alternatives start with.
    assert core.choice("<f=a", "<f=b", core.seq("<f", core.json_value())).first_text() == "<f"
    assert core.choice("x", core.json_value()).first_text() == ""
