"""Render speed: autoparser's ChatTemplate.render against transformers' renderer.

Baseline, measured in the same run: transformers' ``render_jinja_template`` (compiled
template cached by transformers itself). Prints renders per second for both and the ratio.
Uses the corpus when present (``AUTOPARSER_TEMPLATES`` or ../shared/templates), else the
shipped example template. ``--smoke`` runs a short pass for CI.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from timing import total_of

from autoparser import ChatTemplate, TemplateError
from autoparser.examples import example_path

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City"}},
            "required": ["city"],
        },
    },
}
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call1abcd",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call1abcd", "content": "21C"},
    {"role": "assistant", "content": "It is 21C.", "reasoning_content": "Read the tool."},
    {"role": "user", "content": "Thanks!"},
]


def templates() -> list[Path]:
    roots = [os.environ.get("AUTOPARSER_TEMPLATES", ""), "../shared/templates"]
    for root in roots:
        if root and Path(root).is_dir():
            return sorted(Path(root).glob("*.jinja"))
    return [example_path()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="short run for CI")
    args = parser.parse_args()
    repeat = 3 if args.smoke else 30
    from transformers.utils.chat_template_utils import render_jinja_template

    ours_total = theirs_total = polyfilled_total = 0.0
    used = 0
    for path in templates():
        source = path.read_text(encoding="utf-8")
        try:
            template = ChatTemplate(source, bos_token="<s>", eos_token="</s>", polyfills=False)
        except TemplateError:
            continue  # jinja2 cannot compile it (transformers cannot render it either)

        def ours(t: ChatTemplate = template) -> object:
            return t.render(MESSAGES, [WEATHER], polyfills=False)

        def ours_polyfilled(t: ChatTemplate = template) -> object:
            return t.render(MESSAGES, [WEATHER], polyfills=True)

        def theirs(s: str = source) -> object:
            return render_jinja_template(
                [MESSAGES],
                tools=[WEATHER],
                chat_template=s,
                add_generation_prompt=True,
                bos_token="<s>",
                eos_token="</s>",
            )

        try:
            ours()
            theirs()
            ours_polyfilled()  # also probes the caps once, outside the timing
        except Exception:
            continue  # a template that cannot render this conversation in either engine
        used += 1
        ours_total += total_of(ours, repeat)
        theirs_total += total_of(theirs, repeat)
        polyfilled_total += total_of(ours_polyfilled, repeat)
    renders = used * repeat
    probe_start = time.perf_counter()
    for path in templates():
        try:
            ChatTemplate(path.read_text(encoding="utf-8") + "{# fresh #}").caps  # noqa: B018
        except TemplateError:
            continue  # does not compile, or no probe renders: the error is the result
    probe_time = time.perf_counter() - probe_start
    print(f"templates: {used}, renders each: {repeat}")
    print(f"autoparser render:   {renders / ours_total:10.0f} renders/s")
    print(f"autoparser render, polyfills on: {renders / polyfilled_total:10.0f} renders/s")
    print(f"transformers render: {renders / theirs_total:10.0f} renders/s (baseline)")
    print(f"ratio autoparser/transformers speed: {theirs_total / ours_total:.2f}x")
    print(f"caps probing: {probe_time / len(templates()) * 1000:.1f} ms per template (once)")


if __name__ == "__main__":
    main()
