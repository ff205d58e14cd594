"""What a parser node promises before it reads a character, worked out once per node.

Three passes need the same facts about a grammar: the matcher's ordered choice (which
alternatives can start at the next character, ``Choice``), the one-shot compiler (the same,
and what a full-mode match at the end of the input does) and the GBNF emitter (which nodes
can match nothing). They used to work them out three times, with three sets of rules that
drifted apart; here each fact has one visitor, and its answer is kept on the node
(``Parser._facts``), so every pass, every compile and every emission reads it once built.

The facts:

- ``first_set``: the characters a non-empty match can start with, or None when unknown.
  At a character outside it the node fails, or (``nullable``) matches nothing, reading no
  further and whatever follows (a sequence of optional parts then a marker keeps this);
- ``nullable``: whether the node can match the empty string;
- ``first_chars``: ``first_set`` for a node that cannot match nothing (else None): at a
  character outside it the node fails there, so an ordered choice may skip it;
- ``first_text``: the text every match starts with, read by literals ("" when unknown);
- ``fixed_text``: the one text the node matches (literals, in sequence, tagged), or None;
- ``at_end``: a full-mode match where no input is left: 0 (matches nothing, adds no tagged
  node), -1 (fails) or None (adds nodes, or not worked out);
- ``adds_nodes``: whether a match can leave tagged nodes behind.

None of them builds a ``Lazy`` node: its promised first text stands for it (``nullable``
of one without a first text is the exception, and says so). A node reached again through
itself (a recursive rule) answers the cautious value while its own answer is worked out;
an answer that went through a reference to a rule not defined yet is not kept, since the
rule may be defined before the next question.

The module sits under ``peg.core``, which asks it from ``Choice``: it reads nodes by their
attributes (their classes are imported for the types only) and dispatches through
``peg.visitor``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from autoparser.peg import json_scan
from autoparser.peg.visitor import Handler, NodeVisitor

if TYPE_CHECKING:
    from autoparser.peg.core import (
        Atomic,
        Chars,
        Choice,
        Json,
        Lazy,
        Literal,
        Negate,
        Parser,
        Peek,
        Ref,
        Repeat,
        Seq,
        Tag,
        TriggerMark,
    )

_T = TypeVar("_T")

# Where each fact is kept in a node's ``_facts`` list.
_FIRST_SET, _NULLABLE, _FIRST_TEXT, _FIXED_TEXT, _AT_END, _ADDS_NODES = range(6)
_COUNT = 6
_UNSET: object = object()
_OPEN: object = object()  # being worked out (by the thread holding LOCK)
# The most characters a first set lists (a wider class is "unknown": a dict per character
# of it would cost more than trying the alternative).
_MAX_SET = 256

# Held while a rule's facts are worked out (a node marked open is then this thread's: the
# rule was reached again through itself). The same lock builds lazy nodes and families
# (``peg.core``): a builder may ask facts, and facts may build (``Nullable`` of a lazy node
# without a first text).
LOCK = threading.RLock()


class _Unsettled(Exception):
    """An answer went through a reference to a rule not defined yet: not kept."""


class Fact(Generic[_T]):
    """One fact of every node kind, kept on the node once worked out (``of``): mixed into a
    ``NodeVisitor`` that has a ``visit_<Kind>`` for each kind. One instance per fact
    serves every question: it holds no state (a rule being worked out is marked open on
    its node).

    Two threads asking about the same new node both work it out, alike; only a rule
    reference (the one way a grammar reaches itself) is worked out under ``LOCK``.
    """

    __slots__ = ()
    # Where the fact is kept on the node, and what a node reached through itself answers.
    index: ClassVar[int]
    cut: ClassVar[object]
    _methods: ClassVar[dict[type, Handler]]

    if TYPE_CHECKING:

        def visit(self, node: Parser, *args: object) -> _T: ...

        @classmethod
        def method_for(cls, kind: type[Parser]) -> Handler: ...

    def of(self, node: Parser) -> _T:
        """The fact of ``node`` (worked out once, then read from the node)."""
        kept = node._facts
        if kept is None:
            kept = node._facts = [_UNSET] * _COUNT
        index = self.index
        found = kept[index]
        if found is _UNSET or found is _OPEN:
            kind = node.__class__
            method = self._methods.get(kind) or type(self).method_for(kind)
            found = method(self, node)
            if kept[index] is _UNSET:  # (a rule keeps its own answer, see ``through``)
                kept[index] = found
        return found  # type: ignore[return-value]

    def answer(self, node: Parser) -> _T:
        """``of`` from outside: the cautious ``cut`` where a rule is not defined yet (kept
        on no node whose answer went through it)."""
        try:
            return self.of(node)
        except _Unsettled:
            return self.cut  # type: ignore[return-value]

    def through(self, node: Parser, target: Callable[[], Parser]) -> _T:
        """The fact of what ``node`` stands for (a rule's body, what a lazy node builds),
        kept on ``node``; ``cut`` where it is reached again through itself."""
        kept = node._facts
        assert kept is not None  # made by ``of``
        index = self.index
        with LOCK:
            found = kept[index]
            if found is _OPEN:
                return self.cut  # type: ignore[return-value]
            if found is not _UNSET:
                return found  # type: ignore[return-value]
            kept[index] = _OPEN
            try:
                found = self.of(target())
            except BaseException:
                kept[index] = _UNSET
                raise
            kept[index] = found
            return found

    def rule(self, node: Ref) -> Parser:
        """The rule a reference names (``_Unsettled`` if it is not defined yet)."""
        if node.name not in node.rules:
            raise _Unsettled(node.name)
        return node.target()

    def visit_Ref(self, node: Ref) -> _T:
        return self.through(node, lambda: self.rule(node))


class FirstSet(NodeVisitor["frozenset[str] | None"], Fact["frozenset[str] | None"]):
    """The characters a non-empty match can start with, or None when unknown."""

    __slots__ = ()
    index = _FIRST_SET
    cut = None

    def visit_Literal(self, node: Literal) -> frozenset[str] | None:
        return frozenset(node.value[:1])

    def visit_Chars(self, node: Chars) -> frozenset[str] | None:
        ranges = node.charset.ranges
        if node.charset.negated or sum(hi - lo + 1 for lo, hi in ranges) > _MAX_SET:
            return None
        return frozenset(chr(c) for lo, hi in ranges for c in range(lo, hi + 1))

    def visit_Json(self, node: Json) -> frozenset[str] | None:
        return json_scan.first_chars(node.kind, node.single_quotes)

    def visit_Seq(self, node: Seq) -> frozenset[str] | None:
        # The items up to the first that cannot match nothing: any of them may start it.
        found: frozenset[str] = frozenset()
        nullable = _NULLABLE_FACT.of
        for item in node.items:
            chars = self.of(item)
            if chars is None:
                return None
            found = found | chars if found else chars
            if not nullable(item):
                break
        return found

    def visit_Choice(self, node: Choice) -> frozenset[str] | None:
        found: frozenset[str] = frozenset()
        for alt in node.alternatives:
            chars = self.of(alt)
            if chars is None:
                return None
            found = found | chars if found else chars
        return found

    def as_child(self, node: Repeat | Peek | Tag | Atomic | TriggerMark) -> frozenset[str] | None:
        # A lookahead fails where its child does and matches nothing where it matches.
        return self.of(node.child)

    visit_Repeat = visit_Peek = visit_Tag = visit_Atomic = visit_TriggerMark = as_child

    def unknown(self, node: Parser, *args: object) -> frozenset[str] | None:
        return None

    visit_End = visit_Rest = visit_Until = visit_Negate = foreign = unknown

    def visit_Lazy(self, node: Lazy) -> frozenset[str] | None:
        return frozenset(node.first[0]) if node.first else None


class Nullable(NodeVisitor[bool], Fact[bool]):
    """Whether a node can match the empty string (as a grammar: a lookahead, which consumes
    nothing, can). A node of another module is taken as one that can (the cautious side
    for first sets)."""

    __slots__ = ()
    index = _NULLABLE
    cut = True

    def visit_Literal(self, node: Literal) -> bool:
        return not node.value

    def visit_Chars(self, node: Chars) -> bool:
        return node.min == 0

    def visit_Json(self, node: Json) -> bool:
        return False

    def always(self, node: Parser, *args: object) -> bool:
        return True

    visit_Until = visit_Rest = visit_End = visit_Peek = visit_Negate = foreign = always

    def visit_Seq(self, node: Seq) -> bool:
        return all(self.of(item) for item in node.items)

    def visit_Choice(self, node: Choice) -> bool:
        return any(self.of(alt) for alt in node.alternatives)

    def visit_Repeat(self, node: Repeat) -> bool:
        return node.min == 0 or self.of(node.child)

    def as_child(self, node: Tag | Atomic | TriggerMark) -> bool:
        return self.of(node.child)

    visit_Tag = visit_Atomic = visit_TriggerMark = as_child

    def visit_Lazy(self, node: Lazy) -> bool:
        if node.first:
            return False  # every match reads its first text
        # Without one, what it stands for is asked (building it).
        family = node.family
        if family is not None and node.slot >= 0:
            return self.through(node, family.representative)
        return self.through(node, node.target)


class FirstText(NodeVisitor[str], Fact[str]):
    """Text every match starts with, read by literals at the start of the node ("" when
    unknown): where the text that remains differs from it, as far as it goes, the node
    fails there, consuming nothing (a finer filter than a first set for alternatives that
    share a first character, like ``<|channel|>analysis`` and ``<|channel|>final``)."""

    __slots__ = ()
    index = _FIRST_TEXT
    cut = ""

    def visit_Literal(self, node: Literal) -> str:
        return node.value

    def visit_Seq(self, node: Seq) -> str:
        # Items that always match the same text are written out, then the first other
        # item's own first text: ``<function=`` + a tool's name, not ``<function=`` alone,
        # so an ordered choice of a thousand calls tries only the one named.
        parts: list[str] = []
        for item in node.items:
            text = _FIXED_TEXT_FACT.of(item)
            if text is None:
                parts.append(self.of(item))
                break
            parts.append(text)
        return "".join(parts)

    def visit_Choice(self, node: Choice) -> str:
        # What every alternative starts with: their texts' common prefix.
        texts = [self.of(alt) for alt in node.alternatives]
        return os.path.commonprefix(texts)  # noqa: RUF071 - of strings, not of paths

    def visit_Repeat(self, node: Repeat) -> str:
        return self.of(node.child) if node.min >= 1 else ""

    def as_child(self, node: Peek | Tag | Atomic | TriggerMark) -> str:
        return self.of(node.child)

    visit_Peek = visit_Tag = visit_Atomic = visit_TriggerMark = as_child

    def unknown(self, node: Parser, *args: object) -> str:
        return ""

    visit_Chars = visit_Json = visit_End = visit_Rest = visit_Until = unknown
    visit_Negate = foreign = unknown

    def visit_Lazy(self, node: Lazy) -> str:
        return node.first


class FixedText(NodeVisitor["str | None"], Fact["str | None"]):
    """The one text a node matches (a literal, a sequence of such, tagged or atomic, a rule
    holding one), or None."""

    __slots__ = ()
    index = _FIXED_TEXT
    cut = None

    def visit_Literal(self, node: Literal) -> str | None:
        return node.value

    def visit_Seq(self, node: Seq) -> str | None:
        parts: list[str] = []
        for item in node.items:
            text = self.of(item)
            if text is None:
                return None
            parts.append(text)
        return "".join(parts)

    def as_child(self, node: Tag | Atomic | TriggerMark) -> str | None:
        return self.of(node.child)

    visit_Tag = visit_Atomic = visit_TriggerMark = as_child

    def not_fixed(self, node: Parser, *args: object) -> str | None:
        return None

    visit_Chars = visit_Json = visit_End = visit_Rest = visit_Until = not_fixed
    visit_Choice = visit_Repeat = visit_Peek = visit_Negate = visit_Lazy = not_fixed
    foreign = not_fixed


class AtEnd(NodeVisitor["int | None"], Fact["int | None"]):
    """A full-mode match where no input is left reads no character, so its outcome is the
    grammar's alone: 0 (matches, adding no nodes), -1 (fails), or None (it adds nodes, or
    is not worked out here)."""

    __slots__ = ()
    index = _AT_END
    cut = None

    def visit_Literal(self, node: Literal) -> int | None:
        return -1 if node.value else 0

    def visit_Chars(self, node: Chars) -> int | None:
        return 0 if node.min == 0 else -1

    def matches_nothing(self, node: Parser) -> int | None:
        return 0

    visit_End = visit_Rest = visit_Until = matches_nothing

    def visit_Json(self, node: Json) -> int | None:
        return -1

    def visit_Seq(self, node: Seq) -> int | None:
        for item in node.items:
            outcome = self.of(item)
            if outcome != 0:
                return outcome
        return 0

    def visit_Choice(self, node: Choice) -> int | None:
        for alt in node.alternatives:
            outcome = self.of(alt)
            if outcome != -1:
                return outcome
        return -1

    def visit_Lazy(self, node: Lazy) -> int | None:
        # A match reads its first text; without one, not worked out (that would build it).
        return -1 if node.first else None

    def visit_Repeat(self, node: Repeat) -> int | None:
        outcome = self.of(node.child)
        if outcome == -1:
            return 0 if node.min == 0 else -1
        return outcome  # an empty match satisfies the count

    def visit_Negate(self, node: Negate) -> int | None:
        outcome = self.of(node.child)
        return None if outcome is None else -1 - outcome

    def as_child(self, node: Peek | Atomic | TriggerMark) -> int | None:
        return self.of(node.child)

    visit_Peek = visit_Atomic = visit_TriggerMark = as_child

    def visit_Tag(self, node: Tag) -> int | None:
        return -1 if self.of(node.child) == -1 else None

    def unknown(self, node: Parser, *args: object) -> int | None:
        return None  # a rule (recursion, which the one-shot compiler leaves alone) or foreign

    visit_Ref = foreign = unknown


class AddsNodes(NodeVisitor[bool], Fact[bool]):
    """Whether a match can leave tagged nodes behind (so that a parent that fails later
    must take them back)."""

    __slots__ = ()
    index = _ADDS_NODES
    cut = True

    def visit_Tag(self, node: Tag) -> bool:
        return True

    def lookahead(self, node: Peek | Negate) -> bool:
        return False  # whatever the child adds is taken back

    visit_Peek = visit_Negate = lookahead

    def leaf(self, node: Parser) -> bool:
        return False

    visit_Literal = visit_Chars = visit_End = visit_Rest = visit_Until = visit_Json = leaf

    def by_children(self, node: Seq | Choice | Repeat | Atomic | TriggerMark) -> bool:
        return any(self.of(child) for child in node.children())

    visit_Seq = visit_Choice = visit_Repeat = visit_Atomic = visit_TriggerMark = by_children

    def unknown(self, node: Parser, *args: object) -> bool:
        return True  # unknown until built, which this must not cause; or of another module

    visit_Lazy = foreign = unknown


_FIRST_SET_FACT = FirstSet()
_NULLABLE_FACT = Nullable()
_FIRST_TEXT_FACT = FirstText()
_FIXED_TEXT_FACT = FixedText()
_AT_END_FACT = AtEnd()
_ADDS_NODES_FACT = AddsNodes()


def first_set(node: Parser) -> frozenset[str] | None:
    """The characters a non-empty match of ``node`` can start with, or None (see module)."""
    return _FIRST_SET_FACT.answer(node)


def nullable(node: Parser) -> bool:
    """Whether ``node`` can match the empty string."""
    return _NULLABLE_FACT.answer(node)


def starts(node: Parser) -> tuple[frozenset[str] | None, bool]:
    """(``first_set``, whether it can match nothing): at a character outside the set the
    node fails or matches nothing, reading no further. Nullability is asked only where the
    set is known (so that no lazy node is built for it)."""
    chars = _FIRST_SET_FACT.answer(node)
    return chars, chars is not None and _NULLABLE_FACT.answer(node)


def first_chars(node: Parser) -> frozenset[str] | None:
    """Characters a match must start with, or None: at any other character ``node`` fails
    there, consuming nothing, whatever the end of the input (an ordered choice skips it)."""
    chars = _FIRST_SET_FACT.answer(node)
    if chars is None or _NULLABLE_FACT.answer(node):
        return None
    return chars


def lead(node: Parser) -> tuple[frozenset[str] | None, str]:
    """(``first_chars``, ``first_text``) of ``node``: what an ordered choice dispatches on,
    asked of each of its alternatives at once (a thousand, for a thousand tools)."""
    try:
        chars = _FIRST_SET_FACT.of(node)
        if chars is not None and _NULLABLE_FACT.of(node):
            chars = None
        return chars, _FIRST_TEXT_FACT.of(node)
    except _Unsettled:
        return first_chars(node), first_text(node)


def promised(first: str) -> list[object]:
    """The facts of a lazy node promising ``first`` (not empty), as the visitors answer
    them (tests/peg/test_facts.py checks that they agree), kept on it when it is made: a
    choice of a thousand calls reads them without working them out."""
    return [frozenset(first[0]), False, first, None, -1, True]


def first_text(node: Parser) -> str:
    """Text every match of ``node`` starts with, or "" (see ``FirstText``)."""
    return _FIRST_TEXT_FACT.answer(node)


def fixed_text(node: Parser) -> str | None:
    """The one text ``node`` matches, or None."""
    return _FIXED_TEXT_FACT.answer(node)


def at_end(node: Parser) -> int | None:
    """A full-mode match of ``node`` at the end of the input: 0, -1 or None (``AtEnd``)."""
    return _AT_END_FACT.answer(node)


def adds_nodes(node: Parser) -> bool:
    """Whether a match of ``node`` can leave tagged nodes behind."""
    return _ADDS_NODES_FACT.answer(node)


__all__ = [
    "LOCK",
    "AddsNodes",
    "AtEnd",
    "Fact",
    "FirstSet",
    "FirstText",
    "FixedText",
    "Nullable",
    "adds_nodes",
    "at_end",
    "first_chars",
    "first_set",
    "first_text",
    "fixed_text",
    "lead",
    "nullable",
    "promised",
    "starts",
]
