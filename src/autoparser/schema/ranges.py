"""Exact numeric ranges as GBNF: digit-by-digit rules for integer and decimal bounds.

JSON numbers are text, so `minimum: 3, maximum: 250` becomes the decimal strings from "3"
to "250" without leading zeros. The construction splits the range by digit count and then
by leading digit, the classic regex-range technique, giving a grammar linear in the
number of digits.
"""

from __future__ import annotations

from autoparser.schema.gbnf import alternatives, literal

_DIGIT = "[0-9]"
_FRACTION = '( "." [0-9]+ )'
_ZERO_FRACTION = '( "." "0"+ )'
_NONZERO_FRACTION = '( "." [0-9]* [1-9] [0-9]* )'


def _digits(count: int) -> list[str]:
    if count == 0:
        return []
    return [_DIGIT if count == 1 else f"{_DIGIT}{{{count}}}"]


def _digit_class(lo: int, hi: int) -> str:
    return literal(str(lo)) if lo == hi else f"[{lo}-{hi}]"


def _same_length(lo: str, hi: str) -> list[list[str]]:
    """Sequences matching every digit string of len(lo) between lo and hi (inclusive)."""
    if not lo:
        return [[]]
    if lo == hi:
        return [[literal(lo)]]
    if lo[0] == hi[0]:
        return [[literal(lo[0]), *rest] for rest in _same_length(lo[1:], hi[1:])]
    width = len(lo) - 1
    low_tail_min = lo[1:] == "0" * width
    high_tail_max = hi[1:] == "9" * width
    out: list[list[str]] = []
    first = int(lo[0]) if low_tail_min else int(lo[0]) + 1
    last = int(hi[0]) if high_tail_max else int(hi[0]) - 1
    if not low_tail_min:
        out += [[literal(lo[0]), *rest] for rest in _same_length(lo[1:], "9" * width)]
    if first <= last:
        out.append([_digit_class(first, last), *_digits(width)])
    if not high_tail_max:
        out += [[literal(hi[0]), *rest] for rest in _same_length("0" * width, hi[1:])]
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
    return alternatives([f"( {o} )" if " " in o and not o.startswith("(") else o for o in options])


def _magnitude(
    lo: int, lo_inclusive: bool, hi: int | None, hi_inclusive: bool, *, exponents: bool
) -> list[str]:
    """Sequences for unsigned decimals m with lo <(=) m <(=) hi, integer lo and hi."""
    out: list[str] = []
    if hi is not None and hi == lo:
        return [f"{literal(str(lo))} {_ZERO_FRACTION}?"] if lo_inclusive and hi_inclusive else []
    # lo itself as the integer part: any fraction when inclusive, a non-zero one otherwise
    if lo_inclusive:
        out.append(f"{literal(str(lo))} {_FRACTION}?")
    else:
        out.append(f"{literal(str(lo))} {_NONZERO_FRACTION}")
    if hi is None or hi - 1 >= lo + 1:
        inner = alternatives(natural_range(lo + 1, None if hi is None else hi - 1))
        out.append(f"{inner} {_FRACTION}?")
    if hi is not None and hi_inclusive:
        out.append(f"{literal(str(hi))} {_ZERO_FRACTION}?")
    if exponents:
        mantissa = '[1-9] ( "." [0-9]+ )?'
        if lo == 0 and (hi is None or hi >= 1):
            # d.ddd e-N with N >= 1 is below 1, and at least 0
            zero_ok = '[0-9] ( "." [0-9]+ )?' if lo_inclusive else mantissa
            out.append(f'{zero_ok} [eE] "-" "0"* [1-9] [0-9]*')
        if hi is None:
            # d.ddd e+N with d >= 1 is at least 10^N, above lo when N >= digits of lo
            power = alternatives(natural_range(len(str(lo)), None))
            out.append(f'{mantissa} [eE] "+"? {power}')
    return out


def number_range(lo: int | None, lo_inclusive: bool, hi: int | None, hi_inclusive: bool) -> str:
    """A GBNF expression for JSON numbers within integer bounds (None = unbounded)."""
    options: list[str] = []
    if hi is None or hi > 0 or (hi == 0 and hi_inclusive):
        if lo is None or lo < 0:
            options += _magnitude(0, True, hi, hi_inclusive, exponents=True)
        else:
            options += _magnitude(lo, lo_inclusive, hi, hi_inclusive, exponents=True)
    if lo is None or lo < 0:
        top = None if lo is None else -lo
        if hi is None or hi > 0:
            mags = _magnitude(0, True, top, lo_inclusive, exponents=True)
        else:
            mags = _magnitude(-hi, hi_inclusive, top, lo_inclusive, exponents=True)
        if mags:
            options.append('"-" ' + alternatives([f"( {m} )" for m in mags]))
    if not options:
        raise ValueError("empty number range")
    return alternatives([f"( {o} )" for o in options])
