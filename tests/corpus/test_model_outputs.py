"""Model output as real models write it, which deviates from what their templates render.

Each case is hand-written the way models deviate (never rendered by the template): a
reasoning block closed without its opener, JSON call objects with their members in another
order, under the other arguments key, with extra members or string arguments, inner call
markup without its outer opener, a close tag missing at the end, a parameter left unclosed
when the next opens, whitespace around markers, invalid arguments. One template per format
family from ``tests/templates`` (JSON-native, tag+JSON, tag+tagged, pythonic,
harmony-style), and corpus templates when ``../shared/templates`` is there. Each case is
checked non-streaming and streamed in 1-character and random chunks (the stream must fold
into ``parse``). The strict grammar is not involved: it stays as the template renders.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from helpers.formats import (
    TOOLS,
    USER,
    accumulate,
    as_dict,
    check_streaming,
    corpus_template,
    own_template,
    splits,
)

from autoparser import ChatTemplate, RequestError
from autoparser.message import ChatMessage
from autoparser.params import ChatParams
from autoparser.peg import IncrementalParse

PARIS = {"city": "Paris"}
PARIS_C = {"city": "Paris", "unit": "celsius"}
ARGS = json.dumps(PARIS)


@dataclasses.dataclass(frozen=True)
class Case:
    """One hand-written output of a template and the message it must parse into."""

    family: str
    deviation: str
    template: str  # a tests/templates file, or a corpus file when ``corpus``
    output: str
    content: str | None = None
    reasoning: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()
    truncated: bool = False  # the output ended inside a call (or reasoning block)
    cut_call: str | None = None  # the raw text of the call it ended inside (truncated_call)
    corpus: bool = False
    xfail: str = ""  # an unsupported deviation: a strict xfail with its reason
    stream_xfail: str = ""  # the same, for streaming only

    @property
    def id(self) -> str:
        stem = self.template.removesuffix(".jinja")
        return f"{self.family}-{stem}-{self.deviation}"


def weather(args: dict[str, Any] = PARIS) -> tuple[str, dict[str, Any]]:
    return ("get_weather", args)


HERMES = "formats/chatml_hermes.jinja"  # JSON-native inside <tool_call> ... </tool_call>
LLAMA = "formats/llama_like.jinja"  # bare JSON-native, "parameters"
FUNCTIONARY = "formats/functionary_v3_1_like.jinja"  # tag+JSON: <function=NAME>{...}</function>
QWEN_CODER = "formats/qwen3coder_like.jinja"  # tag+tagged: <function=..><parameter=..>
GLM = "formats/glm_like.jinja"  # tag+tagged: NAME<arg_key>..</arg_key><arg_value>..
PYTHONIC = "formats/pythonic_like.jinja"  # [name(key=value, ...)]
HARMONY = "handlers/harmony_like.jinja"  # to=functions.NAME<|channel|>..<|message|>{..}<|call|>
THINK = "reasoning/think_tag.jinja"  # <think> ... </think>, no switch

ON = (("enable_thinking", True),)
OFF = (("enable_thinking", False),)
MALFORMED = '{"city": "Paris", unit: celsius}'
MALFORMED_CALL = f'<tool_call>\n{{"name": "get_weather", "arguments": {MALFORMED}}}\n</tool_call>'

OWN_CASES = [
    # --- JSON-native ---------------------------------------------------------------------
    Case(
        "json",
        "arguments-first",
        HERMES,
        '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>',
        calls=(weather(),),
    ),
    Case(
        "json",
        "parameters-for-arguments",
        HERMES,
        '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>',
        calls=(weather(),),
    ),
    Case(
        "json",
        "arguments-for-parameters",
        LLAMA,
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        calls=(weather(),),
    ),
    Case(
        "json",
        "parameters-first",
        LLAMA,
        '{"parameters": {"city": "Paris", "unit": "celsius"}, "name": "get_weather"}',
        calls=(weather(PARIS_C),),
    ),
    Case(
        "json",
        "type-function-first",
        HERMES,
        '<tool_call>\n{"type": "function", "name": "get_weather", "arguments": '
        '{"city": "Paris"}}\n</tool_call>',
        calls=(weather(),),
    ),
    Case(
        "json",
        "type-function-between-and-after",
        LLAMA,
        '{"name": "get_weather", "type": "function", "parameters": {"city": "Paris"}, '
        '"id": "call_1"}',
        calls=(weather(),),
    ),
    Case(
        "json",
        "arguments-as-string",
        HERMES,
        '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'
        "\n</tool_call>",
        calls=(weather(),),
    ),
    Case(
        "json",
        "arguments-as-string-first",
        LLAMA,
        '{"parameters": "{\\"city\\": \\"Paris\\", \\"unit\\": \\"celsius\\"}", '
        '"name": "get_weather"}',
        calls=(weather(PARIS_C),),
    ),
    Case(
        "json",
        "missing-close-at-end",
        HERMES,
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
        content="Let me check.",
        calls=(weather(),),
    ),
    Case(
        "json",
        "no-whitespace",
        HERMES,
        '<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>',
        calls=(weather(),),
    ),
    Case(
        "json",
        "extra-whitespace",
        HERMES,
        '\n\n<tool_call>\n\n  { "name" : "get_weather" ,\n "arguments" : { "city" : "Paris" } }'
        "\n\n</tool_call>\n",
        calls=(weather(),),
    ),
    Case(
        "json",
        "two-deviating-calls",
        HERMES,
        '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>\n'
        '<tool_call>\n{"type": "function", "name": "search", "parameters": "{\\"query\\": '
        '\\"news\\"}"}\n</tool_call>',
        calls=(weather(), ("search", {"query": "news"})),
    ),
    Case(
        "json",
        "name-twice-is-not-a-call",
        HERMES,
        '<tool_call>\n{"name": "get_weather", "name": "search"}\n</tool_call>',
        content='<tool_call>\n{"name": "get_weather", "name": "search"}\n</tool_call>',
    ),
    Case("json", "malformed-arguments", HERMES, MALFORMED_CALL, content=MALFORMED_CALL),
    Case(
        "json",
        "python-tag-prefix",
        LLAMA,
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        calls=(weather(),),
    ),
    # --- tag + JSON ----------------------------------------------------------------------
    Case(
        "tag-json",
        "missing-close-at-end",
        FUNCTIONARY,
        'Checking. <function=get_weather>{"city": "Paris"}',
        content="Checking.",
        calls=(weather(),),
    ),
    Case(
        "tag-json",
        "newlines-around-markers",
        FUNCTIONARY,
        '<function=get_weather>\n{"city": "Paris", "unit": "celsius"}\n</function>\n'
        '<function=search>\n\n{"query": "news"}\n\n</function>',
        calls=(weather(PARIS_C), ("search", {"query": "news"})),
    ),
    # --- tag + tagged --------------------------------------------------------------------
    Case(
        "tagged",
        "no-outer-opener",
        QWEN_CODER,
        "Sure.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>",
        content="Sure.",
        calls=(weather(),),
    ),
    Case(
        "tagged",
        "no-outer-opener-two-calls",
        QWEN_CODER,
        "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
        "<function=search>\n<parameter=query>\nnews\n</parameter>\n</function>",
        calls=(weather(), ("search", {"query": "news"})),
    ),
    Case(
        "tagged",
        "missing-closes-at-end",
        QWEN_CODER,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>",
        calls=(weather(),),
    ),
    Case(
        "tagged",
        "parameter-unclosed",
        QWEN_CODER,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n<parameter=unit>\n"
        "celsius\n</parameter>\n</function>\n</tool_call>",
        calls=(weather(PARIS_C),),
    ),
    Case(
        "tagged",
        "no-newlines",
        QWEN_CODER,
        "<tool_call><function=get_weather><parameter=city>Paris</parameter>"
        "<parameter=unit>celsius</parameter></function></tool_call>",
        calls=(weather(PARIS_C),),
    ),
    Case(
        "tagged",
        "extra-newlines-between-markers",
        QWEN_CODER,
        "<tool_call>\n\n<function=get_weather>\n\n<parameter=city>\nParis\n</parameter>\n\n"
        "</function>\n\n</tool_call>",
        calls=(weather(),),
    ),
    Case(
        "tagged",
        "value-unclosed",
        GLM,
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n"
        "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>",
        calls=(weather(PARIS_C),),
    ),
    Case(
        "tagged",
        "missing-close-at-end",
        GLM,
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>",
        calls=(weather(),),
    ),
    Case(
        "tagged",
        "no-newlines",
        GLM,
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
        calls=(weather(),),
    ),
    Case(
        "tagged",
        "reasoning-without-opener",
        GLM,
        "I need the weather.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Paris</arg_value>\n</tool_call>",
        reasoning="I need the weather.",
        calls=(weather(),),
        options=ON,
    ),
    Case(
        "tagged",
        "reasoning-off-end-marker-is-text",
        GLM,
        "no reasoning here</think> ok",
        content="no reasoning here</think> ok",
        options=OFF,
    ),
    # --- reasoning alone -----------------------------------------------------------------
    Case(
        "reasoning",
        "closed-without-opener",
        THINK,
        "The user greets me.\n</think>\n\nHello!",
        content="Hello!",
        reasoning="The user greets me.",
        options=ON,
    ),
    Case(
        "reasoning",
        "not-asked-end-marker-is-text",
        THINK,
        "Text.</think> More.",
        content="Text.</think> More.",
    ),
    Case(
        "reasoning",
        "call-opener-before-end-marker",
        GLM,
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "</tool_call>",
        calls=(weather(),),
        options=ON,
    ),
    Case("reasoning", "bare-end-marker", THINK, "</think>\n\nHello!", content="Hello!"),
    Case("reasoning", "with-opener", THINK, "<think>Hm.</think>Hello!", "Hello!", "Hm."),
    Case("reasoning", "no-reasoning", THINK, "Hello, no block.", content="Hello, no block."),
    # --- pythonic ------------------------------------------------------------------------
    Case(
        "pythonic",
        "spaces-around-markers",
        PYTHONIC,
        "[ get_weather( city = 'Paris' , unit = 'celsius' ) ]",
        calls=(weather(PARIS_C),),
    ),
    Case(
        "pythonic",
        "missing-close-at-end",
        PYTHONIC,
        "[get_weather(city='Paris')",
        calls=(weather(),),
    ),
    Case(
        "pythonic",
        "newline-between-calls",
        PYTHONIC,
        "[get_weather(city='Paris'),\nsearch(query='news')]",
        calls=(weather(), ("search", {"query": "news"})),
    ),
    # --- harmony-style -------------------------------------------------------------------
    Case(
        "harmony",
        "missing-call-marker-at-end",
        HARMONY,
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": '
        '"Paris"}',
        calls=(weather(),),
    ),
    Case(
        "harmony",
        "reasoning-then-call",
        HARMONY,
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
        '<|channel|>commentary to=functions.get_weather json<|message|>{"city": "Paris"}<|call|>',
        reasoning="Need weather.",
        calls=(weather(),),
    ),
]


def _cases_per_family(
    family: str,
    template: str,
    cut: str,
    two: tuple[str, str],
    bad: str,
    opener: str,
    *,
    second_text: str | None = None,
    bad_text: str | None = None,
    before: tuple[str, str | None, str | None] = ("Checking.", "Checking.", None),
    opener_is_text: bool = False,
    cut_from: int = 0,
) -> list[Case]:
    """Truncated and malformed calls, the same four deviations for one template.

    ``cut``: a call cut off inside its arguments, from ``cut_from`` (no call, and its text
    is not content either: it is the message's ``truncated_call``; flagged).
    ``two``: a complete call, then one cut off (the first kept; the second's text,
    ``second_text`` if the markers between the calls are not part of it, is the
    ``truncated_call``).
    ``bad``: a call with invalid arguments (no call, not repaired: its text, ``bad_text``
    without an end-of-turn marker, is content).
    ``opener``: output that stops on a call opener after ``before`` (text, and the content
    and reasoning it parses to): the opener dropped, the message flagged; a one-character
    opener (pythonic ``[``) is as likely text, and kept (``opener_is_text``).
    """
    first, second = two
    text, content, reasoning = before
    stopped = (
        Case(family, "dangling-opener", template, text + opener, (text + opener).strip())
        if opener_is_text
        else Case(
            family, "dangling-opener", template, text + opener, content, reasoning, truncated=True
        )
    )
    return [
        Case(
            family,
            "cut-in-arguments",
            template,
            cut,
            content=cut[:cut_from].strip() or None,
            truncated=True,
            cut_call=cut[cut_from:].strip(),
        ),
        Case(
            family,
            "complete-then-cut",
            template,
            first + second,
            calls=(weather(),),
            truncated=True,
            cut_call=(second_text or second).strip(),
        ),
        Case(family, "malformed-not-repaired", template, bad, content=(bad_text or bad).strip()),
        stopped,
    ]


TRUNCATION_CASES = [
    *_cases_per_family(
        "json",
        HERMES,
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
            '\n<tool_call>\n{"name": "search", "arguments": {"query": "ne',
        ),
        f"Sure.\n{MALFORMED_CALL}\nDone.",
        "\n<tool_call>\n",
    ),
    *_cases_per_family(
        "tag-json",
        FUNCTIONARY,
        'Checking. <function=get_weather>{"city": "Par',
        ('<function=get_weather>{"city": "Paris"}</function>', '<function=search>{"query'),
        f"<function=get_weather>{MALFORMED}</function> Done.",
        " <function=",
        cut_from=len("Checking. "),
    ),
    *_cases_per_family(
        "tagged",
        QWEN_CODER,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "</function>\n</tool_call>\n",
            "<tool_call>\n<function=search>\n<parameter=query>\nne",
        ),
        # Junk between two arguments (a value not of its type is a kept call, reported).
        "<tool_call>\n<function=search>\n<parameter=query>\nnews\n</parameter>\n"
        "limit = 3\n<parameter=limit>\n3\n</parameter>\n</function>\n</tool_call>",
        "\n<tool_call>\n<function=",
    ),
    *_cases_per_family(
        "tagged",
        GLM,
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par",
        (
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
            "</tool_call>",
            "<tool_call>search\n<arg_key>query</arg_key>\n<arg_val",
        ),
        "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>news</arg_value>\n"
        "limit = 3\n<arg_key>limit</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
        "<tool_call>",
    ),
    *_cases_per_family(
        "pythonic",
        PYTHONIC,
        "[get_weather(city='Par",
        ("[get_weather(city='Paris'), ", "search(query='ne"),
        "[get_weather(city=Paris, unit=celsius)]",
        " [",
        opener_is_text=True,
    ),
    *_cases_per_family(
        "harmony",
        HARMONY,
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Par',
        (
            "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
            '{"city": "Paris"}<|call|>',
            '<|start|>assistant to=functions.search<|channel|>commentary json<|message|>{"que',
        ),
        f"<|channel|>commentary to=functions.get_weather json<|message|>{MALFORMED}<|call|>",
        "<|start|>assistant<|channel|>commentary to=functions.",
        # The header tokens between two call messages belong to neither.
        second_text='to=functions.search<|channel|>commentary json<|message|>{"que',
        # <|call|> ends the turn (a stop): not part of the message.
        bad_text=f"<|channel|>commentary to=functions.get_weather json<|message|>{MALFORMED}",
        before=("<|channel|>analysis<|message|>Checking.<|end|>", None, "Checking."),
    ),
]

CORPUS_CASES = [
    Case(
        "json",
        "arguments-for-parameters",
        "meta-llama-Llama-3.3-70B-Instruct.jinja",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "json",
        "parameters-first-type",
        "meta-llama-Llama-3.3-70B-Instruct.jinja",
        '{"type": "function", "parameters": {"city": "Paris"}, "name": "get_weather"}',
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "json",
        "python-tag-prefix",
        "meta-llama-Llama-3.3-70B-Instruct.jinja",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "json",
        "reasoning-without-opener-then-string-arguments",
        "Qwen-Qwen3-0.6B.jinja",
        'Weather needed.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": '
        '"{\\"city\\": \\"Paris\\"}"}\n</tool_call>',
        reasoning="Weather needed.",
        calls=(weather(),),
        options=ON,
        corpus=True,
    ),
    Case(
        "json",
        "arguments-first-missing-close",
        "Qwen-Qwen3-0.6B.jinja",
        '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}',
        calls=(weather(),),
        options=OFF,
        corpus=True,
    ),
    Case(
        "json",
        "parameters-type",
        "Qwen-Qwen2.5-7B-Instruct.jinja",  # the Hermes format
        '<tool_call>\n{"type": "function", "name": "get_weather", "parameters": '
        '{"city": "Paris"}}\n</tool_call>',
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "json",
        "whitespace",
        "Mistral-Small-3.2-24B-Instruct-2506.jinja",
        '[TOOL_CALLS]get_weather[ARGS]\n{"city": "Paris"}\n',
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "tagged",
        "no-outer-opener-unclosed-parameter",
        "Qwen3-Coder.jinja",
        "<function=get_weather>\n<parameter=city>\nParis\n<parameter=unit>\ncelsius\n"
        "</parameter>\n</function>",
        calls=(weather(PARIS_C),),
        corpus=True,
    ),
    Case(
        "tagged",
        "missing-closes-at-end",
        "Qwen3-Coder.jinja",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "tagged",
        "reasoning-without-opener-unclosed-value",
        "GLM-4.6.jinja",
        "Weather.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n"
        "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>",
        reasoning="Weather.",
        calls=(weather(PARIS_C),),
        options=ON,
        corpus=True,
    ),
    Case(
        "tagged",
        "reasoning-bare-end-marker",
        "MiniMax-M3.jinja",
        "</mm:think>Hello!",
        content="Hello!",
        corpus=True,
    ),
    Case(
        "tagged",
        "reasoning-without-opener",
        "MiniMax-M3.jinja",
        "The user says hi.</mm:think>\nHello!",
        content="Hello!",
        reasoning="The user says hi.",
        options=ON,
        corpus=True,
    ),
    Case(
        "tag-json",
        "no-section-opener",
        "deepseek-ai-DeepSeek-V3.1.jinja",
        '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>',
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "tag-json",
        "missing-closes-at-end",
        "deepseek-ai-DeepSeek-V3.1.jinja",
        'Ok.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}',
        content="Ok.",
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "tag-json",
        "reasoning-forced-open-r1",
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
        "Simple greeting.\n</think>\n\nHello!",
        content="Hello!",
        reasoning="Simple greeting.",
        options=ON,
        corpus=True,
    ),
    # Issue 21 §5: the call list the system prompt describes (never rendered).
    Case(
        "tag-json",
        "described-functools-list",
        "vllm-tool_chat_template_phi4_mini.jinja",
        'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]',
        calls=(weather(), weather(PARIS_C)),
        corpus=True,
    ),
    Case(
        "tag-json",
        "described-functools-unclosed-after-text",
        "vllm-phi4_mini-v0.8.5.jinja",
        'I will check. functools[{"name": "get_weather", "arguments": {"city": "Paris"}}',
        content="I will check.",
        calls=(weather(),),
        corpus=True,
    ),
    # Issue 21 §5: the prompt ends inside the recipient opener (functionary v2).
    Case(
        "tag-json",
        "recipient-text-then-call",
        "functionary-v2.jinja",
        "all\n<|content|>Let me check.\n<|from|>assistant\n<|recipient|>get_weather\n"
        '<|content|>{"city": "Paris"}',
        content="Let me check.",
        calls=(weather(),),
        corpus=True,
    ),
    Case(
        "tag-json",
        "recipient-call-first",
        "hfjs-meetkai-functionary-medium-v2.2.jinja",
        'get_weather\n<|content|>{"city": "Paris"}',
        calls=(weather(),),
        corpus=True,
    ),
]

CASES = OWN_CASES + TRUNCATION_CASES + CORPUS_CASES


def _template(case: Case) -> ChatTemplate:
    if case.corpus:
        return corpus_template(case.template, case.template)
    return own_template(case.template)


def _params(case: Case) -> ChatParams:
    # Without the parameterless tool: some corpus templates cannot render one (issue 10 §4).
    tools = [t for t in TOOLS if t["function"]["parameters"]]
    return _template(case).apply(USER, tools=tools, call_id_seed=1, **dict(case.options))


def _as_data(message: ChatMessage) -> dict[str, Any]:
    return {
        "content": message.content,
        "reasoning_content": message.reasoning_content,
        "tool_calls": [(c.name, json.loads(c.arguments)) for c in message.tool_calls],
    }


def _marks(reason: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


PARAMS = [pytest.param(c, id=c.id, marks=_marks(c.xfail)) for c in CASES]
STREAM_PARAMS = [pytest.param(c, id=c.id, marks=_marks(c.stream_xfail)) for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_output_parses_to_the_intended_message(case: Case) -> None:
    message = _params(case).parse(case.output)
    assert _as_data(message) == {
        "content": case.content,
        "reasoning_content": case.reasoning,
        "tool_calls": list(case.calls),
    }
    assert message.truncated is case.truncated
    assert message.truncated_call == case.cut_call


@pytest.mark.parametrize("case", STREAM_PARAMS)
def test_streamed_output_folds_into_the_parse(case: Case) -> None:
    """1-character chunks and random chunks: the deltas and the message equal parse()
    (the default, whole-call deltas: a stream never announces a call parse() has not)."""
    check_streaming(_params(case), case.output, count=8, seed=len(case.output))


@pytest.mark.parametrize("case", STREAM_PARAMS)
def test_incremental_stream_drops_only_broken_calls(case: Case) -> None:
    """Incremental deltas, 1-character and random chunks: the message equals parse(); the
    deltas equal it too, but for the calls announced and then dropped (listed)."""
    params = _params(case)
    whole = as_dict(params.parse(case.output))
    for pieces in splits(case.output, 8, len(case.output)):
        stream = params.stream(tool_call_deltas="incremental")
        deltas = [d for piece in pieces for d in stream.feed(piece)] + stream.finish()
        assert as_dict(stream.message) == whole
        folded = accumulate(deltas)
        kept = [c for i, c in enumerate(folded["tool_calls"]) if i not in stream.dropped_calls]
        assert {**folded, "tool_calls": kept} == whole, pieces
        if not whole["tool_calls"] and not stream.dropped_calls:
            assert folded["tool_calls"] == []


def _feeds(params: ChatParams, pieces: list[str], policy: str) -> tuple[Any, ...]:
    stream = params.stream(tool_call_deltas=policy)
    deltas = [stream.feed(piece) for piece in pieces] + [stream.finish()]
    return deltas, as_dict(stream.message), stream.dropped_calls


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_moved_feeds_send_what_a_parse_from_the_root_sends(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A feed that only resumes the last parse's one unfinished leaf moves the end of the
    last tree instead of parsing and mapping it again: every feed's deltas (both policies,
    1-character and random chunks), the message and the dropped calls are those of a
    stream whose every feed parses from the root."""
    params = _params(case)
    resume = IncrementalParse.resume
    for pieces in splits(case.output, 3, len(case.output)):
        for policy in ("whole", "incremental"):
            moved = _feeds(params, pieces, policy)
            with monkeypatch.context() as patch:
                patch.setattr(IncrementalParse, "resume", lambda s, c: min(resume(s, c), -1))
                reparsed = _feeds(params, pieces, policy)
            assert moved == reparsed, (policy, pieces)


def test_strict_grammar_keeps_the_rendered_shape() -> None:
    """The lenient parser reads the deviations; the grammar still allows only the template's
    own shape (the key order, the key name, the outer opener)."""
    from helpers.gbnf_oracle import accepts

    hermes = own_template(HERMES).apply(USER, tools=TOOLS, tool_choice="required")
    assert hermes.grammar is not None
    rendered = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert accepts(hermes.grammar, rendered)
    swapped = '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>'
    assert not accepts(hermes.grammar, swapped)
    coder = own_template(QWEN_CODER).apply(USER, tools=TOOLS, tool_choice="required")
    assert coder.grammar is not None
    bare = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>"
    assert not accepts(coder.grammar, bare)
    assert accepts(coder.grammar, "<tool_call>\n" + bare + "\n</tool_call>")


def test_every_family_is_covered() -> None:
    families = {c.family for c in OWN_CASES}
    assert families >= {"json", "tag-json", "tagged", "pythonic", "harmony", "reasoning"}


# --------------------------------------------------------------------- calls in reasoning

REASONING_CALLS = [
    pytest.param(
        GLM,
        "<think>Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Paris</arg_value>\n</tool_call>\nDone thinking.</think>\nAnswer.",
        id="tagged-args",
    ),
    pytest.param(
        "reasoning/tools_only_reasoning.jinja",
        '<reasoning>Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}\n</tool_call>\nDone thinking.</reasoning>\nAnswer.',
        id="tag-json",
    ),
]


def _reasoning_params(template: str, calls_in_reasoning: bool | None) -> ChatParams:
    options: dict[str, Any] = {"enable_thinking": True, "call_id_seed": 1}
    if calls_in_reasoning is not None:
        options["calls_in_reasoning"] = calls_in_reasoning
    tools = [t for t in TOOLS if t["function"]["parameters"]]
    return own_template(template).apply(USER, tools=tools, **options)


@pytest.mark.parametrize(("template", "text"), REASONING_CALLS)
def test_a_call_inside_reasoning_ends_it_by_default(template: str, text: str) -> None:
    """Default (as llama.cpp, vLLM and Ollama): a call written before the reasoning closes
    ends the reasoning there; the text after the call up to the block's closer is reasoning
    (no raw closer reaches the content, issue 34), and without a closer it is content."""
    params = _reasoning_params(template, None)
    assert _as_data(params.parse(text)) == {
        "content": "Answer.",
        "reasoning_content": "Let me check.\n\nDone thinking.",
        "tool_calls": [weather()],
    }
    assert params.parse(text) == _reasoning_params(template, False).parse(text)
    check_streaming(params, text, count=8, seed=1)
    closer = text[text.index("Done thinking.") + 14 : text.index("\nAnswer.")]
    unclosed = text.replace(closer, "")
    assert _as_data(params.parse(unclosed)) == {
        "content": "Done thinking.\nAnswer.",
        "reasoning_content": "Let me check.",
        "tool_calls": [weather()],
    }
    check_streaming(params, unclosed, count=8, seed=1)


@pytest.mark.parametrize(("template", "text"), REASONING_CALLS)
def test_calls_inside_reasoning_are_calls_when_asked(template: str, text: str) -> None:
    params = _reasoning_params(template, True)
    message = params.parse(text)
    assert _as_data(message) == {
        "content": "Answer.",
        "reasoning_content": "Let me check.\n\nDone thinking.",
        "tool_calls": [weather()],
    }
    check_streaming(params, text, count=8, seed=2)
    # A call cut off inside reasoning is neither a call nor reasoning text: its raw text
    # is the truncated_call, flagged; a broken one stays text.
    cut = text[: text.index("Paris") + 3]
    cut_message = params.parse(cut)
    assert cut_message.tool_calls == [] and cut_message.truncated
    assert cut_message.truncated_call is not None and cut.endswith(cut_message.truncated_call)
    assert "get_weather" in cut_message.truncated_call
    assert cut_message.reasoning_content == "Let me check."
    if template != GLM:  # (a tagged string value takes any text)
        broken = text.replace('"Paris"', '"Paris", oops')
        broken_message = params.parse(broken)
        assert broken_message.tool_calls == []
        assert "oops" in (broken_message.reasoning_content or "")
        check_streaming(params, broken, count=4, seed=3)


def test_calls_in_reasoning_must_be_a_boolean() -> None:
    with pytest.raises(RequestError, match="calls_in_reasoning"):
        own_template(GLM).apply(USER, tools=TOOLS, calls_in_reasoning="yes")  # type: ignore[arg-type]


def test_calls_inside_think_on_qwen3_both_ways() -> None:
    """The corpus' Qwen3 (<think> reasoning, <tool_call> JSON calls), both settings."""
    template = corpus_template("Qwen-Qwen3-0.6B.jinja", "Qwen3")
    tools = [t for t in TOOLS if t["function"]["parameters"]]
    text = (
        '<think>Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}\n</tool_call>\nok.</think>\n\nAnswer.'
    )
    default = template.apply(USER, tools=tools, enable_thinking=True, call_id_seed=1)
    assert _as_data(default.parse(text)) == {
        "content": "Answer.",
        "reasoning_content": "Let me check.\n\nok.",
        "tool_calls": [weather()],
    }
    asked = template.apply(
        USER, tools=tools, enable_thinking=True, call_id_seed=1, calls_in_reasoning=True
    )
    assert _as_data(asked.parse(text)) == {
        "content": "Answer.",
        "reasoning_content": "Let me check.\n\nok.",
        "tool_calls": [weather()],
    }
    for params in (default, asked):
        check_streaming(params, text, count=4, seed=5)


# A call the output ends inside after a whole argument, before its close tag.
CUT_BETWEEN_ARGUMENTS = [
    (QWEN_CODER, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"),
    (GLM, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"),
]


@pytest.mark.parametrize(("template", "output"), CUT_BETWEEN_ARGUMENTS)
def test_finish_reason_length_makes_a_call_cut_between_arguments_content(
    template: str, output: str
) -> None:
    """Ended by a stop token, a call missing only its close tag is the call (models leave
    it out); cut by the token limit (finish_reason "length"), the same text is not a call:
    it is not content, its text is the message's truncated_call, and the message is
    truncated, streamed or not."""
    params = own_template(template).apply(USER, tools=TOOLS, call_id_seed=1)
    for reason in (None, "stop"):
        stopped = params.parse(output, finish_reason=reason)
        assert [(c.name, json.loads(c.arguments)) for c in stopped.tool_calls] == [weather()]
        assert not stopped.truncated
    cut = params.parse(output, finish_reason="length")
    assert cut.tool_calls == [] and cut.truncated
    assert cut.content is None and cut.truncated_call == output.strip()
    for pieces in splits(output, 4, len(output)):
        stream = params.stream()
        deltas = [d for piece in pieces for d in stream.feed(piece)]
        deltas += stream.finish(finish_reason="length")
        assert as_dict(stream.message) == as_dict(cut)
        assert accumulate(deltas) == as_dict(cut)


def test_finish_reason_must_be_a_string() -> None:
    params = own_template(QWEN_CODER).apply(USER, tools=TOOLS)
    with pytest.raises(RequestError, match="finish_reason"):
        params.parse("hi", finish_reason=1)  # type: ignore[arg-type]
    with pytest.raises(RequestError, match="finish_reason"):
        params.stream().finish(finish_reason=True)  # type: ignore[arg-type]
