"""Translate a JSON Schema `pattern` (a regular expression) into GBNF.

The result matches the JSON-encoded text between a string's quotes, so characters that
JSON escapes (`"`, `\\`, control characters) appear in their escaped form. JSON Schema
patterns are unanchored: a pattern without `^` / `$` may be preceded / followed by any
text. Constructs a context-free grammar cannot express exactly (backreferences,
lookarounds, word boundaries, inline flags) raise SchemaError.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Generic, TypeVar

from autoparser.errors import SchemaError
from autoparser.gbnf_text import (
    CONTROL_ESCAPES,
    MAX_CODE,
    SURROGATES,
    alternatives,
    gbnf_char_class,
    gbnf_literal,
    gbnf_repeat,
    merge_ranges,
    subtract_ranges,
    without_surrogates,
)

# Characters that never appear raw inside a JSON string.
_JSON_SPECIAL = merge_ranges([(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])


@lru_cache(maxsize=4)
def python_class(escape: str) -> list[tuple[int, int]]:
    """Code-point ranges of `\\d`, `\\w` or `\\s` as Python's `re` (Unicode) defines them.

    The jsonschema validator matches patterns with `re`, so the grammar uses the same
    classes. Computed once by letting `re` scan every code point (C speed).
    """
    runs = re.finditer(f"\\{escape}+", _all_scalars())
    ranges = [(ord(m.group()[0]), ord(m.group()[-1])) for m in runs]
    return without_surrogates(ranges)


@lru_cache(maxsize=1)
def _all_scalars() -> str:
    low = "".join(map(chr, range(SURROGATES[0])))
    return low + "".join(map(chr, range(SURROGATES[1] + 1, MAX_CODE + 1)))


T = TypeVar("T")

ANY_TEXT = "json-char*"
"""Any JSON string content (the converter defines the shared `json-char` rule)."""


def complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Code points outside `ranges`, surrogates excluded."""
    return without_surrogates(subtract_ranges([(0, MAX_CODE)], ranges))


def _escaped(code: int) -> str:
    """The GBNF literal of one character as json.dumps writes it inside a string."""
    return gbnf_literal(json.dumps(chr(code), ensure_ascii=False)[1:-1])


def set_expression(ranges: list[tuple[int, int]], *, negated: bool = False) -> str:
    """GBNF for one character of a set, in JSON-encoded form."""
    ranges = merge_ranges(ranges)
    options: list[str] = []
    if negated:
        options.append(gbnf_char_class(ranges + _JSON_SPECIAL, negated=True))
        special = subtract_ranges(_JSON_SPECIAL, ranges)
    else:
        plain = without_surrogates(subtract_ranges(ranges, _JSON_SPECIAL))
        if len(plain) == 1 and plain[0][0] == plain[0][1]:
            options.append(gbnf_literal(chr(plain[0][0])))
        elif plain:
            options.append(gbnf_char_class(plain))
        special = subtract_ranges(ranges, subtract_ranges(ranges, _JSON_SPECIAL))
    for lo, hi in special:
        options += [_escaped(code) for code in range(lo, hi + 1)]
    if not options:
        raise ValueError("empty character set")
    return alternatives(options)


class PatternReader(Generic[T]):
    """Recursive descent over the pattern text (schema input, never model output),
    building its result with the methods a subclass gives (by default GBNF over the
    JSON-encoded string content). Other readers build the same language as other things:
    an automaton over raw text (``generate/raw_pattern.py``)."""

    def __init__(self, pattern: str, pointer: str) -> None:
        self.text = pattern
        self.pos = 0
        self.pointer = pointer
        self.uses_dot = False

    # What the reader builds: a subclass names how each construct is written.
    def either(self, branches: list[T]) -> T:
        raise NotImplementedError

    def sequence(self, items: list[T]) -> T:
        """The items one after another (none: the empty string)."""
        raise NotImplementedError

    def repeat(self, item: T, low: int, high: int | None) -> T:
        raise NotImplementedError

    def char_set(self, ranges: list[tuple[int, int]], negated: bool) -> T:
        raise NotImplementedError

    def dot(self) -> T:
        raise NotImplementedError

    def any_text(self) -> T:
        """What an unanchored end of the pattern allows before or after its match."""
        raise NotImplementedError

    def fail(self, what: str) -> SchemaError:
        return SchemaError(
            f"pattern {self.text!r} at {self.pointer or '#'}: {what} (offset {self.pos}) "
            "cannot be expressed in a grammar"
        )

    def peek(self, ahead: int = 0) -> str:
        index = self.pos + ahead
        return self.text[index] if index < len(self.text) else ""

    def parse(self) -> T:
        result = self.alternation(top=True)
        if self.pos < len(self.text):
            raise self.fail("unbalanced ')'")
        return result

    def alternation(self, *, top: bool = False) -> T:
        """Branches separated by '|' (top: the whole pattern, anchors allowed)."""
        branches = [self.branch(top=top)]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.branch(top=top))
        return branches[0] if len(branches) == 1 else self.either(branches)

    def branch(self, *, top: bool) -> T:
        items: list[T] = []
        start_anchor = end_anchor = False
        if self.peek() == "^":
            if not top:
                raise self.fail("'^' inside a group")
            start_anchor = True
            self.pos += 1
        while self.pos < len(self.text) and self.peek() not in "|)":
            char = self.peek()
            if char == "$":
                self.pos += 1
                if not top or self.peek() not in ("", "|"):
                    raise self.fail("'$' before the end of the pattern")
                end_anchor = True
                break
            if char == "^":
                raise self.fail("'^' after the start of the pattern")
            items.append(self.quantified(self.atom()))
        if top and not start_anchor:
            items.insert(0, self.any_text())
        if top and not end_anchor:
            items.append(self.any_text())
        return items[0] if len(items) == 1 else self.sequence(items)

    def quantified(self, atom: T) -> T:
        char = self.peek()
        low: int
        high: int | None
        if char == "*":
            low, high = 0, None
            self.pos += 1
        elif char == "+":
            low, high = 1, None
            self.pos += 1
        elif char == "?":
            low, high = 0, 1
            self.pos += 1
        elif char == "{" and self._bounds() is not None:
            bounds = self._bounds()
            assert bounds is not None
            low, high, length = bounds
            self.pos += length
        else:
            return atom
        if self.peek() == "?":  # lazy: same language
            self.pos += 1
        elif self.peek() == "+":
            raise self.fail("possessive quantifier")
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._bounds()):
            raise self.fail("stacked quantifiers")
        if high is not None and high < low:
            raise self.fail("quantifier with max below min")
        return self.repeat(atom, low, high)

    def _bounds(self) -> tuple[int, int | None, int] | None:
        end = self.text.find("}", self.pos)
        if end < 0:
            return None
        body = self.text[self.pos + 1 : end]
        low_text, comma, high_text = body.partition(",")
        if not (low_text.isdigit() or (comma and not low_text and high_text.isdigit())):
            return None
        if high_text and not high_text.isdigit():
            return None
        low = int(low_text) if low_text else 0
        high = (int(high_text) if high_text else None) if comma else low
        return low, high, end + 1 - self.pos

    def atom(self) -> T:
        char = self.peek()
        self.pos += 1
        if char == "(":
            return self.group()
        if char == "[":
            return self.bracket()
        if char == ".":
            self.uses_dot = True
            return self.dot()
        if char == "\\":
            return self.escape(in_class=False)[1]
        if char in "*+?":
            raise self.fail(f"quantifier {char!r} with nothing to repeat")
        return self.char_set([(ord(char), ord(char))], False)

    def group(self) -> T:
        if self.peek() == "?":
            marker = self.text[self.pos : self.pos + 3]
            if marker.startswith("?:"):
                self.pos += 2
            elif marker.startswith(("?=", "?!", "?<=", "?<!")):
                raise self.fail("lookaround")
            elif marker.startswith(("?P<", "?<")):
                close = self.text.find(">", self.pos)
                if close < 0:
                    raise self.fail("unterminated group name")
                self.pos = close + 1
            elif marker.startswith("?P="):
                raise self.fail("backreference")
            else:
                raise self.fail("inline flag or extension group")
        inner = self.alternation()
        if self.peek() != ")":
            raise self.fail("missing ')'")
        self.pos += 1
        return inner

    def escape(self, *, in_class: bool) -> tuple[list[tuple[int, int]], T]:
        """Parse after a backslash: (code-point ranges, what it builds)."""
        char = self.peek()
        self.pos += 1
        if not char:
            raise self.fail("trailing backslash")
        ranges: list[tuple[int, int]]
        if char.lower() in "dws":
            ranges = python_class(char.lower())
            if char.isupper():
                ranges = complement(ranges)
            return ranges, self.char_set(python_class(char.lower()), char.isupper())
        if char == "b" and in_class:
            ranges = [(8, 8)]
        elif char in "bBAZz":
            raise self.fail(f"anchor or word boundary '\\{char}'")
        elif (char.isdigit() and char != "0") or char == "k":
            raise self.fail("backreference")
        elif char in CONTROL_ESCAPES:
            code = ord(CONTROL_ESCAPES[char])
            ranges = [(code, code)]
        elif char in "xu":
            code = self._hex_escape(char)
            ranges = [(code, code)]
        elif char == "c" or char == "p" or char == "P" or char.isalnum():
            raise self.fail(f"escape '\\{char}'")
        else:
            ranges = [(ord(char), ord(char))]
        return ranges, self.char_set(ranges, False)

    def _hex_escape(self, kind: str) -> int:
        if kind == "u" and self.peek() == "{":
            end = self.text.find("}", self.pos)
            digits = self.text[self.pos + 1 : end] if end > 0 else ""
            self.pos = end + 1
        else:
            width = 2 if kind == "x" else 4
            digits = self.text[self.pos : self.pos + width]
            self.pos += width
            if len(digits) != width:
                digits = ""
        try:
            code = int(digits, 16)
        except ValueError:
            raise self.fail(f"bad '\\{kind}' escape") from None
        if code > MAX_CODE or SURROGATES[0] <= code <= SURROGATES[1]:
            raise self.fail("escape outside Unicode scalar values")
        return code

    def bracket(self) -> T:
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            char = self.peek()
            if not char:
                raise self.fail("unterminated character class")
            if char == "]" and not first:
                self.pos += 1
                break
            first = False
            low_ranges = self._class_atom()
            if (
                self.peek() == "-"
                and self.peek(1) not in ("]", "")
                and len(low_ranges) == 1
                and low_ranges[0][0] == low_ranges[0][1]
            ):
                self.pos += 1
                high_ranges = self._class_atom()
                if len(high_ranges) != 1 or high_ranges[0][0] != high_ranges[0][1]:
                    raise self.fail("range ending in a class escape")
                low, high = low_ranges[0][0], high_ranges[0][0]
                if high < low:
                    raise self.fail("reversed range")
                ranges.append((low, high))
            else:
                ranges += low_ranges
        try:
            return self.char_set(ranges, negated)
        except ValueError:
            raise self.fail("empty character class") from None

    def _class_atom(self) -> list[tuple[int, int]]:
        char = self.peek()
        self.pos += 1
        if char == "\\":
            return self.escape(in_class=True)[0]
        if char == "[" and self.peek() in (":", "=", "."):
            raise self.fail("POSIX class")
        return [(ord(char), ord(char))]


DOT_RULE = ("json-re-dot", set_expression([(0x0A, 0x0A)], negated=True))
"""The shared rule for `.`: any character but a newline, JSON-encoded."""


class _JsonGbnfReader(PatternReader[str]):
    """GBNF for the JSON-encoded content of a string matching the pattern."""

    def either(self, branches: list[str]) -> str:
        return alternatives(branches)

    def sequence(self, items: list[str]) -> str:
        return " ".join(items) if items else '""'

    def repeat(self, item: str, low: int, high: int | None) -> str:
        return gbnf_repeat(item, low, high)

    def char_set(self, ranges: list[tuple[int, int]], negated: bool) -> str:
        return set_expression(ranges, negated=negated)

    def dot(self) -> str:
        return DOT_RULE[0]

    def any_text(self) -> str:
        return ANY_TEXT


def translate_pattern(pattern: str, pointer: str) -> tuple[str, bool]:
    """(GBNF for the string content matching `pattern`, whether DOT_RULE is referenced)."""
    parser = _JsonGbnfReader(pattern, pointer)
    return parser.parse(), parser.uses_dot
