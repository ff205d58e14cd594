"""A string argument's JSON Schema ``pattern`` over the raw text a tagged format writes.

Formats that write string values as raw text between markers (Qwen3-Coder's
``<parameter=input>\\n...\\n</parameter>``, GLM's ``<arg_value>...</arg_value>``) have no
JSON escaping: the text is the value, so the pattern's language is written as is. The
pattern is a search, as in JSON Schema (and ``schema/convert.py``): an end without an
anchor allows any text there, here any raw text that does not hold the value's closer.

A value whose text held its closer would be unreadable: the parser reads up to the
closer. The grammar leaves such texts out: the pattern is read as an automaton, walked
beside a matcher of the ends, and written as one rule per pair of states that never
completes an end (a text that may still write ``</parameter`` but never ``</parameter>``).
A pattern too large for that, or one a grammar cannot express, is not enforced: the value
stays free text, with a log line.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from itertools import pairwise

from autoparser.cache import CACHES, Store
from autoparser.errors import SchemaError
from autoparser.gbnf_text import merge_ranges, subtract_ranges, without_surrogates
from autoparser.peg import Parser, Rules, choice, literal, seq
from autoparser.peg.charclass import CharSet
from autoparser.peg.core import CharClass
from autoparser.schema.regex import PatternReader, complement

LOG = logging.getLogger(__name__)


# The most automaton states a pattern may take (a bounded repeat is written out: Codex's
# apply_patch grammar takes a few hundred).
MAX_STATES = 20_000

Ranges = tuple[tuple[int, int], ...]
# A fragment of the automaton, built afresh each time it is called (a repeat writes its
# item out once per count).
Fragment = Callable[[], tuple[int, int]]


class PatternTooLarge(Exception):
    """The pattern's automaton would pass MAX_STATES."""


class _Automaton(PatternReader[Fragment]):
    """The pattern as a nondeterministic automaton: empty moves and moves on a set of
    characters (positive ranges), from a start state to an end state."""

    def __init__(self, pattern: str, pointer: str) -> None:
        super().__init__(pattern, pointer)
        self.empty: list[list[int]] = []
        self.moves: list[list[tuple[Ranges, int]]] = []

    def state(self) -> int:
        if len(self.empty) >= MAX_STATES:
            raise PatternTooLarge
        self.empty.append([])
        self.moves.append([])
        return len(self.empty) - 1

    def either(self, branches: list[Fragment]) -> Fragment:
        def build() -> tuple[int, int]:
            start, end = self.state(), self.state()
            for branch in branches:
                first, last = branch()
                self.empty[start].append(first)
                self.empty[last].append(end)
            return start, end

        return build

    def sequence(self, items: list[Fragment]) -> Fragment:
        def build() -> tuple[int, int]:
            start = end = self.state()
            for item in items:
                first, last = item()
                self.empty[end].append(first)
                end = last
            return start, end

        return build

    def repeat(self, item: Fragment, low: int, high: int | None) -> Fragment:
        def build() -> tuple[int, int]:
            start = end = self.state()
            for _ in range(low):
                first, last = item()
                self.empty[end].append(first)
                end = last
            if high is None:
                first, last = item()
                self.empty[end].append(first)
                self.empty[last].append(end)
                return start, end
            exit_ = self.state()
            self.empty[end].append(exit_)
            for _ in range(high - low):
                first, last = item()
                self.empty[end].append(first)
                self.empty[last].append(exit_)
                end = last
            return start, exit_

        return build

    def char_set(self, ranges: list[tuple[int, int]], negated: bool) -> Fragment:
        chosen = complement(ranges) if negated else without_surrogates(merge_ranges(ranges))
        if not chosen:
            raise ValueError("empty character set")
        held = tuple(chosen)

        def build() -> tuple[int, int]:
            start, end = self.state(), self.state()
            self.moves[start].append((held, end))
            return start, end

        return build

    def dot(self) -> Fragment:
        return self.char_set([(0x0A, 0x0A)], True)

    def any_text(self) -> Fragment:
        return self.repeat(self.char_set([], True), 0, None)


def _matched(end: str, done: int, char: str) -> int:
    """How much of ``end`` is matched once ``char`` follows ``done`` characters of it."""
    text = end[:done] + char
    for size in range(min(len(text), len(end)), 0, -1):
        if text.endswith(end[:size]):
            return size
    return 0


def _closes_early(end: str, done: int) -> bool:
    """Whether ``end`` written after a text that matched ``done`` of it is found before
    its own last character (an end that overlaps itself: ``aa`` after ``a``)."""
    for char in end[:-1]:
        done = _matched(end, done, char)
        if done == len(end):
            return True
    return False


def _closure(automaton: _Automaton, state: int) -> list[int]:
    seen = {state}
    todo = [state]
    while todo:
        for target in automaton.empty[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return sorted(seen)


Key = tuple[int, tuple[int, ...]]


def _without_ends(
    automaton: _Automaton, start: int, final: int, ends: tuple[str, ...], name: str
) -> Parser | None:
    """The automaton's texts that hold none of ``ends``, as right-linear rules: one per
    pair (state, how much of each end the text's tail matches) that can still finish.
    None where no text is left."""
    letters = sorted({char for end in ends for char in end})
    letter_codes = [(ord(c), ord(c)) for c in letters]
    table: dict[Key, tuple[dict[Key, list[tuple[int, int]]], bool]] = {}
    first: Key = (start, (0,) * len(ends))
    todo = deque([first])
    while todo:
        key = todo.popleft()
        if key in table:
            continue
        if len(table) >= MAX_STATES:
            raise PatternTooLarge
        state, done = key
        reach = _closure(automaton, state)
        targets: dict[Key, list[tuple[int, int]]] = {}
        for source in reach:
            for held, target in automaton.moves[source]:
                for char in letters:
                    code = ord(char)
                    if any(lo <= code <= hi for lo, hi in held):
                        after = tuple(_matched(e, d, char) for e, d in zip(ends, done, strict=True))
                        if all(a < len(e) for a, e in zip(after, ends, strict=True)):
                            targets.setdefault((target, after), []).append((code, code))
                others = subtract_ranges(list(held), letter_codes)
                if others:
                    targets.setdefault((target, (0,) * len(ends)), []).extend(others)
        accepting = final in reach and not any(
            _closes_early(e, d) for e, d in zip(ends, done, strict=True)
        )
        table[key] = (targets, accepting)
        todo.extend(t for t in targets if t not in table)
    live = _live(table)
    if first not in live:
        return None
    return _Writer(table, live, name).state(frozenset([first]))


class _Writer:
    """The live part of the automaton made deterministic (one state per set of states,
    the characters split where the sets' moves differ), written as right-linear rules;
    a run of states with one character each and nothing else is one literal, so that the
    rules stay shallow (the emitter walks them depth first)."""

    def __init__(
        self,
        table: dict[Key, tuple[dict[Key, list[tuple[int, int]]], bool]],
        live: set[Key],
        name: str,
    ) -> None:
        self.table = table
        self.live = live
        self.name = name
        self.rules = Rules()
        self.names: dict[frozenset[Key], str] = {}

    def moves(self, group: frozenset[Key]) -> tuple[list[tuple[Ranges, frozenset[Key]]], bool]:
        """The group's moves (disjoint ranges to the next group) and whether it accepts."""
        cuts: set[int] = set()
        spans: list[tuple[int, int, Key]] = []
        accepting = False
        for key in group:
            targets, accepts = self.table[key]
            accepting = accepting or accepts
            for target, ranges in targets.items():
                if target in self.live:
                    for lo, hi in merge_ranges(ranges):
                        spans.append((lo, hi, target))
                        cuts |= {lo, hi + 1}
        bounds = sorted(cuts)
        by_group: dict[frozenset[Key], list[tuple[int, int]]] = {}
        for lo, nxt in pairwise(bounds):
            hit = frozenset(t for a, b, t in spans if a <= lo and nxt - 1 <= b)
            if hit:
                by_group.setdefault(hit, []).append((lo, nxt - 1))
        return [(tuple(merge_ranges(r)), g) for g, r in by_group.items()], accepting

    def state(self, group: frozenset[Key]) -> Parser:
        found = self.names.get(group)
        if found is not None:
            return self.rules.ref(found)
        if len(self.names) >= MAX_STATES:
            raise PatternTooLarge
        rule = self.names[group] = f"{self.name}-{len(self.names)}"
        self.rules[rule] = self.body(group)
        return self.rules.ref(rule)

    def body(self, group: frozenset[Key]) -> Parser:
        options: list[Parser] = []
        moves, accepting = self.moves(group)
        for ranges, target in moves:
            text, after = self.run(ranges, target)
            head: Parser = literal(text) if text else CharClass(CharSet(ranges))
            options.append(seq(head, self.state(after)))
        if accepting:
            options.append(literal(""))
        return options[0] if len(options) == 1 else choice(*options)

    def run(self, ranges: Ranges, target: frozenset[Key]) -> tuple[str, frozenset[Key]]:
        """Where the move is one character and the states after it each allow one
        character only: those characters as one literal, and the group after them."""
        if len(ranges) != 1 or ranges[0][0] != ranges[0][1]:
            return "", target
        text = [chr(ranges[0][0])]
        seen = {target}
        while target not in self.names:
            moves, accepting = self.moves(target)
            if accepting or len(moves) != 1:
                break
            ((only, after),) = moves
            if len(only) != 1 or only[0][0] != only[0][1] or after in seen:
                break
            text.append(chr(only[0][0]))
            seen.add(after)
            target = after
        return "".join(text), target


def _live(table: dict[Key, tuple[dict[Key, list[tuple[int, int]]], bool]]) -> set[Key]:
    """The states from which a text can finish."""
    before: dict[Key, list[Key]] = {}
    for key, (targets, _) in table.items():
        for target in targets:
            before.setdefault(target, []).append(key)
    live = {key for key, (_, accepting) in table.items() if accepting}
    todo = list(live)
    while todo:
        for source in before.get(todo.pop(), []):
            if source not in live:
                live.add(source)
                todo.append(source)
    return live


def pattern_text(
    pattern: str, ends: list[str], padding: tuple[str, str], where: str
) -> Parser | None:
    """The raw value a string parameter's ``pattern`` allows, as the grammar writes it:
    ``padding`` (the template's text before and after the value) around it, none of
    ``ends`` (the markers that end the value) inside. None where the pattern is not
    enforced (one a grammar cannot express, too large, or that leaves no text): logged."""
    try:
        key = (pattern, tuple(ends), padding)
        return _PATTERN_TEXTS.get_or_build(key, lambda: _pattern_text(*key))
    except SchemaError as exc:
        LOG.warning("%s: the pattern is not enforced: %s", where, exc)
    except PatternTooLarge:
        LOG.warning("%s: the pattern is not enforced: more than %d states", where, MAX_STATES)
    return None


# Per pattern, closers and padding: agents send the same tools every turn.
_PATTERN_TEXTS: Store[Parser] = CACHES.store("raw_patterns", 64)


def _pattern_text(pattern: str, ends: tuple[str, ...], padding: tuple[str, str]) -> Parser:
    reader = _Automaton(pattern, "")
    before, after = padding
    literals = [reader.char_set([(ord(c), ord(c))], False) for c in before]
    trailing = [reader.char_set([(ord(c), ord(c))], False) for c in after]
    start, final = reader.sequence([*literals, reader.parse(), *trailing])()
    found = _without_ends(reader, start, final, ends, "raw-pattern")
    if found is None:
        raise SchemaError(f"no text {pattern!r} allows leaves out {list(ends)}")
    return found
