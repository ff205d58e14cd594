"""Assistant spans for training: what they cost next to a plain render.

Baseline, measured in the same run: transformers' ``render_jinja_template`` of the original
template. Compared with it: ``ChatTemplate.render_spans`` (our spans, renders of the
conversation's prefixes) and transformers rendering the generated training template with
``return_assistant_tokens_mask=True`` (the same spans computed in Jinja). Prints the time
per conversation and the ratio to the baseline. ``--smoke`` runs a short pass for CI.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench_render import MESSAGES, WEATHER, templates
from timing import best_of

from autoparser import AutoparserError, ChatTemplate

TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}
NAMES = (
    "Qwen-Qwen3-0.6B",
    "glm_4_5",
    "HuggingFaceTB-SmolLM3-3B",
    "mistralai-Mistral-Nemo-Instruct-2407",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a short pass")
    args = parser.parse_args()
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError:
        print("transformers is not installed: no baseline, nothing to compare")
        return
    repeats = 3 if args.smoke else 30
    found = {p.stem: p for p in templates()}
    paths: list[Path] = [found[n] for n in NAMES if n in found] or list(found.values())[:1]
    messages: list[dict[str, Any]] = [dict(m) for m in MESSAGES]
    clean = [{k: v for k, v in m.items() if v is not None} for m in messages]
    print(f"{'template':40} {'render':>9} {'spans':>9} {'ratio':>6} {'wrapped':>9} {'ratio':>6}")
    for path in paths:
        source = path.read_text(encoding="utf-8")
        template = ChatTemplate(source, bos_token="<s>", eos_token="</s>", name=path.stem)
        try:
            wrapped = template.training_template()
        except AutoparserError as exc:
            print(f"{path.stem:40} refused: {exc}")
            continue

        def baseline(src: str = source) -> object:
            return render_jinja_template(
                conversations=[clean], tools=[WEATHER], chat_template=src, **TOKENS
            )

        def spans(t: ChatTemplate = template) -> object:
            return t.render_spans(messages, [WEATHER], polyfills=False)

        def generated(src: str = wrapped) -> object:
            return render_jinja_template(
                conversations=[clean],
                tools=[WEATHER],
                chat_template=src,
                return_assistant_tokens_mask=True,
                **TOKENS,
            )

        for fn in (baseline, spans, generated):
            fn()  # compile and analyse outside the timing
        base = best_of(baseline, repeats, time.process_time)
        ours = best_of(spans, repeats, time.process_time)
        gen = best_of(generated, repeats, time.process_time)
        print(
            f"{path.stem:40} {base * 1e3:7.2f}ms {ours * 1e3:7.2f}ms {ours / base:5.1f}x "
            f"{gen * 1e3:7.2f}ms {gen / base:5.1f}x"
        )


if __name__ == "__main__":
    main()
