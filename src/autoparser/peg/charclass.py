"""Character classes: one parsed form rendered both as a Python regex and as a GBNF class.

Parsing the class spec ourselves (instead of handing it to `re`) is what lets the parser and
the grammar agree on exactly the same set of characters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from autoparser.errors import GrammarError
from autoparser.gbnf_text import CONTROL_ESCAPES, gbnf_char_class, merge_ranges


@dataclass(frozen=True)
class CharSet:
    """A set of code points as sorted, merged, inclusive ranges; `negated` flips it."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    @classmethod
    def union(cls, ranges: Iterable[tuple[int, int]], negated: bool = False) -> CharSet:
        """The set of all code points in `ranges` (in any order, overlapping or not)."""
        return cls(tuple(merge_ranges(ranges)), negated)

    def regex(self) -> str:
        """The set as a Python regex character class (memoised: grammars for many tools
        ask for the same few classes thousands of times)."""
        return _class_regex(self.ranges, self.negated)

    def gbnf(self) -> str:
        """The set as a GBNF expression (a class, or a union when the set is everything);
        memoised like ``regex``."""
        return _class_gbnf(self.ranges, self.negated)


@functools.lru_cache(maxsize=4096)
def _class_gbnf(ranges: tuple[tuple[int, int], ...], negated: bool) -> str:
    return gbnf_char_class(ranges, negated=negated)


@functools.lru_cache(maxsize=4096)
def _class_regex(ranges: tuple[tuple[int, int], ...], negated: bool) -> str:
    body = "".join(_rx_range(lo, hi) for lo, hi in ranges)
    if negated:
        return f"[^{body}]" if body else r"[\s\S]"
    return f"[{body}]" if body else r"[^\s\S]"


@functools.lru_cache(maxsize=4096)
def parse_class(spec: str) -> CharSet:
    """Parse a class spec such as ``a-zA-Z_``, ``^<`` or ``[0-9]`` (brackets optional)."""
    if len(spec) >= 2 and spec[0] == "[" and spec[-1] == "]" and not spec.endswith("\\]"):
        spec = spec[1:-1]
    negated = spec.startswith("^")
    if negated:
        spec = spec[1:]
    chars = _unescape(spec)
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(chars):
        ch, _escaped = chars[i]
        if i + 2 < len(chars) and chars[i + 1] == ("-", False):
            hi, _ = chars[i + 2]
            if ord(hi) < ord(ch):
                raise GrammarError(f"character class {spec!r}: range {ch}-{hi} is reversed")
            ranges.append((ord(ch), ord(hi)))
            i += 3
            continue
        ranges.append((ord(ch), ord(ch)))
        i += 1
    return CharSet.union(ranges, negated)


def _unescape(spec: str) -> list[tuple[str, bool]]:
    """Characters of the spec; the flag marks escaped ones (an escaped '-' is not a range)."""
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(spec):
        ch = spec[i]
        if ch == "\\" and i + 1 < len(spec):
            nxt = spec[i + 1]
            if nxt == "x" and i + 3 < len(spec):
                out.append((chr(int(spec[i + 2 : i + 4], 16)), True))
                i += 4
                continue
            if nxt == "u" and i + 5 < len(spec):
                out.append((chr(int(spec[i + 2 : i + 6], 16)), True))
                i += 6
                continue
            out.append((CONTROL_ESCAPES.get(nxt, nxt), True))
            i += 2
            continue
        out.append((ch, False))
        i += 1
    return out


def _rx_char(cp: int) -> str:
    return re.escape(chr(cp)) if cp > 0x20 else f"\\x{cp:02x}"


def _rx_range(lo: int, hi: int) -> str:
    return _rx_char(lo) if lo == hi else f"{_rx_char(lo)}-{_rx_char(hi)}"
