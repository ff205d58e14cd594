"""Grammar building against the number of tools: cold (first request with these tools),
warm (the same tools again, served from the per-request memo) and one tool added to a warm
set (served from the per-tool call cache but for that tool), per template and tool count,
against two baselines measured in the same run: rendering the prompt alone with the same
tools, and 1 tool x N (N cold requests of one new tool each, the per-request work a
thousand-tool request must not exceed by much if building is linear in tools).

CPU time (``time.process_time``: steadier on a shared machine). "collect after" is what a
full collection right after a cold build costs over one without its garbage. The scaling
table prints the cold CPU per tool at each size and its ratio to the smallest size: 1.0
is linear. ``--smoke``: 10 and 100 tools only.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from helpers.many_tools import many_tools  # noqa: E402
from helpers.paths import own_path  # noqa: E402
from timing import best_of  # noqa: E402

from autoparser import ChatTemplate  # noqa: E402

TEMPLATES = {
    "Hermes (ChatML, JSON calls)": "chatml_hermes",
    "Qwen3-Coder (tag per argument)": "qwen3coder_like",
    "GLM-style (key/value tags)": "glm_like",
}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
CLOCK = time.process_time


def _collect() -> float:
    start = CLOCK()
    gc.collect()
    return CLOCK() - start


def _cold(template: ChatTemplate, n: int, prefix: str, choice: str) -> tuple[float, float]:
    """CPU seconds of one apply with tools never seen before, and the extra seconds a full
    collection right after it takes (over one on a heap without its garbage)."""
    tools = many_tools(n, prefix)
    _collect()
    clean = _collect()
    start = CLOCK()
    template.apply(MESSAGES, tools=tools, tool_choice=choice)
    took = CLOCK() - start
    return took, max(0.0, _collect() - clean)


def _one_by_one(template: ChatTemplate, n: int, prefix: str) -> float:
    """CPU seconds of ``n`` cold requests of one new tool each (the same n tool shapes)."""
    tools = many_tools(n, prefix)
    start = CLOCK()
    for tool in tools:
        template.apply(MESSAGES, tools=[tool])
    return CLOCK() - start


def _table(sizes: list[int]) -> None:
    print("## grammar building vs number of tools (CPU time, same run)")
    print(
        "| template | tools | render alone | 1 tool x N | cold auto | cold / (1 tool x N) "
        "| collect after | cold required | warm auto | one tool added | cold / render |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, name in TEMPLATES.items():
        template = ChatTemplate.from_file(own_path(name))
        template.analyze()
        template.apply(MESSAGES, tools=many_tools(3, "warmup"))
        for n in sizes:
            tools = many_tools(n, f"w{n}")
            repeats = 3 if n <= 1000 else 1
            render = best_of(
                lambda t=template, ts=tools: t.render(MESSAGES, tools=ts), repeats, CLOCK
            )
            single = _one_by_one(template, n, f"s{n}")
            auto, after = _cold(template, n, f"a{n}", "auto")
            required, _ = _cold(template, n, f"r{n}", "required")
            template.apply(MESSAGES, tools=tools)
            warm = best_of(lambda t=template, ts=tools: t.apply(MESSAGES, tools=ts), repeats, CLOCK)
            added = tools + many_tools(1, f"added{n}")
            start = CLOCK()
            template.apply(MESSAGES, tools=added)
            one_more = CLOCK() - start
            print(
                f"| {label} | {n:,} | {render * 1e3:,.1f} ms | {single * 1e3:,.1f} ms "
                f"| {auto * 1e3:,.1f} ms | {auto / single:.2f} | {after * 1e3:,.1f} ms "
                f"| {required * 1e3:,.1f} ms | {warm * 1e3:,.1f} ms | {one_more * 1e3:,.1f} ms "
                f"| {auto / render:.1f}x |",
                flush=True,
            )


def _scaling(sizes: list[int]) -> None:
    print()
    print("## cold CPU per tool vs number of tools (linear: ratio 1.0)")
    print("| template | " + " | ".join(f"{n:,} tools" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for label, name in TEMPLATES.items():
        template = ChatTemplate.from_file(own_path(name))
        template.analyze()
        template.apply(MESSAGES, tools=many_tools(3, "warmup"))
        per_tool = [_cold(template, n, f"lin{n}", "auto")[0] / n for n in sizes]
        cells = [f"{p * 1e3:.2f} ms ({p / per_tool[0]:.2f})" for p in per_tool]
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--max-tools", type=int, default=5000, help="largest tool count run")
    ap.add_argument("--no-table", action="store_true", help="the scaling table only")
    args = ap.parse_args()
    if args.smoke:
        sizes, scaling = [10, 100], [50, 100]
    else:
        sizes = [n for n in (10, 100, 1000) if n <= args.max_tools]
        scaling = [n for n in (500, 1000, 2000, 5000) if n <= args.max_tools]
    if not args.no_table:
        _table(sizes)
    if len(scaling) > 1:
        _scaling(scaling)


if __name__ == "__main__":
    main()
