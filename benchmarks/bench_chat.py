"""Chat output parsing benchmark on ../shared/bench, next to llama.cpp's reference figures.

    python benchmarks/bench_chat.py            # every bench template, 5 repeats
    python benchmarks/bench_chat.py --smoke    # three templates, 1 repeat (CI)

For each template: building the request's parameters (analysis + parser + grammar), the
median full parse of the 1x output, and the total time to stream the 1x and 8x outputs in
4-byte chunks (backed off to UTF-8 boundaries, as the reference protocol). The 8x/1x
streaming ratio shows the cost growth (linear: about the length ratio, ~8; the reference
re-parses every prefix: 18-51). Baseline measured in the same run: a floor for any Python
stream parser, feeding the same chunks to a loop that appends them and searches the
marker of the format with str.find from where it stopped.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent.parent / "shared" / "bench"
TEMPLATES = BENCH.parent / "templates"


def chunks_of(text: str, size: int = 4) -> list[str]:
    data = text.encode("utf-8")
    out = []
    i = 0
    while i < len(data):
        j = min(i + size, len(data))
        while j < len(data) and (data[j] & 0xC0) == 0x80:
            j += 1
        out.append(data[i:j].decode("utf-8"))
        i = j
    return out


def timed(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def reference_figures() -> dict[str, tuple[float, float, float]]:
    """template -> (parse 1x us, stream 1x ms, stream 8x ms) from the bench README table."""
    out: dict[str, tuple[float, float, float]] = {}
    readme = BENCH / "README.md"
    if not readme.exists():
        return out
    row = re.compile(r"^\|\s*([\w.\-]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|")
    for line in readme.read_text(encoding="utf-8").splitlines():
        m = row.match(line)
        if m:
            out[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(4)))
    return out


def baseline_stream(chunks: list[str], marker: str) -> None:
    text = ""
    pos = 0
    for chunk in chunks:
        text += chunk
        found = text.find(marker, pos)
        pos = found if found >= 0 else max(0, len(text) - len(marker))


def run_stream(params: Any, chunks: list[str]) -> None:
    stream = params.stream()
    for chunk in chunks:
        stream.feed(chunk)
    stream.finish()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true", help="quick run (3 templates, 1 repeat)")
    args = ap.parse_args()
    if not BENCH.is_dir():
        print(f"bench data not found at {BENCH}; nothing to measure")
        return 0
    from autoparser.template import ChatTemplate

    refs = reference_figures()
    names = sorted({p.name.split(".1x")[0] for p in BENCH.glob("*.1x.txt")})
    if args.smoke:
        names = [n for n in names if n in ("Qwen-Qwen3-0.6B", "Qwen3-Coder", "moonshotai-Kimi-K2")]
    repeats = 1 if args.smoke else 5
    print(
        f"{'template':44} {'build ms':>8} {'parse1x us':>10} {'(ref)':>7} {'stream1x ms':>11} "
        f"{'(ref)':>6} {'stream8x ms':>11} {'(ref)':>6} {'8x/1x':>6} {'(ref)':>5} {'vs floor':>8}"
    )
    worst = 0.0
    for name in names:
        path = TEMPLATES / f"{name}.jinja"
        if not path.exists():
            print(f"{name:44} template not in ../shared/templates")
            continue
        meta = json.loads((BENCH / f"{name}.1x.meta.json").read_text(encoding="utf-8"))
        inputs = meta["inputs"]
        template = ChatTemplate.from_file(path)
        try:
            t0 = time.perf_counter()
            params = template.apply(
                inputs["messages"], tools=inputs.get("tools"), enable_thinking=True
            )
            build = time.perf_counter() - t0
        except Exception as exc:  # report and continue with the other templates
            print(f"{name:44} apply failed: {type(exc).__name__}: {exc}"[:160])
            continue
        text1 = (BENCH / f"{name}.1x.txt").read_text(encoding="utf-8")
        text8 = (BENCH / f"{name}.8x.txt").read_text(encoding="utf-8")
        parse1 = timed(partial(params.parse, text1), repeats * 3)
        c1, c8 = chunks_of(text1), chunks_of(text8)
        s1 = timed(partial(run_stream, params, c1), repeats)
        s8 = timed(partial(run_stream, params, c8), repeats)
        marker = params.grammar_triggers[0].value if params.grammar_triggers else "\x00"
        floor = timed(partial(baseline_stream, c8, marker), repeats)
        ratio = s8 / s1
        worst = max(worst, ratio)
        ref = refs.get(name)
        ref_cols = (
            (f"{ref[0]:7.1f}", f"{ref[1]:6.1f}", f"{ref[2]:6.0f}", f"{ref[2] / ref[1]:5.0f}")
            if ref
            else ("-",) * 4
        )
        print(
            f"{name:44} {build * 1e3:8.1f} {parse1 * 1e6:10.0f} {ref_cols[0]:>7} "
            f"{s1 * 1e3:11.1f} {ref_cols[1]:>6} {s8 * 1e3:11.1f} {ref_cols[2]:>6} "
            f"{ratio:6.1f} {ref_cols[3]:>5} {s8 / floor:7.0f}x"
        )
    print(f"worst 8x/1x streaming ratio: {worst:.1f} (target <= 10; reference 18-51)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
