"""Exact numeric ranges: integer and decimal bounds as digit-by-digit grammar rules."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from helpers.gbnf_oracle import accepts

from autoparser.schema import schema_to_gbnf
from autoparser.schema.ranges import integer_range, natural_range, number_range


def _root(expression: str) -> str:
    """A grammar of the expression in its own rule, as the converter embeds it (llguidance
    reads a non-recursive rule as one lexeme; inline in ``root`` its greedy lexer would split
    ``[1-9] [0-9] | "250"`` into lexemes and refuse "25")."""
    return f"root ::= number\nnumber ::= {expression}\n"


@pytest.mark.parametrize(("lo", "hi"), [(0, 9), (7, 7), (3, 250), (95, 1005), (0, 0)])
def test_natural_ranges_match_exactly_the_canonical_decimals(lo: int, hi: int) -> None:
    grammar = _root("( " + " | ".join(f"( {s} )" for s in natural_range(lo, hi)) + " )")
    wrong = [n for n in range(0, 1100) if accepts(grammar, str(n)) != (lo <= n <= hi)]
    assert wrong == []
    assert not accepts(grammar, f"0{lo}")  # no leading zeros


def test_an_unbounded_natural_range_has_no_top() -> None:
    grammar = _root("( " + " | ".join(f"( {s} )" for s in natural_range(42, None)) + " )")
    assert not accepts(grammar, "41") and accepts(grammar, "42")
    assert accepts(grammar, "9" * 30) and not accepts(grammar, "042")


@pytest.mark.parametrize(("lo", "hi"), [(-5, 3), (None, -10), (12, None), (None, None)])
def test_integer_range_spans_the_sign(lo: int | None, hi: int | None) -> None:
    grammar = _root(integer_range(lo, hi))
    for n in range(-40, 40):
        inside = (lo is None or n >= lo) and (hi is None or n <= hi)
        assert accepts(grammar, str(n)) == inside, n
    assert not accepts(grammar, "-0") or (lo is None or lo <= 0)


def test_empty_ranges_are_refused() -> None:
    with pytest.raises(ValueError, match="empty integer range"):
        integer_range(5, 4)
    with pytest.raises(ValueError, match="bad natural range"):
        natural_range(-1, 3)
    with pytest.raises(ValueError, match="empty number range"):
        number_range(Decimal(1), False, Decimal(1), False)


def test_number_range_keeps_inclusive_and_exclusive_bounds_apart() -> None:
    closed = _root(number_range(Decimal("0.5"), True, Decimal(2), True))
    opened = _root(number_range(Decimal("0.5"), False, Decimal(2), False))
    for text in ("0.5", "2", "2.0"):
        assert accepts(closed, text) and not accepts(opened, text), text
    for text in ("0.51", "1", "1.99"):
        assert accepts(closed, text) and accepts(opened, text), text


@pytest.mark.parametrize(
    ("schema", "window"),
    [
        ({"minimum": 3, "maximum": 250}, range(-20, 1100)),
        ({"minimum": -1234, "maximum": -17}, range(-1300, 30)),
        ({"exclusiveMinimum": -10, "exclusiveMaximum": 10}, range(-30, 30)),
        ({"minimum": 99}, range(0, 1200)),
        ({"maximum": -100}, range(-1200, 50)),
        ({"minimum": 0, "maximum": 0}, range(-5, 5)),
        ({"minimum": 1.5, "maximum": 20.5}, range(-5, 30)),
    ],
)
def test_integer_ranges_are_exact(schema: dict[str, Any], window: range) -> None:
    grammar = schema_to_gbnf({"type": "integer", **schema})
    lo = schema.get("minimum", schema.get("exclusiveMinimum", -(10**9)))
    hi = schema.get("maximum", schema.get("exclusiveMaximum", 10**9))
    wrong = []
    for n in window:
        inside = (n > lo if "exclusiveMinimum" in schema else n >= lo) and (
            n < hi if "exclusiveMaximum" in schema else n <= hi
        )
        if accepts(grammar, str(n)) != inside:
            wrong.append(n)
    assert not wrong
    assert not accepts(grammar, "007") and not accepts(grammar, "1.0")


@pytest.mark.parametrize(
    ("schema", "inside", "outside"),
    [
        (
            {"minimum": 0, "maximum": 1},
            ["0", "0.0", "0.5", "1", "1.0", "1.000", "5e-05", "0e-1", "9.99e-1"],
            ["-0.5", "1.01", "1.5", "2", "-1", "1e+16", "5e-0"],
        ),
        (
            {"exclusiveMinimum": 0},
            ["0.001", "1", "1e+16", "1.5e-07", "123456789.5"],
            ["0", "0.0", "-1", "-0.5", "0e-5"],
        ),
        (
            {"minimum": -50, "exclusiveMaximum": -2},
            ["-50", "-50.0", "-49.99", "-2.01", "-3"],
            ["-50.01", "-51", "-2", "-2.0", "-1.5", "0", "3"],
        ),
        (
            {"maximum": 7},
            ["7", "6.99", "0", "-1e+20", "-123.5", "1e-09"],
            ["7.01", "8", "1e+16"],
        ),
    ],
)
def test_number_bounds(schema: dict[str, Any], inside: list[str], outside: list[str]) -> None:
    grammar = schema_to_gbnf({"type": "number", **schema})
    assert [s for s in inside if not accepts(grammar, s)] == []
    assert [s for s in outside if accepts(grammar, s)] == []


FRACTIONAL_BOUNDS = [
    {"minimum": 0.1, "maximum": 2.5},
    {"exclusiveMinimum": -1.25, "exclusiveMaximum": 0.75},
    {"minimum": 3.14159},
    {"exclusiveMaximum": -0.001},
    {"minimum": 0.25, "exclusiveMaximum": 0.3},
    {"minimum": 1.5, "maximum": 1.5},
    {"exclusiveMinimum": 10.05, "maximum": 12},
]


PROBES = sorted(
    {f"{sign}{whole}{frac}" for sign in ("", "-") for whole in (0, 1, 2, 3, 10, 12)
     for frac in ("", ".0", ".001", ".05", ".1", ".14159", ".1416", ".24", ".25", ".2999",
                  ".3", ".5", ".75", ".7500", ".76", ".9", ".999")}
)  # fmt: skip


@pytest.mark.parametrize("bounds", FRACTIONAL_BOUNDS)
def test_fractional_number_bounds_are_exact(bounds: dict[str, float]) -> None:
    from decimal import Decimal

    grammar = schema_to_gbnf({"type": "number", **bounds})
    checks = {
        "minimum": lambda v, b: v >= b,
        "maximum": lambda v, b: v <= b,
        "exclusiveMinimum": lambda v, b: v > b,
        "exclusiveMaximum": lambda v, b: v < b,
    }
    wrong = [
        probe
        for probe in PROBES
        if accepts(grammar, probe)
        != all(checks[k](Decimal(probe), Decimal(str(b))) for k, b in bounds.items())
    ]
    assert wrong == []
