"""Character classes: one parsed form rendered both as a Python regex and as a GBNF class.

Parsing the class spec ourselves (instead of handing it to `re`) is what lets the parser and
the grammar agree on exactly the same set of characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autoparser.errors import GrammarError

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}
MAX_CODEPOINT = 0x10FFFF


@dataclass(frozen=True)
class CharSet:
    """A set of code points as sorted, merged, inclusive ranges; `negated` flips it."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def regex(self) -> str:
        """The set as a Python regex character class."""
        body = "".join(_rx_range(lo, hi) for lo, hi in self.ranges)
        if self.negated:
            return f"[^{body}]" if body else r"[\s\S]"
        return f"[{body}]" if body else r"[^\s\S]"

    def gbnf(self) -> str:
        """The set as a GBNF expression (a class, or a union when the set is everything)."""
        if self.negated and not self.ranges:
            return ANY_CHAR_GBNF
        if not self.negated and not self.ranges:
            raise GrammarError("an empty character class cannot be expressed in GBNF")
        body = "".join(_gbnf_range(lo, hi) for lo, hi in self.ranges)
        return f"[^{body}]" if self.negated else f"[{body}]"

    def contains(self, ch: str) -> bool:
        """Membership test for one character (used by grammar analysis, not by parsing)."""
        cp = ord(ch)
        inside = any(lo <= cp <= hi for lo, hi in self.ranges)
        return inside != self.negated


ANY_CHAR_GBNF = r"([\x00-\x7F] | [^\x00-\x7F])"


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
    return CharSet(merge_ranges(ranges), negated)


def merge_ranges(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sort and merge overlapping or adjacent ranges."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


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
            out.append((_ESCAPES.get(nxt, nxt), True))
            i += 2
            continue
        out.append((ch, False))
        i += 1
    return out


def _rx_char(cp: int) -> str:
    return re.escape(chr(cp)) if cp > 0x20 else f"\\x{cp:02x}"


def _rx_range(lo: int, hi: int) -> str:
    return _rx_char(lo) if lo == hi else f"{_rx_char(lo)}-{_rx_char(hi)}"


def gbnf_char(cp: int) -> str:
    """One code point inside a GBNF class or string: ASCII escaped, others literal UTF-8."""
    if cp < 0x20 or cp == 0x7F:
        return {0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r"}.get(cp, f"\\x{cp:02X}")
    if chr(cp) in '\\]["^-':
        return f"\\x{cp:02X}"
    if 0xD800 <= cp <= 0xDFFF:
        raise GrammarError(f"lone surrogate U+{cp:04X} cannot be written as UTF-8 in GBNF")
    return chr(cp)


def _gbnf_range(lo: int, hi: int) -> str:
    if lo <= 0xD7FF < hi and hi <= 0xDFFF:
        hi = 0xD7FF
    if 0xD800 <= lo <= 0xDFFF:
        lo = 0xE000
    return gbnf_char(lo) if lo == hi else f"{gbnf_char(lo)}-{gbnf_char(hi)}"


def gbnf_literal(s: str) -> str:
    """A GBNF string literal; the empty string is written ``""``."""
    out = []
    for ch in s:
        cp = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif cp < 0x20 or cp == 0x7F:
            out.append({0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r"}.get(cp, f"\\x{cp:02X}"))
        elif 0xD800 <= cp <= 0xDFFF:
            raise GrammarError(f"lone surrogate U+{cp:04X} cannot be written as UTF-8 in GBNF")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
