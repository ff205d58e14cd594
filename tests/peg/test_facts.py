"""The facts of parser nodes (peg/facts.py): first characters, nullability, first and fixed
text, the end-of-input outcome and whether a match adds tagged nodes, on hand-built nodes,
and that they are worked out once and kept on the node."""

from __future__ import annotations

import pytest

from autoparser.peg import core, facts
from autoparser.peg.core import Parser, Rules


def chars_of(text: str) -> frozenset[str]:
    return frozenset(text)


@pytest.mark.parametrize(
    ("node", "first_set", "nullable"),
    [
        (core.literal("<tool>"), chars_of("<"), False),
        (core.literal(""), frozenset(), True),
        (core.token("<|call|>"), chars_of("<"), False),
        (core.chars("a-c", 1), chars_of("abc"), False),
        (core.chars("a-c", 0), chars_of("abc"), True),
        (core.chars("^a", 1), None, False),  # a negated class: unknown
        (core.any_char(), None, False),
        (core.json_value(), chars_of('{["-0123456789tfn'), False),
        (core.json_object(), chars_of("{"), False),
        (core.end(), None, True),
        (core.rest(), None, True),
        (core.until("</x>"), None, True),
        (core.negate("a"), None, True),
        (core.peek("ab"), chars_of("a"), True),
        (core.optional("[x]"), chars_of("["), True),
        (core.one_or_more("ab"), chars_of("a"), False),
        (core.tag("t", core.literal("q")), chars_of("q"), False),
        (core.atomic(core.literal("q")), chars_of("q"), False),
        (core.trigger(core.literal("q")), chars_of("q"), False),
        (core.choice("ab", "cd"), chars_of("ac"), False),
        (core.choice("ab", core.optional("cd")), chars_of("ac"), True),
        (core.choice("ab", core.until("x")), None, True),
        # A sequence starting with optional parts may start with any of them or what follows.
        (core.seq(core.optional("["), core.space(), "<call>"), chars_of("[< \t\n\r"), False),
        (core.seq(core.optional("a"), core.optional("b")), chars_of("ab"), True),
        (core.seq(core.optional("a"), core.rest()), None, True),
        (core.lazy(lambda: core.literal("<f>"), "<f>"), chars_of("<"), False),
    ],
    ids=repr,
)
def test_first_set_and_nullable(
    node: Parser, first_set: frozenset[str] | None, nullable: bool
) -> None:
    assert facts.first_set(node) == first_set
    assert facts.nullable(node) is nullable
    assert facts.starts(node) == (first_set, first_set is not None and nullable)
    # The matcher's promise: a set only for a node that cannot match nothing.
    assert facts.first_chars(node) == (None if nullable else first_set)
    assert node.first_chars() == facts.first_chars(node)


def test_first_chars_keep_their_promise() -> None:
    # At a character outside the set the node fails there, consuming nothing.
    node = core.seq(core.optional("["), core.space(), core.literal("<call>"))
    found = facts.first_chars(node)
    assert found is not None
    for text in ("x", "]", "a<call>"):
        assert text[0] not in found
        result = node.parse(text, partial=True)
        assert result.fail and result.pos == 0
    for text in ("[ <call>", "<call>", " <call>"):
        assert node.parse(text).success


@pytest.mark.parametrize(
    ("node", "text"),
    [
        (core.literal("<f=a>"), "<f=a>"),
        (core.seq("<f=", core.tag("name", core.literal("go")), ">"), "<f=go>"),
        (core.seq("<f=", core.json_value()), "<f="),
        (core.seq("a", core.optional("b"), "c"), "a"),
        (core.choice("<f=a", "<f=b", core.seq("<f", core.json_value())), "<f"),
        (core.choice("x", core.json_value()), ""),
        (core.one_or_more("ab"), "ab"),
        (core.optional("ab"), ""),
        (core.peek("ab"), "ab"),
        (core.negate("ab"), ""),
        (core.lazy(lambda: core.literal("<f=go>"), "<f="), "<f="),
        (core.seq(core.lazy(lambda: core.literal("x"), "<a"), "b"), "<a"),
    ],
    ids=repr,
)
def test_first_text(node: Parser, text: str) -> None:
    assert facts.first_text(node) == text
    assert node.first_text() == text


@pytest.mark.parametrize(
    ("node", "text"),
    [
        (core.literal("ab"), "ab"),
        (core.token("<t>"), "<t>"),
        (core.seq("a", core.tag("t", core.atomic(core.literal("b"))), core.trigger("c")), "abc"),
        (core.seq("a", core.optional("b")), None),
        (core.choice("a", "a"), None),
        (core.peek("a"), None),  # consumes nothing
        (core.chars("a", 1, 1), None),
        (core.lazy(lambda: core.literal("x"), "x"), None),  # never built for a fact
    ],
    ids=repr,
)
def test_fixed_text(node: Parser, text: str | None) -> None:
    assert facts.fixed_text(node) == text


@pytest.mark.parametrize(
    ("node", "outcome"),
    [
        (core.literal("a"), -1),
        (core.literal(""), 0),
        (core.chars("a", 0), 0),
        (core.chars("a", 1), -1),
        (core.json_value(), -1),
        (core.until("x"), 0),
        (core.seq(core.optional("a"), "b"), -1),
        (core.seq(core.optional("a"), core.space()), 0),
        (core.choice("a", core.optional("b")), 0),
        (core.choice("a", "b"), -1),
        (core.tag("t", core.literal("a")), -1),
        (core.tag("t", core.literal("")), None),  # matches, adding a node
        (core.negate("a"), 0),
        (core.negate(core.optional("a")), -1),
        (core.peek("a"), -1),
        (core.lazy(lambda: core.literal("x"), "x"), -1),
        (core.lazy(lambda: core.literal("x")), None),
    ],
    ids=repr,
)
def test_at_end(node: Parser, outcome: int | None) -> None:
    assert facts.at_end(node) == outcome
    if outcome is not None:  # what the matcher does at the end of the input, full mode
        result = node.parse("")
        assert result.success == (outcome == 0)


@pytest.mark.parametrize(
    ("node", "adds"),
    [
        (core.literal("a"), False),
        (core.seq("a", core.tag("t", core.literal("b"))), True),
        (core.peek(core.tag("t", core.literal("b"))), False),  # taken back
        (core.negate(core.tag("t", core.literal("b"))), False),
        (core.choice("a", core.atomic(core.tag("t", core.literal("b")))), True),
        (core.lazy(lambda: core.literal("x"), "x"), True),  # unknown unbuilt: the safe side
    ],
    ids=repr,
)
def test_adds_nodes(node: Parser, adds: bool) -> None:
    assert facts.adds_nodes(node) is adds


def test_facts_are_kept_on_the_node_and_build_no_lazy_node() -> None:
    built: list[int] = []

    def build() -> Parser:
        built.append(1)
        return core.literal("<f>")

    node = core.choice(core.lazy(build, "<f>"), core.seq(core.optional("x"), "y"))
    assert facts.first_chars(node) == chars_of("<xy")
    assert facts.first_text(node) == ""
    assert facts.at_end(node) == -1
    assert facts.adds_nodes(node) is True
    assert built == []
    kept = node._facts
    assert kept is not None
    # Asked again, the answers are read from the node, not worked out again.
    kept[:] = ["first set", "nullable", "first text", "fixed", "end", "adds"]
    assert facts.first_set(node) == "first set"
    assert facts.first_text(node) == "first text"
    assert facts.fixed_text(node) == "fixed"
    assert facts.at_end(node) == "end"


def test_nullable_of_a_lazy_node_without_first_text_asks_what_it_builds() -> None:
    node = core.lazy(lambda: core.optional("x"))
    assert facts.nullable(node) is True
    assert isinstance(node, core.Lazy) and node.built


def test_recursive_rules_answer_the_cautious_value() -> None:
    rules = Rules()
    # list ::= "[" (list | "x") "]"  |  list "," : reached again through itself.
    rules["list"] = core.choice(
        core.seq("[", core.choice(rules.ref("list"), "x"), "]"),
        core.seq(rules.ref("list"), ","),
    )
    node = rules.ref("list")
    assert facts.first_chars(node) is None  # the left recursion is unknown
    assert facts.first_text(node) == ""
    rules["item"] = core.seq("[", core.optional(rules.ref("item")), "]")
    item = rules.ref("item")
    assert facts.first_chars(item) == chars_of("[")
    assert facts.first_text(item) == "["
    assert facts.fixed_text(item) is None
    assert facts.nullable(item) is False
    assert item.parse("[[]]").success


def test_a_rule_defined_later_is_asked_again() -> None:
    rules = Rules()
    node = core.seq(core.optional(rules.ref("later")), "z")
    assert facts.first_chars(node) is None  # not defined yet: unknown, and not kept
    assert facts.first_text(rules.ref("later")) == ""
    rules["later"] = core.literal("ab")
    assert facts.first_chars(node) == chars_of("az")
    assert facts.first_text(node) == ""
    assert facts.fixed_text(rules.ref("later")) == "ab"


def test_a_node_of_another_module_is_the_cautious_side() -> None:
    class Stray(Parser):
        def _match(
            self, ctx: object, pos: int
        ) -> tuple[int, int, tuple[core.Node, ...], bool, str]:
            raise AssertionError("never parsed here")

    stray = Stray()
    assert facts.first_set(stray) is None
    assert facts.first_chars(core.seq(stray, "a")) is None
    assert facts.nullable(stray) is True
    assert facts.first_text(stray) == ""
    assert facts.fixed_text(stray) is None
    assert facts.at_end(stray) is None
    assert facts.adds_nodes(stray) is True


@pytest.mark.parametrize("first", ["<", "<function=get_weather>"])
def test_a_lazy_node_keeps_the_facts_the_visitors_answer_for_its_promise(first: str) -> None:
    node = core.lazy(lambda: core.literal(first + "x"), first)
    assert node._facts == facts.promised(first)
    fresh = core.lazy(lambda: core.literal("x"), first)
    fresh._facts = None  # worked out by the visitors this time
    worked_out = [
        visitor.of(fresh)
        for visitor in (
            facts.FirstSet(),
            facts.Nullable(),
            facts.FirstText(),
            facts.FixedText(),
            facts.AtEnd(),
            facts.AddsNodes(),
        )
    ]
    assert worked_out == facts.promised(first)


def test_lead_is_first_chars_and_first_text() -> None:
    rules = Rules()
    for node in (
        core.seq(core.optional("["), "<call>"),
        core.choice("ab", "ac"),
        core.optional("x"),
        rules.ref("undefined"),
    ):
        assert facts.lead(node) == (facts.first_chars(node), facts.first_text(node))
