"""GBNF text helpers: quoting literals and character classes portably.

Portable means accepted unchanged by llama.cpp, xgrammar and llguidance: only the escapes
all three know (`\\\\`, `\\"`, `\\n`, `\\r`, `\\t`, `\\xNN`, `\\[`, `\\]`), non-ASCII as
literal UTF-8, never `\\u`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

_LITERAL_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\r"): "\\r"}
_LITERAL_ESCAPES[ord("\t")] = "\\t"
for _code in [*range(0x20), 0x7F]:
    _LITERAL_ESCAPES.setdefault(_code, f"\\x{_code:02X}")

# Inside a class every character that is special to some engine's class syntax is written
# as a hex escape, which all of them decode to the plain character.
_CLASS_SPECIAL = set('\\]^-["/')

_NAME_JUNK = re.compile(r"[^A-Za-z0-9]+")


def literal(text: str) -> str:
    """A GBNF string literal matching exactly `text` (`""` for the empty string)."""
    return '"' + text.translate(_LITERAL_ESCAPES) + '"'


def json_literal(value: object) -> str:
    """A GBNF literal for the compact JSON text of a scalar (non-ASCII kept literal)."""
    return literal(json.dumps(value, ensure_ascii=False))


def class_char(code: int) -> str:
    """One code point as it may appear inside a GBNF character class."""
    char = chr(code)
    if code < 0x20 or code == 0x7F or char in _CLASS_SPECIAL:
        return f"\\x{code:02X}"
    return char


def char_class(ranges: Iterable[tuple[int, int]], *, negated: bool = False) -> str:
    """A GBNF class `[...]` (or `[^...]`) from inclusive code-point ranges."""
    parts = []
    for lo, hi in ranges:
        if lo == hi:
            parts.append(class_char(lo))
        elif hi == lo + 1:
            parts.append(class_char(lo) + class_char(hi))
        else:
            parts.append(f"{class_char(lo)}-{class_char(hi)}")
    return ("[^" if negated else "[") + "".join(parts) + "]"


def alternatives(options: Sequence[str]) -> str:
    """`( a | b )`, or the single option itself; duplicates dropped, order kept."""
    unique = list(dict.fromkeys(options))
    if not unique:
        raise ValueError("no alternatives")
    if len(unique) == 1:
        return unique[0]
    return "( " + " | ".join(unique) + " )"


def _top_level_atom(expr: str) -> bool:
    """Whether `expr` is one atom (maybe quantified): no space or bar outside groups."""
    depth = 0
    quoted = in_class = False
    index = 0
    while index < len(expr):
        char = expr[index]
        if char == "\\" and (quoted or in_class):
            index += 2
            continue
        if quoted:
            quoted = char != '"'
        elif in_class:
            in_class = char != "]"
        elif char == '"':
            quoted = True
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and char in " |":
            return False
        index += 1
    return True


def _quantified_group(item: str) -> str | None:
    """The inside of `( X+ )`-like groups (one quantified atom), else None.

    llguidance's GBNF import drops such parentheses and then writes `X+?`, which it cannot
    read back; callers rewrite these groups instead of quantifying them.
    """
    if not (item.startswith("( ") and item.endswith(" )")):
        return None
    inner = item[2:-2]
    if not inner.endswith(("+", "*", "?", "}")) or not _top_level_atom(inner):
        return None
    return inner


def optional(expr: str) -> str:
    """`expr` or nothing, written so every engine reads it."""
    inner = _quantified_group(f"( {expr} )")
    if inner is None:
        return f"( {expr} )?"
    if inner.endswith("+"):
        return inner[:-1] + "*"
    if inner.endswith(("*", "?")):
        return inner
    return f'( "" | {inner} )'


def repeat(item: str, low: int, high: int | None) -> str:
    """`item` repeated low..high times, always written with a lower bound."""
    inner = _quantified_group(item)
    if inner is not None:
        if (low, high) == (0, 1):
            return optional(inner)
        item = f'( {inner} "" )'  # a sequence keeps its parentheses in every engine
    if high is not None and high < low:
        raise ValueError("empty repetition")
    if high == low:
        if low == 0:
            return '""'
        return item if low == 1 else f"{item}{{{low}}}"
    if high is None:
        return {0: f"{item}*", 1: f"{item}+"}.get(low, f"{item}{{{low},}}")
    if low == 0 and high == 1:
        return f"{item}?"
    return f"{item}{{{low},{high}}}"


def rule_name_part(text: str) -> str:
    """`text` reduced to letters, digits and dashes, for use inside a rule name."""
    return _NAME_JUNK.sub("-", text).strip("-").lower() or "x"


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, non-overlapping, non-adjacent inclusive ranges."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out
