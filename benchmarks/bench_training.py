"""Assistant spans for training: what they cost next to a plain render.

Baseline, measured in the same run: transformers' ``render_jinja_template`` of the original
template. Compared with it: ``ChatTemplate.render_spans`` (our spans, renders of the
conversation's prefixes), ``ChatTemplate.training_samples`` (the samples, checked against
inference renders) and transformers rendering the generated training template with
``return_assistant_tokens_mask=True`` (the same spans computed in Jinja), and the floor of
the per-turn design: ``assistant_spans`` itself with transformers as the renderer of the
prefixes it needs (what our spans would cost if our renders cost what transformers' do), on
a six-message
conversation with two assistant turns (one a tool call) and on a one-turn one (user,
assistant: most instruction data). Prints the time per conversation and the ratio to the
baseline. ``--smoke`` runs a short pass for CI.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench_render import MESSAGES, WEATHER, templates
from timing import best_of

from autoparser import AutoparserError, ChatTemplate
from autoparser.training import assistant_spans

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
    conversations = {
        "6 msgs": [dict(m) for m in MESSAGES],
        "1 turn": [dict(MESSAGES[1]), {"role": "assistant", "content": "It is 21C in Paris."}],
    }
    print(
        f"{'template':38} {'conv':6} {'render':>8} {'spans':>8} {'ratio':>5} "
        f"{'samples':>8} {'ratio':>5} {'wrapped':>8} {'ratio':>5} {'floor':>8} {'ratio':>5}"
    )
    for path in paths:
        source = path.read_text(encoding="utf-8")
        template = ChatTemplate(source, bos_token="<s>", eos_token="</s>", name=path.stem)
        try:
            wrapped = template.training_template()
        except AutoparserError as exc:
            print(f"{path.stem:38} refused: {exc}")
            continue
        analysis = template.for_tools([WEATHER]).analyze()
        for label, messages in conversations.items():
            clean = [{k: v for k, v in m.items() if v is not None} for m in messages]

            def baseline(src: str = source, conv: list[dict[str, Any]] = clean) -> object:
                return render_jinja_template(
                    conversations=[conv], tools=[WEATHER], chat_template=src, **TOKENS
                )

            def spans(t: ChatTemplate = template, conv: list[dict[str, Any]] = messages) -> object:
                return t.render_spans(conv, [WEATHER], polyfills=False)

            def samples(
                t: ChatTemplate = template, conv: list[dict[str, Any]] = messages
            ) -> object:
                return t.training_samples(conv, [WEATHER], polyfills=False)

            def generated(src: str = wrapped, conv: list[dict[str, Any]] = clean) -> object:
                return render_jinja_template(
                    conversations=[conv],
                    tools=[WEATHER],
                    chat_template=src,
                    return_assistant_tokens_mask=True,
                    **TOKENS,
                )

            for fn in (baseline, spans, samples, generated):
                fn()  # compile and analyse outside the timing

            def prefix_by_transformers(part: Any, agp: bool, src: str = source) -> str:
                conv = [{k: v for k, v in m.items() if v is not None} for m in part]
                rendered = render_jinja_template(  # (renders, generation indices)
                    conversations=[conv],
                    tools=[WEATHER],
                    chat_template=src,
                    add_generation_prompt=agp,
                    bos_token=TOKENS["bos_token"],
                    eos_token=TOKENS["eos_token"],
                )[0]
                return str(rendered[0])

            def floor(
                conv: list[dict[str, Any]] = messages,
                eot: tuple[str, ...] = tuple(analysis.end_of_turn),
                gp: str = analysis.generation_prompt,
            ) -> object:
                text = prefix_by_transformers(conv, False)
                return assistant_spans(
                    text,
                    conv,
                    prefix_by_transformers,
                    eot,
                    gp,
                )

            if (
                floor()
                != template.render_spans(messages, [WEATHER], polyfills=False).assistant_spans
            ):
                print(f"{path.stem:38} {label:6} the floor's spans differ from ours")
            tried = (spans, samples, generated, floor)
            base = best_of(baseline, repeats, time.process_time)
            times = [best_of(fn, repeats, time.process_time) for fn in tried]
            cells = " ".join(f"{t * 1e3:6.2f}ms {t / base:4.1f}x" for t in times)
            print(f"{path.stem:38} {label:6} {base * 1e3:6.2f}ms {cells}")


if __name__ == "__main__":
    main()
