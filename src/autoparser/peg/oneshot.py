"""One-shot parsing: a parser compiled once into closures for parsing a whole text.

An incremental parse (``IncrementalParse``) keeps memo entries, scan hints and whether each
result depended on the end of the input, so that the next feed can resume; every node
pays for that bookkeeping. A parse of a text that will not grow (``ChatParams.parse``)
needs none of it. Here each node of a definition becomes one closure
``match(run, pos) -> int`` that only says where it ended:

- ``end >= 0``: matched, up to ``end``;
- ``-1``: failed;
- ``-2 - end``: needs more input, stopped at ``end`` (partial mode only).

Tagged nodes go onto one list shared by the run; a node that fails takes its own back off,
so a failure costs nothing to report. A run of plain items in a sequence (literals,
character runs, optional literals, any of those tagged, and untagged sequences, ordered
choices and repetitions of them and the end of the input) is one regex whose groups give
the tagged nodes, its outcome taken at once where it cannot depend on the end of the input
(a character none of its items reads follows); ordered choices look at the next character
(``facts.starts``) and skip an alternative by the texts it may start with, and at the end
of the input a full-mode choice answers from the grammar alone (``facts.at_end``). The
compiler is a ``NodeVisitor``: one ``visit_<Kind>`` per node kind of ``NODE_TYPES``; the
facts it reads are worked out once per node, shared with the matcher and the GBNF emitter.

There is no memo within a run: the grammars a format builds are shallow, and the
first-character dispatch keeps retries rare. Between the two runs of one text (full mode,
then partial mode, as ``ChatParams.parse`` needs both) a ``Shared`` carries what did
not depend on the end of the input, so the second run only redoes the end.

The result is the same tree ``Parser.parse`` gives, in both modes, except that a failed
parse reports no position (tests/peg/test_oneshot.py checks the rest). Grammars with
named rules (recursion, whose depth budget only the memoised driver keeps) or node kinds
of other modules are not compiled: ``compiled`` returns None and the caller parses as
before.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from autoparser.peg import facts, json_scan
from autoparser.peg.charclass import CharSet
from autoparser.peg.core import (
    _NOT_YET,
    Atomic,
    Chars,
    Choice,
    End,
    Hints,
    Json,
    Lazy,
    LeafRegex,
    Literal,
    Negate,
    Node,
    NodeVisitor,
    Parser,
    Peek,
    Ref,
    Repeat,
    Rest,
    Seq,
    Tag,
    TriggerMark,
    Until,
    _Ctx,
    _depth_budget,
)
from autoparser.peg.status import FAIL, MORE, OK

_new_node = tuple.__new__


class Shared:
    """What runs over one text found independently of the end of the input: kept for the
    run in the other mode (full, then partial, as ``ChatParams.parse`` needs both).

    One dict per kind of result, each typed: where a JSON value that the C decoder reads
    ends (by node and position, and by position alone for ``json_value_end``), how far a
    repetition got, and what a tagged node with structure inside matched.
    """

    __slots__ = ("json", "repeats", "tags", "values")

    def __init__(self) -> None:
        self.json: dict[tuple[int, int], int] = {}
        self.values: dict[int, int] = {}
        self.repeats: dict[tuple[int, int], tuple[int, int, tuple[Node, ...]]] = {}
        self.tags: dict[tuple[int, int], tuple[int, Node | None]] = {}


class _Run:
    """The state of one run: the text, the tagged nodes so far, end-dependence."""

    __slots__ = ("closer", "hits", "json", "n", "out", "repeats", "tags", "text", "values")

    def __init__(self, text: str, shared: Shared) -> None:
        self.text = text
        self.n = len(text)
        self.out: list[Node] = []
        # Leaf results that depended on the end of the input: a negative lookahead in
        # partial mode needs more input when its child's outcome did, and only results
        # that did not are the same in both modes (and so kept in `shared`).
        self.hits = 0
        # The closer of the unfinished JSON value a result that needs more input ends in.
        self.closer = ""
        # Results kept for another run over the same text, in either mode (``Shared``'s
        # dicts, held here directly: one attribute read less in every matcher using them).
        self.json = shared.json
        self.values = shared.values
        self.repeats = shared.repeats
        self.tags = shared.tags


Match = Callable[[_Run, int], int]


class _Unsupported(Exception):
    """A node this module does not compile (the caller parses the memoised way)."""


# Held while a lazy node reached in a run is compiled (runs of one parser may share it).
_COMPILE_LOCK = threading.Lock()


def _memoised(node: Parser, partial: bool) -> Match:
    """A node the compiler refuses, reached through a lazy node in a compiled parser: run
    by the memoised driver from where the run is, its nodes and outcome handed back."""

    def memoised(r: _Run, pos: int) -> int:
        ctx = _Ctx(r.text, partial, {}, Hints(), [], _depth_budget())
        status, end, nodes, hit, closer = node._call(ctx, pos)
        if hit:
            r.hits += 1
        if status == FAIL:
            return -1
        r.out.extend(nodes)
        if status == MORE:
            r.closer = closer
            return -2 - end
        return end

    return memoised


class OneShot:
    """A parser compiled for whole-text parses, in partial and in full mode."""

    __slots__ = ("_full", "_partial")

    def __init__(self, root: Parser) -> None:
        self._full = _Compiler(partial=False).compile(root)
        self._partial = _Compiler(partial=True).compile(root)

    def parse(
        self, text: str, partial: bool = False, shared: Shared | None = None
    ) -> tuple[int, Node]:
        """``(status, tree)`` of ``text`` as ``Parser.parse(text, partial)`` gives them
        (status: FAIL / OK / MORE of ``peg.status``; the tree of a failure is empty).

        ``shared``: pass the same ``Shared`` to the partial- and the full-mode run of one text
        and the second skips what the first found independently of the end of the input.
        Raises RecursionError when the text nests deeper than the Python stack allows.
        """
        run = _Run(text, Shared() if shared is None else shared)
        e = (self._partial if partial else self._full)(run, 0)
        if e >= 0:
            return OK, _new_node(Node, (None, 0, e, True, tuple(run.out), ""))
        if e == -1:
            return FAIL, _new_node(Node, (None, 0, 0, False, (), ""))
        return MORE, _new_node(Node, (None, 0, -2 - e, False, tuple(run.out), run.closer))


def json_value_end(shared: Shared, pos: int) -> int:
    """Where a complete JSON value that a run with ``shared`` read at ``pos`` ends, or -1.

    Read by ``json.loads``' own C decoder (``json_scan.fast_complete``, which rejects NaN
    and Infinity besides): a span it read is JSON that ``json.loads`` takes as it is.
    """
    return shared.values.get(pos, -1)


def compiled(root: Parser) -> OneShot | None:
    """The one-shot form of ``root``, compiled on first use and kept on the root; None if
    it has node kinds this module does not compile."""
    found = root._oneshot
    if found is not _NOT_YET:
        assert found is None or isinstance(found, OneShot)
        return found
    try:
        shot: OneShot | None = OneShot(root)
    except _Unsupported:
        shot = None
    root._oneshot = shot
    return shot


# --- leaves ----------------------------------------------------------------------------------


def _literal(c: _Compiler, node: Literal) -> Match:
    s: str = node.value
    size = len(s)
    if not c.partial:

        def literal_full(r: _Run, pos: int) -> int:
            text = r.text
            if text.startswith(s, pos):
                return pos + size
            if r.n - pos < size and s.startswith(text[pos:]):
                r.hits += 1
            return -1

        return literal_full

    def literal_partial(r: _Run, pos: int) -> int:
        text = r.text
        if text.startswith(s, pos):
            return pos + size
        n = r.n
        if n - pos < size and s.startswith(text[pos:]):
            r.hits += 1
            r.closer = ""
            return -2 - n
        return -1

    return literal_partial


def _chars(c: _Compiler, node: Chars) -> Match:
    rx_match = node._rx.match
    low: int = node.min
    high: int | None = node.max
    if not c.partial:

        def chars_full(r: _Run, pos: int) -> int:
            m = rx_match(r.text, pos)
            e = m.end() if m else pos
            if e == r.n and (high is None or e - pos < high):
                r.hits += 1
            return e if e - pos >= low else -1

        return chars_full

    def chars_partial(r: _Run, pos: int) -> int:
        m = rx_match(r.text, pos)
        e = m.end() if m else pos
        if e == r.n and (high is None or e - pos < high):
            r.hits += 1
            r.closer = ""
            return -2 - e
        return e if e - pos >= low else -1

    return chars_partial


def _end(c: _Compiler, node: End) -> Match:
    def end(r: _Run, pos: int) -> int:
        if pos >= r.n:
            r.hits += 1
            return pos
        return -1

    return end


def _rest(c: _Compiler, node: Rest) -> Match:
    if not c.partial:

        def rest_full(r: _Run, pos: int) -> int:
            r.hits += 1
            return max(pos, r.n)

        return rest_full

    def rest_partial(r: _Run, pos: int) -> int:
        r.hits += 1
        r.closer = ""
        return -2 - max(pos, r.n)

    return rest_partial


def _until(c: _Compiler, node: Until) -> Match:
    delimiters: tuple[str, ...] = node.delimiters
    longest: int = node._longest
    hold = node._hold_rx
    if node._rx is None:
        first = delimiters[0]

        def find(text: str, pos: int) -> int:
            return text.find(first, pos)
    else:
        search = node._rx.search

        def find(text: str, pos: int) -> int:
            m = search(text, pos)
            return m.start() if m else -1

    if not c.partial:

        def until_full(r: _Run, pos: int) -> int:
            i = find(r.text, pos)
            if i >= 0:
                return i
            r.hits += 1
            return max(pos, r.n)

        return until_full

    def until_partial(r: _Run, pos: int) -> int:
        text = r.text
        i = find(text, pos)
        if i >= 0:
            return i
        n = r.n
        r.hits += 1
        r.closer = ""
        held = hold.search(text, max(pos, n - longest + 1)) if hold is not None else None
        return -2 - max(pos, held.start() if held else n)

    return until_partial


def _json(c: _Compiler, node: Json) -> Match:
    kind: str = node.kind
    quotes: bool = node.single_quotes
    uid: int = node._uid
    fast = json_scan.fast_complete
    scan = json_scan.scan

    def complete(r: _Run, pos: int) -> int:
        """End of a complete value the C decoder reads at pos (the same in both modes,
        so found once per text), or -1."""
        key = (uid, pos)
        e = r.json.get(key)
        if e is None:
            e = r.json[key] = fast(r.text, pos, kind)
            if e >= 0:
                r.values[pos] = e
        return e

    if not c.partial:

        def json_full(r: _Run, pos: int) -> int:
            e = complete(r, pos)
            if e >= 0:
                return e
            res = scan(r.text, pos, kind, False, quotes)
            if res.hit_end:
                r.hits += 1
            return res.end if res.status == OK else -1

        return json_full

    def json_partial(r: _Run, pos: int) -> int:
        e = complete(r, pos)
        if e >= 0:
            return e
        res = scan(r.text, pos, kind, True, quotes)
        if res.hit_end:
            r.hits += 1
        if res.status == OK:
            return res.end
        if res.status == FAIL:
            return -1
        r.closer = res.closer
        return -2 - res.end

    return json_partial


# --- combinators -----------------------------------------------------------------------------


class _Piece(LeafRegex):
    """One item of a run of plain items as regex text: a literal, a character run (taken
    greedily, never given back: an atomic group), as ``LeafRegex`` writes them, an optional
    literal (the same), one of those tagged (a group whose span becomes the node), and,
    untagged, sequences, ordered choices and repetitions of plain items and the end of the
    input (PEG's: each alternative and each iteration atomic, an ordered choice the first
    alternative that matches).

    What makes a run's outcome independent of where the input ends: a match that ends
    before it by more than a skipped optional literal could have looked (``margin``), or,
    for any outcome, a character after its start that no item can read (``stops``): its
    items never look past it (their characters are ``ranges``; a negated class reads
    nearly anything, so a run with one has no such character).
    """

    __slots__ = ("depth", "items", "margin", "open_ended", "parts", "refused", "tags")

    def __init__(self, refused: set[int]) -> None:
        super().__init__()
        # Nodes found not plain inside a run (by id; shared by the compiler's runs): a
        # grammar's deep structure is looked into once, not again at every level.
        self.refused = refused
        self.items: list[Parser] = []  # the run's items (for ``stops``)
        self.parts: list[str] = []
        self.tags: list[tuple[str, int]] = []  # (tag name, group) in order
        self.margin = 0  # the longest optional literal: how far a skipped one may look
        # A choice, repetition or end makes ``margin`` no bound: only ``stops`` decides.
        self.open_ended = False
        self.depth = 0  # inside a sequence, choice or repetition (no tags there)

    def add(self, node: Parser) -> bool:
        """Append ``node`` if it is a plain item; False (nothing appended) if not."""
        groups, tags, margin, open_ended = self.groups, len(self.tags), self.margin, self.open_ended
        text = self.visit(node)
        if text is None:
            self.groups, self.margin, self.open_ended = groups, margin, open_ended
            del self.tags[tags:]
            return False
        self.parts.append(text)
        self.items.append(node)
        return True

    def stops(self) -> re.Pattern[str] | None:
        """A character no item of the run can read (None: the run may read any); worked
        out when a run first needs it (most of a thousand tools' runs never run)."""
        ranges: list[tuple[int, int]] = []
        for node in self.items:
            found = _read_chars(node)
            if found is None:
                return None
            ranges += found
        return re.compile(CharSet.union(ranges, negated=True).regex())

    def _inner(self, node: Parser) -> str | None:
        if node._uid in self.refused:
            return None
        self.depth += 1
        try:
            found = self.visit(node)
        finally:
            self.depth -= 1
        if found is None:
            self.refused.add(node._uid)
        return found

    def visit_End(self, node: Parser) -> str | None:
        self.open_ended = True
        return r"\Z"

    def visit_Seq(self, node: Parser) -> str | None:
        assert isinstance(node, Seq)
        parts = [self._inner(item) for item in node.items]
        if not parts or any(p is None for p in parts):
            return None
        return "(?:" + "".join(p for p in parts if p is not None) + ")"

    def visit_Choice(self, node: Parser) -> str | None:
        assert isinstance(node, Choice)
        self.groups += 1
        group = self.groups
        alts = [self._inner(alt) for alt in node.alternatives]
        if not alts or any(a is None for a in alts):
            return None
        self.open_ended = True
        # (?=(A|B))\N: the first alternative that matches, never given back.
        return f"(?=({'|'.join(a for a in alts if a is not None)}))\\{group}"

    def visit_Repeat(self, node: Repeat) -> str | None:
        child = node.child
        if (node.min, node.max) == (0, 1) and isinstance(child, Literal):
            self.margin = max(self.margin, len(child.value))
            self.groups += 1
            return f"(?=((?:{re.escape(child.value)})?))\\{self.groups}"
        self.groups += 1
        group = self.groups
        inner = self._inner(child)
        # An item that may match nothing repeats by PEG's own rule: not written here.
        if inner is None or facts.nullable(child):
            return None
        self.open_ended = True
        bound = "" if node.max is None else str(node.max)
        return f"(?=((?:{inner}){{{node.min},{bound}}}))\\{group}"

    def visit_Tag(self, node: Tag) -> str | None:
        if self.depth or not isinstance(node.child, (Literal, Chars)):
            return None
        self.groups += 1
        group = self.groups
        inner = self.visit(node.child)
        if inner is None:  # a leaf kind of another module
            return None
        self.tags.append((node.name, group))
        return f"({inner})"


class _ReadChars(NodeVisitor["list[tuple[int, int]] | None"]):
    """The characters a plain item may read, as code point ranges; None where that is
    nearly any (a negated class)."""

    __slots__ = ()

    def visit_Literal(self, node: Literal) -> list[tuple[int, int]] | None:
        return [(ord(ch), ord(ch)) for ch in set(node.value)]

    def visit_Chars(self, node: Chars) -> list[tuple[int, int]] | None:
        return None if node.charset.negated else list(node.charset.ranges)

    def visit_End(self, node: End) -> list[tuple[int, int]] | None:
        return []

    def visit_Seq(self, node: Seq) -> list[tuple[int, int]] | None:
        return self.joined(node.items)

    def visit_Choice(self, node: Choice) -> list[tuple[int, int]] | None:
        return self.joined(node.alternatives)

    def joined(self, nodes: tuple[Parser, ...]) -> list[tuple[int, int]] | None:
        ranges: list[tuple[int, int]] = []
        for child in nodes:
            found = self.visit(child)
            if found is None:
                return None
            ranges += found
        return ranges

    def as_child(self, node: Repeat | Tag) -> list[tuple[int, int]] | None:
        return self.visit(node.child)

    visit_Repeat = visit_Tag = as_child

    def unknown(self, node: Parser, *args: object) -> list[tuple[int, int]] | None:
        return None  # not a plain item

    visit_Rest = visit_Until = visit_Json = visit_Peek = visit_Negate = unknown
    visit_Atomic = visit_TriggerMark = visit_Ref = visit_Lazy = foreign = unknown


_read_chars = _ReadChars().visit


def _plain_run(piece: _Piece, items: tuple[Match, ...]) -> Match:
    """Consecutive plain items as one regex match, their tags' nodes made from its groups.

    Where no item's outcome can depend on where the input ends (see ``_Piece``), the
    regex's outcome is the run's; otherwise each item runs on its own and says so.
    """
    rx_match = re.compile("".join(piece.parts)).match
    margin = -1 if piece.open_ended else piece.margin
    tags = tuple(piece.tags)
    one_by_one = _in_turn(items)
    stop: list[Callable[[str, int], re.Match[str] | None] | None] = []  # at first need

    def stop_search(text: str, pos: int) -> re.Match[str] | None:
        if not stop:
            stops = piece.stops()
            stop.append(stops.search if stops is not None else None)
        search = stop[0]
        return search(text, pos) if search is not None else None

    def plain_run(r: _Run, pos: int) -> int:
        text = r.text
        m = rx_match(text, pos)
        if m is not None and margin >= 0 and m.end() + margin < r.n:
            pass
        elif stop_search(text, pos) is None:
            return one_by_one(r, pos)
        elif m is None:
            return -1
        for name, group in tags:
            start, end = m.span(group)
            r.out.append(_new_node(Node, (name, start, end, True, (), "")))
        return m.end()

    return plain_run


def _seq(c: _Compiler, node: Seq) -> Match:
    raw: tuple[Parser, ...] = node.items
    parts: list[Match] = []
    i = 0
    while i < len(raw):
        piece = _Piece(c.refused)
        j = i
        while j < len(raw) and piece.add(raw[j]):
            j += 1
        # Worth one regex: two items or more, or one that would take two calls.
        if j - i >= 2 or (j > i and type(raw[i]) in (Tag, Repeat)):
            parts.append(_plain_run(piece, tuple(c.compile(p) for p in raw[i:j])))
            i = j
        else:
            parts.append(c.compile(raw[i]))
            i += 1

    items = tuple(parts)
    if len(items) == 1:
        return items[0]
    # Nodes to take back on failure exist only if an item that may add some is followed
    # by one that may fail; otherwise every failing item has already taken back its own.
    producing = [c.adds_nodes(p) for p in raw]
    keeps = any(producing[:-1])
    if len(items) == 2 and not keeps:
        first, second = items

        def seq2(r: _Run, pos: int) -> int:
            e = first(r, pos)
            return e if e < 0 else second(r, e)

        return seq2
    if not keeps:

        def seq_plain(r: _Run, pos: int) -> int:
            for item in items:
                pos = item(r, pos)
                if pos < 0:
                    return pos
            return pos

        return seq_plain

    return _in_turn(items)


def _in_turn(items: tuple[Match, ...]) -> Match:
    """The items one after the other; on a failure the nodes they added are taken back."""

    def seq(r: _Run, pos: int) -> int:
        out = r.out
        mark = len(out)
        for item in items:
            e = item(r, pos)
            if e < 0:
                if e == -1 and len(out) > mark:
                    del out[mark:]
                return e
            pos = e
        return pos

    return seq


def _choice(c: _Compiler, node: Choice) -> Match:
    # Per next character, the alternatives worth trying (in order), with the text each
    # must start with when longer than one character (``Parser.first_text``): those that
    # can start with it, can match nothing, or whose first characters are unknown.
    alts = [(alt, *c.starts(alt), _must_texts(alt)) for alt in node.alternatives]
    chars = frozenset().union(*(f for _a, f, _e, _t in alts if f is not None))
    # Many characters share one list of alternatives: each list is converted once.
    # Each entry: the matcher, the texts one of which it must start with (when longer
    # than one character: ``Parser.first_text``, else ``_first_texts``) and the longest's
    # length ((), 0: none).
    lists: dict[
        tuple[tuple[int, tuple[str, ...]], ...], tuple[tuple[Match, tuple[str, ...], int], ...]
    ] = {}

    def musts(texts: tuple[str, ...], ch: str | None) -> tuple[str, ...]:
        if ch is not None:
            texts = tuple(t for t in texts if t.startswith(ch))
        return texts if any(len(t) > 1 for t in texts) else ()

    def matchers(ch: str | None) -> tuple[tuple[Match, tuple[str, ...], int], ...]:
        picked = [
            (alt, musts(texts, ch))
            for alt, f, empty, texts in alts
            if f is None or empty or (ch is not None and ch in f)
        ]
        key = tuple((alt._uid, texts) for alt, texts in picked)
        found = lists.get(key)
        if found is None:
            found = lists[key] = tuple(
                (c.compile(alt), texts, max(map(len, texts), default=0)) for alt, texts in picked
            )
        return found

    table = {ch: matchers(ch) for ch in chars}
    others = matchers(None)
    every = tuple((c.compile(alt), (), 0) for alt in node.alternatives)
    get = table.get
    at_end = None if c.partial else c.at_end(node)
    if at_end is not None:
        # The alternatives tried at the end of the input (where a repetition of them
        # stops) all fail or all match nothing there, whatever the text: say so at once.
        # Each would have read the end of the input.

        def choice_full(r: _Run, pos: int) -> int:
            left = r.n - pos
            if left <= 0:
                r.hits += 1
                return -1 if at_end else pos
            text = r.text
            for alt, must, size in get(text[pos], others):
                if size and left >= size and not text.startswith(must, pos):
                    continue
                e = alt(r, pos)
                if e != -1:
                    return e
            return -1

        return choice_full

    def choice(r: _Run, pos: int) -> int:
        text = r.text
        left = r.n - pos
        alternatives = get(text[pos], others) if left > 0 else every
        for alt, must, size in alternatives:
            if size and left >= size and not text.startswith(must, pos):
                continue  # it would fail here, consuming nothing (see Parser.first_text)
            e = alt(r, pos)
            if e != -1:
                return e
        return -1

    return choice


# More first texts than this and an alternative is tried rather than filtered (a choice of
# many tools' calls: its own choice dispatches them).
_MAX_FIRST_TEXTS = 16


def _must_texts(alt: Parser) -> tuple[str, ...]:
    """The texts one of which ``alt`` must start with, for a choice to skip it by: its one
    first text where it has one (``Parser.first_text``), else its few first texts, else ()."""
    must = alt.first_text()
    if len(must) > 1:
        return (must,)
    return _first_texts(alt) or ()


class _FirstTexts(NodeVisitor["tuple[str, ...] | None"]):
    """Texts one of which a match of a node starts with (so it matches nothing else), or
    None: unknown, it may match nothing, or more than ``_MAX_FIRST_TEXTS`` of them. Where
    ``Parser.first_text`` finds no one text (harmony's messages start ``<|channel|>`` or
    `` to=``), a choice can still skip an alternative with one ``str.startswith`` of a
    tuple."""

    __slots__ = ()

    def visit_Literal(self, node: Literal) -> tuple[str, ...] | None:
        return (node.value,) if node.value else None

    def visit_Seq(self, node: Seq) -> tuple[str, ...] | None:
        return self.visit(node.items[0]) if node.items else None

    def visit_Choice(self, node: Choice) -> tuple[str, ...] | None:
        texts: list[str] = []
        for alt in node.alternatives:
            found = self.visit(alt)
            if found is None or len(texts) + len(found) > _MAX_FIRST_TEXTS:
                return None  # unknown, or too many to be worth a filter
            texts.extend(found)
        return tuple(texts)

    def as_child(self, node: Tag | Atomic | TriggerMark) -> tuple[str, ...] | None:
        return self.visit(node.child)

    visit_Tag = visit_Atomic = visit_TriggerMark = as_child

    def unknown(self, node: Parser, *args: object) -> tuple[str, ...] | None:
        return None  # it may match nothing, or start with any text

    visit_Chars = visit_Json = visit_End = visit_Rest = visit_Until = unknown
    visit_Repeat = visit_Peek = visit_Negate = visit_Ref = visit_Lazy = foreign = unknown


_first_texts = _FirstTexts().visit


def _repeat(c: _Compiler, node: Repeat) -> Match:
    child = c.compile(node.child)
    low: int = node.min
    high: int | None = node.max
    if high == 1 and low == 0:

        def optional(r: _Run, pos: int) -> int:
            e = child(r, pos)
            return pos if e == -1 else e

        return optional
    uid: int = node._uid

    def repeat(r: _Run, pos: int) -> int:
        out = r.out
        mark = len(out)
        # Iterations that did not depend on the end of the input are the same in the
        # other mode's run: (position, count, nodes) after the last of them.
        key = (uid, pos)
        known = r.repeats.get(key)
        if known is None:
            got = 0
        else:
            pos, got, nodes = known
            out.extend(nodes)
        hits = r.hits
        stable = -1
        more = 0
        while high is None or got < high:
            e = child(r, pos)
            if e < 0:
                more = e
                break
            if e == pos:  # an empty match repeats forever: the remaining count is satisfied
                got = max(got, low)
                break
            pos = e
            got += 1
            if r.hits == hits:
                stable = len(out)
                known = (pos, got, ())
        if stable >= 0 and known is not None:
            r.repeats[key] = (known[0], known[1], tuple(out[mark:stable]))
        if more < -1:
            return more
        if got < low:
            if len(out) > mark:
                del out[mark:]
            return -1
        return pos

    return repeat


def _peek(c: _Compiler, node: Peek) -> Match:
    child = c.compile(node.child)

    def peek(r: _Run, pos: int) -> int:
        out = r.out
        mark = len(out)
        e = child(r, pos)
        if len(out) > mark:
            del out[mark:]
        if e >= 0:
            return pos
        if e == -1:
            return -1
        r.closer = ""
        return -2 - pos

    return peek


def _negate(c: _Compiler, node: Negate) -> Match:
    child = c.compile(node.child)
    if not c.partial:

        def negate_full(r: _Run, pos: int) -> int:
            out = r.out
            mark = len(out)
            e = child(r, pos)
            if len(out) > mark:
                del out[mark:]
            return pos if e == -1 else -1

        return negate_full

    def negate_partial(r: _Run, pos: int) -> int:
        out = r.out
        mark = len(out)
        hits = r.hits
        e = child(r, pos)
        if len(out) > mark:
            del out[mark:]
        if e == -1:
            return pos
        if e < -1 or r.hits != hits:  # the child's outcome may change as the text grows
            r.closer = ""
            return -2 - pos
        return -1

    return negate_partial


def _tag(c: _Compiler, node: Tag) -> Match:
    child = c.compile(node.child)
    name: str = node.name
    if not c.adds_nodes(node.child):

        def tag_leaf(r: _Run, pos: int) -> int:
            e = child(r, pos)
            if e >= 0:
                r.out.append(_new_node(Node, (name, pos, e, True, (), "")))
            elif e < -1:
                r.out.append(_new_node(Node, (name, pos, -2 - e, False, (), r.closer)))
            return e

        return tag_leaf

    uid: int = node._uid

    def tag(r: _Run, pos: int) -> int:
        # A node with structure inside (a call, an argument): found once per text when
        # its outcome did not depend on the end of the input.
        key = (uid, pos)
        known = r.tags.get(key)
        if known is not None:
            if known[1] is not None:
                r.out.append(known[1])
            return known[0]
        out = r.out
        mark = len(out)
        hits = r.hits
        e = child(r, pos)
        if e == -1:
            if r.hits == hits:
                r.tags[key] = (-1, None)
            return -1
        children = tuple(out[mark:])
        del out[mark:]
        if e >= 0:
            found = _new_node(Node, (name, pos, e, True, children, ""))
            if r.hits == hits:
                r.tags[key] = (e, found)
        else:
            found = _new_node(Node, (name, pos, -2 - e, False, children, r.closer))
        out.append(found)
        return e

    return tag


def _atomic(c: _Compiler, node: Atomic) -> Match:
    child = c.compile(node.child)
    if not c.partial or not c.adds_nodes(node.child):
        return child  # it only holds back the nodes of an unfinished match

    def atomic(r: _Run, pos: int) -> int:
        out = r.out
        mark = len(out)
        e = child(r, pos)
        if e < -1 and len(out) > mark:
            del out[mark:]  # unfinished: its nodes appear once it is complete
        return e

    return atomic


def _transparent(c: _Compiler, node: TriggerMark) -> Match:
    return c.compile(node.child)


class _Compiler(NodeVisitor[Match]):
    """Turns parser nodes into matchers of one mode; shared nodes are compiled once."""

    def __init__(self, partial: bool) -> None:
        self.partial = partial
        self.done: dict[int, Match] = {}
        self.refused: set[int] = set()  # see _Piece
        # The facts the matchers are built from (``peg.facts``: kept on each node).
        self.adds_nodes = facts.adds_nodes
        self.at_end = facts.at_end
        self.starts = facts.starts

    def compile(self, node: Parser) -> Match:
        found = self.done.get(node._uid)
        if found is None:
            found = self.done[node._uid] = self.visit(node)
        return found

    visit_Literal = _literal  # and Token
    visit_Chars = _chars  # and CharClass, AnyChar, Space
    visit_End = _end
    visit_Rest = _rest
    visit_Until = _until
    visit_Json = _json  # and JsonSchema
    visit_Seq = _seq
    visit_Choice = _choice
    visit_Repeat = _repeat
    visit_Peek = _peek
    visit_Negate = _negate
    visit_Tag = _tag
    visit_Atomic = _atomic
    visit_TriggerMark = _transparent

    def visit_Ref(self, node: Ref) -> Match:
        # Named rules: recursion, whose depth budget only the memoised driver keeps.
        raise _Unsupported("Ref")

    def visit_Lazy(self, node: Lazy) -> Match:
        # Compiled when first reached (building it, as parsing does), in this compiler:
        # what it shares with the rest of the grammar is compiled once. A target the
        # compiler refuses (a named rule) is parsed the memoised way.
        compile_ = self.compile
        found: list[Match] = []
        partial = self.partial
        first = node.first_text()
        size = len(first)

        def lazy(r: _Run, pos: int) -> int:
            text = r.text
            if size and not text.startswith(first, pos):
                # Failed unbuilt, as Lazy._match does.
                if not first.startswith(text[pos : pos + size]):
                    return -1
                if not partial:
                    r.hits += 1
                    return -1
            if not found:
                with _COMPILE_LOCK:
                    if not found:
                        try:
                            found.append(compile_(node.checked()))
                        except _Unsupported:
                            found.append(_memoised(node.checked(), partial))
            return found[0](r, pos)

        return lazy

    def foreign(self, node: Parser, *args: object) -> Match:
        raise _Unsupported(type(node).__name__)


__all__ = ["FAIL", "MORE", "OK", "OneShot", "compiled", "json_value_end"]
