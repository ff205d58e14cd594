"""One-shot parse benchmark on ../shared/bench: ``ChatParams.parse`` against a stream.

    python benchmarks/bench_parse.py            # every bench input, 1x and 8x
    python benchmarks/bench_parse.py --smoke    # fewer repetitions (CI)

``parse(text)`` must equal what a stream fed the whole text produces; it used to be
exactly that (a ``StreamParser`` fed the text, then finished). The baseline measured in
the same run is that stream, so the ratio is what the one-shot path saves:

- parse: ``params.parse(text)`` (the compiled one-shot parser, ``peg/oneshot.py``, and
  the final tree mapped straight to the message, ``stream/whole.py``);
- via stream: ``stream(); feed(text); finish(); message`` (the baseline);
- parser alone: the compiled parser's full- then partial-mode run of the text, against
  the memoised driver's partial- then full-mode run of a stream (``IncrementalParse``).

Best CPU time of the repetitions (the machine may be shared). The message of both is
compared: "same" or MISMATCH.

The guard against a slide (issue 36 §2): the stream baseline moves with the project, so a
change that slows both hides. Each input is therefore also timed against a **fixed
baseline** that does not change with the project: ``fixed_baseline`` (the text through
``json.dumps``/``json.loads`` and two ``re`` scans, all C-speed passes over it). ``parse /
fixed`` is compared with the ratios recorded in ``benchmarks/parse_ratios.json`` (written by
``--record``, on a quiet machine, with the table in docs/performance.md); a ratio more than
10% off its record is flagged MOVED, and a change that moves one says so in its commit
message. Nothing fails on time: the flags are for the reader.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import timing
from bench_stream import BENCH_DIRS, STAND_INS, TEMPLATE_DIRS, first_dir, load_template

from autoparser.peg.oneshot import Shared, compiled

RECORD = Path(__file__).with_name("parse_ratios.json")
# How far a ratio may move from its record before the run flags it (issue 36 §2).
TOLERANCE = 0.10
_MARKUP = re.compile(r"<[^<>\n]{1,64}>|\[[A-Z_]{2,32}\]")
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def fixed_baseline(text: str) -> object:
    """Work over the text that does not change with the project: a JSON round trip of it
    as one string and two regex scans (markup-like spans, words)."""
    return (
        json.loads(json.dumps(text)),
        _MARKUP.findall(text),
        sum(1 for _ in _WORDS.finditer(text)),
    )


def moved(ratio: float, recorded: float | None) -> str:
    """How a ratio compares with its record: "" within tolerance, else the change."""
    if recorded is None:
        return "new"
    change = ratio / recorded - 1
    return f"MOVED {change:+.0%}" if abs(change) > TOLERANCE else f"{change:+.0%}"


def best_us(fn: Callable[[], object], repeats: int) -> float:
    return timing.best_of(fn, repeats, time.process_time) * 1e6


def via_stream(params: Any, text: str) -> Any:
    stream = params.stream()
    stream.feed(text)
    stream.finish()
    return stream.message


def measure(params: Any, text: str, repeats: int) -> tuple[float, float, float, float, str]:
    """parse, via stream, compiled trees, memoised trees (µs), and whether the two
    messages are the same."""
    root = params.definition.parser
    shot = compiled(root)

    def one_shot_trees() -> None:
        assert shot is not None
        shared = Shared()
        shot.parse(text, False, shared)
        shot.parse(text, True, shared)

    def memoised_trees() -> None:
        inc = root.incremental()
        inc.feed(text)
        inc.finish()

    parse = best_us(lambda: params.parse(text), repeats)
    stream = best_us(lambda: via_stream(params, text), repeats)
    alone = best_us(one_shot_trees, repeats) if shot is not None else float("nan")
    memo = best_us(memoised_trees, repeats)
    same = "same" if params.parse(text) == via_stream(params, text) else "MISMATCH"
    return parse, stream, alone, memo, same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="fewer repetitions")
    ap.add_argument(
        "--record",
        action="store_true",
        help=f"write the parse / fixed ratios to {RECORD.name} (on a quiet machine)",
    )
    args = ap.parse_args()
    recorded: dict[str, float] = (
        json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.is_file() else {}
    )
    bench = first_dir(BENCH_DIRS, "*.meta.json")
    templates = first_dir(TEMPLATE_DIRS, "*.jinja")
    if bench is None or templates is None:
        print("bench data or template corpus not found: nothing to measure")
        return 0
    repeats = 20 if args.smoke else 300
    print(f"python {sys.version.split()[0]}, best CPU time of {repeats} runs, µs")
    print(
        "| input | parse | via stream | parse / stream "
        "| parser alone: compiled | memoised | compiled / memoised | same message "
        "| fixed | parse / fixed | vs record |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
    ratios: list[float] = []
    fixed_ratios: dict[str, float] = {}
    for meta_path in sorted(bench.glob("*.meta.json")):
        name = meta_path.name.removesuffix(".meta.json")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        stem = meta["template"].removesuffix(".jinja")
        path = templates / meta["template"]
        if not path.is_file():
            path = templates / f"{STAND_INS.get(stem, stem)}.jinja"
        if not path.is_file():
            print(f"| {name} | template not found |")
            continue
        inputs = meta["inputs"]
        params = load_template(path, meta["prompt"]).apply(
            inputs["messages"],
            tools=inputs.get("tools"),
            enable_thinking=inputs.get("enable_thinking"),
            reasoning_format=inputs.get("reasoning_format", "auto"),
            parallel_tool_calls=inputs.get("parallel_tool_calls"),
        )
        text = (bench / meta["output_file"]).read_text(encoding="utf-8")
        parse, stream, alone, memo, same = measure(params, text, repeats)
        fixed = best_us(lambda text=text: fixed_baseline(text), repeats)  # type: ignore[misc]
        ratios.append(parse / stream)
        fixed_ratios[name] = round(parse / fixed, 3)
        print(
            f"| {name} | {parse:.1f} | {stream:.1f} | {parse / stream:.2f} "
            f"| {alone:.1f} | {memo:.1f} | {alone / memo:.2f} | {same} "
            f"| {fixed:.1f} | {parse / fixed:.2f} | {moved(parse / fixed, recorded.get(name))} |"
        )
    if ratios:
        print(f"parse / via stream: {min(ratios):.2f}-{max(ratios):.2f}")
        flagged = [n for n, r in fixed_ratios.items() if moved(r, recorded.get(n)).startswith("M")]
        print(f"parse / fixed moved more than {TOLERANCE:.0%} from the record: {flagged or 'none'}")
    if args.record:
        RECORD.write_text(json.dumps(fixed_ratios, indent=1, sort_keys=True) + "\n", "utf-8")
        print(f"recorded {len(fixed_ratios)} ratios in {RECORD.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
