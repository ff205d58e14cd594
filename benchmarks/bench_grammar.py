"""A request with many tools, cold: what building its parser and grammar costs, and what
reading the model's answer costs after it, against baselines measured in the same run.

Per template and tool count, CPU time (``time.process_time``: steadier on a shared machine)
of ``ChatTemplate.apply`` with tools never seen before, split into its parts:

- **render**: the prompt alone (jinja2), the baseline;
- **build**: apply minus the render: validating the request, the parser and the grammar
  (issue 22 §2's floor: 1,000 tools in 0.1 s), for two tool sets: *repeated* forms (six
  parameter schemas under a thousand names, tests/helpers/many_tools.py) and *varied* ones
  (distinct names, descriptions, enums, bounds and nested objects: ``varied_tools``);
- **collect after**: what a full collection of the cyclic garbage collector right after
  the build costs over the next one (the build's garbage; each build is measured after a
  full collection, so that one triggered by earlier measurements' heap falls outside);
- **1st parse** / **stream**: parsing one call of the answer right after (the parser is
  built only for the call the answer makes), whole and in 4-character chunks;
- **warm**: the same request again (memoised), **one added**: the tools plus one new one.

``--smoke``: 10 and 100 tools only; ``--max-tools N``; ``--scaling``: build time per tool
at 500 to 5,000 tools (ratio to 500; 1.0 is linear).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from helpers.many_tools import many_tools, varied_tools  # noqa: E402
from helpers.paths import own_path  # noqa: E402
from helpers.roundtrip import model_output  # noqa: E402

from autoparser import ChatTemplate  # noqa: E402

TEMPLATES = {
    "Hermes (JSON calls)": "chatml_hermes",
    "Qwen3-Coder (tag per argument)": "qwen3coder_like",
    "GLM-style (key/value tags)": "glm_like",
}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
CLOCK = time.process_time
_RUN = iter(range(10**9))  # a fresh prefix per measurement: tools never seen before


def _fresh(kind: str, n: int) -> list[dict[str, Any]]:
    prefix = f"r{next(_RUN)}"
    return many_tools(n, prefix) if kind == "repeated" else varied_tools(n, n, prefix=prefix)


def _answer(template: ChatTemplate, tools: list[dict[str, Any]]) -> str:
    """The model's answer calling one tool (a third of the way in), as the template writes it."""
    tool = tools[len(tools) // 3]["function"]
    props = tool["parameters"].get("properties", {})
    args = {k: "Paris" if v.get("type") == "string" else 1 for k, v in props.items()}
    args = {k: v for k, v in args.items() if v == "Paris"}  # strings only: valid anywhere
    call = {
        "id": "c0",
        "type": "function",
        "function": {"name": tool["name"], "arguments": json.dumps(args)},
    }
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    text, why = model_output(template, template.analyze(), message, tools, {})
    assert text, why
    return text


def _cold(template: ChatTemplate, kind: str, n: int) -> dict[str, float]:
    """CPU seconds of one cold request and of reading its answer (a full collection
    first, so that one the heap of earlier measurements triggers falls outside), and of
    the full collection right after the build (its garbage and what the caches keep)."""
    tools = _fresh(kind, n)
    answer = _answer(template, tools)
    gc.collect()
    start = CLOCK()
    template.render(MESSAGES, tools=tools)
    render = CLOCK() - start
    start = CLOCK()
    params = template.apply(MESSAGES, tools=tools)
    build = CLOCK() - start - render
    start = CLOCK()
    gc.collect()
    collect = CLOCK() - start
    start = CLOCK()
    gc.collect()  # the same heap without the build's garbage: the baseline
    collect = max(0.0, collect - (CLOCK() - start))
    start = CLOCK()
    message = params.parse(answer)
    parse = CLOCK() - start
    assert message.tool_calls, answer
    stream = params.stream()
    start = CLOCK()
    for i in range(0, len(answer), 4):
        stream.feed(answer[i : i + 4])
    stream.finish()
    streamed = CLOCK() - start
    gc.collect()
    start = CLOCK()
    template.apply(MESSAGES, tools=tools)
    warm = CLOCK() - start
    more = [*tools, *_fresh(kind, 1)]
    gc.collect()
    start = CLOCK()
    template.apply(MESSAGES, tools=more)
    added = CLOCK() - start
    return {
        "render": render,
        "build": build,
        "collect": collect,
        "parse": parse,
        "stream": streamed,
        "warm": warm,
        "added": added,
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def _table(sizes: list[int]) -> None:
    print("## a cold request with N tools (CPU time, same run)")
    print(
        "| template | tools | render | build, repeated forms | build, varied forms "
        "| build / render (repeated, varied) | collect after (rep., var.) "
        "| 1st parse after (rep., var.) | stream after | warm | one added |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, name in TEMPLATES.items():
        template = ChatTemplate.from_file(own_path(name))
        template.analyze()
        template.apply(MESSAGES, tools=many_tools(3, "warmup"))
        for n in sizes:
            rep = _cold(template, "repeated", n)
            var = _cold(template, "varied", n)
            print(
                f"| {label} | {n:,} | {_ms(rep['render'])} | {_ms(rep['build'])} "
                f"| {_ms(var['build'])} | {rep['build'] / rep['render']:.1f}x, "
                f"{var['build'] / var['render']:.1f}x "
                f"| {_ms(rep['collect'])}, {_ms(var['collect'])} "
                f"| {_ms(rep['parse'])}, {_ms(var['parse'])} "
                f"| {_ms(rep['stream'])} | {_ms(rep['warm'])} | {_ms(rep['added'])} |",
                flush=True,
            )


def _scaling(sizes: list[int]) -> None:
    print()
    print("## build CPU per tool vs number of tools (repeated forms; linear: ratio 1.0)")
    print("| template | " + " | ".join(f"{n:,} tools" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for label, name in TEMPLATES.items():
        template = ChatTemplate.from_file(own_path(name))
        template.analyze()
        template.apply(MESSAGES, tools=many_tools(3, "warmup"))
        per_tool = []
        for n in sizes:
            tools = _fresh("repeated", n)
            gc.collect()
            start = CLOCK()
            template.render(MESSAGES, tools=tools)
            render = CLOCK() - start
            start = CLOCK()
            template.apply(MESSAGES, tools=tools)
            per_tool.append((CLOCK() - start - render) / n)
        cells = [f"{p * 1e6:.0f} us ({p / per_tool[0]:.2f})" for p in per_tool]
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--max-tools", type=int, default=1000, help="largest tool count run")
    ap.add_argument("--scaling", action="store_true", help="also the per-tool scaling table")
    args = ap.parse_args()
    sizes = [10, 100] if args.smoke else [n for n in (10, 100, 1000) if n <= args.max_tools]
    _table(sizes)
    if args.scaling:
        _scaling([n for n in (500, 1000, 2000, 5000) if n <= max(args.max_tools, 500)])


if __name__ == "__main__":
    main()
