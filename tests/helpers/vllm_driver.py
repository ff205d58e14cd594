"""Drive vLLM's own parser machinery with autoparser's vLLM plugin (runs in the vLLM venv).

``python tests/helpers/vllm_driver.py CASES.json RESULTS.json`` (with ``PYTHONPATH=src``),
started by tests/integrations/vllm/test_parsers.py in the environment scripts/setup_vllm.sh
builds. For each case (a template, a request, a model output and token-boundary splits of
it) it does
what vLLM's chat serving does with the parsers named ``autoparser``:

- ``ParserManager.get_parser(tool_parser_name="autoparser", reasoning_parser_name=...)``
  composes the parser class (and validates it against the tokenizer);
- a parser instance's ``set_prompt_token_ids`` + ``adjust_request`` (the renderer's step);
- ``parse`` of the whole output (non-streaming) and ``ChatStreamProcessor.step`` per chunk
  of token ids (streaming), each on a fresh instance, as the serving code makes them.

The tokenizer is built here: byte-level tokens with no merges (so any text round-trips)
plus the template's markers as special tokens, as a real model's vocabulary has them.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from entry_points import declare_entry_point
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from autoparser import ChatTemplate


@functools.cache
def tokenizer_for(source: str, bos: str, eos: str) -> Any:
    analysis = ChatTemplate(source, bos_token=bos, eos_token=eos).analyze()
    r = analysis.reasoning
    markers = {
        m.strip()
        for m in (*analysis.preserved_tokens, *analysis.end_of_turn, r.start, r.end, bos, eos)
        if m and m.strip()
    }
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(m, special=True, normalized=False) for m in sorted(markers)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos or None, eos_token=eos)
    fast.chat_template = source
    return fast


def chunks(tokenizer: Any, text: str, cuts: list[int]) -> list[tuple[str, list[int]]]:
    """The output as (delta text, delta token ids), cut after the given token positions
    (only where a token ends a character, as vLLM's detokenizer emits text)."""
    enc = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False)
    ids, offsets = enc.ids, enc.offsets
    ends = [
        k + 1
        for k in range(len(ids) - 1)
        if offsets[k][1] <= offsets[k + 1][0] and offsets[k][1] > 0
    ]
    chosen = sorted({ends[c % len(ends)] for c in cuts} if ends else set())
    out: list[tuple[str, list[int]]] = []
    prev_tok, prev_char = 0, 0
    for k in [*chosen, len(ids)]:
        char = offsets[k - 1][1] if k < len(ids) else len(text)
        if k <= prev_tok:
            continue
        out.append((text[prev_char:char], ids[prev_tok:k]))
        prev_tok, prev_char = k, char
    if prev_char < len(text):  # text the tokenizer gave no token for (never, byte-level)
        out.append((text[prev_char:], []))
    return out


def message_view(reasoning: Any, content: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"reasoning": reasoning or None, "content": content or None, "tool_calls": calls}


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
    from vllm.parser.parser_manager import ParserManager

    tok = tokenizer_for(case["template"], case["bos"], case["eos"])
    req = case["request"]
    body: dict[str, Any] = {"model": "m", "messages": req["messages"]}
    if req.get("tools"):
        body["tools"] = req["tools"]
        body["tool_choice"] = "auto"
    if req.get("chat_template_kwargs"):
        body["chat_template_kwargs"] = req["chat_template_kwargs"]
    body.update(req.get("extra", {}))
    kwargs = req.get("chat_template_kwargs") or {}
    parser_cls = ParserManager.get_parser(
        tool_parser_name="autoparser",
        reasoning_parser_name="autoparser" if case.get("reasoning_parser", True) else None,
        enable_auto_tools=True,
        model_name="m",
        tokenizer=tok,
    )
    assert parser_cls is not None
    try:
        prompt = tok.apply_chat_template(
            req["messages"],
            tools=req.get("tools"),
            add_generation_prompt=True,
            tokenize=False,
            **kwargs,
        )
    except Exception:
        prompt = case["prompt"]
    prompt_ids = tok.backend_tokenizer.encode(prompt, add_special_tokens=False).ids

    def new_parser() -> Any:
        return parser_cls(tok, request.tools, chat_template_kwargs=kwargs, model_config=None)

    request = ChatCompletionRequest(**body)
    adjuster = new_parser()
    adjuster.set_prompt_token_ids(prompt_ids)
    request = adjuster.adjust_request(request)
    result: dict[str, Any] = {
        "id": case["id"],
        "prompt": prompt,
        "skip_special_tokens": request.skip_special_tokens,
        "grammar": (request.structured_outputs.grammar if request.structured_outputs else None),
        "reasoning_ended_at_start": request.resolve_reasoning_ended(adjuster, prompt_ids),
        "grammar_error": None,
    }
    if result["grammar"]:
        # What vLLM does with a request's grammar before it reaches the engine.
        from vllm.sampling_params import SamplingParams
        from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

        try:
            validate_xgrammar_grammar(SamplingParams(structured_outputs=request.structured_outputs))
        except Exception as exc:
            result["grammar_error"] = str(exc)[:500]

    text = case["text"]
    parser = new_parser()
    parser.set_prompt_token_ids(prompt_ids)
    ids = tok.backend_tokenizer.encode(text, add_special_tokens=False).ids
    reasoning, content, calls = parser.parse(
        text, request, enable_auto_tools=True, model_output_token_ids=ids
    )
    result["parse"] = message_view(
        reasoning,
        content,
        [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls or []],
    )

    streams = []
    for cuts in case["splits"]:
        request = ChatCompletionRequest(**body)
        request = adjuster.adjust_request(request)
        processor = ChatStreamProcessor(
            request, new_parser(), enable_auto_tools=True, parser_cls=parser_cls
        )
        pieces = chunks(tok, text, cuts)
        acc_r, acc_c = [], []
        acc_calls: dict[int, dict[str, Any]] = {}
        for n, (delta_text, delta_ids) in enumerate(pieces):
            last = n == len(pieces) - 1
            step = processor.step(
                delta_text, delta_ids, "stop" if last else None, prompt_ids if n == 0 else None
            )
            delta = step.delta
            if delta is None:
                continue
            if delta.reasoning:
                acc_r.append(delta.reasoning)
            if delta.content:
                acc_c.append(delta.content)
            for tc in delta.tool_calls:
                entry = acc_calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    entry["id"] = tc.id
                if tc.function and tc.function.name:
                    entry["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    entry["arguments"] += tc.function.arguments
        streams.append(
            message_view("".join(acc_r), "".join(acc_c), [acc_calls[i] for i in sorted(acc_calls)])
        )
    result["streams"] = streams
    return result


def load_plugin(entry_point: str, work: Path) -> dict[str, bool]:
    """Load the plugin the two ways vLLM does: its ``vllm.general_plugins`` entry point
    (declared here in a distribution's metadata, as an installed autoparser has it), then
    ``--tool-parser-plugin autoparser.integrations.vllm``. Which registered the parsers."""
    from vllm.plugins import load_general_plugins
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    def registered() -> bool:
        return (
            "autoparser" in ToolParserManager.list_registered()
            and "autoparser" in ReasoningParserManager.list_registered()
        )

    before = registered()
    declare_entry_point(work, "vllm.general_plugins", entry_point)
    load_general_plugins()
    by_entry_point = registered()
    ToolParserManager.import_tool_parser("autoparser.integrations.vllm")
    return {"before": before, "entry_point": by_entry_point, "plugin_module": registered()}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    cases = spec["cases"]
    results: list[dict[str, Any]] = [
        {"id": "__plugin__", **load_plugin(spec["entry_point"], Path(sys.argv[2]).parent / "ep")}
    ]
    for case in cases:
        try:
            results.append(run_case(case))
        except Exception:
            results.append({"id": case["id"], "error": traceback.format_exc()})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
