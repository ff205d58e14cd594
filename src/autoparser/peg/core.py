"""PEG parser nodes, the parse driver, tagged trees and incremental (resumable) parsing.

Every node implements ``_match(ctx, pos)`` and returns a plain tuple
``(status, end, nodes, hit_end, closer)``:

- ``status``: FAIL / SUCCESS / NEED_MORE_INPUT (ints, see ParseStatus);
- ``end``: where the match ended (SUCCESS), stopped (NEED_MORE_INPUT) or failed (FAIL);
- ``nodes``: the tagged tree nodes produced (tuple);
- ``hit_end``: whether the outcome depended on where the input ends (or on partial mode);
  results with ``hit_end=False`` stay true however the text grows, which is what makes
  them safe to keep across incremental feeds;
- ``closer``: for an unfinished JSON value, the text that would close it.
"""

from __future__ import annotations

import codecs
import re
import sys
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import ClassVar, NamedTuple, Union

from autoparser.errors import AutoparserError, GrammarError
from autoparser.peg import facts, json_scan
from autoparser.peg.charclass import CharSet, parse_class
from autoparser.peg.status import FAIL, MORE, OK, STATUSES, ParseStatus

# Re-exported (the visitor lives under the nodes, which read the facts visitors work out).
from autoparser.peg.visitor import NodeKindError as NodeKindError
from autoparser.peg.visitor import NodeVisitor as NodeVisitor
from autoparser.peg.visitor import register_kinds

Res = tuple[int, int, tuple["Node", ...], bool, str]
_NO_NODES: tuple[Node, ...] = ()


class Node(NamedTuple):
    """A tagged span of the input; the root node has tag None and spans the whole match.

    A named tuple rather than a frozen dataclass: a stream builds the nodes on its
    unfinished path again on every feed, and a tuple is several times cheaper to make.
    """

    tag: str | None
    start: int
    end: int
    complete: bool
    children: tuple[Node, ...] = ()
    closer: str = ""

    def text(self, source: str) -> str:
        """The text this node covers in `source` (the string that was parsed)."""
        return source[self.start : self.end]

    def walk(self) -> Iterator[Node]:
        """This node and its descendants, depth-first, without recursion."""
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def find(self, tag: str) -> Node | None:
        """First descendant (or self) with this tag, depth-first."""
        return next((n for n in self.walk() if n.tag == tag), None)

    def find_all(self, tag: str) -> list[Node]:
        """All descendants (and self) with this tag, depth-first."""
        return [n for n in self.walk() if n.tag == tag]


# Builds a Node from its six fields without the generated __new__'s Python frame (the hot
# path: one per tagged node on a stream's unfinished path, every feed).
_new_node = tuple.__new__


@dataclass(frozen=True)
class ParseResult:
    """Status, position reached and the tagged tree of one parse."""

    status: ParseStatus
    pos: int
    tree: Node
    error: str | None = field(default=None, compare=False)

    @property
    def success(self) -> bool:
        return self.status is ParseStatus.SUCCESS

    @property
    def need_more_input(self) -> bool:
        return self.status is ParseStatus.NEED_MORE_INPUT

    @property
    def fail(self) -> bool:
        return self.status is ParseStatus.FAIL


class ParseDepthError(AutoparserError):
    """Grammar recursion went deeper than the Python stack allows (reported as FAIL)."""


Key = tuple[int, int]  # (node uid, position): what memo entries and hints are kept by


class Hints:
    """Where scans stopped, kept across the incremental runs of one stream: one typed dict
    per kind of hint (a node's uid says which node a key belongs to)."""

    __slots__ = ("json", "progress", "until")

    def __init__(self) -> None:
        # Sequences and repetitions: (index or count, position, nodes) after the items
        # whose results were final.
        self.progress: dict[Key, tuple[int, int, tuple[Node, ...]]] = {}
        # Until: where to resume the search for a delimiter.
        self.until: dict[Key, int] = {}
        # JSON values: the scanner's state where the text ended.
        self.json: dict[Key, json_scan.ScanState] = {}


class _Ctx:
    """State of one parse run; memo and hints may be shared across incremental runs."""

    __slots__ = (
        "depth",
        "frontier",
        "hints",
        "hits",
        "json_hints",
        "max_depth",
        "memo",
        "n",
        "partial",
        "text",
        "until_hints",
        "volatile",
    )

    def __init__(
        self,
        text: str,
        partial: bool,
        memo: dict[Key, Res],
        hints: Hints,
        volatile: list[Key],
        max_depth: int,
    ) -> None:
        self.text = text
        self.n = len(text)
        self.partial = partial
        self.memo = memo
        # Hints' dicts, held directly: one attribute read less in the matchers.
        self.hints = hints.progress
        self.until_hints = hints.until
        self.json_hints = hints.json
        self.volatile = volatile
        self.depth = 0
        self.max_depth = max_depth
        # Leaf results that depended on the end of the input, and the last unfinished
        # leaf (a literal, run, until or JSON scan that needs more) among them: see
        # IncrementalParse.resume.
        self.hits = 0
        self.frontier: tuple[Parser, int] | None = None

    def run(self, node: Parser, pos: int) -> Res:
        return node._call(self, pos)


_uids = count(1)
# A root's one-shot form not compiled yet (None once compiled means: not compilable).
_NOT_YET = object()
ParserLike = Union["Parser", str]


def as_parser(p: ParserLike) -> Parser:
    """A Parser from a parser or a plain string (a literal)."""
    if isinstance(p, Parser):
        return p
    if isinstance(p, str):
        return Literal(p)
    raise TypeError(f"expected a Parser or str, got {type(p).__name__}")


def _frame_depth() -> int:
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


def _depth_budget() -> int:
    """How deep a parse may nest from here: a clear FAIL before Python's RecursionError."""
    return max((sys.getrecursionlimit() - _frame_depth() - 50) // 3, 1)


class Parser:
    """Base class of every parser node; nodes are immutable once built.

    A node keeps what is derived from it once, so that it leaves with the node: its facts
    (``peg.facts``), and for a root its one-shot form (``peg.oneshot.compiled``) and
    whether feeds may resume (``_resumable``).
    """

    __slots__ = ("_facts", "_oneshot", "_resumable", "_uid")
    _memo: ClassVar[bool] = True

    def __init__(self) -> None:
        self._uid = next(_uids)
        self._oneshot: object = _NOT_YET
        self._resumable: bool | None = None
        self._facts: list[object] | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        # The entry point a parent calls: the memoised wrapper, or (for nodes cheaper to
        # rerun than to look up) the node's own _match, one Python call less per node.
        super().__init_subclass__(**kwargs)
        cls._call = Parser._memo_call if cls._memo else cls._match  # type: ignore[method-assign]

    def _call(self, ctx: _Ctx, pos: int) -> Res:
        """Match at `pos` through the memo (replaced per class, see __init_subclass__)."""
        return self._memo_call(ctx, pos)

    def _memo_call(self, ctx: _Ctx, pos: int) -> Res:
        key = (self._uid, pos)
        memo = ctx.memo
        r = memo.get(key)
        if r is not None:
            return r
        # No try/finally: an exception ends the whole parse and its context with it.
        depth = ctx.depth
        if depth >= ctx.max_depth:
            raise ParseDepthError(f"grammar nesting deeper than {ctx.max_depth} levels")
        ctx.depth = depth + 1
        r = memo[key] = self._match(ctx, pos)
        ctx.depth = depth
        if r[3]:
            ctx.volatile.append(key)
        return r

    # --- building -------------------------------------------------------------------------
    def __add__(self, other: ParserLike) -> Parser:
        return seq(self, other)

    def __radd__(self, other: ParserLike) -> Parser:
        return seq(other, self)

    def __or__(self, other: ParserLike) -> Parser:
        return choice(self, other)

    def __ror__(self, other: ParserLike) -> Parser:
        return choice(other, self)

    def __invert__(self) -> Parser:
        return Negate(self)

    def optional(self) -> Parser:
        return optional(self)

    def zero_or_more(self) -> Parser:
        return zero_or_more(self)

    def one_or_more(self) -> Parser:
        return one_or_more(self)

    def repeat(self, min: int = 0, max: int | None = None) -> Parser:
        return repeat(self, min, max)

    def tag(self, name: str) -> Parser:
        return Tag(name, self)

    def atomic(self) -> Parser:
        return Atomic(self)

    def trigger(self) -> Parser:
        return TriggerMark(self)

    def children(self) -> tuple[Parser, ...]:
        """Direct sub-parsers (rule references are not followed)."""
        return ()

    def first_chars(self) -> frozenset[str] | None:
        """Characters a match can start with, or None when unknown.

        The promise a set makes: at a position holding a character outside it, this node
        fails there, consuming nothing, without depending on the end of the input; so an
        ordered choice may skip it by looking at one character (see Choice, peg.facts).
        """
        return facts.first_chars(self)

    def first_text(self) -> str:
        """Text a match must start with, or "" when unknown.

        The promise: where the characters that remain differ from it (as far as they
        go), this node fails there, consuming nothing, without depending on the end of
        the input (a finer filter than `first_chars` for alternatives sharing a first
        character, like ``<|channel|>analysis`` and ``<|channel|>final``). Every text
        given is read by literals at the start of the node, so this holds.
        """
        return facts.first_text(self)

    # --- parsing --------------------------------------------------------------------------
    def _match(self, ctx: _Ctx, pos: int) -> Res:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self, text: str, partial: bool = False) -> ParseResult:
        """Parse a prefix of `text` from position 0 (add `end()` to require all of it)."""
        return self._run(text, partial, {}, Hints(), [])

    def incremental(self) -> IncrementalParse:
        """A resumable parse that is fed text chunk by chunk."""
        return IncrementalParse(self)

    def _run(
        self,
        text: str,
        partial: bool,
        memo: dict[tuple[int, int], Res],
        hints: Hints,
        volatile: list[tuple[int, int]],
        max_depth: int = 0,
    ) -> ParseResult:
        ctx = _Ctx(text, partial, memo, hints, volatile, max_depth or _depth_budget())
        return self._run_ctx(ctx)

    def _run_ctx(self, ctx: _Ctx) -> ParseResult:
        volatile = ctx.volatile
        if volatile:
            pop = ctx.memo.pop
            for key in volatile:
                pop(key, None)
            volatile.clear()
        try:
            status, end, nodes, _hit, closer = self._call(ctx, 0)
        except (ParseDepthError, RecursionError) as exc:
            # Partial memo contents are still valid: only finished matches were stored.
            msg = str(exc) if isinstance(exc, ParseDepthError) else "recursion too deep"
            return ParseResult(ParseStatus.FAIL, 0, Node(None, 0, 0, False), msg)
        tree = _new_node(
            Node, (None, 0, end, status == OK, nodes, closer if status == MORE else "")
        )
        return ParseResult(STATUSES[status], end, tree)

    def __repr__(self) -> str:
        return f"{type(self).__name__}#{self._uid}"


def _extended(last: ParseResult, end: int, closer: str) -> ParseResult:
    """`last` with the unfinished nodes (the path to the scan that needs more input, always
    the last node at each level) ending at `end` with `closer`."""

    def along(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        if not nodes or nodes[-1].complete:
            return nodes
        n = nodes[-1]
        return (
            *nodes[:-1],
            _new_node(Node, (n.tag, n.start, end, False, along(n.children), closer)),
        )

    root = last.tree
    tree = _new_node(Node, (None, 0, end, False, along(root.children), closer))
    return ParseResult(ParseStatus.NEED_MORE_INPUT, end, tree)


def _resumable(root: Parser) -> bool:
    """Is every node reachable from `root` one whose end dependence the feed shortcut
    accounts for (a kind of NODE_TYPES; a subclass defined elsewhere is not)?"""
    known = root._resumable
    if known is None:
        known = root._resumable = _Resumable().of(root)
    return known


class _Resumable(NodeVisitor[bool]):
    """``_resumable``: every node reached is of a kind of ``NODE_TYPES`` (each node once)."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: set[int] = set()

    def of(self, node: Parser) -> bool:
        if node._uid in self._seen:
            return True  # answered where it was first reached
        self._seen.add(node._uid)
        return self.visit(node)

    def by_children(self, node: Parser) -> bool:
        return all(self.of(child) for child in node.children())

    visit_Literal = visit_Chars = visit_End = visit_Rest = visit_Until = by_children
    visit_Json = visit_Seq = visit_Choice = visit_Repeat = visit_Peek = by_children
    visit_Negate = visit_Tag = visit_Atomic = visit_TriggerMark = by_children

    def visit_Lazy(self, node: Lazy) -> bool:
        return True  # built from NODE_TYPES only, which it checks when it builds

    def visit_Ref(self, node: Ref) -> bool:
        return node.name in node.rules and self.of(node.target())

    def foreign(self, node: Parser, *args: object) -> bool:
        return False


class IncrementalParse:
    """Parse a growing text: memoised final results and scan hints survive between feeds."""

    def __init__(self, parser: Parser) -> None:
        self._parser = parser
        self._text = ""
        self._memo: dict[tuple[int, int], Res] = {}
        self._hints = Hints()
        self._volatile: list[tuple[int, int]] = []
        self._decoder: codecs.IncrementalDecoder | None = None
        # The nesting budget of the first feed is kept: walking the caller's frames on
        # every feed costs more than a token's parse (a deeper later caller still gets a
        # FAIL from RecursionError, never a crash).
        self._max_depth = 0
        # (leaf, position) when the last result depended on the end of the input only
        # through that one unfinished leaf: a literal, run, until or JSON scan (resume).
        self._frontier: tuple[Parser, int] | None = None
        self._resumable = _resumable(parser)
        # The last result: `_result` as parsed, with its unfinished path moved to `_moved`
        # (end, closer) when later feeds only resumed its leaf (built when read).
        self._result = ParseResult(ParseStatus.NEED_MORE_INPUT, 0, Node(None, 0, 0, False))
        self._moved: tuple[int, str] | None = None
        # The context resumed leaves run in (one per stream: a leaf reads only the text,
        # the hints and partial mode, and reports through hits and frontier).
        self._scan_ctx = _Ctx("", True, self._memo, self._hints, self._volatile, 1)

    @property
    def text(self) -> str:
        """All text fed so far."""
        return self._text

    @property
    def result(self) -> ParseResult:
        """The result of the last feed."""
        moved = self._moved
        if moved is not None:
            self._result = _extended(self._result, moved[0], moved[1])
            self._moved = None
        return self._result

    def feed(self, chunk: str) -> ParseResult:
        """Append a chunk and parse in partial mode."""
        if self.resume(chunk) >= 0:
            return self.result
        return self.reparse()

    def resume(self, chunk: str) -> int:
        """Append a chunk; if the last result depended on the end of the input only
        through one leaf and that leaf, run alone on the longer text, still needs more,
        the new result is the last one with its unfinished path (the last node at each
        level) ending further on: return that end (``result`` builds the tree only when
        read, so a caller that knows what the move means can skip it). Otherwise return
        -1: call ``reparse`` for the result (``feed`` does both)."""
        text = self._text
        self._text = ""  # drop our reference so CPython can grow the string in place
        text += chunk
        self._text = text
        frontier = self._frontier
        if frontier is None:
            return -1
        # Every other result on the leaf's path was final, and the nodes above the leaf
        # pass its end and closer through unchanged: no need to start again from the root.
        ctx = self._scan_ctx
        ctx.text = text
        ctx.n = len(text)
        ctx.hits = 0
        r = frontier[0]._match(ctx, frontier[1])
        ctx.text = ""  # the text is ours alone again (grown in place next time)
        if r[0] == MORE and not r[2] and ctx.hits == 1:
            self._moved = (r[1], r[4])
            return r[1]
        return -1

    def reparse(self) -> ParseResult:
        """Parse all the text fed so far in partial mode (after ``resume`` returned -1)."""
        if not self._max_depth:
            self._max_depth = _depth_budget()
        ctx = _Ctx(self._text, True, self._memo, self._hints, self._volatile, self._max_depth)
        result = self._parser._run_ctx(ctx)
        self._result = result
        self._moved = None
        self._frontier = None
        if (
            self._resumable
            and ctx.hits == 1
            and ctx.frontier is not None
            and result.status is ParseStatus.NEED_MORE_INPUT
        ):
            self._frontier = ctx.frontier
        return result

    def feed_bytes(self, data: bytes) -> ParseResult:
        """Append UTF-8 bytes: a character split across chunks waits for its last byte;
        invalid bytes become U+FFFD (model output is never rejected for its encoding)."""
        if self._decoder is None:
            self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        return self.feed(self._decoder.decode(data))

    def finish(self) -> ParseResult:
        """End of input: parse everything in full (non-partial) mode.

        Bytes fed with `feed_bytes` that end inside a character become U+FFFD.
        """
        if self._decoder is not None:
            tail = self._decoder.decode(b"", final=True)
            if tail:
                self.feed(tail)
        self._frontier = None
        return self._parser._run(
            self._text, False, self._memo, self._hints, self._volatile, self._max_depth
        )


# --- leaves --------------------------------------------------------------------------------


class Literal(Parser):
    """Exact text; a proper prefix of it at the end of partial input needs more input."""

    __slots__ = ("value",)
    _memo = False

    def __init__(self, value: str) -> None:
        super().__init__()
        self.value = value

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        s = self.value
        text = ctx.text
        if text.startswith(s, pos):
            return (OK, pos + len(s), _NO_NODES, False, "")
        if ctx.n - pos < len(s) and s.startswith(text[pos:]):
            ctx.hits += 1
            if ctx.partial:
                ctx.frontier = (self, pos)
                return (MORE, ctx.n, _NO_NODES, True, "")
            return (FAIL, ctx.n, _NO_NODES, True, "")
        return (FAIL, pos, _NO_NODES, False, "")

    def __repr__(self) -> str:
        return f"literal({self.value!r})"


class Token(Literal):
    """A special token such as ``<tool_call>``: matched as its text.

    Kept distinct from Literal so a grammar can report it as a token trigger.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"token({self.value!r})"


class Chars(Parser):
    """Between min and max characters of a class, greedy, matched with one regex."""

    __slots__ = ("_rx", "charset", "max", "min")
    _memo = False

    def __init__(self, charset: CharSet, min: int = 0, max: int | None = None) -> None:
        super().__init__()
        if min < 0 or (max is not None and max < min):
            raise GrammarError(f"chars: invalid bounds {{{min},{max}}}")
        self.charset = charset
        self.min = min
        self.max = max
        bound = "" if max is None else str(max)
        self._rx = re.compile(f"{charset.regex()}{{0,{bound}}}")

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        m = self._rx.match(ctx.text, pos)
        e = m.end() if m else pos
        got = e - pos
        if e == ctx.n and (self.max is None or got < self.max):
            ctx.hits += 1
            if ctx.partial:
                ctx.frontier = (self, pos)
                return (MORE, e, _NO_NODES, True, "")
            return (OK if got >= self.min else FAIL, e, _NO_NODES, True, "")
        return (OK if got >= self.min else FAIL, e, _NO_NODES, False, "")

    def __repr__(self) -> str:
        return f"chars({self.charset.regex()!r}, {self.min}, {self.max})"


class CharClass(Chars):
    """Exactly one character of a class."""

    __slots__ = ()

    def __init__(self, charset: CharSet) -> None:
        super().__init__(charset, 1, 1)

    def __repr__(self) -> str:
        return f"char_class({self.charset.regex()!r})"


class AnyChar(CharClass):
    """Any single character."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(CharSet((), negated=True))

    def __repr__(self) -> str:
        return "any_char()"


class Space(Chars):
    """Zero or more ASCII whitespace characters (space, tab, newline, carriage return)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(parse_class(" \\t\\n\\r"), 0, None)

    def __repr__(self) -> str:
        return "space()"


class End(Parser):
    """End of input."""

    __slots__ = ()
    _memo = False

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        if pos >= ctx.n:
            ctx.hits += 1
            return (OK, pos, _NO_NODES, True, "")
        return (FAIL, pos, _NO_NODES, False, "")

    def __repr__(self) -> str:
        return "end()"


class Rest(Parser):
    """Everything to the end of input (unfinished while input may still grow)."""

    __slots__ = ()
    _memo = False

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        ctx.hits += 1
        if ctx.partial:
            ctx.frontier = (self, pos)
            return (MORE, max(pos, ctx.n), _NO_NODES, True, "")
        return (OK, max(pos, ctx.n), _NO_NODES, True, "")

    def __repr__(self) -> str:
        return "rest()"


class Until(Parser):
    """Characters up to (not including) the first occurrence of any delimiter.

    Scans with `str.find` (one delimiter) or a compiled alternation, resuming from where
    the previous incremental run stopped. At the end of partial input, a trailing proper
    prefix of a delimiter is held back (not part of the span) and more input is needed.
    """

    __slots__ = ("_hold_rx", "_longest", "_rx", "delimiters")
    _memo = False

    def __init__(self, delimiters: tuple[str, ...]) -> None:
        super().__init__()
        if not delimiters or any(not d for d in delimiters):
            raise GrammarError("until: delimiters must be non-empty strings")
        self.delimiters = delimiters
        self._longest = max(len(d) for d in delimiters)
        alternation = "|".join(re.escape(d) for d in sorted(delimiters, key=len, reverse=True))
        self._rx = re.compile(alternation) if len(delimiters) > 1 else None
        # Any proper prefix of a delimiter that ends the text: searched from the leftmost
        # start that could still hold one, the first match is the longest held-back tail.
        prefixes = sorted({d[:k] for d in delimiters for k in range(1, len(d))}, key=len)
        held = "|".join(re.escape(p) for p in reversed(prefixes))
        self._hold_rx = re.compile(f"(?:{held})\\Z") if prefixes else None

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        text = ctx.text
        n = ctx.n
        key = (self._uid, pos)
        start = ctx.until_hints.get(key, pos)
        if self._rx is None:
            i = text.find(self.delimiters[0], start)
        else:
            m = self._rx.search(text, start)
            i = m.start() if m else -1
        if i >= 0:
            if ctx.partial and self._hold_rx is not None and n - i < self._longest:
                # A delimiter that starts earlier may still come: the one found lies inside
                # the unfinished tail of a longer one (``<|`` in ``all\n<|con``). Leftmost
                # wins, as on the whole text: hold back from where that one starts.
                held = self._hold_rx.search(text, max(pos, n - self._longest + 1))
                if held is not None and held.start() < i:
                    ctx.frontier = (self, pos)
                    return (MORE, held.start(), _NO_NODES, True, "")
            return (OK, i, _NO_NODES, False, "")
        ctx.until_hints[key] = max(pos, n - self._longest + 1)
        ctx.hits += 1
        if not ctx.partial:
            return (OK, max(pos, n), _NO_NODES, True, "")
        ctx.frontier = (self, pos)
        rx = self._hold_rx
        held = rx.search(text, max(pos, n - self._longest + 1)) if rx is not None else None
        return (MORE, max(pos, held.start() if held else n), _NO_NODES, True, "")

    def __repr__(self) -> str:
        if len(self.delimiters) == 1:
            return f"until({self.delimiters[0]!r})"
        return f"until_one_of{self.delimiters!r}"


class Json(Parser):
    """A JSON value (or one kind of value) per RFC 8259, without surrounding whitespace."""

    __slots__ = ("kind", "single_quotes")

    def __init__(self, kind: str = "value", single_quotes: bool = False) -> None:
        super().__init__()
        if kind not in json_scan.KINDS:
            raise GrammarError(f"unknown JSON kind {kind!r}")
        self.kind = kind
        self.single_quotes = single_quotes

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        key = (self._uid, pos)
        state = ctx.json_hints.get(key)
        if state is None:
            end = json_scan.fast_complete(ctx.text, pos, self.kind)
            if end >= 0:
                return (OK, end, _NO_NODES, False, "")
        status, end, hit_end, closer, state = json_scan.scan(
            ctx.text, pos, self.kind, ctx.partial, self.single_quotes, state
        )
        if state is not None:
            ctx.json_hints[key] = state
        if hit_end:
            ctx.hits += 1
            if status == MORE:
                ctx.frontier = (self, pos)
        return (status, end, _NO_NODES, hit_end, closer)

    def __repr__(self) -> str:
        return f"json_{self.kind}()"


class JsonSchema(Json):
    """A JSON value typed by a schema: parsed as JSON, emitted from the schema in GBNF."""

    __slots__ = ("document", "name", "schema")

    def __init__(
        self,
        schema: dict[str, object],
        name: str,
        single_quotes: bool = False,
        document: dict[str, object] | None = None,
    ) -> None:
        super().__init__("value", single_quotes)
        self.schema = schema
        self.name = name
        self.document = document

    def __repr__(self) -> str:
        return f"json_schema(name={self.name!r})"


# --- combinators ---------------------------------------------------------------------------


class LeafRegex(NodeVisitor["str | None"]):
    """A plain leaf as a regex that matches exactly where the leaf succeeds, consuming the
    same text (a class run without backtracking, as Chars takes it), or None.

    ``groups`` counts the capture groups used so far (a class run takes one; a regex of
    several leaves numbers its backreferences by it). The one-shot compiler's run of plain
    items extends this with optional literals and tags.
    """

    __slots__ = ("groups",)

    def __init__(self) -> None:
        self.groups = 0

    def visit_Literal(self, node: Literal) -> str | None:
        return re.escape(node.value)

    def visit_Chars(self, node: Chars) -> str | None:
        bound = "" if node.max is None else str(node.max)
        self.groups += 1
        # (?=(X))\N: X matched greedily and never given back (an atomic group before 3.11).
        return f"(?=({node.charset.regex()}{{{node.min},{bound}}}))\\{self.groups}"

    def not_plain(self, node: Parser) -> str | None:
        """Any other kind: not a plain leaf."""
        return None

    visit_End = visit_Rest = visit_Until = visit_Json = not_plain
    visit_Seq = visit_Choice = visit_Peek = visit_Negate = not_plain
    visit_Atomic = visit_TriggerMark = visit_Ref = visit_Lazy = not_plain

    def visit_Repeat(self, node: Repeat) -> str | None:
        return None  # a run of its own (the one-shot compiler takes an optional literal)

    def visit_Tag(self, node: Tag) -> str | None:
        return None  # a node to report (the one-shot compiler takes a tagged leaf)

    def foreign(self, node: Parser, *args: object) -> str | None:
        return None  # a kind of another module: not a plain leaf either


def _fuse_leaves(items: tuple[Parser, ...]) -> dict[int, tuple[int, re.Pattern[str]]] | None:
    """Runs of two or more consecutive plain leaves (literals, character runs): start
    index -> (index after the run, one regex for the whole run)."""
    runs: dict[int, tuple[int, re.Pattern[str]]] = {}
    i = 0
    while i < len(items):
        j = i
        parts: list[str] = []
        leaves = LeafRegex()
        while j < len(items):
            rx = leaves.visit(items[j])
            if rx is None:
                break
            parts.append(rx)
            j += 1
        if j - i >= 2:
            runs[i] = (j, re.compile("".join(parts)))
        i = max(j, i + 1)
    return runs or None


class Seq(Parser):
    """All items in order."""

    __slots__ = ("_fused", "_fused_done", "items")

    def __init__(self, items: tuple[Parser, ...]) -> None:
        super().__init__()
        self.items = items
        # Fused on first parse: a grammar-only sequence (a thousand tools' strict call
        # parsers, emitted as GBNF and never run) never pays for it.
        self._fused: dict[int, tuple[int, re.Pattern[str]]] | None = None
        self._fused_done = False

    def children(self) -> tuple[Parser, ...]:
        return self.items

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        # Items whose results were final are not replayed on the next incremental run:
        # the hint holds (index, position, nodes) after the last of them, stored when the
        # first item whose outcome depends on the end of the input is reached.
        key = (self._uid, pos)
        hint = ctx.hints.get(key)
        if hint is None:
            i, p, nodes = 0, pos, []
        else:
            i, p, nodes = hint[0], hint[1], list(hint[2])
        first = i
        hit = False
        items = self.items
        count = len(items)
        if not self._fused_done:
            self._fused = _fuse_leaves(items)
            self._fused_done = True
        fused = self._fused
        while i < count:
            if fused is not None:
                run = fused.get(i)
                if run is not None:
                    # A run of plain leaves in one regex match; only where it ends before
                    # the end of the input are all of its results known to be final.
                    m = run[1].match(ctx.text, p)
                    if m is not None and m.end() < ctx.n:
                        p = m.end()
                        i = run[0]
                        continue
            st, e, ns, h, cl = items[i]._call(ctx, p)
            if h and not hit:
                hit = True
                if i > first:
                    ctx.hints[key] = (i, p, tuple(nodes))
            if st != OK:
                if st == MORE:
                    nodes.extend(ns)
                    return (MORE, e, tuple(nodes), True, cl)
                return (FAIL, e, _NO_NODES, hit, "")
            if ns:
                nodes.extend(ns)
            p = e
            i += 1
        return (OK, p, tuple(nodes), hit, "")

    def __repr__(self) -> str:
        return "seq(" + ", ".join(map(repr, self.items)) + ")"


class Choice(Parser):
    """The first alternative that does not fail (an unfinished one is taken as is)."""

    __slots__ = ("_all", "_by_char", "_others", "alternatives")

    def __init__(self, alternatives: tuple[Parser, ...]) -> None:
        super().__init__()
        self.alternatives = alternatives
        # Built on first use (rules referenced may be defined after this node):
        # character -> the alternatives that can start with it, in order, each with the
        # text it must start with ("" when one character says as much).
        self._by_char: dict[str, tuple[tuple[Parser, str], ...]] | None = None
        self._others: tuple[tuple[Parser, str], ...] = ()
        self._all = tuple((alt, "") for alt in alternatives)

    def children(self) -> tuple[Parser, ...]:
        return self.alternatives

    def _dispatch(self) -> dict[str, tuple[tuple[Parser, str], ...]]:
        """Per next character, the alternatives worth trying: those that could start
        with it and those whose first characters are unknown (the others would fail
        there without looking further, so skipping them changes no result)."""
        alts = [(a, *facts.lead(a)) for a in self.alternatives]
        chars = frozenset().union(*(f for _a, f, _t in alts if f is not None))
        table = {
            c: tuple((a, t if len(t) > 1 else "") for a, f, t in alts if f is None or c in f)
            for c in chars
        }
        self._others = tuple((a, t if len(t) > 1 else "") for a, f, t in alts if f is None)
        self._by_char = table
        return table

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        hit = False
        furthest = pos
        text = ctx.text
        left = ctx.n - pos
        alternatives = self._all
        if left > 0:
            table = self._by_char
            if table is None:
                table = self._dispatch()
            alternatives = table.get(text[pos], self._others)
        for alt, must in alternatives:
            if (
                must
                and not text.startswith(must, pos)
                and (left >= len(must) or not must.startswith(text[pos:]))
            ):
                # It would fail here, consuming nothing, however the input ends (see
                # first_text): skipped alike whether or not all of it has arrived, so that
                # a feed's result is the one-shot parse's, failure position included.
                continue
            r = alt._call(ctx, pos)
            if r[0] != FAIL:
                return r if not hit or r[3] else (r[0], r[1], r[2], True, r[4])
            hit = hit or r[3]
            furthest = max(furthest, r[1])
        return (FAIL, furthest, _NO_NODES, hit, "")

    def __repr__(self) -> str:
        return "choice(" + ", ".join(map(repr, self.alternatives)) + ")"


class _Wrapper(Parser):
    """A node with one child."""

    __slots__ = ("child",)

    def __init__(self, child: Parser) -> None:
        super().__init__()
        self.child = child

    def children(self) -> tuple[Parser, ...]:
        return (self.child,)


class Repeat(_Wrapper):
    """Greedy repetition between min and max times (max None: unbounded)."""

    __slots__ = ("max", "min")

    def __init__(self, child: Parser, min: int, max: int | None) -> None:
        super().__init__(child)
        if min < 0 or (max is not None and max < min):
            raise GrammarError(f"repeat: invalid bounds {{{min},{max}}}")
        self.min = min
        self.max = max

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        # Iterations whose results were final are not replayed on the next incremental
        # run: the hint holds (position, count, nodes) after the last of them.
        key = (self._uid, pos)
        hint = ctx.hints.get(key)
        if hint is None:
            p, got, nodes = pos, 0, []
        else:
            p, got, nodes = hint[0], hint[1], list(hint[2])
        stable: tuple[int, int, int] | None = None  # (pos, count, len(nodes)) if advanced
        hit = False
        child = self.child
        call = child._call
        limit = self.max
        status = OK
        closer = ""
        while limit is None or got < limit:
            st, e, ns, h, cl = call(ctx, p)
            hit = hit or h
            if st == FAIL:
                break
            if ns:
                nodes.extend(ns)
            if st == MORE:
                status, closer, p = MORE, cl, e
                break
            if e == p:  # an empty match repeats forever: the remaining count is satisfied
                got = max(got, self.min)
                break
            p = e
            got += 1
            if not hit:
                stable = (p, got, len(nodes))
        if stable is not None:
            ctx.hints[key] = (stable[0], stable[1], tuple(nodes[: stable[2]]))
        if status == MORE:
            return (MORE, p, tuple(nodes), True, closer)
        if got < self.min:
            return (FAIL, p, _NO_NODES, hit, "")
        return (OK, p, tuple(nodes), hit, "")

    def __repr__(self) -> str:
        return f"repeat({self.child!r}, {self.min}, {self.max})"


class Peek(_Wrapper):
    """Positive lookahead: succeeds where the child does, consuming nothing."""

    __slots__ = ()
    _memo = False

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        st, _e, _ns, h, _cl = self.child._call(ctx, pos)
        if h:
            ctx.hits += 1
        return (st, pos, _NO_NODES, h, "")

    def __repr__(self) -> str:
        return f"peek({self.child!r})"


class Negate(_Wrapper):
    """Negative lookahead: succeeds where the child fails, consuming nothing."""

    __slots__ = ()
    _memo = False

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        st, _e, _ns, h, _cl = self.child._call(ctx, pos)
        if h:
            ctx.hits += 1
        if st == FAIL:
            return (OK, pos, _NO_NODES, h, "")
        if st == MORE or (h and ctx.partial):
            return (MORE, pos, _NO_NODES, True, "")
        return (FAIL, pos, _NO_NODES, h, "")

    def __repr__(self) -> str:
        return f"negate({self.child!r})"


class Tag(_Wrapper):
    """Reports the child's span as a tree node named `name`."""

    __slots__ = ("name",)
    _memo = False

    def __init__(self, name: str, child: Parser) -> None:
        super().__init__(child)
        self.name = name

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        st, e, ns, h, cl = self.child._call(ctx, pos)
        if st == FAIL:
            return (st, e, _NO_NODES, h, "")
        return (st, e, (_new_node(Node, (self.name, pos, e, st == OK, ns, cl)),), h, cl)

    def __repr__(self) -> str:
        return f"tag({self.name!r}, {self.child!r})"


class Atomic(_Wrapper):
    """Its tagged nodes appear only once the child is complete."""

    __slots__ = ()
    _memo = False

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        r = self.child._call(ctx, pos)
        if r[0] == MORE and r[2]:
            return (r[0], r[1], _NO_NODES, r[3], r[4])
        return r

    def __repr__(self) -> str:
        return f"atomic({self.child!r})"


class TriggerMark(_Wrapper):
    """Marks the child as a lazy-grammar trigger; transparent when parsing."""

    __slots__ = ()
    _memo = False

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        return self.child._call(ctx, pos)

    def __repr__(self) -> str:
        return f"trigger({self.child!r})"


class Ref(Parser):
    """A reference to a named rule, resolved when parsing (so rules may recurse)."""

    __slots__ = ("name", "rules")
    _memo = False

    def __init__(self, rules: Rules, name: str) -> None:
        super().__init__()
        self.rules = rules
        self.name = name

    def target(self) -> Parser:
        try:
            return self.rules[self.name]
        except KeyError:
            raise GrammarError(f"reference to undefined rule {self.name!r}") from None

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        return self.target()._call(ctx, pos)

    def __repr__(self) -> str:
        return f"ref({self.name!r})"


# Built parsers of Lazy nodes and representatives of families: one lock for all, held
# only while one builds (re-entrant: a builder may make lazy nodes of its own), the lock
# a rule's facts are worked out under (a builder may ask facts, and facts may build).
_BUILD_LOCK = facts.LOCK

# The letters placeholders are written with: lowercase (every rule-name sanitiser and
# every escaping, GBNF, JSON or Python's repr, leaves them as they are), and none that a
# grammar's own syntax uses (the escapes \n \r \t \xNN, the hex digits, class ranges
# such as a-z), so that a placeholder left anywhere but in a literal or a rule name shows.
PLACEHOLDER_LETTERS = "qjw"


def placeholder(index: int) -> str:
    """The ``index``-th stand-in name of a family's representative (see ``Family``)."""
    digits = ""
    while True:
        index, digit = divmod(index, len(PLACEHOLDER_LETTERS))
        digits = PLACEHOLDER_LETTERS[digit] + digits
        if not index:
            break
    return f"qjwq{digits}wjq"


@dataclass(frozen=True)
class Name:
    """A family member's name where its representative has a placeholder: ``text`` as
    the member's parser writes it (a tool's or an argument's name), ``rule`` as it reads in
    the member's rule names (lowercase letters, digits and dashes)."""

    text: str
    rule: str


class Family:
    """Parsers built alike, differing only in names and in parts built alike in turn: the
    calls of tools of one form (an argument of some kind in each place, names aside), the
    arguments of one kind under other names, one schema under other names.

    ``build(slots)`` returns the builder's parser for the ``placeholders`` instead of a
    member's names and, in place of each of a member's ``Lazy.parts``, its stand-in in
    ``slots`` (a ``Lazy`` with ``slot`` set: "the member's part k goes here"). A pass that
    reads only the form of a member (the GBNF emitter) works on such a representative,
    built once per form of the parts, and puts in each member's ``Name``s and its parts,
    so that a request with a thousand such calls pays for a few. The builder must use names
    only as text (in literals, JSON keys and rule names): the emitter checks each
    representative's grammar and builds a member on its own where a placeholder went
    anywhere else (an ``until`` automaton, a character class). ``key`` identifies the
    family across requests; what passes derive from it is kept with it (``kept``).
    """

    __slots__ = ("_kept", "build", "key", "placeholders")

    def __init__(
        self,
        key: Hashable,
        placeholders: tuple[str, ...],
        build: Callable[[tuple[Parser, ...]], Parser],
    ) -> None:
        self.key = key
        self.placeholders = placeholders
        self.build = build
        self._kept: dict[Hashable, object] = {}

    def kept(self, key: Hashable, make: Callable[[], object]) -> object:
        """What a pass derived from this family under ``key`` (made once, then kept)."""
        found = self._kept.get(key, _MISSING)
        if found is _MISSING:
            with _BUILD_LOCK:
                found = self._kept.get(key, _MISSING)
                if found is _MISSING:
                    found = self._kept[key] = make()
        return found

    def representative(self) -> Parser:
        """The parser built for the placeholders, for a family whose members have no parts."""
        found = self.kept("representative", lambda: self.build(()))
        assert isinstance(found, Parser)
        return found

    def __repr__(self) -> str:
        return f"Family({len(self.placeholders)} names)"


_MISSING = object()


class Lazy(Parser):
    """A parser built when first needed: one alternative of thousands (a tool's call),
    whose parsers together cost more to build than a request can pay up front.

    Parses exactly as what ``build()`` returns, built at the first match that needs it.
    ``first_text``, declared by whoever made the node, is a promise: every match starts
    with that text, read by literals (as ``Parser.first_text``); so where the text differs
    from it, or in full mode ends before all of it, the node fails unbuilt (reporting the
    position it started at, where its target may report a later one).

    A member of a ``Family`` carries its ``names`` and its ``parts`` (parsers of its own,
    themselves members of other families mostly): the GBNF emitter writes it from the
    family's representative without building it. A node with ``slot`` set stands in a
    representative for a member's part (``Family.build``); it is never parsed.
    """

    __slots__ = ("_build", "_checked", "_target", "family", "first", "names", "parts", "slot")
    _memo = False

    def __init__(
        self,
        build: Callable[[], Parser] | None,
        first_text: str = "",
        family: Family | None = None,
        names: tuple[Name, ...] = (),
        parts: tuple[Parser, ...] = (),
        slot: int = -1,
    ) -> None:
        super().__init__()
        if family is not None and len(names) != len(family.placeholders):
            raise GrammarError(
                f"lazy: {len(names)} names for a family of {len(family.placeholders)}"
            )
        if (build is None) != (slot >= 0):
            raise GrammarError("lazy: a parser to build, or a slot (a stand-in), not both")
        self._build = build
        self._target: Parser | None = None
        self._checked = False
        self.first = first_text
        self.family = family
        self.names = names
        self.parts = parts
        self.slot = slot
        if first_text:
            self._facts = facts.promised(first_text)

    @property
    def built(self) -> bool:
        """Whether the parser was built (a parse reached it, or a pass needed it)."""
        return self._target is not None

    def target(self) -> Parser:
        """The parser this node stands for (built on first use)."""
        found = self._target
        if found is None:
            with _BUILD_LOCK:
                found = self._target
                if found is None:
                    if self._build is None:
                        raise GrammarError(f"{self!r} stands in for a part: it has no parser")
                    found = self._target = self._build()
                    self._build = None
        return found

    def checked(self) -> Parser:
        """The target, checked (once) to be made of ``NODE_TYPES`` only: a stream may
        resume one of its leaves (the emitter, which only reads it, needs no check)."""
        found = self.target()
        if not self._checked:
            if not _resumable(found):
                raise GrammarError(
                    f"{self!r}: its builder made a node of a kind outside NODE_TYPES"
                )
            self._checked = True
        return found

    def _match(self, ctx: _Ctx, pos: int) -> Res:
        first = self.first
        if first and not ctx.text.startswith(first, pos):
            # Answered unbuilt where the promise says: text that differs from it, or (in
            # full mode) text ending before all of it, which no match can be.
            if not first.startswith(ctx.text[pos : pos + len(first)]):
                return (FAIL, pos, _NO_NODES, False, "")
            if not ctx.partial:
                ctx.hits += 1
                return (FAIL, ctx.n, _NO_NODES, True, "")
        return self.checked()._call(ctx, pos)

    def __repr__(self) -> str:
        if self.slot >= 0:
            return f"slot({self.slot})"
        return f"lazy({self.first!r})" if self.first else f"lazy#{self._uid}"


# The closed set of parser node kinds: every pass over a grammar (``NodeVisitor``) handles
# each, the matcher is each one's ``_match``, and only these may resume a stream's feed.
NODE_TYPES: tuple[type[Parser], ...] = (
    Literal,
    Token,
    Chars,
    CharClass,
    AnyChar,
    Space,
    End,
    Rest,
    Until,
    Json,
    JsonSchema,
    Seq,
    Choice,
    Repeat,
    Peek,
    Negate,
    Tag,
    Atomic,
    TriggerMark,
    Ref,
    Lazy,
)
_NODE_SET = frozenset(NODE_TYPES)
register_kinds(NODE_TYPES)


class Rules:
    """A registry of named rules; references resolve lazily, so rules may be recursive."""

    def __init__(self) -> None:
        self._defs: dict[str, Parser] = {}

    def __setitem__(self, name: str, parser: ParserLike) -> None:
        self._defs[name] = as_parser(parser)

    def __getitem__(self, name: str) -> Parser:
        return self._defs[name]

    def __contains__(self, name: object) -> bool:
        return name in self._defs

    def __iter__(self) -> Iterator[str]:
        return iter(self._defs)

    def __len__(self) -> int:
        return len(self._defs)

    def define(self, name: str, parser: ParserLike) -> Ref:
        """Define a rule and return a reference to it."""
        self[name] = parser
        return self.ref(name)

    def ref(self, name: str) -> Ref:
        """A reference to the rule `name` (which may be defined later)."""
        return Ref(self, name)


# --- builder functions (the public construction API) --------------------------------------


def literal(s: str) -> Parser:
    """Exact text."""
    return Literal(s)


def token(s: str) -> Parser:
    """A special token (e.g. ``<tool_call>``): matched like a literal, a "token" trigger."""
    return Token(s)


def any_char() -> Parser:
    """Any single character."""
    return AnyChar()


def char_class(spec: str) -> Parser:
    """One character of a class: ``char_class("a-zA-Z_")``; ``"^<"`` negates."""
    return CharClass(parse_class(spec))


def chars(spec: str, min: int = 1, max: int | None = None) -> Parser:
    """Between min and max characters of a class (max None or -1: unbounded)."""
    return Chars(parse_class(spec), min, None if max is None or max < 0 else max)


def _flatten(kind: type[Parser], parts: Iterable[ParserLike], attr: str) -> tuple[Parser, ...]:
    out: list[Parser] = []
    for part in parts:
        p = as_parser(part)
        if type(p) is kind:
            out.extend(getattr(p, attr))
        else:
            out.append(p)
    return tuple(out)


def seq(*parts: ParserLike) -> Parser:
    """All parts in order; nested sequences are flattened."""
    items = _flatten(Seq, parts, "items")
    return items[0] if len(items) == 1 else Seq(items)


def choice(*alternatives: ParserLike) -> Parser:
    """Ordered choice: the first alternative that does not fail."""
    alts = _flatten(Choice, alternatives, "alternatives")
    return alts[0] if len(alts) == 1 else Choice(alts)


def repeat(p: ParserLike, min: int = 0, max: int | None = None) -> Parser:
    """Greedy repetition, min to max times (max None or -1: unbounded)."""
    child = as_parser(p)
    bound = None if max is None or max < 0 else max
    if type(child) in (CharClass, AnyChar):
        assert isinstance(child, Chars)
        return Chars(child.charset, min, bound)
    return Repeat(child, min, bound)


def optional(p: ParserLike) -> Parser:
    """Zero or one."""
    return repeat(p, 0, 1)


def zero_or_more(p: ParserLike) -> Parser:
    """Zero or more, greedy."""
    return repeat(p, 0, None)


def one_or_more(p: ParserLike) -> Parser:
    """One or more, greedy."""
    return repeat(p, 1, None)


def peek(p: ParserLike) -> Parser:
    """Positive lookahead."""
    return Peek(as_parser(p))


def negate(p: ParserLike) -> Parser:
    """Negative lookahead."""
    return Negate(as_parser(p))


def until(delimiter: str) -> Parser:
    """Everything up to the first occurrence of `delimiter` (not consumed)."""
    return Until((delimiter,))


def until_one_of(*delimiters: str) -> Parser:
    """Everything up to the first occurrence of any delimiter (not consumed)."""
    return Until(tuple(delimiters))


def space() -> Parser:
    """Zero or more whitespace characters."""
    return Space()


def end() -> Parser:
    """End of input."""
    return End()


def rest() -> Parser:
    """Everything to the end of input."""
    return Rest()


def json_value(allow_single_quotes: bool = False) -> Parser:
    """Any JSON value (RFC 8259); single-quoted strings too if allowed (python-dict style)."""
    return Json("value", allow_single_quotes)


def json_object(allow_single_quotes: bool = False) -> Parser:
    """A JSON object."""
    return Json("object", allow_single_quotes)


def json_array(allow_single_quotes: bool = False) -> Parser:
    """A JSON array."""
    return Json("array", allow_single_quotes)


def json_string(allow_single_quotes: bool = False) -> Parser:
    """A JSON string."""
    return Json("string", allow_single_quotes)


def json_number() -> Parser:
    """A JSON number."""
    return Json("number")


def json_literal() -> Parser:
    """``true``, ``false`` or ``null``."""
    return Json("literal")


def json_schema(
    schema: dict[str, object],
    name: str,
    allow_single_quotes: bool = False,
    document: dict[str, object] | None = None,
) -> Parser:
    """A JSON value typed by `schema`; its grammar comes from the schema converter.

    `document` is the schema `schema` is part of, where its `$ref`s point (one tool
    parameter's `#/$defs/...` are the tool's); by default `schema` itself.
    """
    return JsonSchema(schema, name, allow_single_quotes, document)


def tag(name: str, p: ParserLike) -> Parser:
    """Report p's span as a tree node tagged `name`."""
    return Tag(name, as_parser(p))


def atomic(p: ParserLike) -> Parser:
    """p's tagged nodes appear only once p is complete."""
    return Atomic(as_parser(p))


def trigger(p: ParserLike) -> Parser:
    """Mark p as the start of a lazy-grammar trigger."""
    return TriggerMark(as_parser(p))


def lazy(
    build: Callable[[], Parser],
    first_text: str = "",
    family: Family | None = None,
    names: tuple[Name, ...] = (),
    parts: tuple[Parser, ...] = (),
) -> Parser:
    """What ``build()`` returns, built when first needed (see ``Lazy``)."""
    return Lazy(build, first_text, family, names, parts)
