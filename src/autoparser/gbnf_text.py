"""GBNF text primitives shared by the PEG emitter and the schema converter.

Portable means accepted unchanged by llama.cpp, xgrammar and llguidance: only the escapes
all three know (`\\\\`, `\\"`, `\\n`, `\\r`, `\\t`, `\\xNN`; a hex digit right after a
`\\xNN` is itself written `\\xNN`, since llama.cpp reads two digits and xgrammar reads on),
non-ASCII as literal UTF-8
(never `\\u`), `""` rather than an empty alternative, repetition bounds always with a
lower bound, rule names of lowercase letters, digits and '-'. Expressions are plain
strings; what group(), alternatives(), sequence(), gbnf_repeat() and gbnf_optional() return is safe
to place in a sequence (unwrap() is for rule bodies).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from autoparser.errors import GrammarError

# Single-letter escapes of control characters, as regex and character-class syntax write them
# (``\n``, ``\t`` ...): read by the PEG character classes and the schema pattern converter.
CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}

MAX_CODE = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

ANY_CHAR = "( [\\x00-\\x7F] | [^\\x00-\\x7F] )"
"""Any one character: `[^]` is not portable, so ASCII or not-ASCII."""

_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\r"): "\\r"}
_ESCAPES[ord("\t")] = "\\t"
for _code in [*range(0x20), 0x7F]:
    _ESCAPES.setdefault(_code, f"\\x{_code:02X}")

# Inside a class every character that is special to some engine's class syntax is written
# as a hex escape, which all of them decode to the plain character.
_CLASS_SPECIAL = frozenset('\\]^-["/')
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# What gbnf_literal() escapes: a character of _ESCAPES, or a run of hex digits right after a
# character written as `\xNN` (the run is escaped digit by digit, see the module docstring).
_HEX_ESCAPED = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f"
_TO_ESCAPE = re.compile(f'[{_HEX_ESCAPED}"\\\\\n\r\t]|(?<=[{_HEX_ESCAPED}])[0-9A-Fa-f]+')
_HEX_DIGIT = frozenset("0123456789ABCDEFabcdef")

# JSON tokens, shared by the PEG emitter's RFC 8259 rules and the schema converter.
JSON_CHAR = r'[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )'
"""One character of JSON string content (RFC 8259): a plain character or an escape."""
JSON_NUMBER = '"-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?'
"""A JSON number (RFC 8259)."""


# --- escaping ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def gbnf_literal(text: str) -> str:
    """A GBNF string literal matching exactly `text` (`""` for the empty string).

    Memoised: a grammar for many tools writes the same markers and punctuation thousands
    of times."""
    bad = _LONE_SURROGATE.search(text)
    if bad:
        raise GrammarError(f"lone surrogate U+{ord(bad.group()):04X} cannot be written in GBNF")
    return '"' + _TO_ESCAPE.sub(_escape_match, text) + '"'


_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
_ESCAPED = re.compile(r"\\(?:x([0-9A-Fa-f]{2})|(.))", re.DOTALL)


def gbnf_unescape(literal: str) -> str:
    """The text a GBNF string literal (as gbnf_literal() writes it, quotes included)
    matches: gbnf_unescape(gbnf_literal(text)) == text."""
    if len(literal) < 2 or literal[0] != '"' or literal[-1] != '"':
        raise GrammarError(f"not a GBNF string literal: {literal[:40]!r}")

    def one(match: re.Match[str]) -> str:
        code, char = match.groups()
        if code is not None:
            return chr(int(code, 16))
        found = _UNESCAPES.get(char)
        if found is None:
            raise GrammarError(f"unknown escape \\{char} in a GBNF literal")
        return found

    return _ESCAPED.sub(one, literal[1:-1])


def _escape_match(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 1 and ord(text) in _ESCAPES:
        return _ESCAPES[ord(text)]
    return "".join(f"\\x{ord(c):02X}" for c in text)


def class_char(code: int) -> str:
    """One code point as it may appear inside a GBNF character class."""
    if SURROGATES[0] <= code <= SURROGATES[1]:
        raise GrammarError(f"lone surrogate U+{code:04X} cannot be written in GBNF")
    if code < 0x20 or code == 0x7F:
        return _ESCAPES[code]
    if chr(code) in _CLASS_SPECIAL:
        return f"\\x{code:02X}"
    return chr(code)


# --- code-point ranges and character classes -----------------------------------------------


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


def subtract_ranges(
    ranges: Iterable[tuple[int, int]], remove: Iterable[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The code points of `ranges` outside `remove`, as merged ranges."""
    cut = merge_ranges(remove)
    out: list[tuple[int, int]] = []
    first = 0
    for lo, hi in merge_ranges(ranges):
        while first < len(cut) and cut[first][1] < lo:
            first += 1
        index = first
        while index < len(cut) and cut[index][0] <= hi:
            cut_lo, cut_hi = cut[index]
            if cut_lo > lo:
                out.append((lo, cut_lo - 1))
            lo = max(lo, cut_hi + 1)
            index += 1
        if lo <= hi:
            out.append((lo, hi))
    return out


def without_surrogates(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` minus the surrogate block, which UTF-8 text never contains."""
    return subtract_ranges(ranges, [SURROGATES])


def gbnf_char_class(ranges: Iterable[tuple[int, int]], *, negated: bool = False) -> str:
    """A GBNF class `[...]` (or `[^...]`) from inclusive code-point ranges.

    Surrogates are left out; an empty negated class is written as ANY_CHAR, an empty
    class (which matches nothing) raises GrammarError.
    """
    parts: list[str] = []

    def add(code: int) -> None:
        # a hex digit right after a `\xNN` escape would be read as part of it by xgrammar
        after_escape = bool(parts) and parts[-1].startswith("\\x")
        if after_escape and chr(code) in _HEX_DIGIT:
            parts.append(f"\\x{code:02X}")
        else:
            parts.append(class_char(code))

    for lo, hi in without_surrogates(ranges):
        add(lo)
        if hi == lo + 1:
            add(hi)
        elif hi > lo:
            parts.append("-")
            add(hi)
    if not parts:
        if negated:
            return ANY_CHAR
        raise GrammarError("an empty character class cannot be expressed in GBNF")
    return ("[^" if negated else "[") + "".join(parts) + "]"


# --- grouping ------------------------------------------------------------------------------

# Literals and classes: what may hold parentheses, bars and spaces that are not structure.
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]', re.DOTALL)
# A group holding no other group (after the quoted pieces are gone).
_INNERMOST = re.compile(r"\([^()]*\)")
_SIMPLE_ATOM = re.compile(r'[a-zA-Z0-9-]+|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]', re.DOTALL)
# Expressions up to this long have their skeleton memoised; longer ones (a choice of a
# thousand calls) are read again, at the regex engine's speed, rather than kept.
_MEMO_LENGTH = 1024


def _skeleton(expr: str) -> str:
    """``expr`` with its quoted pieces removed and every group, innermost first, made a
    ``#``: what is left is its top level (an unbalanced parenthesis stays)."""
    text = _QUOTED.sub("", expr)
    while "(" in text:
        reduced = _INNERMOST.sub("#", text)
        if reduced == text:
            break
        text = reduced
    return text


@functools.lru_cache(maxsize=8192)
def _short_skeleton(expr: str) -> str:
    return _skeleton(expr)


def _top_level(expr: str) -> str:
    """What is outside every group of ``expr`` (see ``_skeleton``); memoised for short
    expressions: a grammar for many tools asks about the same small ones thousands of times."""
    return _short_skeleton(expr) if len(expr) <= _MEMO_LENGTH else _skeleton(expr)


def unwrap(expr: str) -> str:
    """`expr` without a redundant outer group: ``( a | b )`` -> ``a | b``.

    ``( a ) ( b )`` stays: its first group closes before the end.
    """
    if expr.startswith("( ") and expr.endswith(" )") and _top_level(expr) == "#":
        return expr[2:-2]
    return expr


def group(expr: str) -> str:
    """`expr` as one atom: unchanged when it already is one (a name, literal, class or a
    single group spanning the whole text), else wrapped in parentheses."""
    if _SIMPLE_ATOM.fullmatch(expr) or unwrap(expr) != expr:
        return expr
    return f"( {expr} )"


def sequence(parts: Iterable[str | None]) -> str:
    """The parts one after the other (None and `""` left out; none at all: `""`); a part
    that is a bare choice `a | b` is grouped."""
    kept = [p for p in parts if p is not None and p != '""']
    if not kept:
        return '""'
    # No "|" anywhere means none at the top level: most parts never need their outline.
    return " ".join(f"( {p} )" if "|" in p and "|" in _top_level(p) else p for p in kept)


def alternatives(options: Sequence[str]) -> str:
    """`( a | b )`, or the single option itself; duplicates dropped, order kept."""
    unique = list(dict.fromkeys(options))
    if not unique:
        raise ValueError("no alternatives")
    if len(unique) == 1:
        return unique[0]
    return "( " + " | ".join(unique) + " )"


# --- repetition ----------------------------------------------------------------------------


def _quantified_group(atom: str) -> str | None:
    """The inside of `( X+ )`-like groups (one quantified atom), else None.

    llguidance's GBNF import drops such parentheses and then writes `X+?`, which it cannot
    read back; gbnf_repeat() rewrites these groups instead of quantifying them.
    """
    if not (atom.startswith("( ") and atom.endswith(" )")):
        return None
    inner = atom[2:-2]
    if not inner.endswith(("+", "*", "?", "}")):
        return None
    if (" " in inner or "|" in inner) and (" " in _top_level(inner) or "|" in _top_level(inner)):
        return None
    return inner


def gbnf_repeat(item: str, low: int, high: int | None) -> str:
    """`item` repeated low..high times (high None: unbounded), bounds always with a low."""
    if high is not None and high < low:
        raise ValueError(f"empty repetition {low}..{high}")
    if high == 0:
        return '""'
    atom = group(item)
    if (low, high) == (1, 1):
        return atom
    inner = _quantified_group(atom)
    if inner is not None:
        if (low, high) == (0, 1):
            if inner.endswith("+"):
                return inner[:-1] + "*"
            if inner.endswith(("*", "?")):
                return inner
            return f'( "" | {inner} )'
        atom = f'( {inner} "" )'  # a sequence keeps its parentheses in every engine
    if high is None:
        return {0: f"{atom}*", 1: f"{atom}+"}.get(low, f"{atom}{{{low},}}")
    if (low, high) == (0, 1):
        return f"{atom}?"
    if high == low:
        return f"{atom}{{{low}}}"
    return f"{atom}{{{low},{high}}}"


def gbnf_optional(expr: str) -> str:
    """`expr` or nothing, written so every engine reads it."""
    return gbnf_repeat(expr, 0, 1)


# --- rules ---------------------------------------------------------------------------------


def rules_text(rules: Mapping[str, str]) -> str:
    """GBNF lines `name ::= body`, one per rule, in the mapping's order."""
    return "".join(f"{name} ::= {body}\n" for name, body in rules.items())


def fresh_name(base: str, taken: Callable[[str], bool]) -> str:
    """`base`, or `base-2`, `base-3`... : the first name that is not taken."""
    name, counter = base, 2
    while taken(name):
        name = f"{base}-{counter}"
        counter += 1
    return name


# --- rule names ----------------------------------------------------------------------------

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NAME_JUNK = re.compile(r"[^A-Za-z0-9]+")


@functools.lru_cache(maxsize=8192)
def name_part(text: str) -> str:
    """`text` as lowercase letters, digits and single dashes (maybe empty), for rule names.

    Lowercase because llguidance folds names to snake case: distinct names here must stay
    distinct there. camelCase words are split with a dash. Memoised: a request's tools
    repeat their parameters' names.
    """
    return _NAME_JUNK.sub("-", _CAMEL.sub(r"\1-\2", text)).strip("-").lower()


def rule_name(text: str) -> str:
    """A whole GBNF rule name from `text`: name_part(), starting with a letter."""
    name = name_part(text)
    if name[:1].isdigit():
        name = "r-" + name  # some engines want a letter first
    return name or "rule"
