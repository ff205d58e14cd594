"""The closed set of parser node kinds and the passes over it (issue 20 §3).

``peg.core.NODE_TYPES`` lists every node kind; every pass over a grammar is a
``NodeVisitor`` (the one-shot compiler and its analyses, the GBNF emitter, the leaf
regexes), the matcher is each kind's ``_match``, and only these kinds may resume a feed.
Everything here is computed from the set and from the classes found at run time, so a
node class added without being listed, or a kind some pass does not handle, fails.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

import pytest

import autoparser
from autoparser.errors import GrammarError
from autoparser.peg import core, gbnf_emit, oneshot
from autoparser.peg.core import NODE_TYPES, NodeKindError, NodeVisitor, Parser, Rules
from autoparser.peg.status import OK

# Every module of the package, imported so that every visitor and node class is defined.
for _info in pkgutil.walk_packages(autoparser.__path__, "autoparser."):
    if ".integrations." not in _info.name and not _info.name.endswith("__main__"):
        importlib.import_module(_info.name)


def _subclasses(base: type) -> list[type]:
    found: list[type] = []
    stack: list[type] = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def _ours(cls: type) -> bool:
    return cls.__module__.startswith("autoparser.")


def unlisted_kinds() -> list[type]:
    """Public Parser subclasses of the package that NODE_TYPES does not list."""
    return [
        c
        for c in _subclasses(Parser)
        if _ours(c) and not c.__name__.startswith("_") and c not in NODE_TYPES
    ]


def visitors() -> list[type[NodeVisitor[object]]]:
    """Every visitor class the package defines."""
    return [c for c in _subclasses(NodeVisitor) if _ours(c)]


def _rules_ref() -> Parser:
    rules = Rules()
    return rules.define("word", core.literal("w"))


# One node of each kind, for the behavioural checks (a kind without one fails below).
EXAMPLES: dict[type[Parser], Callable[[], Parser]] = {
    core.Literal: lambda: core.literal("ab"),
    core.Token: lambda: core.token("<t>"),
    core.Chars: lambda: core.chars("a-z", 1, 3),
    core.CharClass: lambda: core.char_class("0-9"),
    core.AnyChar: core.any_char,
    core.Space: core.space,
    core.End: core.end,
    core.Rest: core.rest,
    core.Until: lambda: core.until("</x>"),
    core.Json: core.json_value,
    core.JsonSchema: lambda: core.json_schema({"type": "integer"}, "n"),
    core.Seq: lambda: core.seq("a", core.chars("0-9")),
    core.Choice: lambda: core.choice("a", "b"),
    core.Repeat: lambda: core.repeat("ab", 0, 2),
    core.Peek: lambda: core.peek("a"),
    core.Negate: lambda: core.negate("a"),
    core.Tag: lambda: core.tag("t", "a"),
    core.Atomic: lambda: core.atomic("a"),
    core.TriggerMark: lambda: core.trigger("a"),
    core.Ref: _rules_ref,
    core.Lazy: lambda: core.lazy(lambda: core.seq("a", core.chars("0-9", 0)), "a"),
}


def test_every_node_class_of_the_package_is_a_listed_kind() -> None:
    assert unlisted_kinds() == []
    assert len(set(NODE_TYPES)) == len(NODE_TYPES)


def test_a_new_node_class_not_listed_is_found() -> None:
    class Stray(Parser):
        pass

    Stray.__module__ = "autoparser.peg.stray"  # as if defined in the package
    try:
        assert unlisted_kinds() == [Stray]
    finally:
        Stray.__module__ = __name__
    assert unlisted_kinds() == []


def test_every_kind_has_its_own_matcher() -> None:
    for kind in NODE_TYPES:
        assert kind._match is not Parser._match, kind.__name__


def test_the_passes_are_visitors() -> None:
    names = {c.__qualname__ for c in visitors()}
    # The matcher aside (each kind's _match), the passes the issue names.
    assert {
        "_Compiler",
        "FirstSet",
        "Nullable",
        "FirstText",
        "FixedText",
        "AtEnd",
        "AddsNodes",
        "_Resumable",
        "_Emitter",
        "LeafRegex",
        "_Piece",
        "_SplitFinder",
        "_Nullable",
        "_StartsFree",
        "_EndsFree",
        "_Lexeme",
        "_LeadingWords",
    } <= names


@pytest.mark.parametrize("visitor", visitors(), ids=lambda v: v.__qualname__)
def test_every_visitor_handles_every_kind(visitor: type[NodeVisitor[object]]) -> None:
    for kind in NODE_TYPES:
        method = visitor.method_for(kind)
        assert method is not NodeVisitor.foreign, (visitor.__qualname__, kind.__name__)


def test_examples_cover_every_kind() -> None:
    assert set(EXAMPLES) == set(NODE_TYPES)
    for kind, make in EXAMPLES.items():
        assert type(make()) is kind


@pytest.mark.parametrize("kind", NODE_TYPES, ids=lambda k: k.__name__)
def test_each_kind_through_every_pass(kind: type[Parser]) -> None:
    node = EXAMPLES[kind]()
    # The resumability check.
    assert core._resumable(node)
    # The one-shot compiler (everything but named rules: recursion, by design) gives the
    # matcher's trees.
    shot = oneshot.compiled(node)
    assert (shot is None) == (kind is core.Ref)
    for text in ("", "a", "ab", "</x", "12"):
        for partial in (False, True):
            expected = node.parse(text, partial)
            if shot is not None:
                status, tree = shot.parse(text, partial)
                assert status == expected.status, (text, partial)
                assert expected.fail or tree == expected.tree, (text, partial)
    # The GBNF emitter: a grammar, or the GrammarError of a node GBNF cannot express.
    try:
        assert gbnf_emit.grammar(node).text.startswith("root ::= ")
    except NodeKindError:  # pragma: no cover - the failure this test exists for
        raise
    except GrammarError as exc:
        assert kind in (core.Peek, core.Negate), exc
    # Lazy: its trigger words, or the GrammarError of a node that has no leading literal.
    try:
        lazy = gbnf_emit.grammar(core.trigger(node), lazy=True)
        assert lazy.triggers
    except NodeKindError:  # pragma: no cover - the failure this test exists for
        raise
    except GrammarError as exc:
        assert "trigger word" in str(exc) or kind in (core.Peek, core.Negate), exc


class _Stray(Parser):
    """A node class of another module (not a kind of NODE_TYPES)."""

    __slots__ = ()

    def _match(self, ctx: core._Ctx, pos: int) -> core.Res:
        return (OK, pos, (), False, "")


def test_a_foreign_node_class_is_refused_clearly() -> None:
    stray = _Stray()
    with pytest.raises(NodeKindError, match="_Stray is not a parser node kind"):
        _Counting().visit(stray)
    # Each pass says what it does with it: parsed the memoised way, not resumed, not
    # compiled, not translated to GBNF, not a plain leaf.
    assert core.seq("a", stray).parse("a").success
    assert not core._resumable(core.seq("a", stray))
    assert oneshot.compiled(core.seq("a", stray)) is None
    with pytest.raises(GrammarError, match="no GBNF translation for _Stray"):
        gbnf_emit.grammar(core.seq("a", stray))
    assert core.LeafRegex().visit(stray) is None


class _Counting(NodeVisitor[int]):
    """A visitor handling literals only."""

    def visit_Literal(self, node: core.Literal) -> int:
        return len(node.value)


def test_a_visitor_missing_a_kind_says_which() -> None:
    assert _Counting().visit(core.literal("abc")) == 3
    assert _Counting().visit(core.token("<t>")) == 3  # a Token is a Literal
    with pytest.raises(NodeKindError, match="_Counting does not handle Seq nodes"):
        _Counting().visit(core.seq("a", "b"))


def test_methods_are_resolved_once_per_class() -> None:
    _Counting().visit(core.token("x"))
    table = _Counting._methods
    assert table[core.Token] is _Counting.visit_Literal
    assert table is not NodeVisitor._methods and table is not core.LeafRegex._methods
    # A subclass resolves on its own (its methods may differ).
    assert core.Token not in oneshot._Piece._methods or (
        oneshot._Piece._methods[core.Token] is core.LeafRegex.visit_Literal
    )


def test_nearest_kind_wins() -> None:
    # The emitter bounds space() but not other class runs: Space's own method.
    emitter = gbnf_emit._Emitter
    assert emitter.method_for(core.Space) is emitter.visit_Space
    assert emitter.method_for(core.AnyChar) is emitter.visit_Chars
    assert emitter.method_for(core.JsonSchema) is emitter.visit_JsonSchema
