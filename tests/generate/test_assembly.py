"""Parser and grammar generation from hand-written analyses of the project's own templates.

Outputs are rendered by the templates themselves (see generate_cases.py); the parse of a
rendered assistant turn must give back the message, and the grammar must accept it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from helpers.formats import check_streaming, lazy_start
from helpers.gbnf_oracle import accepts
from helpers.generate_cases import (
    CASE_BY_NAME,
    SCENARIOS,
    TOOLS,
    Case,
    call,
    expected,
    normalized,
    scenarios,
)

from autoparser.analysis.model import (
    ArgumentsAnalysis,
    FunctionAnalysis,
    TemplateAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolsAnalysis,
)
from autoparser.errors import RequestError
from autoparser.generate import GrammarTrigger
from autoparser.params import build_params


def _grammar_params(only_calls: bool) -> list[Any]:
    """Call scenarios (without content before the calls for tool_choice=required)."""
    return [
        p
        for p in SCENARIOS
        if "tool_calls" in p.values[2] and not (only_calls and p.values[2].get("content"))
    ]


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_parse_gives_back_the_message(case: Case, scenario: str, message: dict[str, Any]) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    assert normalized(params.parse(text), ids=case.ids) == expected(message, ids=case.ids)
    assert not params.parse(text).truncated


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_end_of_turn_marker_optional(case: Case, scenario: str, message: dict[str, Any]) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    with_stop = params.parse(text + case.analysis.end_of_turn[0])
    assert with_stop == params.parse(text)


@pytest.mark.parametrize(("case", "scenario", "message"), _grammar_params(only_calls=True))
def test_required_grammar_accepts_calls(case: Case, scenario: str, message: dict[str, Any]) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools, tool_choice="required")
    assert params.grammar is not None
    assert not params.grammar_lazy
    assert params.grammar_triggers == []
    assert accepts(params.grammar, text), text


@pytest.mark.parametrize(("case", "scenario", "message"), _grammar_params(only_calls=False))
def test_lazy_grammar_accepts_from_trigger(
    case: Case, scenario: str, message: dict[str, Any]
) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    assert params.grammar is not None and params.grammar_lazy
    assert params.grammar_triggers
    start = lazy_start(params, text)
    assert accepts(params.grammar, text[start:]), text[start:]


def test_grammar_rejects_a_second_call_without_parallel_calls() -> None:
    case = CASE_BY_NAME["hermes"]
    text = case.output(scenarios(case)["two_calls"], TOOLS)
    single = case.params(TOOLS, tool_choice="required", parallel_tool_calls=False)
    parallel = case.params(TOOLS, tool_choice="required", parallel_tool_calls=True)
    assert parallel.grammar and accepts(parallel.grammar, text)
    assert single.grammar and not accepts(single.grammar, text)
    # The parser still reads both calls: the grammar constrains, the parser is lenient.
    assert len(single.parse(text).tool_calls) == 2


def test_named_tool_choice_allows_only_that_tool() -> None:
    case = CASE_BY_NAME["qwen3coder"]
    weather = case.output(scenarios(case)["one_call"], TOOLS)
    search = case.output(scenarios(case)["complex_args"], TOOLS)
    params = case.params(TOOLS, tool_choice={"type": "function", "function": {"name": "search"}})
    assert params.grammar is not None and not params.grammar_lazy
    assert accepts(params.grammar, search)
    assert not accepts(params.grammar, weather)


def test_tool_choice_none_keeps_calls_as_content() -> None:
    case = CASE_BY_NAME["hermes"]
    text = case.output(scenarios(case)["one_call"], TOOLS)
    params = case.params(TOOLS, tool_choice="none")
    assert params.grammar is None
    message = params.parse(text)
    assert message.tool_calls == []
    assert message.content == text.strip()


def test_no_tools_no_grammar() -> None:
    params = CASE_BY_NAME["think_tag"].params(None)
    assert params.grammar is None
    assert params.grammar_triggers == []


@pytest.mark.parametrize("case", [CASE_BY_NAME["think_tag"], CASE_BY_NAME["forced_open"]])
def test_response_format_constrains_content(case: Case) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}
    params = case.params(None, response_format=fmt)
    assert params.grammar is not None and not params.grammar_lazy
    body = '{"answer": 42}'
    text = ("Short thought.\n</think>\n\n" if params.thinking_forced_open else "") + body
    assert accepts(params.grammar, text)
    assert not accepts(params.grammar, text.replace("42", '"x"'))
    message = params.parse(text)
    assert json.loads(message.content or "") == {"answer": 42}
    obj = case.params(None, response_format={"type": "json_object"})
    assert obj.grammar is not None and accepts(obj.grammar, text)
    assert not accepts(obj.grammar, text.replace(body, "[1]"))


def test_forced_open_reasoning() -> None:
    case = CASE_BY_NAME["forced_open"]
    params = case.params(None)
    assert params.thinking_forced_open
    message = params.parse("I think.\n</think>\n\nAnswer.")
    assert (message.reasoning_content, message.content) == ("I think.", "Answer.")
    # Reasoning that never closes is kept as reasoning and flagged.
    cut = params.parse("I think and think")
    assert cut.reasoning_content == "I think and think"
    assert cut.content is None and cut.truncated


def test_thinking_toggle_disabled_closes_the_block() -> None:
    case = Case(
        "toggle",
        "reasoning/thinking_toggle.jinja",
        CASE_BY_NAME["forced_open"].analysis,
    )
    on = case.params(None, enable_thinking=True)
    off = case.params(None, enable_thinking=False)
    assert not off.thinking_forced_open
    assert off.parse("Answer.").content == "Answer."
    # Reasoning on: text closed by the end marker is reasoning, whether the prompt opened
    # the block or the model left the opener out; off, the marker is just text.
    assert on.parse("Hmm.</think>Answer.").reasoning_content == "Hmm."
    assert off.parse("Hmm.</think>Answer.").content == "Hmm.</think>Answer."


def test_reasoning_format_none_leaves_reasoning_in_content() -> None:
    case = CASE_BY_NAME["think_tag"]
    text = "<think>\nHmm.\n</think>\n\nAnswer."
    auto = case.params(None).parse(text)
    raw = case.params(None, reasoning_format="none").parse(text)
    assert (auto.reasoning_content, auto.content) == ("Hmm.", "Answer.")
    assert raw.reasoning_content is None and raw.content == text
    assert case.params(None, reasoning_format="deepseek").parse(text) == auto


def test_delimiter_reasoning() -> None:
    case = CASE_BY_NAME["delimiter"]
    default = case.params(None)
    text = "Reasoning here.\n[BEGIN FINAL RESPONSE]\nFinal."
    message = default.parse(text)
    assert (message.reasoning_content, message.content) == ("Reasoning here.", "Final.")
    assert default.parse("Just an answer.").content == "Just an answer."
    forced = case.params(None, enable_thinking=True)
    assert forced.thinking_forced_open
    assert forced.parse(text) == message


def test_trigger_words_and_preserved_tokens() -> None:
    case = CASE_BY_NAME["hermes"]
    params = case.params(TOOLS)
    assert GrammarTrigger("word", "<tool_call>") in params.grammar_triggers
    assert params.additional_stops == ["<|im_end|>"]
    assert params.prompt.endswith("<|im_start|>assistant\n")


def test_call_prefix_token_is_optional_before_a_call_and_a_trigger() -> None:
    case = CASE_BY_NAME["llama"]
    params = case.params(TOOLS)
    plain = case.output(scenarios(case)["one_call"], TOOLS)
    prefixed = "<|python_tag|>" + plain
    assert GrammarTrigger("word", "<|python_tag|>") in params.grammar_triggers
    assert params.grammar is not None
    assert accepts(params.grammar, prefixed) and accepts(params.grammar, plain)
    assert lazy_start(params, "Sure. " + prefixed) == len("Sure. ")
    calls = [(c.name, c.arguments) for c in params.parse(prefixed).tool_calls]
    assert calls and calls == [(c.name, c.arguments) for c in params.parse(plain).tool_calls]
    # The token alone, with no call after it, is text.
    assert params.parse("see <|python_tag|> here").content == "see <|python_tag|> here"


# ------------------------------------------------------------------ malformed / truncated


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\nnot json at all\n</tool_call>",
        '<tool_call>\n{"name": "unknown_tool", "arguments": {}}\n</tool_call>',
        "Use <tool_call> tags like this.",
        "{ not a call }",
    ],
)
def test_malformed_calls_stay_content(text: str) -> None:
    params = CASE_BY_NAME["hermes"].params(TOOLS)
    message = params.parse(text)
    assert message.tool_calls == []
    assert message.content == text.strip()


def test_malformed_bare_json_stays_content() -> None:
    params = CASE_BY_NAME["llama"].params(TOOLS)
    for text in ['{"name": "nope", "parameters": {}}', "{not json", "a {b} c"]:
        message = params.parse(text)
        assert message.tool_calls == [] and message.content == text


@pytest.mark.parametrize("name", ["hermes", "qwen3coder", "functionary", "glm", "bracket_callid"])
def test_truncated_call_is_kept_apart_and_flagged(name: str) -> None:
    """Output cut anywhere after the call's name: a call only once its arguments are
    whole (for a tagged call, each argument written so far: a cut between two arguments
    reads like a model that left its end markers out); before that the call is neither a
    call nor content (its raw text is the message's truncated_call) and the message is
    flagged truncated. Never a call with repaired arguments:
    every value returned is the value written."""
    case = CASE_BY_NAME[name]
    message_in = scenarios(case)["complex_args"]
    full = case.output(message_in, TOOLS)
    args = message_in["tool_calls"][0]["function"]["arguments"]
    params = case.params(TOOLS)
    name_at = full.find("search") + len("search") + 2
    seen = set()
    # A value left without its suffix ends at a call's closer when the output ends there
    # (a model leaving out the last value suffix, docs/streaming.md): output cut right
    # after a closer written inside a value reads the same way, so such cuts are left out.
    closers = ("</tool_call>", "</function>")
    for cut in [*range(name_at, len(full), 7), *range(len(full) - 16, len(full) + 1)]:
        prefix = full[:cut]
        if cut < len(full) and prefix.endswith(closers):
            continue
        message = params.parse(prefix)
        if message.tool_calls:
            [tc] = message.tool_calls
            got = json.loads(tc.arguments)
            assert tc.name == "search" and got == {k: args[k] for k in got}, cut
            seen.add("call")
        else:
            # Neither a call nor content: the raw text kept as the truncated call.
            assert message.truncated and message.content is None, cut
            assert message.truncated_call is not None
            assert prefix.rstrip().endswith(message.truncated_call)
            seen.add("cut")
    assert seen == {"call", "cut"}


def test_truncated_string_value_is_the_truncated_call() -> None:
    params = CASE_BY_NAME["hermes"].params(TOOLS)
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    message = params.parse(text)
    assert message.truncated and message.tool_calls == [] and message.content is None
    assert message.truncated_call == text
    tagged = CASE_BY_NAME["qwen3coder"].params(TOOLS)
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"
    message = tagged.parse(text)
    assert message.truncated and message.tool_calls == [] and message.content is None
    assert message.truncated_call == text


# ------------------------------------------------------------------ request errors


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": "required", "tools": None}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}]},
            "tools[0].function.parameters",
        ),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "parameters": {"type": "string"}},
                    }
                ]
            },
            "tools[0].function.parameters",
        ),
        ({"tools": [WEATHER_T := TOOLS[0], WEATHER_T]}, "tools[1].function.name"),
        ({"response_format": {"type": "json_schema", "json_schema": {}}}, "response_format"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"reasoning_format": "weird"}, "reasoning_format"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ],
)
def test_invalid_requests_raise_naming_the_field(options: dict[str, Any], field: str) -> None:
    case = CASE_BY_NAME["hermes"]
    tools = options.pop("tools", TOOLS)
    with pytest.raises(RequestError) as info:
        case.params(tools, **options)
    assert field in str(info.value)


@pytest.mark.parametrize("name", ["hermes", "qwen3coder", "mistral"])
def test_response_format_with_tools_constrains_the_whole_answer(name: str) -> None:
    """OpenAI and vLLM take both: the answer is a call or content in the format, so the
    grammar applies from the first token and allows exactly those two."""
    case = CASE_BY_NAME[name]
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    params = case.load().apply(
        [{"role": "user", "content": "Hi"}], tools=case.request_tools, response_format=fmt
    )
    assert params.grammar is not None and not params.grammar_lazy
    call = case.output(scenarios(case)["one_call"], case.request_tools)
    assert accepts(params.grammar, call), call
    assert accepts(params.grammar, '{"a": 1}')
    assert not accepts(params.grammar, "Hello there.")
    assert not accepts(params.grammar, '{"a": "x"}')
    assert params.parse(call).tool_calls and params.parse('{"a": 1}').content == '{"a": 1}'


# ------------------------------------------------------------------ end to end with the analyser


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_apply_with_analysed_template(case: Case, scenario: str, message: dict[str, Any]) -> None:
    """template.apply: the template's own analysis (not the hand-written one) parses back."""
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.load().apply([{"role": "user", "content": "Hi"}], tools=tools)
    assert params.prompt == case.load().render(
        [{"role": "user", "content": "Hi"}], tools=tools, add_generation_prompt=True
    )
    assert params.prompt.endswith(params.generation_prompt)
    assert normalized(params.parse(text), ids=case.ids) == expected(message, ids=case.ids)


def test_text_after_end_of_turn_is_not_part_of_the_message() -> None:
    params = CASE_BY_NAME["hermes"].params(TOOLS)
    message = params.parse("Hello.<|im_end|>\n<|im_start|>user\nMore<|im_end|>")
    assert message.content == "Hello." and message.tool_calls == []


def test_content_wrappers_are_dropped() -> None:
    from autoparser.analysis.model import ContentAnalysis, ContentMode

    base = CASE_BY_NAME["think_tag"]
    analysis = dataclasses.replace(
        base.analysis,
        content=ContentAnalysis(
            mode=ContentMode.ALWAYS_WRAPPED, start="<response>", end="</response>"
        ),
    )
    case = dataclasses.replace(base, analysis=analysis)
    params = case.params(None)
    message = params.parse("<think>Hmm</think>\n<response>Answer.</response>")
    assert (message.reasoning_content, message.content) == ("Hmm", "Answer.")


def test_forced_open_triggers_fire_only_after_reasoning() -> None:
    import re

    base = CASE_BY_NAME["forced_open"]
    case = dataclasses.replace(
        base,
        analysis=dataclasses.replace(base.analysis, tools=CASE_BY_NAME["hermes"].analysis.tools),
    )
    params = case.params(TOOLS)
    assert params.thinking_forced_open and params.grammar_lazy
    (trigger,) = params.grammar_triggers
    assert trigger.kind == "pattern"  # searched: a whole-output match costs engines more
    rx = re.compile(trigger.value)
    assert rx.search("I could use <tool_call> here") is None
    call_text = '<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>'
    output = "I could use <tool_call> here</think>\n\n" + call_text
    match = rx.search(output)
    assert match is not None and match.group(1) == "<tool_call>"
    assert match.start(1) == output.index(call_text)
    assert params.grammar is not None and accepts(params.grammar, call_text)
    message = params.parse("Mention <tool_call> while thinking.</think>\n" + call_text)
    assert message.reasoning_content == "Mention <tool_call> while thinking."
    assert [c.name for c in message.tool_calls] == ["ping"]


def _forced_open_with_tools() -> Case:
    base = CASE_BY_NAME["forced_open"]
    tools = CASE_BY_NAME["qwen3coder"].analysis.tools
    return dataclasses.replace(
        base, analysis=dataclasses.replace(base.analysis, tools=tools), calls=True
    )


def test_required_grammar_allows_reasoning_before_calls() -> None:
    case = _forced_open_with_tools()
    params = case.params(TOOLS, tool_choice="required")
    assert params.thinking_forced_open and not params.grammar_lazy and params.grammar
    call_text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    assert accepts(params.grammar, "Let me think.\n</think>\n\n" + call_text)
    assert not accepts(params.grammar, "Let me think.\n</think>\n\nJust text.")
    message = params.parse("Let me think.\n</think>\n\n" + call_text)
    assert message.reasoning_content == "Let me think."
    assert [c.name for c in message.tool_calls] == ["get_weather"]


def test_partial_parse_is_the_message_so_far() -> None:
    params = CASE_BY_NAME["hermes"].params(TOOLS)
    text = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'
    partial = params.parse(text, partial=True)
    assert partial.content == "Checking." and not partial.truncated
    assert partial.tool_calls == []  # a call is part of the message once it is whole
    final = params.parse(text)
    assert final.truncated and final.tool_calls == [] and final.content == "Checking."
    assert final.truncated_call == text[len("Checking.\n") :]


def test_call_without_its_id_still_parses() -> None:
    case = CASE_BY_NAME["bracket_callid"]
    params = case.params(TOOLS)
    message = params.parse('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}')
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert message.tool_calls[0].id.startswith("call_")
    with_id = params.parse('[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city": "Paris"}')
    assert with_id.tool_calls[0].id == "abc123XYZ"


def test_required_calls_need_a_tool_format() -> None:
    case = CASE_BY_NAME["think_tag"]  # a template without tool calls
    with pytest.raises(RequestError, match="tool_choice"):
        case.params(TOOLS, tool_choice="required")
    assert case.params(TOOLS).grammar is None  # auto: nothing to constrain


def test_index_written_in_id_position_is_not_used_as_id() -> None:
    """Kimi-K2 style: the template writes the call's index where an id would go."""
    base = CASE_BY_NAME["bracket_callid"]
    tools_analysis = base.analysis.tools
    generated = dataclasses.replace(
        tools_analysis, call_id=dataclasses.replace(tools_analysis.call_id, generated=True)
    )
    case = dataclasses.replace(base, analysis=dataclasses.replace(base.analysis, tools=generated))
    text = '[TOOL_CALLS]get_weather[CALL_ID]0[ARGS]{"city": "Paris"}'
    (c,) = case.params(TOOLS).parse(text).tool_calls
    assert c.id.startswith("call_") and c.id != "0"
    (own,) = base.params(TOOLS).parse(text).tool_calls
    assert own.id == "0"


def test_tool_names_sanitising_alike_get_distinct_grammar_rules() -> None:
    import re

    def tool(name: str, kind: str) -> dict[str, Any]:
        props = {"v": {"type": kind}}
        return {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {"type": "object", "properties": props, "required": ["v"]},
            },
        }

    tools = [tool("get_wëather", "integer"), tool("get-wëather", "boolean")]
    for name in ("hermes", "qwen3coder"):
        case = CASE_BY_NAME[name]
        params = case.params(tools, tool_choice="required")
        assert params.grammar is not None
        rule_names = re.findall(r"^(\S+) ::=", params.grammar, re.M)
        assert all(re.fullmatch(r"[A-Za-z0-9-]+", n) for n in rule_names), rule_names
        for fn, value in (("get_wëather", 3), ("get-wëather", True)):
            message = {"role": "assistant", "content": None, "tool_calls": [call(fn, {"v": value})]}
            text = case.output(message, tools)
            assert accepts(params.grammar, text), (name, text)
            assert json.loads(params.parse(text).tool_calls[0].arguments) == {"v": value}


def test_tagged_grammar_accepts_python_scalars() -> None:
    case = CASE_BY_NAME["qwen3coder"]
    params = case.params(TOOLS, tool_choice="required")
    text = (
        "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n"
        "<parameter=exact>\n{}\n</parameter>\n</function>\n</tool_call>"
    )
    assert params.grammar is not None
    for word, value in (("False", False), ("true", True)):
        assert accepts(params.grammar, text.format(word))
        args = json.loads(params.parse(text.format(word)).tool_calls[0].arguments)
        assert args == {"query": "x", "exact": value}
    assert not accepts(params.grammar, text.format("Maybe"))


# --- typed argument name suffix (string="true" / string="false" style) -------------------

_TYPED_CALL = '<calls>\n<call name="search">\n{}</call>\n</calls>'


def _typed_param(name: str, value: str, json_suffix: bool) -> str:
    return f'<param name="{name}" json="{"yes" if json_suffix else "no"}">{value}</param>\n'


@pytest.mark.parametrize(
    ("params", "arguments"),
    [
        # As the template writes them: strings raw, other values JSON after json="yes".
        (
            [("query", "a <b> c", False), ("limit", "5", True), ("filters", '{"k": [1]}', True)],
            {"query": "a <b> c", "limit": 5, "filters": {"k": [1]}},
        ),
        # The model chose the other suffix: the suffix it wrote decides the value's type.
        ([("query", '"quoted"', True), ("limit", "5", False)], {"query": "quoted", "limit": "5"}),
        ([("cursor", "null", True), ("exact", "True", True)], {"cursor": None, "exact": True}),
    ],
)
def test_typed_name_suffix_types_the_value(
    params: list[tuple[str, str, bool]], arguments: dict[str, Any]
) -> None:
    text = _TYPED_CALL.format("".join(_typed_param(*p) for p in params))
    parsed = CASE_BY_NAME["typed_suffix"].params(TOOLS).parse(text)
    assert [c.name for c in parsed.tool_calls] == ["search"]
    assert json.loads(parsed.tool_calls[0].arguments) == arguments
    assert parsed.content is None


def test_typed_name_suffix_grammar_follows_the_schema() -> None:
    params = CASE_BY_NAME["typed_suffix"].params(TOOLS, tool_choice="required")
    assert params.grammar is not None
    good = [("query", "x", False), ("limit", "5", True), ("cursor", "null", True)]
    assert accepts(params.grammar, _TYPED_CALL.format("".join(_typed_param(*p) for p in good)))
    for bad in (("limit", "5", False), ("query", '"x"', True), ("limit", '"5"', True)):
        text = _TYPED_CALL.format(_typed_param("query", "x", False) + _typed_param(*bad))
        assert not accepts(params.grammar, text), bad


def test_typed_name_suffix_streams_like_parse() -> None:
    params = CASE_BY_NAME["typed_suffix"].params(TOOLS)
    body = _typed_param("query", "news", False) + _typed_param("filters", '{"a": [1, 2]}', True)
    text = _TYPED_CALL.format(body)
    expected_message = params.parse(text)
    stream = params.stream()
    for k in range(0, len(text), 3):
        stream.feed(text[k : k + 3])
    stream.finish()
    assert stream.message == expected_message
    assert json.loads(expected_message.tool_calls[0].arguments) == {
        "query": "news",
        "filters": {"a": [1, 2]},
    }


def test_json_name_suffix_of_older_analyses() -> None:
    """An analysis without name_suffix_json: pythonic quoting still means bare values."""
    from autoparser.generate.tagged_calls import json_name_suffix as suffix

    assert suffix(ArgumentsAnalysis(name_suffix="='", value_suffix="'")) == "="
    assert suffix(ArgumentsAnalysis(name_suffix=">", value_suffix="</p>")) == ">"
    typed = ArgumentsAnalysis(name_suffix=' t="s">', name_suffix_json=' t="j">')
    assert suffix(typed) == ' t="j">'
    data = TemplateAnalysis(tools=ToolsAnalysis(arguments=typed)).to_dict()
    assert TemplateAnalysis.from_dict(data).tools.arguments == typed
    del data["tools"]["arguments"]["name_suffix_json"]
    assert TemplateAnalysis.from_dict(data).tools.arguments.name_suffix_json == ""


def test_chat_message_contract() -> None:
    """tool_calls is a list of ToolCall (issue 6's contract); the message stays frozen."""
    from autoparser.message import ChatMessage, ToolCall

    case = CASE_BY_NAME["hermes"]
    params = case.params(TOOLS)
    message = {"role": "assistant", "content": None, "tool_calls": [call("ping", {})]}
    parsed = params.parse(case.output(message, TOOLS))
    assert isinstance(parsed.tool_calls, list)
    assert [type(c) for c in parsed.tool_calls] == [ToolCall]
    assert params.parse("Just text.").tool_calls == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.tool_calls = []  # type: ignore[misc]
    first, second = ChatMessage(), ChatMessage()
    assert first.tool_calls == [] and first.tool_calls is not second.tool_calls
    openai = parsed.to_openai()
    assert openai["tool_calls"][0]["function"]["name"] == "ping"
    assert "tool_calls" not in ChatMessage(content="x").to_openai()


# --- a prompt that ends with the call opener (the first call's opener is in the prompt) ---

_RECIPIENT = TemplateAnalysis(
    tools=ToolsAnalysis(
        format=ToolFormatAnalysis(mode=ToolFormat.TAG_WITH_JSON),
        function=FunctionAnalysis(name_prefix=">>>", name_suffix="\n"),
        call_separator="\n",
        parallel_calls=True,
    ),
    generation_prompt=">>>",
    end_of_turn=("<|eot|>",),
)
_PER_CALL = TemplateAnalysis(
    tools=ToolsAnalysis(
        format=ToolFormatAnalysis(
            mode=ToolFormat.JSON_NATIVE,
            per_call_start="<tool_call>\n",
            per_call_end="\n</tool_call>",
            name_field="name",
            args_field="arguments",
            field_order=("name", "arguments"),
        ),
        call_separator="\n",
        parallel_calls=True,
    ),
    end_of_turn=("<|eot|>",),
)
_SECTION = TemplateAnalysis(
    tools=ToolsAnalysis(
        format=ToolFormatAnalysis(
            mode=ToolFormat.TAG_WITH_JSON, section_start="<calls>", section_end="</calls>"
        ),
        function=FunctionAnalysis(name_prefix="<fn=", name_suffix=">", close="</fn>"),
        parallel_calls=True,
    ),
    end_of_turn=("<|eot|>",),
)
_W = '{"city": "Paris", "days": 3}'
# (analysis, prompt end, output of two calls: the first opener is in the prompt).
_OPENED = {
    "recipient": (_RECIPIENT, ">>>", f'get_weather\n{_W}\n>>>search\n{{"query": "a>b"}}'),
    "per_call": (
        _PER_CALL,
        "<tool_call>\n",
        f'{{"name": "get_weather", "arguments": {_W}}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search", "arguments": {"query": "a>b"}}\n</tool_call>',
    ),
    "section": (
        _SECTION,
        "<calls>",
        f'<fn=get_weather>{_W}</fn><fn=search>{{"query": "a>b"}}</fn></calls>',
    ),
}


@pytest.mark.parametrize("kind", list(_OPENED))
def test_prompt_opened_call_parses_streams_and_is_accepted(kind: str) -> None:
    analysis, opener, text = _OPENED[kind]
    params = build_params(analysis, prompt=f"User: hi\n{opener}", tools=TOOLS)
    message = params.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris", "days": 3}),
        ("search", {"query": "a>b"}),
    ]
    assert message.content is None and not message.truncated
    assert params.parse(text + "<|eot|>") == message
    check_streaming(params, text, count=20, seed=len(text))
    # The model is inside the first call from its first byte: no trigger, a plain grammar.
    assert params.grammar is not None and not params.grammar_lazy
    assert not params.grammar_triggers
    assert accepts(params.grammar, text)
    assert not accepts(params.grammar, opener.strip() + text)  # the opener is not repeated
    assert not accepts(params.grammar, "Hello")


@pytest.mark.parametrize("kind", list(_OPENED))
def test_prompt_opened_call_single_and_without_parallel(kind: str) -> None:
    analysis, opener, text = _OPENED[kind]
    one = {
        "recipient": f"get_weather\n{_W}",
        "per_call": f'{{"name": "get_weather", "arguments": {_W}}}\n</tool_call>',
        "section": f"<fn=get_weather>{_W}</fn></calls>",
    }[kind]
    params = build_params(
        analysis, prompt=f"User: hi\n{opener}", tools=TOOLS, parallel_tool_calls=False
    )
    assert params.grammar is not None
    assert accepts(params.grammar, one)
    assert not accepts(params.grammar, text)
    assert [c.name for c in params.parse(one).tool_calls] == ["get_weather"]


def test_prompt_without_the_opener_is_unchanged() -> None:
    params = build_params(_RECIPIENT, prompt="User: hi\n", tools=TOOLS)
    assert params.grammar_lazy
    # ">>>" alone also opens a text answer (">>>all"): the triggers name the tools.
    assert params.grammar_triggers == [
        GrammarTrigger("word", f">>>{t['function']['name']}")
        for t in sorted(TOOLS, key=lambda t: len(t["function"]["name"]), reverse=True)
    ]
    text = f"Sure.\n>>>get_weather\n{_W}"
    message = params.parse(text)
    assert message.content == "Sure."
    assert [c.name for c in message.tool_calls] == ["get_weather"]
    # Without the opener in the prompt, a bare call is text.
    assert not params.parse(f"get_weather\n{_W}").tool_calls


def test_prompt_opened_call_keeps_other_text_as_content() -> None:
    params = build_params(_RECIPIENT, prompt="User: hi\n>>>", tools=TOOLS)
    assert params.parse("all\nHello there").content == "all\nHello there"
    # tool_choice=none: no call is read at all.
    plain = build_params(_RECIPIENT, prompt="User: hi\n>>>", tools=TOOLS, tool_choice="none")
    assert plain.grammar is None
    assert not plain.parse(f"get_weather\n{_W}").tool_calls
