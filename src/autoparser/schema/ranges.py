"""Exact numeric ranges as GBNF: digit-by-digit rules for integer and decimal bounds.

JSON numbers are text, so `minimum: 3, maximum: 250` becomes the decimal strings from "3"
to "250" without leading zeros. The construction splits the range by digit count and then
by leading digit, the classic regex-range technique, giving a grammar linear in the
number of digits.
"""

from __future__ import annotations

from decimal import Decimal

from autoparser.gbnf_text import alternatives, gbnf_literal, gbnf_optional, group, sequence

_DIGIT = "[0-9]"
_FRACTION = '( "." [0-9]+ )'


def _digits(count: int) -> list[str]:
    if count == 0:
        return []
    return [_DIGIT if count == 1 else f"{_DIGIT}{{{count}}}"]


def _digit_class(lo: int, hi: int) -> str:
    return gbnf_literal(str(lo)) if lo == hi else f"[{lo}-{hi}]"


def _same_length(lo: str, hi: str) -> list[list[str]]:
    """Sequences matching every digit string of len(lo) between lo and hi (inclusive)."""
    if not lo:
        return [[]]
    if lo == hi:
        return [[gbnf_literal(lo)]]
    if lo[0] == hi[0]:
        return [[gbnf_literal(lo[0]), *rest] for rest in _same_length(lo[1:], hi[1:])]
    width = len(lo) - 1
    low_tail_min = lo[1:] == "0" * width
    high_tail_max = hi[1:] == "9" * width
    out: list[list[str]] = []
    first = int(lo[0]) if low_tail_min else int(lo[0]) + 1
    last = int(hi[0]) if high_tail_max else int(hi[0]) - 1
    if not low_tail_min:
        out += [[gbnf_literal(lo[0]), *rest] for rest in _same_length(lo[1:], "9" * width)]
    if first <= last:
        out.append([_digit_class(first, last), *_digits(width)])
    if not high_tail_max:
        out += [[gbnf_literal(hi[0]), *rest] for rest in _same_length("0" * width, hi[1:])]
    return out


def _join(items: list[str]) -> str:
    merged: list[str] = []
    for item in items:  # "1" "2" -> "12" for readability
        if merged and item.startswith('"') and merged[-1].startswith('"'):
            merged[-1] = merged[-1][:-1] + item[1:]
        else:
            merged.append(item)
    return " ".join(merged) if merged else '""'


def natural_range(lo: int, hi: int | None) -> list[str]:
    """GBNF sequences matching the canonical decimals of lo..hi (hi None = unbounded)."""
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"bad natural range {lo}..{hi}")
    out: list[str] = []
    lo_len = len(str(lo))
    top_len = len(str(hi)) if hi is not None else lo_len
    for length in range(lo_len, top_len + 1):
        start = max(lo, 10 ** (length - 1) if length > 1 else 0)
        end = 10**length - 1 if hi is None else min(hi, 10**length - 1)
        out += [_join(seq) for seq in _same_length(str(start), str(end).zfill(length))]
    if hi is None:
        out.append(f"[1-9] [0-9]{{{lo_len},}}")
    return out


def integer_range(lo: int | None, hi: int | None) -> str:
    """A GBNF expression for JSON integers n with lo <= n <= hi (None = unbounded)."""
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"empty integer range {lo}..{hi}")
    options: list[str] = []
    if hi is None or hi >= 0:
        options += natural_range(max(lo, 0) if lo is not None else 0, hi)
    if lo is None or lo < 0:
        low_mag = max(1, -hi) if hi is not None else 1
        high_mag = -lo if lo is not None else None
        options.append('"-" ' + alternatives(natural_range(low_mag, high_mag)))
    return alternatives([group(o) for o in options])


# A fraction is the digit string D after the point; these return (whether D may be empty,
# GBNF for the non-empty D allowed, or None) so "." is only written before digits.
Fraction = tuple[bool, "str | None"]


def _then(digit: str, rest: Fraction) -> str | None:
    """One literal digit followed by a fraction rest (possibly empty)."""
    empty_ok, expr = rest
    if expr is None:
        return gbnf_literal(digit) if empty_ok else None
    return (
        f"{gbnf_literal(digit)} {gbnf_optional(expr)}"
        if empty_ok
        else f"{gbnf_literal(digit)} {expr}"
    )


def _digits_between(low: int, high: int) -> str | None:
    """One digit in low..high followed by any digits."""
    if low > high:
        return None
    return f"{_digit_class(low, high)} [0-9]*"


def _join_options(options: list[str | None]) -> str | None:
    kept = [o for o in options if o is not None]
    return alternatives([group(o) for o in kept]) if kept else None


def _at_least(f: str, strict: bool) -> Fraction:
    """Fractions D with 0.D >= 0.f (> when strict); f has no trailing zeros."""
    if not f:
        return (False, '"0"* [1-9] [0-9]*') if strict else (True, "[0-9]+")
    first = int(f[0])
    return False, _join_options(
        [_digits_between(first + 1, 9), _then(f[0], _at_least(f[1:], strict))]
    )


def _at_most(g: str, strict: bool) -> Fraction:
    """Fractions D with 0.D <= 0.g (< when strict); g has no trailing zeros."""
    if not g:
        return (False, None) if strict else (True, '"0"+')
    first = int(g[0])
    return True, _join_options(
        [_digits_between(0, first - 1), _then(g[0], _at_most(g[1:], strict))]
    )


def _between(f: str, g: str, low_strict: bool, high_strict: bool) -> Fraction:
    """Fractions D with 0.f <(=) 0.D <(=) 0.g, for 0.f <= 0.g."""
    if not f and not g:
        return (False, None) if low_strict or high_strict else (True, '"0"+')
    if not f and not low_strict:
        return _at_most(g, high_strict)
    low, high = (int(f[0]) if f else 0), int(g[0])
    if low == high:
        return False, _then(str(low), _between(f[1:], g[1:], low_strict, high_strict))
    return False, _join_options(
        [
            _then(str(low), _at_least(f[1:], low_strict)),
            _digits_between(low + 1, high - 1),
            _then(str(high), _at_most(g[1:], high_strict)),
        ]
    )


def _split(value: Decimal) -> tuple[int, str]:
    """(integer part, fraction digits without trailing zeros) of a non-negative decimal."""
    text = format(value, "f")
    whole, _, fraction = text.partition(".")
    return int(whole), fraction.rstrip("0")


def _with_fraction(whole: int, fraction: Fraction) -> str | None:
    empty_ok, expr = fraction
    if expr is None:
        return gbnf_literal(str(whole)) if empty_ok else None
    tail = sequence([gbnf_literal("."), expr])
    return sequence([gbnf_literal(str(whole)), gbnf_optional(tail) if empty_ok else tail])


def _magnitude(
    lo: Decimal, lo_inclusive: bool, hi: Decimal | None, hi_inclusive: bool
) -> list[str]:
    """Sequences for unsigned decimals m with lo <(=) m <(=) hi."""
    low_whole, low_frac = _split(lo)
    options: list[str | None] = []
    if hi is not None and int(hi) == low_whole:
        high_frac = _split(hi)[1]
        options.append(
            _with_fraction(
                low_whole, _between(low_frac, high_frac, not lo_inclusive, not hi_inclusive)
            )
        )
    else:
        options.append(_with_fraction(low_whole, _at_least(low_frac, not lo_inclusive)))
        top = None if hi is None else int(hi) - 1
        if top is None or top >= low_whole + 1:
            inner = alternatives(natural_range(low_whole + 1, top))
            options.append(f"{inner} {_FRACTION}?")
        if hi is not None:
            high_whole, high_frac = _split(hi)
            options.append(_with_fraction(high_whole, _at_most(high_frac, not hi_inclusive)))
    mantissa = '[1-9] ( "." [0-9]+ )?'
    if lo == 0 and (hi is None or hi > 0):
        # d.ddd e-N is below 10^(1-N): within bounds once 10^(1-N) <= hi
        least = 1
        while hi is not None and Decimal(10) ** (1 - least) > hi:
            least += 1
        zero_ok = '[0-9] ( "." [0-9]+ )?' if lo_inclusive else mantissa
        power = alternatives(natural_range(least, None))
        options.append(f'{zero_ok} [eE] "-" "0"* {power}')
    if hi is None:
        # d.ddd e+N with d >= 1 is at least 10^N, above lo when N >= digits of lo
        power = alternatives(natural_range(len(str(low_whole)), None))
        options.append(f'{mantissa} [eE] "+"? {power}')
    return [o for o in options if o is not None]


def number_range(
    lo: Decimal | None, lo_inclusive: bool, hi: Decimal | None, hi_inclusive: bool
) -> str:
    """A GBNF expression for JSON numbers within decimal bounds (None = unbounded)."""
    zero = Decimal(0)
    options: list[str] = []
    if hi is None or hi > 0 or (hi == 0 and hi_inclusive):
        if lo is None or lo < 0:
            options += _magnitude(zero, True, hi, hi_inclusive)
        else:
            options += _magnitude(lo, lo_inclusive, hi, hi_inclusive)
    if lo is None or lo < 0:
        top = None if lo is None else -lo
        if hi is None or hi > 0:
            mags = _magnitude(zero, True, top, lo_inclusive)
        else:
            mags = _magnitude(-hi, hi_inclusive, top, lo_inclusive)
        if mags:
            options.append('"-" ' + alternatives([f"( {m} )" for m in mags]))
    if not options:
        raise ValueError("empty number range")
    return alternatives([f"( {o} )" for o in options])
