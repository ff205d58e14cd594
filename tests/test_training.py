"""Assistant spans and masks for training, with transformers as the oracle.

* Templates that ship ``{% generation %}`` blocks: the blocks are stripped, our spans are
  computed from the stripped template and compared with transformers'
  ``return_assistant_tokens_mask`` on the original, as character spans and as token masks
  from a real byte-level BPE tokenizer built offline here.
* Generated training templates (``ChatTemplate.training_template``): for every corpus
  template, byte-identical renders with transformers and transformers' generation spans
  equal to ours; the templates it refuses are listed with their reason.
* Properties: spans never cover another message's text; each span parses back into its
  assistant message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.parity import CONVERSATIONS as PARITY_CONVERSATIONS
from helpers.parity import fixed_clock, our_clock, with_conventional_variables
from helpers.paths import CORPUS_SKIP_REASON, corpus_dir, corpus_params, corpus_templates

from autoparser import ChatTemplate, RenderedPrompt, assistant_tokens_mask, tokenize_for_training
from autoparser.cli import main as cli_main
from autoparser.errors import AutoparserError, ExportError, RequestError, TemplateError
from autoparser.training import (
    CHECK_TOOL,
    common_prefix,
    header_match,
    strip_generation_blocks,
    training_template,
)

ctu = pytest.importorskip("transformers.utils.chat_template_utils")
tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

BOS, EOS = "<s>", "</s>"
__all__ = ["fixed_clock"]  # the parity test's fixture: both engines see the same date
# The corpus folder (tests using it skip with CORPUS_SKIP_REASON when it is absent).
TEMPLATES = corpus_dir() or Path("templates-not-found")


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


TIME_TOOL = json.loads(json.dumps(CHECK_TOOL).replace("get_weather", "get_time"))
CONVERSATIONS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "content": (
        [{"role": "user", "content": "Hi there!"}, {"role": "assistant", "content": "Hello."}],
        None,
    ),
    "several_turns": (
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi there!"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4."},
        ],
        None,
    ),
    "assistant_first": (
        [
            {"role": "assistant", "content": "Welcome, ask away."},
            {"role": "user", "content": "Hi there!"},
            {"role": "assistant", "content": "Hello."},
        ],
        None,
    ),
    "reasoning": (
        [
            {"role": "user", "content": "Hi there!"},
            {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet them."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4.", "reasoning_content": "Add them."},
        ],
        None,
    ),
    "tool_call": (
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("call00001", "get_weather", {"city": "Paris"})],
            },
            {"role": "tool", "tool_call_id": "call00001", "content": "21 degrees"},
            {"role": "assistant", "content": "It is warm."},
        ],
        [CHECK_TOOL],
    ),
    "parallel_calls": (
        [
            {"role": "user", "content": "Weather and time in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Two tools.",
                "tool_calls": [
                    _call("call00001", "get_weather", {"city": "Paris"}),
                    _call("call00002", "get_time", {"city": "Paris"}),
                ],
            },
            {"role": "tool", "tool_call_id": "call00001", "content": "21 degrees"},
            {"role": "tool", "tool_call_id": "call00002", "content": "14:05 local"},
            {"role": "assistant", "content": "Warm, early afternoon."},
            {"role": "user", "content": "Thanks a lot"},
        ],
        [CHECK_TOOL, TIME_TOOL],
    ),
}

# How each template's generation blocks relate to what the model generates (our spans):
#   exact   - the same spans;
#   header  - the block also holds the end of the prompt the model was given for the turn
#             (the role header, a forced ``<think>``, DeepSeek's ``<｜tool▁outputs▁end｜>``):
#             the model never writes it, so our span starts after it;
#   space   - the template writes a space between the header and the content the prompt
#             ends before (``ASSISTANT:`` then `` Hello``): the model writes it, our span has it.
GENERATION_TEMPLATES = {
    "LFM2.5-8B-A1B": "exact",
    "axolotl-llava": "space",
    "axolotl-phi_4": "exact",
    "hfjs-lfm2.5-vl-450m": "exact",
    "hfjs-smollm3-3b": "header",
    "poolside-Laguna-S-2.1": "header",
    "poolside-Laguna-XS-2.1": "header",
    "poolside-Laguna-XS.2": "header",
    "trl-deepseekv3_training": "header",
    "trl-glm4moe_training": "exact",
    "trl-qwen3_training": "exact",
    "trl-qwen3_vl_training": "exact",
}
_GENERATION_TAG = re.compile(r"\{%-?\s*generation")


def _clean(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as apply_chat_template passes them (None fields dropped)."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def _oracle(source: str, messages: list[dict[str, Any]], tools: Any, agp: bool = False) -> Any:
    (text,), (spans,) = ctu.render_jinja_template(
        conversations=[_clean(messages)],
        tools=tools,
        chat_template=source,
        return_assistant_tokens_mask=True,
        add_generation_prompt=agp,
        bos_token=BOS,
        eos_token=EOS,
    )
    return text, [tuple(s) for s in spans if s[1] > s[0]]


_SPECIAL = re.compile(r"<\|[^|\s]{1,40}\|>|<｜[^｜]{1,40}｜>|</?(?:s|think|assistant|user)>")


def _tokenizer(source: str, texts: list[str]) -> Any:
    """A real byte-level BPE fast tokenizer trained here on the texts (no download), with
    the template's special tokens as single tokens."""
    models, pre, trainers, decoders = (
        tokenizers.models,
        tokenizers.pre_tokenizers,
        tokenizers.trainers,
        tokenizers.decoders,
    )
    specials = sorted(set(_SPECIAL.findall(source)) | {BOS, EOS})
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, initial_alphabet=pre.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, additional_special_tokens=specials
    )


def _in_prompt(source: str, head: list[dict[str, Any]], tools: Any, extra: str) -> bool:
    """Whether ``extra`` is prompt text: the end of the render of ``head`` followed by the
    start of the generation prompt the template adds to it."""
    if not head:  # the turn opens the conversation: its prompt is the generation prompt
        probe = [{"role": "user", "content": "x"}]
        before, _ = _oracle(source, probe, tools)
        prompt, _ = _oracle(source, probe, tools, agp=True)
        return prompt.startswith(before) and prompt[len(before) :].startswith(extra)
    before, _ = _oracle(source, head, tools)
    prompt, _ = _oracle(source, head, tools, agp=True)
    header = prompt[len(before) :] if prompt.startswith(before) else ""
    return any(
        before.endswith(extra[:cut]) and header.startswith(extra[cut:])
        for cut in range(len(extra) + 1)
    )


def _assert_spans_cover_no_other_message(
    prompt: RenderedPrompt, messages: list[dict[str, Any]]
) -> None:
    """Spans are ordered, disjoint, and hold no user, system or tool text."""
    previous = 0
    for start, end in prompt.assistant_spans:
        assert previous <= start < end <= len(prompt.text)
        previous = end
    for message in messages:
        content = message.get("content")
        if message["role"] == "assistant" or not isinstance(content, str) or not content:
            continue
        for found in re.finditer(re.escape(content), prompt.text):
            for start, end in prompt.assistant_spans:
                assert found.end() <= start or end <= found.start(), (message, found.start())


def _assistant_indices(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if m["role"] == "assistant"]


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
def test_generation_templates_are_all_listed() -> None:
    """Every corpus template with generation blocks is compared below (none forgotten)."""
    found = {p.stem for p in corpus_templates() if _GENERATION_TAG.search(p.read_text("utf-8"))}
    assert found == set(GENERATION_TEMPLATES)


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
@pytest.mark.parametrize("name", sorted(GENERATION_TEMPLATES))
def test_spans_match_transformers_generation_blocks(name: str) -> None:
    source = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    ours_template = ChatTemplate(strip_generation_blocks(source), bos_token=BOS, eos_token=EOS)
    relation = GENERATION_TEMPLATES[name]
    texts: list[str] = []
    cases: list[tuple[str, RenderedPrompt, list[tuple[int, int]], list[dict[str, Any]], Any]] = []
    for conv, (messages, tools) in CONVERSATIONS.items():
        try:
            text, oracle = _oracle(source, messages, tools)
        except Exception:  # the template cannot render it (it raises): neither do we
            with pytest.raises(TemplateError):
                ours_template.render_spans(messages, tools, polyfills=False)
            continue
        ours = ours_template.render_spans(messages, tools, polyfills=False)
        assert ours.text == text, conv
        assert len(ours.assistant_spans) == len(oracle) == len(_assistant_indices(messages)), conv
        allowed: list[tuple[int, int]] = []  # where the two may differ, by the relation
        for index, o_span, span in zip(
            _assistant_indices(messages), oracle, ours.assistant_spans, strict=True
        ):
            assert span[1] == o_span[1], (
                conv,
                text[o_span[0] : o_span[1]],
                text[span[0] : span[1]],
            )
            if relation == "exact":
                assert span == o_span, conv
            elif relation == "header":
                assert o_span[0] <= span[0], conv
                assert _in_prompt(source, messages[:index], tools, text[o_span[0] : span[0]]), conv
            else:
                assert span[0] <= o_span[0] and not text[span[0] : o_span[0]].strip(), conv
            allowed.append((min(span[0], o_span[0]), max(span[0], o_span[0])))
        texts.append(text)
        cases.append((conv, ours, allowed, messages, tools))
    # Token masks: transformers' own apply_chat_template on the original template.
    tokenizer = _tokenizer(source, texts)
    for conv, ours, allowed, messages, tools in cases:
        out = tokenizer.apply_chat_template(
            _clean(messages),
            tools=tools,
            chat_template=source,
            return_assistant_tokens_mask=True,
            return_dict=True,
            tokenize=True,
        )
        row = tokenize_for_training(tokenizer, ours)
        assert row["input_ids"] == list(out["input_ids"]), conv
        offsets = tokenizer(ours.text, add_special_tokens=False, return_offsets_mapping=True)[
            "offset_mapping"
        ]
        assert row["assistant_masks"] == assistant_tokens_mask(ours, offsets)
        assert 0 < sum(row["assistant_masks"]) < len(row["assistant_masks"]), conv
        for token, (mine, theirs) in enumerate(
            zip(row["assistant_masks"], out["assistant_masks"], strict=True)
        ):
            if mine != theirs:  # only inside a documented difference
                start, end = offsets[token]
                assert any(a <= start and end <= b for a, b in allowed), (conv, token)
        if relation == "exact":
            assert row["assistant_masks"] == list(out["assistant_masks"]), conv


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
def test_trl_qwen3_keeps_reasoning_the_original_drops() -> None:
    """TRL's qwen3_training template keeps every turn's reasoning (its generation blocks
    hold it); the original Qwen3 template drops reasoning before the last user message, and
    our spans on it are what it renders: the model is not trained on reasoning it never saw."""
    messages, tools = CONVERSATIONS["reasoning"]
    original = ChatTemplate.from_file(TEMPLATES / "Qwen-Qwen3-0.6B.jinja")
    trl_source = (TEMPLATES / "trl-qwen3_training.jinja").read_text(encoding="utf-8")
    trl = ChatTemplate(strip_generation_blocks(trl_source))
    first_original = original.render_spans(messages, tools, polyfills=False).assistant_text()
    first_trl = trl.render_spans(messages, tools, polyfills=False).assistant_text()
    assert "Greet them." not in first_original[0] and "Greet them." in first_trl[0]
    assert "Add them." in first_original[1] and "Add them." in first_trl[1]


# ----------------------------------------------------------------- generated templates

# Templates the training template refuses, with why (a substring of the ExportError or
# TemplateError): never a template that renders differently.
EXPORT_REFUSED = {
    "DeepSeek-V3.2": "cannot locate assistant turn",  # history turns lose "<think>" after
    "vllm-tool_chat_template_deepseekr1": "cannot locate assistant turn",  # tool outputs move
    "vllm-tool_chat_template_deepseekv3": "cannot locate assistant turn",  # tool outputs move
    "xinference-deepseek-v3": "cannot locate assistant turn",  # whitespace moves with turns
    "MiroThinker-v1": "syntax error",
    "hfjs-fireworks-firefunction-v1": "raised an exception",
    "llamacpp-test-gigachat-20b-a3b-instruct": "render failed",
    "vllm-template_vicuna": "syntax error",
    "vllm-tool_chat_template_deepseekv31": "syntax error",
}


# Templates whose training template exports, but that transformers renders for none of the
# conversations (so nothing is compared), with why.
NOTHING_COMPARABLE = {
    "hfjs-cohere-command-r-v01": "reads Cohere's own tool shape and iterates tools unguarded:"
    " transformers renders no OpenAI-shaped conversation",
}


@pytest.mark.parametrize("path", corpus_params())
@pytest.mark.usefixtures("fixed_clock")
def test_training_template_renders_identically_with_our_spans(path: Path) -> None:
    source = strip_generation_blocks(path.read_text(encoding="utf-8"))
    try:
        template = ChatTemplate(
            source, bos_token=BOS, eos_token=EOS, name=path.stem, clock=our_clock
        )
        wrapped = template.training_template()
    except (ExportError, TemplateError) as exc:
        assert path.stem in EXPORT_REFUSED, f"refused, not listed: {exc}"
        assert EXPORT_REFUSED[path.stem] in str(exc)
        return
    assert path.stem not in EXPORT_REFUSED, "listed as refused but exported"
    compared = 0
    # The parity conversations, and this module's tool conversations, whose tools describe
    # every parameter (Command R's templates need the descriptions).
    own = {
        f"own_{name}": {"messages": CONVERSATIONS[name][0], "tools": CONVERSATIONS[name][1]}
        for name in ("tool_call", "parallel_calls")
    }
    for parity_case in [*PARITY_CONVERSATIONS.values(), *own.values()]:
        case = parity_case
        if template.renderer.conventional_variables:  # passed to transformers too
            case = with_conventional_variables(template, parity_case)
        messages, tools = case["messages"], case.get("tools")
        agp, kwargs = case.get("add_generation_prompt", True), case.get("kwargs", {})
        options = {"tools": tools, "add_generation_prompt": agp, "bos_token": BOS, "eos_token": EOS}
        try:
            (want,), _ = ctu.render_jinja_template(
                conversations=[_clean(messages)], chat_template=source, **options, **kwargs
            )
        except Exception:
            continue  # transformers cannot render the original: nothing to keep
        (got,), (spans,) = ctu.render_jinja_template(
            conversations=[_clean(messages)],
            chat_template=wrapped,
            return_assistant_tokens_mask=True,
            **options,
            **kwargs,
        )
        assert got == want
        ours = template.render_spans(messages, tools, agp, polyfills=False, **kwargs)
        assert ours.text == want
        assert [tuple(s) for s in spans if s[1] > s[0]] == ours.assistant_spans
        _assert_spans_cover_no_other_message(ours, messages)
        compared += 1
    if path.stem in NOTHING_COMPARABLE:
        assert not compared, "listed as not comparable but compared"
        return
    assert compared, "no conversation compared"


# ------------------------------------------------------------------------ properties

PROPERTY_TEMPLATES = [
    "Qwen-Qwen3-0.6B",
    "trl-qwen3_training",
    "LFM2.5-8B-A1B",
    "glm_4_5",
    "HuggingFaceTB-SmolLM3-3B",
    "deepseek-ai-DeepSeek-V3.1",
]


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
@pytest.mark.parametrize("name", PROPERTY_TEMPLATES)
@pytest.mark.parametrize("conv", sorted(CONVERSATIONS))
def test_spans_never_cover_other_messages(name: str, conv: str) -> None:
    messages, tools = CONVERSATIONS[conv]
    template = ChatTemplate.from_file(TEMPLATES / f"{name}.jinja")
    prompt = template.render_spans(messages, tools)
    assert prompt.text == template.render(messages, tools, False)
    _assert_spans_cover_no_other_message(prompt, messages)


def _strip_end_of_turn(text: str, markers: tuple[str, ...]) -> str:
    text = text.rstrip()
    for marker in markers:
        if marker and text.endswith(marker):
            return text[: -len(marker)]
    return text


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
@pytest.mark.parametrize("name", PROPERTY_TEMPLATES)
def test_spans_parse_back_into_the_assistant_messages(name: str) -> None:
    """The last turn of a tool conversation (reasoning kept, as it is the last) parses back
    through the request's own parser, started where the span starts."""
    messages, tools = CONVERSATIONS["parallel_calls"]
    messages = messages[:2]  # user, assistant with reasoning and two calls
    template = ChatTemplate.from_file(TEMPLATES / f"{name}.jinja")
    if not template.caps.supports_tool_calls:  # SmolLM3 renders no calls: content instead
        messages = [messages[0], {"role": "assistant", "content": "Sunny and warm."}]
    prompt = template.render_spans(messages, tools)
    (span_text,) = prompt.assistant_text()
    params = template.apply(messages[:1], tools)
    assert params.prompt == prompt.text[: prompt.assistant_spans[0][0]] or params.prompt.endswith(
        prompt.text[: prompt.assistant_spans[0][0]][-8:]
    )
    parsed = params.parse(_strip_end_of_turn(span_text, template.analyze().end_of_turn))
    calls = [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls]
    want = [
        (c["function"]["name"], c["function"]["arguments"])
        for c in messages[1].get("tool_calls", [])
    ]
    assert calls == want
    assert (parsed.content or "").strip() == messages[1]["content"]


# ---------------------------------------------------------------------- unit checks


def test_assistant_tokens_mask_follows_transformers_overlap_rule() -> None:
    offsets = [(0, 3), (3, 5), (5, 9), (9, 10), (10, 14)]
    assert assistant_tokens_mask([(4, 9)], offsets) == [0, 1, 1, 0, 0]  # straddling counts
    assert assistant_tokens_mask([(3, 5), (10, 12)], offsets) == [0, 1, 0, 0, 1]
    assert assistant_tokens_mask(RenderedPrompt("x" * 14, []), offsets) == [0] * 5


def test_string_primitives() -> None:
    assert common_prefix("abcdef", "abcxyz") == 3
    assert common_prefix("", "abc") == 0
    # A forced "<think>" the history lacks is not matched up to its "<".
    assert header_match("<|im_start|>assistant\n<think>\n", "<|im_start|>assistant\n<tool") == 22
    assert header_match("ASSISTANT:", "ASSISTANT: hi") == 10


def test_tokenize_for_training_needs_a_fast_tokenizer() -> None:
    class Slow:
        is_fast = False

    with pytest.raises(RequestError, match="fast tokenizer"):
        tokenize_for_training(Slow(), RenderedPrompt("", []))


def test_training_template_refuses_what_it_cannot_wrap() -> None:
    with pytest.raises(ExportError, match="generation"):
        training_template("{% generation %}x{% endgeneration %}")
    with pytest.raises(ExportError, match="extends"):
        training_template('{% extends "base" %}')


def test_training_template_keeps_whitespace_and_the_final_newline() -> None:
    source = "  {%- for m in messages %}\n{{ m.role }}: {{ m.content }}\n{% endfor %}  \n"
    template = ChatTemplate(source)
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    wrapped = ChatTemplate(template.training_template())
    assert wrapped.render(messages, None, False) == template.render(messages, None, False)


def test_cli_training_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jinja"
    path.write_text(
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}",
        encoding="utf-8",
    )
    assert cli_main(["training-template", str(path)]) == 0
    out = capsys.readouterr().out
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    (text,), (spans,) = ctu.render_jinja_template(
        conversations=[messages], chat_template=out, return_assistant_tokens_mask=True
    )
    assert text == "<|user|>hi<|end|><|assistant|>yo<|end|>"
    assert [text[s:e] for s, e in spans] == ["yo<|end|>"]


def test_render_spans_errors_are_project_errors() -> None:
    template = ChatTemplate("{{ raise_exception('no') if messages|length > 1 }}{{ messages }}")
    with pytest.raises(AutoparserError):
        template.render_spans(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
        )


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
@pytest.mark.parametrize("name", PROPERTY_TEMPLATES)
@pytest.mark.parametrize("conv", ["several_turns", "tool_call", "parallel_calls"])
def test_every_turn_parses_back(name: str, conv: str) -> None:
    """Every assistant span of a multi-turn conversation, parsed by the parser of the request
    that prompted it, gives the turn's content and calls (reasoning as rendered)."""
    messages, tools = CONVERSATIONS[conv]
    template = ChatTemplate.from_file(TEMPLATES / f"{name}.jinja")
    if tools and not template.caps.supports_tool_calls:
        pytest.skip("the template renders no tool calls")  # SmolLM3: checked with content
    prompt = template.render_spans(messages, tools)
    markers = template.analyze().end_of_turn
    indices = _assistant_indices(messages)
    assert len(prompt.assistant_spans) == len(indices)
    for index, span_text in zip(indices, prompt.assistant_text(), strict=True):
        message = messages[index]
        parsed = template.apply(messages[:index], tools).parse(
            _strip_end_of_turn(span_text, markers)
        )
        calls = [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls]
        want = [
            (c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls", [])
        ]
        assert calls == want, (index, span_text)
        assert (parsed.content or "").strip() == message["content"], (index, span_text)
        reasoning = message.get("reasoning_content")
        if reasoning and reasoning in span_text:  # rendered: read back as reasoning
            assert (parsed.reasoning_content or "").strip() == reasoning


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
@pytest.mark.parametrize(
    "name", ["Qwen-Qwen3-0.6B", "glm_4_5", "mistralai-Mistral-Nemo-Instruct-2407"]
)
def test_training_template_token_masks_equal_ours(name: str) -> None:
    """transformers' apply_chat_template on the generated template, with a real tokenizer,
    gives the assistant_masks tokenize_for_training gives from our spans."""
    source = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    template = ChatTemplate(source, bos_token=BOS, eos_token=EOS)
    wrapped = template.training_template()
    prompts = {}
    for conv, (messages, tools) in CONVERSATIONS.items():
        try:
            prompts[conv] = template.render_spans(messages, tools, polyfills=False)
        except TemplateError:
            continue  # the template refuses it (Mistral: roles must alternate from a user)
    assert len(prompts) >= len(CONVERSATIONS) - 1
    tokenizer = _tokenizer(source, [p.text for p in prompts.values()])
    for conv, (messages, tools) in CONVERSATIONS.items():
        if conv not in prompts:
            continue
        out = tokenizer.apply_chat_template(
            _clean(messages),
            tools=tools,
            chat_template=wrapped,
            return_assistant_tokens_mask=True,
            return_dict=True,
            tokenize=True,
        )
        row = tokenize_for_training(tokenizer, prompts[conv])
        assert row["input_ids"] == list(out["input_ids"]), conv
        assert row["assistant_masks"] == list(out["assistant_masks"]), conv
        assert 0 < sum(row["assistant_masks"]) < len(row["input_ids"]), conv
