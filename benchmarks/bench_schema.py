"""Benchmark: JSON Schema -> GBNF conversion time for large tool schemas.

Cases: one object with 500 properties, and 128 tools x 10 parameters (each tool converted
with schema_rules under its own prefix, as a tool-call grammar does). The baseline,
measured in the same run, is json.dumps of the same schemas: the ratio says how many
times a plain serialisation of the input the conversion costs. Targets: 50 ms and 100 ms.

Usage: python benchmarks/bench_schema.py [--smoke]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from timing import median_of

from autoparser.schema import schema_rules, schema_to_gbnf

PARAMETER_KINDS: list[dict[str, Any]] = [
    {"type": "string", "description": "free text"},
    {"type": "integer", "minimum": 0, "maximum": 10000},
    {"type": "number", "minimum": 0},
    {"type": "boolean"},
    {"type": "string", "enum": ["low", "medium", "high", "critical"]},
    {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    {"type": "string", "format": "date-time"},
    {
        "type": "object",
        "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
        "required": ["lat", "lon"],
        "additionalProperties": False,
    },
    {"type": ["string", "null"], "maxLength": 64},
    {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
]


def wide_schema(count: int) -> dict[str, Any]:
    """One object with `count` properties, every third required."""
    names = [f"field_{i:03d}" for i in range(count)]
    return {
        "type": "object",
        "properties": {n: PARAMETER_KINDS[i % len(PARAMETER_KINDS)] for i, n in enumerate(names)},
        "required": names[::3],
        "additionalProperties": False,
    }


def tools(count: int, parameters: int) -> list[dict[str, Any]]:
    """`count` tool parameter schemas with `parameters` parameters, two required."""
    out = []
    for t in range(count):
        names = [f"t{t}_arg_{p}" for p in range(parameters)]
        out.append(
            {
                "type": "object",
                "properties": {
                    n: PARAMETER_KINDS[(t + p) % len(PARAMETER_KINDS)] for p, n in enumerate(names)
                },
                "required": names[:2],
                "additionalProperties": False,
            }
        )
    return out


def median_ms(action: Callable[[], object], repeats: int) -> float:
    action()  # warm-up: caches, imports
    return median_of(action, repeats) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="few repetitions (CI)")
    args = parser.parse_args()
    repeats = 3 if args.smoke else 25

    wide = wide_schema(500)
    many = tools(128, 10)

    def convert_tools() -> None:
        for i, schema in enumerate(many):
            schema_rules(schema, f"tool-{i}")

    cases: list[tuple[str, Callable[[], object], Callable[[], object], float]] = [
        ("500-property schema", lambda: schema_to_gbnf(wide), lambda: json.dumps(wide), 50.0),
        ("128 tools x 10 params", convert_tools, lambda: [json.dumps(s) for s in many], 100.0),
    ]
    print(f"bench_schema ({'smoke' if args.smoke else 'full'}, median of {repeats})")
    print(f"{'case':<24}{'convert ms':>12}{'json.dumps ms':>15}{'ratio':>9}{'target':>10}")
    for name, action, baseline, target in cases:
        ms = median_ms(action, repeats)
        base = median_ms(baseline, repeats)
        verdict = "ok" if ms < target else "SLOW"
        print(f"{name:<24}{ms:>12.2f}{base:>15.3f}{ms / base:>8.0f}x{target:>7.0f} ms {verdict}")
    grammar = schema_to_gbnf(wide)
    print(f"500-property grammar: {len(grammar)} bytes, {grammar.count(chr(10))} rules")


if __name__ == "__main__":
    main()
