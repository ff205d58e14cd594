"""PEG parser benchmarks: ratios against stdlib baselines measured in the same run.

    python benchmarks/bench_peg.py            # full sizes (1 MB JSON / until, 100 kB stream)
    python benchmarks/bench_peg.py --smoke    # quick CI run, same figures at smaller sizes

Figures: full-mode JSON parse vs json.loads; truncated JSON (partial mode, the resumable
scanner, which skips complete nested values with the C decoder) and the scanner alone vs
json.loads of the complete document; until() vs str.find; an incremental parse
fed in 4-byte steps, total time at N and 4N bytes (linear cost means a ratio near 4).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import timing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.peg_example import chat_parser

from autoparser.peg import (
    Parser,
    json_object,
    json_scan,
    json_value,
    tag,
    until,
    zero_or_more,
)
from autoparser.peg import end as end_of_input


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Best CPU time of `repeats` runs (CPU time: the machine may be shared)."""
    return timing.best_of(fn, repeats, time.process_time)


def json_document(size: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    items = []
    total = 0
    while total < size:
        item = {
            "id": rng.randint(0, 10**9),
            "name": "".join(rng.choice("abcdefghij ") for _ in range(rng.randint(5, 30))),
            "score": rng.random() * 1000,
            "tags": [rng.choice(["x", "y", "zé", "→"]) for _ in range(rng.randint(0, 5))],
            "nested": {"ok": rng.random() < 0.5, "none": None, "list": [1, 2.5, -3e-3]},
            "text": 'line\nwith "quotes" and \\ backslash ' * rng.randint(0, 3),
        }
        items.append(item)
        total += len(json.dumps(item)) + 2
    return json.dumps({"items": items}, indent=1, ensure_ascii=False)


def chat_output(size: int) -> str:
    words = ["the", "model", "thinks", "about", "<b>tags</b>", "and", "</thin", "k>", "é", "→"]
    rng = random.Random(2)

    def prose(n: int) -> str:
        out: list[str] = []
        length = 0
        while length < n:
            w = rng.choice(words)
            out.append(w)
            length += len(w) + 1
        return " ".join(out)

    args = json.dumps({"code": prose(size * 3 // 10), "n": [1, 2, {"k": "v"}]})
    return (
        f"<think>{prose(size * 4 // 10)}</think>{prose(size * 3 // 10)}"
        f"<tool_call>{args}</tool_call>"
    )


def jsonl(size: int) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        lines.append(json.dumps({"i": len(lines), "text": "x" * 20, "ok": True}) + "\n")
        total += len(lines[-1])
    return "".join(lines)


def stream(parser: Parser, text: str, step: int) -> None:
    inc = parser.incremental()
    for i in range(0, len(text), step):
        inc.feed(text[i : i + step])
    res = inc.finish()
    assert res.success, res


def feed_only(parser: Parser, text: str, step: int) -> None:
    inc = parser.incremental()
    for i in range(0, len(text), step):
        res = inc.feed(text[i : i + step])
    assert res.need_more_input, res


def print_scaling(
    label: str, run: Callable[[str], None], inputs: tuple[str, str], repeats: int, note: str
) -> None:
    """Time `run` on an input and on one 4x as large; print both times and their ratio."""
    small, large = inputs
    t_small = best_of(lambda: run(small), repeats)
    t_large = best_of(lambda: run(large), repeats)
    print(
        f"incremental {label:<5} {len(small) / 1e3:5.0f} kB {t_small * 1e3:8.1f} ms, "
        f"{len(large) / 1e3:5.0f} kB {t_large * 1e3:8.1f} ms: 4x input -> "
        f"{t_large / t_small:5.2f}x time ({note})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="small sizes, one repeat (for CI)")
    args = ap.parse_args()
    json_size = 100_000 if args.smoke else 1_000_000
    stream_size = 25_000 if args.smoke else 100_000
    repeats = 1 if args.smoke else 5

    print(f"PEG benchmarks ({'smoke' if args.smoke else 'full'} run)")

    doc = json_document(json_size)
    jv = json_value()
    assert jv.parse(doc).pos == len(doc)
    t_loads = best_of(lambda: json.loads(doc), repeats)
    t_peg = best_of(lambda: jv.parse(doc), repeats)
    print(
        f"json full parse   {len(doc) / 1e6:5.2f} MB  peg {t_peg * 1e3:8.2f} ms  "
        f"json.loads {t_loads * 1e3:8.2f} ms  ratio {t_peg / t_loads:6.2f}x"
    )
    truncated = doc[:-3]
    assert jv.parse(truncated, partial=True).need_more_input
    t_scan = best_of(lambda: jv.parse(truncated, partial=True), repeats)
    print(
        f"json partial scan {len(doc) / 1e6:5.2f} MB  peg {t_scan * 1e3:8.2f} ms  "
        f"json.loads {t_loads * 1e3:8.2f} ms  ratio {t_scan / t_loads:6.2f}x"
    )

    t_pure = best_of(lambda: json_scan.scan(truncated, 0, "value", True, False, fast=False), 1)
    print(
        f"json scanner only {len(doc) / 1e6:5.2f} MB  peg {t_pure * 1e3:8.2f} ms  "
        f"json.loads {t_loads * 1e3:8.2f} ms  ratio {t_pure / t_loads:6.2f}x  "
        "(worst case: no C decoder)"
    )

    filler = ("lorem ipsum <b>dolor</b> </thinking sit amet é→ " * (json_size // 40))[:json_size]
    text = filler + "</think>"
    u = until("</think>")
    assert u.parse(text).pos == len(filler)
    t_find = best_of(lambda: text.find("</think>"), repeats)
    t_until = best_of(lambda: u.parse(text), repeats)
    print(
        f"until scan        {len(text) / 1e6:5.2f} MB  peg {t_until * 1e3:8.3f} ms  "
        f"str.find   {t_find * 1e3:8.3f} ms  ratio {t_until / t_find:6.2f}x"
    )

    parser = chat_parser()
    small = chat_output(stream_size)
    large = chat_output(stream_size * 4)
    t_small = best_of(lambda: stream(parser, small, 4), max(1, repeats - 2))
    t_large = best_of(lambda: stream(parser, large, 4), max(1, repeats - 2))
    t_oneshot = best_of(lambda: parser.parse(small), repeats)
    print(
        f"incremental 4 B   {len(small) / 1e3:6.0f} kB  {t_small * 1e3:8.1f} ms "
        f"({t_small / (len(small) / 4) * 1e6:5.1f} us/feed; one-shot parse "
        f"{t_oneshot * 1e3:6.2f} ms)"
    )
    print(
        f"incremental 4 B   {len(large) / 1e3:6.0f} kB  {t_large * 1e3:8.1f} ms "
        f"({t_large / (len(large) / 4) * 1e6:5.1f} us/feed)"
    )
    print(f"incremental scaling 4x input -> {t_large / t_small:5.2f}x time (linear: ~4x)")

    lines = zero_or_more(json_object() + "\n") + end_of_input()
    print_scaling(
        "JSONL",
        lambda text: stream(lines, text, 4),
        (jsonl(stream_size), jsonl(stream_size * 4)),
        max(1, repeats - 2),
        "many repetition items",
    )
    nested = tag("v", json_value())
    small, large = '[{"a":' * (stream_size // 60), '[{"a":' * (stream_size * 4 // 60)
    print_scaling(
        "deep",
        lambda text: feed_only(nested, text, 4),
        (small, large),
        max(1, repeats - 2),
        f"JSON nested {len(large) // 6} deep, closer per feed",
    )


if __name__ == "__main__":
    main()
