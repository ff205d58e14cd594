"""The gpt-oss "harmony" format: parse, stream and grammar, on our own template and the corpus.

Outputs are rendered by the templates themselves (the assistant turn minus the prompt), so
the expected message is what was rendered, never a hand-typed parse result.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from datetime import datetime
from typing import Any

import pytest
from helpers.formats import (
    ARGUMENT_CUTS,
    TOOLS,
    USER,
    call,
    check_arguments_turning_invalid,
    check_fragment_mix,
    check_streaming,
    corpus_template,
    expected,
    lazy_start,
    model_output,
    needle_text_grows,
    normalized,
    own_template,
    scenarios,
    stream,
)
from helpers.gbnf_oracle import accepts
from helpers.paths import bench_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import ChatTemplate
from autoparser.params import ChatParams

OWN = "handlers/harmony_like.jinja"
RETURN = "<|return|>"
CALL = "<|call|>"
SCENARIOS = scenarios(CALL)
CALL_SCENARIOS = [name for name, msg in SCENARIOS.items() if msg.get("tool_calls")]


def _params(
    template: ChatTemplate, tools: list[dict[str, Any]] | None = TOOLS, **kw: Any
) -> ChatParams:
    kw.setdefault("call_id_seed", 11)
    return template.apply(USER, tools=tools, **kw)


def _own_output(name: str) -> str:
    return model_output(own_template(OWN), SCENARIOS[name], TOOLS, (RETURN,))


# --------------------------------------------------------------------------- own template


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_parse_gives_back_the_message(name: str) -> None:
    text = _own_output(name)
    message = _params(own_template(OWN), parallel_tool_calls=True).parse(text)
    assert normalized(message) == expected(SCENARIOS[name])
    assert not message.truncated


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_end_markers_are_optional(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN), parallel_tool_calls=True)
    bare = text.removesuffix(CALL)
    assert params.parse(bare) == params.parse(text) == params.parse(text + RETURN)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_streaming_equals_parse(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN), parallel_tool_calls=True)
    check_streaming(params, text, seed=zlib.crc32(name.encode()))
    deltas, message = stream(params, list(text))
    assert normalized(message) == expected(SCENARIOS[name])
    for delta in deltas:
        for field in ("content", "reasoning_content"):
            assert "<|" not in delta.get(field, ""), delta


@pytest.mark.parametrize("name", CALL_SCENARIOS)
def test_lazy_grammar_accepts_from_trigger(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN), parallel_tool_calls=True)
    assert params.grammar is not None and params.grammar_lazy
    assert accepts(params.grammar, text[lazy_start(params, text) :])


@pytest.mark.parametrize("name", [n for n in CALL_SCENARIOS if not SCENARIOS[n].get("content")])
def test_required_grammar_accepts_calls(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN), tool_choice="required", parallel_tool_calls=True)
    assert params.grammar is not None and not params.grammar_lazy
    assert params.grammar_triggers == []
    assert accepts(params.grammar, text), text
    assert accepts(params.grammar, text.removesuffix(CALL))


def test_required_grammar_rejects_content_before_the_call() -> None:
    params = _params(own_template(OWN), tool_choice="required")
    assert params.grammar is not None
    assert not accepts(params.grammar, _own_output("content_call"))
    assert not accepts(params.grammar, _own_output("content"))


_TO = " to=functions.get_weather"
_ARGS = '<|message|>{"city": "Oslo"}'
HEADERS = {
    "recipient-first": f"{_TO}<|channel|>commentary json{_ARGS}",
    "constrain": f"{_TO}<|channel|>commentary <|constrain|>json{_ARGS}",
    "channel-first": f"<|channel|>commentary{_TO} json{_ARGS}",
    "channel-first-constrain": f"<|channel|>commentary{_TO} <|constrain|>json{_ARGS}",
    "constrain-no-space": f"<|channel|>commentary{_TO}<|constrain|>json{_ARGS}",
    "no-type": f"<|channel|>commentary{_TO}{_ARGS}",
    "analysis-channel": f"<|channel|>analysis{_TO}{_ARGS}",
}


@pytest.mark.parametrize("header", list(HEADERS))
@pytest.mark.parametrize("ending", ["", CALL])
def test_header_variants(header: str, ending: str) -> None:
    text = (
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant" + HEADERS[header] + ending
    )
    params = _params(own_template(OWN))
    message = params.parse(text)
    assert message.reasoning_content == "Think."
    assert message.content is None
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Oslo"})
    ]
    check_streaming(params, text, count=5)
    if header != "analysis-channel":  # the grammar allows the trained commentary channel only
        assert params.grammar is not None
        assert accepts(params.grammar, text[lazy_start(params, text) :])


def test_reasoning_format_none_keeps_the_analysis_message_as_content() -> None:
    text = _own_output("reasoning_content")
    message = _params(own_template(OWN), reasoning_format="none").parse(text)
    assert message.reasoning_content is None
    assert message.content == "<|channel|>analysis<|message|>Let me think.\nStep 1.<|end|>Done: 42."


def test_tool_choice_none_keeps_calls_as_content() -> None:
    text = _own_output("one_call")
    params = _params(own_template(OWN), tool_choice="none")
    assert params.grammar is None
    message = params.parse(text)
    assert message.tool_calls == []
    assert message.content is not None and "to=functions.get_weather" in message.content
    check_streaming(params, text, count=5)


def test_named_tool_choice_allows_only_that_tool() -> None:
    params = _params(
        own_template(OWN), tool_choice={"type": "function", "function": {"name": "search"}}
    )
    assert params.grammar is not None and not params.grammar_lazy
    template = own_template(OWN)
    search = model_output(
        template, {"role": "assistant", "tool_calls": [call("search", {"query": "x"})]}, TOOLS, ()
    )
    assert accepts(params.grammar, search)
    assert not accepts(params.grammar, _own_output("one_call"))


def test_parallel_calls_only_when_allowed() -> None:
    text = _own_output("two_calls")
    single = _params(own_template(OWN), parallel_tool_calls=False)
    parallel = _params(own_template(OWN), parallel_tool_calls=True)
    assert single.grammar and parallel.grammar
    assert accepts(parallel.grammar, text[lazy_start(parallel, text) :])
    assert not accepts(single.grammar, text[lazy_start(single, text) :])
    # The parser still reads every call the model wrote.
    assert len(single.parse(text).tool_calls) == 2


def test_response_format_constrains_the_final_message() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    params = _params(own_template(OWN), tools=None, response_format=fmt)
    assert params.grammar is not None and not params.grammar_lazy
    answer = {"role": "assistant", "reasoning_content": "Hmm.", "content": '{"answer": 42}'}
    text = model_output(own_template(OWN), answer, None, (RETURN,))
    assert accepts(params.grammar, text)
    assert accepts(params.grammar, text.split("<|start|>assistant", 1)[1])
    assert not accepts(params.grammar, text.replace("42", '"42"'))
    assert params.parse(text).content == '{"answer": 42}'


def test_unknown_recipient_stays_content() -> None:
    text = '<|channel|>commentary to=functions.launch json<|message|>{"x": 1}<|call|>'
    message = _params(own_template(OWN)).parse(text)
    assert message.tool_calls == []
    assert message.content == '<|channel|>commentary to=functions.launch json<|message|>{"x": 1}'


def test_stray_text_outside_channels_is_content() -> None:
    text = "Plain answer without channels."
    params = _params(own_template(OWN))
    assert params.parse(text).content == text
    check_streaming(params, text, count=5)


def test_truncated_call_is_kept_apart_and_flagged() -> None:
    """Output cut inside the arguments: no call, the call message's text is not content
    but the message's truncated_call."""
    text = _own_output("one_call")
    cut = text[: text.index('"Paris"') + 4]
    params = _params(own_template(OWN))
    message = params.parse(cut)
    assert message.truncated and message.tool_calls == []
    assert message.content is None
    cut_call = message.truncated_call
    assert cut_call is not None and cut_call.endswith('{"city": "Par')
    assert "get_weather" in cut_call
    check_streaming(params, cut, count=5)


def test_output_stopped_on_a_call_header_drops_it() -> None:
    """The model stopped right after opening a call message: nothing of a call was
    written, the header is dropped (not content) and the message flagged truncated."""
    params = _params(own_template(OWN))
    head = "<|channel|>analysis<|message|>Need weather.<|end|>"
    for opener in ("<|start|>assistant", "<|start|>assistant to=functions.", "<|start|>"):
        message = params.parse(head + opener)
        assert (message.content, message.reasoning_content) == (None, "Need weather.")
        assert message.truncated, opener
        check_streaming(params, head + opener, count=3)


def test_truncated_reasoning_is_kept_and_flagged() -> None:
    text = "<|channel|>analysis<|message|>Still thinking about"
    message = _params(own_template(OWN)).parse(text)
    assert message.truncated and message.reasoning_content == "Still thinking about"


def test_needles_stream_in_order() -> None:
    message = {
        "role": "assistant",
        "reasoning_content": "r-1 then r-2",
        "content": "c-3 and c-4",
        "tool_calls": [call("search", {"query": "a-5 a-6", "tags": ["a-7"]})],
    }
    text = model_output(own_template(OWN), message, TOOLS, (RETURN,))
    params = _params(own_template(OWN))
    needle_text_grows(params, text, ["r-1", "r-2", "c-3", "c-4", "a-5", "a-6", "a-7"])


def test_preserved_tokens_stops_and_triggers() -> None:
    params = _params(own_template(OWN))
    assert {t.value for t in params.grammar_triggers} == {" to=functions."}
    harmony = ["<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", CALL, RETURN]
    assert set(harmony) <= set(params.preserved_tokens)
    assert len(params.preserved_tokens) == len(set(params.preserved_tokens))
    # The analysis' end of turn, then the end of a call message.
    assert params.additional_stops == [RETURN, CALL]
    # Without calls nor a JSON answer the model writes no <|constrain|>.
    plain = _params(own_template(OWN), tools=None)
    assert set(plain.preserved_tokens) == set(harmony) - {"<|constrain|>"}
    assert plain.additional_stops == [RETURN, CALL]


def test_preserved_tokens_follow_the_analysis() -> None:
    """Only the markers the template is seen to use are preserved (no <|return|> here)."""
    from autoparser.params import build_params

    analysis = own_template(OWN).analyze()
    assert RETURN in analysis.end_of_turn
    without_return = dataclasses.replace(analysis, end_of_turn=("<|end|>",))
    params = build_params(without_return, prompt="<|start|>assistant", tools=TOOLS)
    assert RETURN not in params.preserved_tokens
    assert {"<|start|>", "<|end|>", "<|constrain|>", CALL} <= set(params.preserved_tokens)
    # <|end|> closes a channel, never the turn: it is no stop even where the analysis
    # takes it for the end of turn (a template variant ending its history turns with it).
    assert params.additional_stops == [RETURN, CALL]


# --------------------------------------------------------------------------- corpus


def _corpus_template() -> ChatTemplate:
    return corpus_template("openai-gpt-oss-120b.jinja", "gpt-oss")


# The real template writes the content of a tool-call message into the analysis channel and
# renders only the first call of a message: those scenarios are not expressible there.
CORPUS_NA = {
    "content_call": "content of a call message is rendered as analysis",
    "two_calls": "the template renders one call per message",
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_corpus_gpt_oss_round_trip(name: str) -> None:
    if name in CORPUS_NA:
        pytest.skip(f"n/a: {CORPUS_NA[name]}")
    template = _corpus_template()
    assert template.analyze().handler == "harmony"
    text = model_output(template, SCENARIOS[name], TOOLS, (RETURN,))
    params = _params(template)
    assert normalized(params.parse(text)) == expected(SCENARIOS[name])
    check_streaming(params, text, count=5, seed=3)


@pytest.mark.parametrize("name", [n for n in CALL_SCENARIOS if n not in CORPUS_NA])
def test_corpus_gpt_oss_grammar(name: str) -> None:
    template = _corpus_template()
    text = model_output(template, SCENARIOS[name], TOOLS, (RETURN,))
    params = _params(template)
    assert params.grammar is not None and params.grammar_lazy
    assert accepts(params.grammar, text[lazy_start(params, text) :])
    required = _params(template, tool_choice="required")
    assert required.grammar is not None and accepts(required.grammar, text)


def _bench(scale: str) -> tuple[str, dict[str, Any]]:
    bench = bench_dir()
    if bench is None or not (bench / f"openai-gpt-oss-120b.{scale}.txt").is_file():
        pytest.skip("gpt-oss bench output not found (../shared/bench)")
    text = (bench / f"openai-gpt-oss-120b.{scale}.txt").read_text(encoding="utf-8")
    meta = json.loads((bench / f"openai-gpt-oss-120b.{scale}.meta.json").read_text("utf-8"))
    return text, meta


def _recorded_date(prompt: str) -> datetime:
    """The date gpt-oss's template printed into the recorded prompt (``Current date: ...``)."""
    found = re.search(r"Current date: (\d{4}-\d{2}-\d{2})", prompt)
    assert found, "recorded gpt-oss prompt has no 'Current date:' line"
    return datetime.strptime(found.group(1), "%Y-%m-%d")


@pytest.mark.parametrize("scale", ["1x", "8x"])
def test_bench_output_parses_to_the_rendered_message(scale: str) -> None:
    text, meta = _bench(scale)
    template = _corpus_template()
    inputs = meta["inputs"]
    params = template.apply(
        inputs["messages"],
        tools=inputs.get("tools"),
        parallel_tool_calls=inputs.get("parallel_tool_calls"),
        reasoning_format=inputs.get("reasoning_format", "auto"),
        enable_thinking=inputs.get("enable_thinking"),
        now=_recorded_date(meta["prompt"]),
    )
    assert params.prompt == meta["prompt"]
    want = meta["rendered_assistant_message"]
    got = params.parse(text)
    assert (got.content or "").strip() == (want.get("content") or "").strip()
    assert (got.reasoning_content or "").strip() == (want.get("reasoning_content") or "").strip()
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in want.get("tool_calls", [])
    ]
    chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
    _deltas, streamed = stream(params, chunks)
    assert streamed == got
    assert params.grammar is not None
    start = lazy_start(params, text)
    assert accepts(params.grammar, text[start:])


# --------------------------------------------------------------------------- robustness

FRAGMENTS = [
    "<|start|>assistant",
    "<|channel|>",
    "analysis",
    "final",
    "commentary",
    " to=functions.get_weather",
    " to=functions.nope",
    " json",
    "<|constrain|>",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    '{"city": "X"}',
    '{"city": ',
    "text ",
    "<|",
    "\n",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=14),
    ARGUMENT_CUTS,
    st.integers(0, 10_000),
)
def test_any_mix_of_markers_streams_like_it_parses(parts: list[str], cut: str, seed: int) -> None:
    # Arguments may break anywhere ('{"city": ' then another fragment).
    check_fragment_mix(_params(own_template(OWN)), parts, cut, seed)


def test_arguments_turning_invalid_mid_stream() -> None:
    """A call announced while streaming stays a call in parse(): cut, closed, flagged."""
    header = " to=functions.get_weather<|channel|>commentary json<|message|>"
    text = header + '{"city": <|end|><|start|>assistant<|channel|>final<|message|>ok'
    check_arguments_turning_invalid(_params(own_template(OWN)), text)
