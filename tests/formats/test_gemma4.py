"""gemma-4 format: ``call:NAME{key:<|"|>text<|"|>,n:3}`` arguments, thought channel.

Outputs are rendered by the templates themselves (the project's small gemma-4-like template,
and the corpus template when present), so the expected message is what was rendered: the
arguments written in the gemma notation must parse back to the JSON the template was given.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping
from typing import Any

import pytest
from helpers.formats import (
    TOOLS,
    USER,
    call,
    check_streaming,
    expected,
    needle_text_grows,
    normalized,
    own_template,
    scenarios,
    stream,
)
from helpers.gbnf_oracle import accepts
from helpers.paths import corpus_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import ChatTemplate
from autoparser.formats import detect_format
from autoparser.formats.gemma4 import CALL_END, CALL_START, QUOTE, to_json
from autoparser.params import ChatParams

OWN = "handlers/gemma4_like.jinja"
CORPUS = "google-gemma-4-31B-it.jinja"
ENDS = ("<turn|>", "<|tool_response>")
SCENARIOS = scenarios(CALL_END)
CALL_SCENARIOS = [name for name, msg in SCENARIOS.items() if msg.get("tool_calls")]
# The corpus template writes reasoning only in tool-call turns (TOOLS_ONLY).
CORPUS_SCENARIOS = [n for n in SCENARIOS if n != "reasoning_content"]
MARKERS = ("<|", "|>", "<channel", "<tool_call", "<turn")

ANY_ARGS = {
    "type": "function",
    "function": {
        "name": "store",
        "description": "Store anything",
        "parameters": {"type": "object", "properties": {}},
    },
}


def _corpus() -> ChatTemplate:
    root = corpus_dir()
    if root is None or not (root / CORPUS).is_file():
        pytest.skip(f"{CORPUS} not in the corpus (../shared/templates)")
    return ChatTemplate.from_file(root / CORPUS)


def _template(which: str) -> ChatTemplate:
    return own_template(OWN) if which == "own" else _corpus()


def _params(template: ChatTemplate, tools: Any = TOOLS, **kw: Any) -> ChatParams:
    kw.setdefault("call_id_seed", 7)
    kw.setdefault("enable_thinking", True)
    params: ChatParams = template.apply(USER, tools=tools, **kw)
    return params


def _output(template: ChatTemplate, message: Mapping[str, Any], tools: Any = TOOLS) -> str:
    """What the model writes: the turn's render after the prompt, without the end of turn.

    Rendered with thinking on: the corpus template's prompt then ends with ``<|turn>model\\n``
    (with thinking off it also writes an empty thought channel that history turns lack).
    """
    prompt = template.render(USER, tools=tools, add_generation_prompt=True, enable_thinking=True)
    full = template.render(
        [*USER, message], tools=tools, add_generation_prompt=False, enable_thinking=True
    )
    assert full.startswith(prompt), "the render of the turn does not extend the prompt"
    text = full[len(prompt) :].rstrip()
    for marker in ENDS:
        text = text.removesuffix(marker)
    return text


def _args_of(message: Any) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in message.tool_calls]


def _lazy_start(params: ChatParams, text: str) -> int:
    words = [t.value for t in params.grammar_triggers]
    assert words == [CALL_START], params.grammar_triggers
    return text.index(CALL_START)


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_selects_the_handler() -> None:
    assert detect_format("{{- '<|tool_call>call:' + function['name'] + '{' -}}") == "gemma4"
    assert own_template(OWN).analyze().handler == "gemma4"


def test_corpus_template_is_fingerprinted() -> None:
    analysis = _corpus().analyze()
    assert analysis.handler == "gemma4"
    assert (analysis.reasoning.start, analysis.reasoning.end) == ("<|channel>thought", "<channel|>")


# --------------------------------------------------------------------------- the notation


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('<|"|>Paris<|"|>', "Paris"),
        ('<|"|>a "q" {b} [c],d:e\n<|"|>', 'a "q" {b} [c],d:e\n'),
        ('<|"|><|"|>', ""),
        ("3", 3),
        ("-2.5", -2.5),
        ("1e-05", 1e-05),
        ("1e+20", 1e20),
        ("true", True),
        ("False", False),
        ("None", None),
        ("null", None),
        ("{}", {}),
        ("[]", []),
        (
            '{a:1,b:<|"|>x<|"|>,c:{d:[1,None,true]}}',
            {"a": 1, "b": "x", "c": {"d": [1, None, True]}},
        ),
        ('[<|"|>α<|"|>,[],{k:<|"|>}<|"|>}]', ["α", [], {"k": "}"}]),
        ('{<|"|>quoted key<|"|>:1}', {"quoted key": 1}),
        (" { a : 1 , b : [ 2 , 3 ] } ", {"a": 1, "b": [2, 3]}),
        ("{a:1} extra", "{a:1} extra"),  # not one value: kept as text
    ],
)
def test_notation_to_json(raw: str, value: Any) -> None:
    assert json.loads(to_json(raw)) == value


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('{a:<|"|>Par', {"a": "Par"}),
        ('{a:<|"|>Par<|"', {"a": "Par"}),
        ("{a:[1,{b:", {"a": [1, {"b": None}]}),
        ("[1,2", [1, 2]),
        ("{a", {"a": None}),
        ("", None),
    ],
)
def test_cut_off_notation_closes(raw: str, value: Any) -> None:
    assert json.loads(to_json(raw)) == value


def test_every_prefix_converts_to_json() -> None:
    raw = '{a:<|"|>x, y<|"|>,b:[1,2.5,{c:None}],d:{e:true}}'
    for k in range(len(raw) + 1):
        json.loads(to_json(raw[:k]))


# --------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_own_parse_gives_back_the_message(name: str) -> None:
    template = own_template(OWN)
    message = _params(template).parse(_output(template, SCENARIOS[name]))
    assert normalized(message) == expected(SCENARIOS[name])
    assert not message.truncated


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_own_streaming_equals_parse(name: str) -> None:
    template = own_template(OWN)
    text = _output(template, SCENARIOS[name])
    params = _params(template)
    check_streaming(params, text, seed=zlib.crc32(name.encode()))
    deltas, message = stream(params, list(text))
    assert normalized(message) == expected(SCENARIOS[name])
    for delta in deltas:
        for field in ("content", "reasoning_content"):
            assert not any(m in delta.get(field, "") for m in MARKERS), delta


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_end_of_turn_marker_is_optional(name: str) -> None:
    template = own_template(OWN)
    text = _output(template, SCENARIOS[name])
    params = _params(template)
    end = "<|tool_response>" if SCENARIOS[name].get("tool_calls") else "<turn|>"
    assert params.parse(text + end) == params.parse(text)
    assert params.parse(text + end + "\n<|turn>user\nmore") == params.parse(text)


@pytest.mark.parametrize("name", CORPUS_SCENARIOS)
def test_corpus_round_trip(name: str) -> None:
    template = _corpus()
    text = _output(template, SCENARIOS[name])
    params = _params(template)
    assert normalized(params.parse(text)) == expected(SCENARIOS[name])
    check_streaming(params, text, count=8, seed=zlib.crc32(name.encode()))


def test_corpus_prompt_without_thinking_closes_the_thought_channel() -> None:
    template = _corpus()
    params = _params(template, enable_thinking=None)
    assert params.prompt.endswith("<|turn>model\n<|channel>thought\n<channel|>")
    text = '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>'
    message = params.parse(text)
    assert message.reasoning_content is None
    assert _args_of(message) == [("get_weather", {"city": "Oslo"})]


RICH: dict[str, Any] = {
    "quotes": "say \"hi\" and 'bye' \\ back\\slash",
    "newlines": "\nleading and trailing\n\n",
    "unicode": "ünïcødé 東京 🌧 ✓",
    "braces": "{a:1} [x] <tool_call|> <|tool_call>call:f{} <turn|>",
    "ints": [0, -7, 9999999, -123456789012],
    "floats": [0.25, -1.5, 1e-05, 1e20],
    "flags": [True, False],
    "nothing": None,
    "nested": {"deep": {"deeper": [{"k": "v"}, [], {}]}, "empty": ""},
}


@pytest.mark.parametrize("which", ["own", "corpus"])
def test_rich_arguments_round_trip(which: str) -> None:
    template = _template(which)
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("store", RICH), call("store", {"only": 1})],
    }
    text = _output(template, message, [ANY_ARGS])
    params = _params(template, [ANY_ARGS])
    parsed = params.parse(text)
    assert _args_of(parsed) == [("store", RICH), ("store", {"only": 1})]
    assert not parsed.truncated
    check_streaming(params, text, count=10, seed=3)


_KEYS = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=6)
_TEXT = st.text(st.characters(codec="utf-8", max_codepoint=0x1FFFF), max_size=12).filter(
    lambda s: QUOTE not in s
)
_LEAVES = (
    _TEXT
    | st.integers(-(10**15), 10**7)
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
    | st.booleans()
    | st.none()
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_KEYS, _VALUES, max_size=4), st.integers(0, 10_000))
def test_any_arguments_round_trip(args: dict[str, Any], seed: int) -> None:
    template = own_template(OWN)
    message = {"role": "assistant", "content": None, "tool_calls": [call("store", args)]}
    text = _output(template, message, [ANY_ARGS])
    params = _params(template, [ANY_ARGS])
    parsed = _args_of(params.parse(text))
    assert parsed == [("store", args)]
    check_streaming(params, text, count=2, seed=seed)


def test_number_text_is_python_str() -> None:
    # The template prints numbers with str(): -0.0 and exponents must come back as numbers.
    template = own_template(OWN)
    args = {"a": -0.0, "b": 1.5e300, "c": -(2**70)}
    message = {"role": "assistant", "content": None, "tool_calls": [call("store", args)]}
    text = _output(template, message, [ANY_ARGS])
    [(_name, got)] = _args_of(_params(template, [ANY_ARGS]).parse(text))
    assert got == args and math.copysign(1.0, got["a"]) == -1.0


# --------------------------------------------------------------------------- grammar


@pytest.mark.parametrize("which", ["own", "corpus"])
@pytest.mark.parametrize("name", CALL_SCENARIOS)
def test_lazy_grammar_accepts_from_trigger(which: str, name: str) -> None:
    template = _template(which)
    text = _output(template, SCENARIOS[name])
    params = _params(template)
    assert params.grammar is not None and params.grammar_lazy
    assert accepts(params.grammar, text[_lazy_start(params, text) :]), text


@pytest.mark.parametrize("which", ["own", "corpus"])
@pytest.mark.parametrize("name", [n for n in CALL_SCENARIOS if not SCENARIOS[n].get("content")])
def test_required_grammar_accepts_calls(which: str, name: str) -> None:
    template = _template(which)
    text = _output(template, SCENARIOS[name])
    params = _params(template, tool_choice="required")
    assert params.grammar is not None and not params.grammar_lazy
    assert accepts(params.grammar, text), text


def test_required_grammar_rejects_text_and_bad_arguments() -> None:
    template = own_template(OWN)
    params = _params(template, tool_choice="required")
    assert params.grammar is not None
    assert not accepts(params.grammar, _output(template, SCENARIOS["content"]))
    good = '<|tool_call>call:search{limit:3,query:<|"|>x<|"|>}<tool_call|>'
    assert accepts(params.grammar, good)
    for bad in (
        '<|tool_call>call:search{limit:<|"|>3<|"|>,query:<|"|>x<|"|>}<tool_call|>',  # type
        "<|tool_call>call:search{limit:3}<tool_call|>",  # required key missing
        "<|tool_call>call:search{}<tool_call|>",
        '<|tool_call>call:search{query:<|"|>x<|"|>,limit:3}<tool_call|>',  # unsorted
        '<|tool_call>call:get_weather{city:<|"|>x<|"|>,unit:<|"|>kelvin<|"|>}<tool_call|>',
        '<|tool_call>call:nope{a:<|"|>x<|"|>}<tool_call|>',
        '<|tool_call>call:search{"query": "x"}<tool_call|>',  # JSON is not the notation
    ):
        assert not accepts(params.grammar, bad), bad


def test_named_tool_choice_allows_only_that_tool() -> None:
    template = own_template(OWN)
    params = _params(template, tool_choice={"type": "function", "function": {"name": "search"}})
    assert params.grammar is not None and not params.grammar_lazy
    assert accepts(params.grammar, _output(template, SCENARIOS["complex_args"]))
    assert not accepts(params.grammar, _output(template, SCENARIOS["one_call"]))


def test_parallel_calls_only_when_allowed() -> None:
    template = own_template(OWN)
    text = _output(template, SCENARIOS["two_calls"])
    single = _params(template, parallel_tool_calls=False)
    parallel = _params(template, parallel_tool_calls=True)
    assert single.grammar and parallel.grammar
    assert accepts(parallel.grammar, text)
    assert not accepts(single.grammar, text)
    assert len(single.parse(text).tool_calls) == 2


def test_required_grammar_allows_reasoning_first() -> None:
    template = own_template(OWN)
    text = _output(template, SCENARIOS["reasoning_call"])
    params = _params(template, tool_choice="required")
    assert params.grammar is not None and accepts(params.grammar, text)


def test_tool_choice_none_keeps_calls_as_content() -> None:
    template = own_template(OWN)
    text = _output(template, SCENARIOS["content_call"])
    params = _params(template, tool_choice="none")
    assert params.grammar is None
    message = params.parse(text)
    assert not message.tool_calls
    assert message.content is not None and message.content.startswith(CALL_START)
    check_streaming(params, text, count=5)


def test_response_format_constrains_the_text() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    template = own_template(OWN)
    params = _params(
        template, tools=None, response_format={"type": "json_object", "schema": schema}
    )
    assert params.grammar is not None and not params.grammar_lazy
    assert accepts(params.grammar, '{"n": 42}')
    assert not accepts(params.grammar, '{"n": true}')
    assert params.parse('{"n": 42}').content == '{"n": 42}'


@pytest.mark.parametrize("which", ["own", "corpus"])
def test_preserved_tokens_and_stops(which: str) -> None:
    params = _params(_template(which))
    assert {CALL_START, CALL_END, QUOTE} <= set(params.preserved_tokens)
    assert len(params.preserved_tokens) == len(set(params.preserved_tokens))
    assert {"<|tool_response>", "<turn|>"} <= set(params.additional_stops)


# --------------------------------------------------------------------------- robustness


@pytest.mark.parametrize(
    "text",
    [
        "Plain words about <|tool_call> in prose.",
        "<|tool_call>call:launch{now:true}<tool_call|>",
        "<|tool_call>garbage<tool_call|>",
        '<|tool_call>call:get_weather(city="x")',
        'call:get_weather{city:<|"|>x<|"|>}',
    ],
)
def test_text_outside_the_format_stays_content(text: str) -> None:
    params = _params(own_template(OWN))
    message = params.parse(text)
    assert not message.tool_calls
    assert message.content == text
    check_streaming(params, text, count=5)


@pytest.mark.parametrize("cut_after", ['query:<|"|>a "quoted"', "nested:{list:[1,2.5", "limit:1"])
def test_truncated_call_is_kept_apart_and_flagged(cut_after: str) -> None:
    """Output cut inside a call: no call (its arguments are not whole), its text is not
    content but the message's truncated_call, and the message says it was truncated."""
    template = own_template(OWN)
    text = _output(template, SCENARIOS["complex_args"])
    cut = text[: text.index(cut_after) + len(cut_after)]
    params = _params(template)
    message = params.parse(cut)
    assert message.truncated and message.tool_calls == []
    assert message.content is None
    assert message.truncated_call is not None and cut.endswith(message.truncated_call)
    assert message.truncated_call.startswith(CALL_START)
    check_streaming(params, cut, count=5)


def test_truncated_reasoning_is_flagged() -> None:
    params = _params(own_template(OWN))
    message = params.parse("<|channel>thought\nhalf a tho")
    assert message.truncated and message.reasoning_content == "half a tho"


def test_arguments_breaking_after_the_name_are_content() -> None:
    # A value that is no value of the notation: the call is no call (never a repaired
    # one); its text is content; an incremental stream drops the call it announced.
    text = "<|tool_call>call:search{limit:3,query:oops here}<tool_call|>after"
    params = _params(own_template(OWN))
    message = params.parse(text)
    assert message.tool_calls == [] and not message.truncated
    assert message.content == text
    check_streaming(params, text, count=10)
    incremental = params.stream(tool_call_deltas="incremental")
    for piece in text:
        incremental.feed(piece)
    incremental.finish()
    assert incremental.dropped_calls == (0,) and incremental.message == message


@pytest.mark.parametrize(
    ("text", "args", "truncated"),
    [
        (
            '<|tool_call>call:search{"query": "x", "limit": 3}<tool_call|>',
            {"query": "x", "limit": 3},
            False,
        ),
        ('<|tool_call>call:search{ "query": "x" } <tool_call|>', {"query": "x"}, False),
        ('<|tool_call>call:search{"query": "x', None, True),
        ('<|tool_call>call:search{"query": oops}<tool_call|>', None, False),
        ("<|tool_call>call:search{", None, True),
    ],
)
def test_json_arguments_are_read_too(
    text: str, args: dict[str, Any] | None, truncated: bool
) -> None:
    # A model slipping out of the notation into JSON: the character after "{" decides.
    # JSON that breaks is no call: the text is content; cut off, it is the truncated call.
    params = _params(own_template(OWN))
    message = params.parse(text)
    assert _args_of(message) == ([("search", args)] if args is not None else [])
    if args is None:
        assert (message.truncated_call if truncated else message.content) == text
    assert message.truncated is truncated
    check_streaming(params, text, count=10)


def test_reasoning_format_none_keeps_the_channel_in_content() -> None:
    template = own_template(OWN)
    text = _output(template, SCENARIOS["reasoning_content"])
    message = _params(template, reasoning_format="none").parse(text)
    assert message.reasoning_content is None
    assert message.content is not None and message.content.startswith("<|channel>thought")


def test_needles_stream_in_order() -> None:
    template = own_template(OWN)
    message = {
        "role": "assistant",
        "reasoning_content": "r-1 then r-2",
        "content": "c-5 and c-6",
        "tool_calls": [
            call("search", {"query": "a-3", "tags": ["a-4"]}),
        ],
    }
    text = _output(template, message)
    needle_text_grows(_params(template), text, ["r-1", "r-2", "a-3", "a-4", "c-5", "c-6"])


def test_string_arguments_stream_before_they_end() -> None:
    template = own_template(OWN)
    text = '<|tool_call>call:search{query:<|"|>a long string value'
    parser = _params(template).stream(tool_call_deltas="incremental")
    deltas = parser.feed(text)
    folded = "".join(
        tc["function"].get("arguments", "") for d in deltas for tc in d.get("tool_calls", [])
    )
    assert folded == '{"query": "a long string value'


FRAGMENTS = [
    CALL_START,
    "call:get_weather{",
    "call:ping{",
    "call:nope{",
    'city:<|"|>X<|"|>',
    '"city": "X"',
    " ",
    "limit:3",
    "opts:{a:[1,None]}",
    ",",
    "}",
    CALL_END,
    "<|channel>thought\n",
    "<channel|>",
    "text ",
    "<|",
    '<|"|>',
    "\n",
    "<turn|>",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14), st.integers(0, 10_000))
def test_any_mix_streams_like_it_parses(parts: list[str], seed: int) -> None:
    text = "".join(parts)
    if len(text) < 2:
        return
    params = _params(own_template(OWN))
    message = params.parse(text)  # never raises
    for c in message.tool_calls:
        assert isinstance(json.loads(c.arguments), dict)
    check_streaming(params, text, count=2, seed=seed)


TYPED = {
    "type": "function",
    "function": {
        "name": "typed",
        "description": "Every kind of parameter",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "n": {"type": "integer", "minimum": -1000, "maximum": 1000},
                "ratio": {"type": "number"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                "opt": {"type": ["string", "null"]},
                "kind": {"type": "string", "enum": ["x", "y z"]},
                "sub": {
                    "type": "object",
                    "properties": {
                        "a": {"type": "integer", "minimum": 0, "maximum": 99},
                        "b": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
                    },
                    "required": ["a"],
                    "additionalProperties": False,
                },
            },
            "required": ["query", "sub"],
            "additionalProperties": False,
        },
    },
}


def _typed_args() -> st.SearchStrategy[dict[str, Any]]:
    from hypothesis_jsonschema import from_schema

    schema = TYPED["function"]["parameters"]  # type: ignore[index]
    values = from_schema(schema).filter(lambda a: QUOTE not in json.dumps(a, ensure_ascii=False))
    return values.map(lambda a: a if isinstance(a, dict) else {})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_typed_args())
def test_schema_valid_arguments_parse_and_satisfy_the_grammar(args: dict[str, Any]) -> None:
    template = own_template(OWN)
    message = {"role": "assistant", "content": None, "tool_calls": [call("typed", args)]}
    text = _output(template, message, [TYPED])
    params = _params(template, [TYPED], tool_choice="required")
    assert _args_of(params.parse(text)) == [("typed", args)]
    assert params.grammar is not None and accepts(params.grammar, text), text
