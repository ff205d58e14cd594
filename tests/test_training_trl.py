"""A real trainer end to end: TRL's SFTTrainer, a tiny random Llama, a tokenizer built here.

No download: the tokenizer is a byte-level BPE trained on the rendered conversations (the
template's special tokens kept whole), the model a two-layer LlamaConfig initialised at
random; a few CPU steps each. What is checked is what reaches the loss: the labels of every
training batch, captured in ``compute_loss``, equal our trained spans token for token:

* TRL on conversational data with ``assistant_only_loss=True`` and our ``training-template``
  output as the chat template, on a template TRL does not ship (Mistral Nemo);
* the same data as our dataset rows through our collator;
* a history-rewriting template (Qwen3 with reasoning, multi-turn; and a small one written
  here that drops earlier reasoning) as per-turn samples, pre-tokenized rows through TRL.

Without trl/torch (the ``train`` extra) the module skips with the reason, except in CI
(``CI=true``), where .ci/run installs them and a missing one fails.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import corpus_dir

from autoparser import ChatTemplate, RenderedPrompt, tokenize_for_training
from autoparser.cli import main as cli_main
from autoparser.training import IGNORE_INDEX, TrainingSample, collate, sample_rows


def _require(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        reason = f"{module} is not installed (pip install -c constraints.txt '.[train]')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the TRL end-to-end test: {reason}")
        pytest.skip(reason)


torch = _require("torch")
trl = _require("trl")
datasets = _require("datasets")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
TEMPLATES = corpus_dir() or Path("templates-not-found")
_SPECIAL = re.compile(r"<\|[^|\s]{1,40}\|>|\[/?[A-Z_]{2,20}\]|</?(?:s|think|tool_call)>")

CONVERSATIONS: list[list[dict[str, Any]]] = [
    [
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
    ],
    [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
    ],
    [
        {"role": "user", "content": "Say yes."},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "Say no."},
        {"role": "assistant", "content": "No."},
    ],
]
REASONING: list[list[dict[str, Any]]] = [
    [
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet them."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "reasoning_content": "Add two and two."},
    ],
    [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris.", "reasoning_content": "Well known."},
        {"role": "user", "content": "And Italy?"},
        {"role": "assistant", "content": "Rome.", "reasoning_content": "Also known."},
    ],
]
# Drops the reasoning of every assistant turn but the last (as Qwen3 and DeepSeek do).
DROPS_REASONING = (
    "{%- for m in messages -%}{%- if m.role == 'assistant' -%}<|assistant|>"
    "{%- if loop.last and m.reasoning_content -%}<think>{{ m.reasoning_content }}</think>"
    "{%- endif -%}{{ m.content }}<|end|>\n{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>\n"
    "{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)


def _tokenizer(source: str, texts: Sequence[str]) -> Any:
    """A byte-level BPE trained on ``texts``, the template's special tokens kept whole."""
    specials = sorted(set(_SPECIAL.findall(source + "".join(texts))) | {BOS, EOS, PAD})
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=specials,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(list(texts), trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[s for s in specials if s not in (BOS, EOS, PAD)],
    )


def _model(tokenizer: Any) -> Any:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
    )
    return transformers.LlamaForCausalLM(config)


class _Recording(trl.SFTTrainer):  # type: ignore[misc]
    """SFTTrainer that keeps, per example of each batch, the ids and labels the loss sees."""

    seen: list[tuple[tuple[int, ...], tuple[int, ...]]]

    def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        mask = inputs["attention_mask"].bool()
        for ids, labels, keep in zip(inputs["input_ids"], inputs["labels"], mask, strict=True):
            self.seen.append((tuple(ids[keep].tolist()), tuple(labels[keep].tolist())))
        return super().compute_loss(model, inputs, *args, **kwargs)


def _train(
    tokenizer: Any, data: list[dict[str, Any]], tmp_path: Path, collator: Any = None
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    conversational = "messages" in data[0]
    args = trl.SFTConfig(
        output_dir=str(tmp_path),
        # TRL masks conversations itself (assistant_only_loss, through the generation blocks);
        # pre-tokenized rows carry their own assistant_masks, which TRL folds into the labels
        # (assistant_only_loss must then be off: TRL refuses it on non-conversational data);
        # with our collator, TRL's preparation is skipped and the collator builds the labels.
        assistant_only_loss=conversational,
        dataset_kwargs={"skip_prepare_dataset": True} if collator is not None else None,
        max_steps=2 * ((len(data) + 1) // 2),  # every example at least once
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        seed=0,
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )
    trainer = _Recording(
        model=_model(tokenizer),
        args=args,
        train_dataset=datasets.Dataset.from_list(data),
        processing_class=tokenizer,
        data_collator=collator,
    )
    trainer.seen = []
    result = trainer.train()
    assert result.training_loss > 0  # it trained, on a finite loss
    return trainer.seen


def _expected(tokenizer: Any, samples: Sequence[TrainingSample]) -> dict[tuple[int, ...], tuple]:
    """Per sample: its ids and the labels our spans give (ids inside a span, else ignored)."""
    out: dict[tuple[int, ...], tuple[int, ...]] = {}
    for sample in samples:
        row = tokenize_for_training(tokenizer, RenderedPrompt(sample.text, list(sample.spans)))
        labels = [
            t if m else IGNORE_INDEX
            for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True)
        ]
        assert any(m for m in row["assistant_masks"]) and not all(row["assistant_masks"])
        out[tuple(row["input_ids"])] = tuple(labels)
    return out


def _assert_seen_equals(
    seen: list[tuple[tuple[int, ...], tuple[int, ...]]], expected: dict
) -> None:
    assert {ids for ids, _ in seen} == set(expected)  # every sample reached the loss
    for ids, labels in seen:
        assert labels == expected[ids]


@pytest.mark.skipif(
    not (TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja").exists(),
    reason="template corpus not found",
)
def test_trl_with_our_training_template_and_with_our_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja"
    source = path.read_text("utf-8")
    template = ChatTemplate(source, bos_token=BOS, eos_token=EOS)
    results = [template.training_samples(c, polyfills=False) for c in CONVERSATIONS]
    assert not any(r.per_turn for r in results), [r.reason for r in results]
    samples = [s for r in results for s in r.samples]
    tokenizer = _tokenizer(source, [s.text for s in samples])
    command = ["training-template", str(path), "--bos-token", BOS, "--eos-token", EOS]
    assert cli_main(command) == 0
    tokenizer.chat_template = capsys.readouterr().out  # `autoparser training-template` output
    expected = _expected(tokenizer, samples)
    # TRL renders and masks the conversations itself, through the generation blocks.
    seen = _train(tokenizer, [{"messages": c} for c in CONVERSATIONS], tmp_path / "trl")
    _assert_seen_equals(seen, expected)
    # The same data as our rows, through our collator.
    rows = sample_rows(tokenizer, samples)
    collator = functools.partial(collate, pad_token_id=tokenizer.pad_token_id)
    seen = _train(tokenizer, rows, tmp_path / "ours", collator)
    _assert_seen_equals(seen, expected)


def _per_turn_run(template: ChatTemplate, source: str, tmp_path: Path) -> None:
    results = [template.training_samples(c, polyfills=False) for c in REASONING]
    assert all(r.per_turn for r in results), [r.reason for r in results]
    samples = [s for r in results for s in r.samples]
    assert len(samples) == sum(len(c) // 2 for c in REASONING)  # one per assistant turn
    tokenizer = _tokenizer(source, [s.text for s in samples])
    for result, conversation in zip(results, REASONING, strict=True):
        first = result.samples[0]
        assert conversation[1]["reasoning_content"] in first.trained_text()[0]  # kept, as seen
        assert template.sample_skew(first, conversation, polyfills=False) == []
    seen = _train(tokenizer, sample_rows(tokenizer, samples), tmp_path)
    _assert_seen_equals(seen, _expected(tokenizer, samples))


def test_trl_trains_per_turn_samples_of_a_template_that_drops_reasoning(tmp_path: Path) -> None:
    _per_turn_run(
        ChatTemplate(DROPS_REASONING, bos_token=BOS, eos_token=EOS), DROPS_REASONING, tmp_path
    )


@pytest.mark.skipif(
    not (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").exists(), reason="template corpus not found"
)
def test_trl_trains_per_turn_samples_of_qwen3(tmp_path: Path) -> None:
    source = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text("utf-8")
    _per_turn_run(ChatTemplate(source, bos_token=BOS, eos_token=EOS), source, tmp_path)
