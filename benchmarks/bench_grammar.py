"""Grammar building against the number of tools: cold (first request with these tools) and
warm (the same tools again, served from the per-request memo), per template and tool count,
against rendering the prompt alone with the same tools, measured in the same run.

CPU time (``time.process_time``: steadier on a shared machine). Builds run with the
collector paused, so collecting what a cold build left falls on a later request: the
"collect after" column is what a full collection right after it costs over one without
its garbage. ``--smoke``: 10 and 100 tools only.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--max-tools", type=int, default=5000, help="largest tool count run")
    args = ap.parse_args()
    sizes = [n for n in ((10, 100) if args.smoke else (10, 100, 1000, 5000)) if n <= args.max_tools]
    print("## grammar building vs number of tools (CPU time, same run)")
    print(
        "| template | tools | render alone | cold auto | collect after | cold required "
        "| warm auto | cold per tool | cold / render |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
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
            auto, after = _cold(template, n, f"a{n}", "auto")
            required, _ = _cold(template, n, f"r{n}", "required")
            template.apply(MESSAGES, tools=tools)
            warm = best_of(lambda t=template, ts=tools: t.apply(MESSAGES, tools=ts), repeats, CLOCK)
            print(
                f"| {label} | {n:,} | {render * 1e3:,.1f} ms | {auto * 1e3:,.1f} ms "
                f"| {after * 1e3:,.1f} ms "
                f"| {required * 1e3:,.1f} ms | {warm * 1e3:,.1f} ms "
                f"| {auto / n * 1e3:.2f} ms | {auto / render:.1f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
