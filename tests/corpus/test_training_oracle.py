"""Training samples against an oracle made of transformers renders alone, over the corpus.

For each assistant turn of a conversation, transformers renders the conversation before it
with the generation prompt (what the model was given: P) and up to its end without it (U);
what the model generated is U after P. A template rewrites history when some P or U is not a
prefix of the whole render. ``ChatTemplate.training_samples`` must then give one sample per
turn, P followed by the generation; otherwise one sample, the whole render, with each turn
starting where P ends and holding the generation. Both must also agree on which was done.
A turn whose U does not start with P (a forced ``<think>`` the history lacks) has no
generation the oracle can tell: we must report it as a finding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.parity import fixed_clock, our_clock, with_conventional_variables

from autoparser import ChatTemplate
from autoparser.errors import AutoparserError, TemplateError
from autoparser.training import TrainingSamples, strip_generation_blocks

ctu = pytest.importorskip("transformers.utils.chat_template_utils")
from helpers.paths import corpus_params  # noqa: E402

BOS, EOS = "<s>", "</s>"
__all__ = ["fixed_clock"]  # both engines see the same date


# Every parameter described (Command R's templates print the descriptions unguarded).
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


# The conversation shapes: (messages, tools).
SHAPES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "plain": (
        [{"role": "user", "content": "Hello there."}, {"role": "assistant", "content": "Hi!"}],
        None,
    ),
    "system": (
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4."},
        ],
        None,
    ),
    "reasoning": (
        [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4.", "reasoning_content": "Two and two."},
            {"role": "user", "content": "And 3+3?"},
            {"role": "assistant", "content": "6.", "reasoning_content": "Three and three."},
        ],
        None,
    ),
    "tool_loop": (
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("call_1", "get_weather", {"city": "Paris"})],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
            {"role": "assistant", "content": "It is 21 degrees."},
        ],
        [WEATHER, TIME],
    ),
    "parallel_calls": (
        [
            {"role": "user", "content": "Weather and time in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Two tools.",
                "tool_calls": [
                    _call("call_1", "get_weather", {"city": "Paris"}),
                    _call("call_2", "get_time", {"city": "Paris"}),
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
            {"role": "tool", "tool_call_id": "call_2", "content": "14:05"},
            {"role": "assistant", "content": "Warm, early afternoon."},
            {"role": "user", "content": "Thanks."},
        ],
        [WEATHER, TIME],
    ),
    "multi_turn": (
        [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
            {"role": "assistant", "content": "Why did the chicken cross the road?"},
            {"role": "user", "content": "Why?"},
            {"role": "assistant", "content": "To get to the other side."},
        ],
        None,
    ),
}


# Templates transformers renders none of the shapes with (so there is no oracle), and why;
# for those jinja2 cannot even compile, a part of the error.
NO_ORACLE = {
    "MiroThinker-v1": "syntax error",
    "vllm-template_vicuna": "syntax error",
    "vllm-tool_chat_template_deepseekv31": "syntax error",
    "gpt4all-deepseek-r1-distill": "uses gpt4all's regex_replace filter",
    "hfjs-cohere-command-r-v01": "reads Cohere's own tool shape (tool.name, not function)",
    "hfjs-fireworks-firefunction-v1": "wants a 'functions' message first",
    "llamacpp-test-gigachat-20b-a3b-instruct": "reads additional_special_tokens",
}


def _oracle_render(
    source: str, messages: list[dict[str, Any]], tools: Any, agp: bool, kwargs: dict[str, Any]
) -> str:
    (text,), _ = ctu.render_jinja_template(
        conversations=[[{k: v for k, v in m.items() if v is not None} for m in messages]],
        tools=tools,
        chat_template=source,
        add_generation_prompt=agp,
        bos_token=BOS,
        eos_token=EOS,
        **kwargs,
    )
    return str(text)


def _check_shape(
    template: ChatTemplate, source: str, messages: list[dict[str, Any]], tools: Any
) -> str:
    """Compares one conversation; returns what happened (for the module's tallies)."""
    kwargs: dict[str, Any] = {}
    if template.renderer.conventional_variables:
        kwargs = with_conventional_variables(template, {"tools": tools})["kwargs"]
    indices = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    try:
        whole = _oracle_render(source, messages, tools, False, kwargs)
        prompts = [_oracle_render(source, messages[:i], tools, True, kwargs) for i in indices]
        uptos = [_oracle_render(source, messages[: i + 1], tools, False, kwargs) for i in indices]
    except Exception:  # transformers cannot render a prefix: no oracle
        # (our sandbox also takes what transformers' refuses, e.g. list.append)
        return "refused"
    result: TrainingSamples = template.training_samples(messages, tools, polyfills=False, **kwargs)
    rewritten = any(
        not whole.startswith(u) or not whole.startswith(p)
        for p, u in zip(prompts, uptos, strict=True)
    )
    assert result.per_turn == rewritten, result.reason
    markers = {m.strip() for m in template.for_tools(tools).analyze().end_of_turn}
    turns = [t for s in result.samples for t in s.turns]
    assert [t.index for t in turns] == indices
    flagged = {f.index for f in result.findings if f.kind == "prompt_not_rendered"}
    for index, prompt, upto, turn in zip(indices, prompts, uptos, turns, strict=True):
        sample = next(s for s in result.samples if turn in s.turns)
        if not result.per_turn:
            assert sample.text == whole
        if not upto.startswith(prompt):
            assert index in flagged  # no generation to compare: said so
            continue
        assert index not in flagged
        generation = upto[len(prompt) :]
        assert sample.text[: turn.start] == prompt, index
        produced = sample.text[turn.start : turn.end]
        assert produced.startswith(generation), index
        assert produced[len(generation) :].strip() in markers | {""}, index
        if result.per_turn:
            assert turn.end == len(sample.text)
    for sample in result.samples:  # every part trained: the spans are the turns
        assert sample.spans == tuple((t.start, t.end) for t in sample.turns if t.end > t.start)
    return "per_turn" if result.per_turn else "single"


@pytest.mark.parametrize("path", corpus_params())
@pytest.mark.usefixtures("fixed_clock")
def test_training_samples_match_the_transformers_oracle(path: Path) -> None:
    source = strip_generation_blocks(path.read_text(encoding="utf-8"))
    try:
        template = ChatTemplate(
            source, bos_token=BOS, eos_token=EOS, name=path.stem, clock=our_clock
        )
        outcomes = {
            shape: _check_shape(template, source, messages, tools)
            for shape, (messages, tools) in SHAPES.items()
        }
    except TemplateError as exc:  # jinja2 cannot compile it
        assert NO_ORACLE.get(path.stem, "-") in str(exc)
        return
    if path.stem in NO_ORACLE:
        assert set(outcomes.values()) == {"refused"}, "listed as without oracle but compared"
    else:
        assert set(outcomes.values()) != {"refused"}, "transformers renders no shape"


# A tool conversation with reasoning on both turns: every part occurs, in two turns.
PARTS_CASE = [dict(m) for m in SHAPES["parallel_calls"][0]]
PARTS_CASE[4] = {**PARTS_CASE[4], "reasoning_content": "Summarise both."}
# Per part: text that must be trained when only that part is, and text that must not be.
PART_TEXTS = {
    "content": (["Warm, early afternoon."], ["Two tools.", "Summarise both.", "get_time"]),
    "tool_calls": (["get_weather", "get_time"], ["Warm, early", "Two tools.", "Summarise"]),
    "reasoning": (["Two tools."], ["Warm, early", "get_time"]),
}


@pytest.mark.parametrize("path", corpus_params())
def test_parts_train_only_what_they_name(path: Path) -> None:
    """Training one part trains its text and none of the others', wherever the template
    renders that part at all (reasoning is dropped from history by many templates)."""
    if path.stem in NO_ORACLE:
        pytest.skip(NO_ORACLE[path.stem])
    source = strip_generation_blocks(path.read_text(encoding="utf-8"))
    template = ChatTemplate(source, bos_token=BOS, eos_token=EOS, name=path.stem, clock=our_clock)
    tools = SHAPES["parallel_calls"][1]
    try:
        every = template.training_samples(PARTS_CASE, tools, polyfills=False)
    except AutoparserError:
        return  # the template cannot render the conversation (it raises): nothing to split
    trained = "".join(t for s in every.samples for t in s.trained_text())
    compared = 0
    for part, (present, absent) in PART_TEXTS.items():
        if not all(text in trained for text in present):
            continue  # the template does not render this part here
        only = template.training_samples(PARTS_CASE, tools, parts=[part], polyfills=False)
        text = "".join(t for s in only.samples for t in s.trained_text())
        assert all(t in text for t in present), (part, text)
        assert not any(t in text for t in absent), (part, text)
        compared += 1
    silent = {f.index for f in every.findings if f.kind == "turn_not_rendered"}
    assert compared or silent == {1, 4}, "no part rendered, and no finding says so"
