"""functionary v3.2 ``>>>recipient`` format: parse, stream and grammar, own template and corpus.

Outputs are rendered by the templates themselves (the assistant turn minus the prompt, which
ends with ``>>>``), so the expected message is what was rendered.
"""

from __future__ import annotations

import json
import re
import zlib
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
    trigger_start,
)
from helpers.gbnf_oracle import accepts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import ChatTemplate
from autoparser.params import ChatParams

OWN = "handlers/functionary_v3_2_like.jinja"
EOT = "<|eot_id|>"
# The format has no reasoning: those scenarios are not expressible.
SCENARIOS = {k: v for k, v in scenarios(">>>").items() if "reasoning" not in k}
CALL_SCENARIOS = [name for name, msg in SCENARIOS.items() if msg.get("tool_calls")]


def _params(
    template: ChatTemplate, tools: list[dict[str, Any]] | None = TOOLS, **kw: Any
) -> ChatParams:
    kw.setdefault("call_id_seed", 5)
    return template.apply(USER, tools=tools, **kw)


def _own_output(name: str) -> str:
    return model_output(own_template(OWN), SCENARIOS[name], TOOLS, (EOT,))


# --------------------------------------------------------------------------- own template


def test_prompt_ends_with_the_recipient_marker() -> None:
    params = _params(own_template(OWN))
    assert params.prompt.endswith(">>>")
    assert _own_output("content").startswith("all\n")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_parse_gives_back_the_message(name: str) -> None:
    message = _params(own_template(OWN)).parse(_own_output(name))
    assert normalized(message) == expected(SCENARIOS[name])
    assert not message.truncated


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_end_of_turn_marker_is_optional(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN))
    assert params.parse(text + EOT) == params.parse(text)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_streaming_equals_parse(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN))
    check_streaming(params, text, seed=zlib.crc32(name.encode()))
    deltas, message = stream(params, list(text))
    assert normalized(message) == expected(SCENARIOS[name])
    for delta in deltas:
        assert ">>" not in delta.get("content", ""), delta


@pytest.mark.parametrize("name", CALL_SCENARIOS)
def test_lazy_grammar_accepts_from_trigger(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN))
    assert params.grammar is not None and params.grammar_lazy
    assert accepts(params.grammar, text[lazy_start(params, text) :])


@pytest.mark.parametrize("name", [n for n in CALL_SCENARIOS if not SCENARIOS[n].get("content")])
def test_required_grammar_accepts_calls(name: str) -> None:
    text = _own_output(name)
    params = _params(own_template(OWN), tool_choice="required")
    assert params.grammar is not None and not params.grammar_lazy
    assert params.grammar_triggers == []
    assert accepts(params.grammar, text), text


def test_required_grammar_rejects_text_segments() -> None:
    params = _params(own_template(OWN), tool_choice="required")
    assert params.grammar is not None
    assert not accepts(params.grammar, _own_output("content_call"))
    assert not accepts(params.grammar, _own_output("content"))


def test_triggers_are_the_call_openings() -> None:
    params = _params(own_template(OWN))
    names = [t["function"]["name"] for t in TOOLS]
    words = {t.value for t in params.grammar_triggers if t.kind == "word"}
    assert words == {f">>>{n}\n" for n in names}
    # The first call follows the prompt's ">>>": a full match anchored at the start.
    (first,) = [t for t in params.grammar_triggers if t.kind == "pattern_full"]
    for name in names:
        text = f'{name}\n{{"city": "Paris"}}'
        assert re.fullmatch(first.value, text) is not None
        assert trigger_start(params, text) == 0
        # A line of text for the user that reads like a call opening does not fire.
        assert trigger_start(params, f"all\nI will call {name}\nnow") == -1
    assert re.fullmatch(first.value, "get_weathers\n{}") is None
    # Text for the user never triggers the grammar.
    assert trigger_start(params, _own_output("content")) == -1
    assert trigger_start(params, _own_output("content_call")) > 0


def test_triggers_name_only_the_request_tools() -> None:
    params = _params(own_template(OWN))
    named = _params(own_template(OWN), tool_choice="auto", tools=[TOOLS[1]])
    assert len(named.grammar_triggers) == 2 < len(params.grammar_triggers)
    name = TOOLS[1]["function"]["name"]
    assert trigger_start(named, f"{name}\n{{}}") == 0
    assert trigger_start(named, f"{TOOLS[0]['function']['name']}\n{{}}") == -1


def test_named_tool_choice_allows_only_that_tool() -> None:
    params = _params(
        own_template(OWN), tool_choice={"type": "function", "function": {"name": "search"}}
    )
    assert params.grammar is not None and not params.grammar_lazy
    search = {"role": "assistant", "tool_calls": [call("search", {"query": "x"})]}
    assert accepts(params.grammar, model_output(own_template(OWN), search, TOOLS, (EOT,)))
    assert not accepts(params.grammar, _own_output("one_call"))


def test_parallel_calls_only_when_allowed() -> None:
    text = _own_output("two_calls")
    single = _params(own_template(OWN), parallel_tool_calls=False)
    parallel = _params(own_template(OWN), parallel_tool_calls=True)
    assert single.grammar and parallel.grammar
    assert accepts(parallel.grammar, text)
    assert not accepts(single.grammar, text)
    assert len(single.parse(text).tool_calls) == 2


def test_response_format_constrains_the_text() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    params = _params(
        own_template(OWN), tools=None, response_format={"type": "json_object", "schema": schema}
    )
    assert params.grammar is not None and not params.grammar_lazy
    answer = {"role": "assistant", "content": '{"n": 42}'}
    text = model_output(own_template(OWN), answer, None, (EOT,))
    assert accepts(params.grammar, text)
    assert not accepts(params.grammar, text.replace("42", "true"))
    assert params.parse(text).content == '{"n": 42}'


def test_tool_choice_none_keeps_calls_as_content() -> None:
    text = _own_output("content_call")
    params = _params(own_template(OWN), tool_choice="none")
    assert params.grammar is None
    message = params.parse(text)
    assert message.tool_calls == []
    assert message.content is not None and message.content.startswith("Let me check.>>>get_weather")
    check_streaming(params, text, count=5)


def test_whitespace_between_segments() -> None:
    text = 'all\nChecking.\n>>>get_weather\n{"city": "Rome"}\n>>>ping\n{}\n'
    params = _params(own_template(OWN))
    message = params.parse(text)
    assert message.content == "Checking."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Rome"}),
        ("ping", {}),
    ]
    check_streaming(params, text, count=5)


@pytest.mark.parametrize(
    "text",
    [
        "Hello without a recipient.",
        'launch\n{"now": true}',
        'all\nok>>>launch\n{"now": true}',
        "get_weather\nnot json",
    ],
)
def test_text_outside_the_format_stays_content(text: str) -> None:
    params = _params(own_template(OWN))
    message = params.parse(text)
    assert message.tool_calls == []
    assert message.content == text.removeprefix("all\n")
    check_streaming(params, text, count=5)


def test_truncated_call_is_kept_apart_and_flagged() -> None:
    """Output cut inside the arguments: no call; the segment's text is not content but
    the message's truncated_call."""
    text = _own_output("content_call")
    cut = text[: text.index('"Paris"') + 3]
    params = _params(own_template(OWN))
    message = params.parse(cut)
    assert message.truncated and message.tool_calls == []
    assert message.content == "Let me check."
    assert message.truncated_call == '>>>get_weather\n{"city": "Pa'
    check_streaming(params, cut, count=5)


def test_needles_stream_in_order() -> None:
    message = {
        "role": "assistant",
        "content": "c-1 and c-2",
        "tool_calls": [
            call("search", {"query": "a-3 a-4", "tags": ["a-5"]}),
            call("get_weather", {"city": "a-6"}),
        ],
    }
    text = model_output(own_template(OWN), message, TOOLS, (EOT,))
    needle_text_grows(_params(own_template(OWN)), text, ["c-1", "c-2", "a-3", "a-4", "a-5", "a-6"])


# --------------------------------------------------------------------------- corpus


def _corpus_template() -> ChatTemplate:
    return corpus_template("meetkai-functionary-medium-v3.2.jinja", "functionary v3.2")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_corpus_functionary_round_trip(name: str) -> None:
    template = _corpus_template()
    assert template.analyze().handler == "functionary_v3_2"
    text = model_output(template, SCENARIOS[name], TOOLS, (EOT,))
    params = _params(template)
    assert normalized(params.parse(text)) == expected(SCENARIOS[name])
    check_streaming(params, text, count=5, seed=9)


@pytest.mark.parametrize("name", CALL_SCENARIOS)
def test_corpus_functionary_grammar(name: str) -> None:
    template = _corpus_template()
    text = model_output(template, SCENARIOS[name], TOOLS, (EOT,))
    params = _params(template)
    assert params.grammar is not None and params.grammar_lazy
    assert accepts(params.grammar, text[lazy_start(params, text) :])
    if not SCENARIOS[name].get("content"):
        required = _params(template, tool_choice="required")
        assert required.grammar is not None and accepts(required.grammar, text)


# --------------------------------------------------------------------------- robustness

FRAGMENTS = [
    ">>>",
    "all\n",
    "get_weather\n",
    "ping\n",
    "nope\n",
    '{"city": "X"}',
    '{"city": ',
    "{}",
    "text ",
    ">>",
    "\n",
    EOT,
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=14),
    ARGUMENT_CUTS,
    st.integers(0, 10_000),
)
def test_any_mix_of_segments_streams_like_it_parses(parts: list[str], cut: str, seed: int) -> None:
    # Arguments may break anywhere ('{"city": ' then another fragment).
    check_fragment_mix(_params(own_template(OWN)), parts, cut, seed)


def test_arguments_turning_invalid_mid_stream() -> None:
    """A call announced while streaming stays a call in parse(): cut, closed, flagged."""
    text = 'get_weather\n{"city": >>>all\nok'
    check_arguments_turning_invalid(_params(own_template(OWN)), text)
