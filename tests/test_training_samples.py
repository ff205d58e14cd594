"""training_samples: one sample or one per turn, the options, and the skew check.

Two small templates written here: one renders history as the model saw it, the other drops
the reasoning of every assistant turn but the last (as Qwen3 and DeepSeek do), so the whole
render is not what the model saw when it wrote the first turn. Expectations come from
renders of the same templates, never from hand-written strings of the output.
"""

from __future__ import annotations

from typing import Any

import pytest

from autoparser import ChatTemplate
from autoparser.errors import RequestError, TemplateError
from autoparser.training import (
    IGNORE_INDEX,
    TrainedTurn,
    TrainingSample,
    collate,
    sample_rows,
)

_TURN = (
    "<|assistant|>{% if KEEP and m.reasoning_content %}<think>{{ m.reasoning_content }}</think>"
    "{% endif %}{{ m.content }}{% for c in m.tool_calls or [] %}<call>{{ c.function.name }} "
    "{{ c.function.arguments | tojson }}</call>{% endfor %}<|end|>\n"
)
_SOURCE = (
    "{%- for m in messages -%}{%- if m.role == 'assistant' -%}" + _TURN + "{%- else -%}"
    "<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)
STABLE = _SOURCE.replace("KEEP", "true")
DROPS_REASONING = _SOURCE.replace("KEEP", "loop.last")

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "Use the tool.",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "P"}}}
        ],
    },
    {"role": "tool", "content": "21 C"},
    {"role": "assistant", "content": "It is 21 C.", "reasoning_content": "Read it."},
    {"role": "user", "content": "Thanks."},
]


def _generation(template: ChatTemplate, index: int) -> tuple[str, str]:
    """The prompt the model was given for messages[index] and what it wrote after it."""
    prompt = template.render(MESSAGES[:index], add_generation_prompt=True)
    upto = template.render(MESSAGES[: index + 1], add_generation_prompt=False)
    assert upto.startswith(prompt)
    return prompt, upto[len(prompt) :]


def test_stable_history_gives_one_sample_with_every_turn() -> None:
    template = ChatTemplate(STABLE)
    result = template.training_samples(MESSAGES)
    assert not result.per_turn and "one sample" in result.reason
    (sample,) = result.samples
    assert sample.text == template.render(MESSAGES, add_generation_prompt=False)
    assert [t.index for t in sample.turns] == [2, 4]
    for turn in sample.turns:
        prompt, generated = _generation(template, turn.index)
        assert sample.text[: turn.start] == prompt
        assert sample.text[turn.start : turn.end] == generated
    assert sample.spans == tuple((t.start, t.end) for t in sample.turns)


def test_rewritten_history_gives_one_sample_per_turn() -> None:
    template = ChatTemplate(DROPS_REASONING)
    whole = template.render(MESSAGES, add_generation_prompt=False)
    assert "Use the tool." not in whole  # the first turn's reasoning is gone from history
    result = template.training_samples(MESSAGES)
    assert result.per_turn and result.reason.startswith("messages[2]:")
    assert len(result.samples) == 2
    for sample in result.samples:
        (turn,) = sample.turns
        prompt, generated = _generation(template, turn.index)
        assert sample.text == prompt + generated
        assert sample.spans == ((len(prompt), len(sample.text)),)
    assert "<think>Use the tool.</think>" in result.samples[0].trained_text()[0]


def test_split_on_request_and_refused_single() -> None:
    stable = ChatTemplate(STABLE).training_samples(MESSAGES, split="per_turn")
    assert stable.per_turn and stable.reason == "split per turn on request"
    with pytest.raises(TemplateError, match=r"messages\[2\]"):
        ChatTemplate(DROPS_REASONING).training_samples(MESSAGES, split="single")


@pytest.mark.parametrize("source", [STABLE, DROPS_REASONING], ids=["stable", "rewritten"])
def test_parts_choose_what_is_trained(source: str) -> None:
    template = ChatTemplate(source)
    calls = "".join(
        "".join(s.trained_text())
        for s in template.training_samples(MESSAGES, parts=["tool_calls"]).samples
    )
    content = "".join(
        "".join(s.trained_text())
        for s in template.training_samples(MESSAGES, parts=["content"]).samples
    )
    reasoning = "".join(
        "".join(s.trained_text())
        for s in template.training_samples(MESSAGES, parts=["reasoning"]).samples
    )
    assert "get_weather" in calls and "Checking." not in calls and "Use the tool." not in calls
    assert "Checking." in content and "It is 21 C." in content
    assert "get_weather" not in content and "Use the tool." not in content
    assert "Use the tool." in reasoning and "Read it." in reasoning
    assert "Checking." not in reasoning and "get_weather" not in reasoning


def test_last_turn_only_and_end_of_turn_out() -> None:
    template = ChatTemplate(STABLE)
    last = template.training_samples(MESSAGES, turns="last")
    (sample,) = last.samples
    assert [t.index for t in sample.turns] == [4]
    (trained,) = sample.trained_text()
    assert trained == _generation(template, 4)[1]
    without = template.training_samples(MESSAGES, turns="last", end_of_turn=False)
    (trained_without,) = without.samples[0].trained_text()
    marker_and_after = trained[len(trained_without) :]
    assert trained.startswith(trained_without) and marker_and_after.strip()
    assert marker_and_after.strip() in template.analyze().end_of_turn


def test_skew_check_finds_a_mask_over_the_rewritten_render() -> None:
    """The whole render with render_spans' spans (what a single-render trainer uses) is not
    what the model saw for its first turn; our per-turn samples are."""
    template = ChatTemplate(DROPS_REASONING)
    prompt = template.render_spans(MESSAGES)
    single = TrainingSample(
        prompt.text,
        tuple(prompt.assistant_spans),
        tuple(
            TrainedTurn(i, s, e) for i, (s, e) in zip((2, 4), prompt.assistant_spans, strict=True)
        ),
    )
    problems = template.sample_skew(single, MESSAGES)
    assert problems and problems[0].startswith("messages[2]:")
    for sample in template.training_samples(MESSAGES).samples:
        assert template.sample_skew(sample, MESSAGES) == []


def test_bad_options_and_conversations_are_request_errors() -> None:
    template = ChatTemplate(STABLE)
    with pytest.raises(RequestError, match="parts"):
        template.training_samples(MESSAGES, parts=["content", "images"])
    with pytest.raises(RequestError, match="turns"):
        template.training_samples(MESSAGES, turns="first")
    with pytest.raises(RequestError, match="split"):
        template.training_samples(MESSAGES, split="sometimes")
    one = template.training_samples(MESSAGES, parts="content")  # a name, not its letters
    assert one.samples == template.training_samples(MESSAGES, parts=["content"]).samples
    with pytest.raises(RequestError, match="no assistant turn"):
        template.training_samples(MESSAGES[:2])


def test_rows_and_collate_keep_exactly_the_trained_tokens() -> None:
    torch = pytest.importorskip("torch", reason="collate needs torch (the train extra)")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    template = ChatTemplate(DROPS_REASONING)
    samples = template.training_samples(MESSAGES, parts=["content", "tool_calls"]).samples
    word = tokenizers.Tokenizer(tokenizers.models.BPE())
    word.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    word.train_from_iterator([s.text for s in samples], trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=word)
    rows = sample_rows(tokenizer, samples)
    batch = collate(rows, pad_token_id=0)
    assert batch["input_ids"].shape == batch["labels"].shape
    for row, labels in zip(rows, batch["labels"].tolist(), strict=True):
        kept = [t for t in labels if t != IGNORE_INDEX]
        assert kept == [
            t for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m
        ]
        assert kept and len(kept) < len(row["input_ids"])
        assert isinstance(batch["labels"], torch.Tensor)


def test_a_stop_token_the_next_message_prints_stays_with_a_rewritten_turn() -> None:
    """GLM-style: no end-of-turn after the assistant, the next message's ``<|user|>`` is the
    model's stop token; the turn renders differently once that message follows (its reasoning
    dropped), and the per-turn sample still ends with the token."""
    source = (
        "{%- for m in messages -%}<|{{ m.role }}|>\n"
        "{%- if m.role == 'assistant' and loop.last and m.reasoning_content -%}"
        "<think>{{ m.reasoning_content }}</think>{%- endif -%}{{ m.content }}{%- endfor -%}"
        "{%- if add_generation_prompt -%}<|assistant|>\n{%- endif -%}"
    )
    template = ChatTemplate(source)
    (marker,) = template.analyze().end_of_turn
    messages = [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet them."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4.", "reasoning_content": "Add them."},
    ]
    result = template.training_samples(messages)
    assert result.per_turn
    first = result.samples[0]
    prompt = template.render(messages[:1], add_generation_prompt=True)
    generated = template.render(messages[:2], add_generation_prompt=False)[len(prompt) :]
    assert "Greet them." in generated
    assert first.text == prompt + generated + marker
    assert first.trained_text() == [generated + marker]
    assert template.sample_skew(first, messages) == []
