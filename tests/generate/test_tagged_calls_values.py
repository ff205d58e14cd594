"""Argument values of tag-per-argument formats, and calls that are not whole (issue 21
§1, §2, §4), on small inline templates of our own: union types with string, values kept
exactly where the template writes no padding, marker text inside values, a value left
without its suffix, junk between arguments, and calls the output ends inside. Each case
is parsed whole and streamed (1-character and random chunks: the stream equals the parse).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.formats import check_streaming, splits, stream
from helpers.generate_cases import accumulate

from autoparser import ChatTemplate
from autoparser.params import ChatParams

# GLM-like: <tool_call>NAME, then <k>key</k><v>value</v> per argument, no padding around
# a value (a string is printed as is, anything else as JSON).
UNPADDED = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls or [] %}
{{- '<tool_call>' + tc.function.name + '\\n' }}
{%- for k, v in tc.function.arguments | items %}
{{- '<k>' + k + '</k>\\n<v>' + (v if v is string else v | tojson) + '</v>\\n' }}
{%- endfor %}
{{- '</tool_call>' }}
{%- endfor %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""

# Qwen3-Coder-like: a value on a line of its own (padding: one newline either side).
PADDED = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls or [] %}
{{- '<call>\\n<fn=' + tc.function.name + '>\\n' }}
{%- for k, v in tc.function.arguments | items %}
{{- '<p=' + k + '>\\n' + (v if v is string else v | tojson) + '\\n</p>\\n' }}
{%- endfor %}
{{- '</fn>\\n</call>' }}
{%- endfor %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""

PAY = {
    "type": "function",
    "function": {
        "name": "pay",
        "description": "Pay an amount.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": ["string", "integer"]},
                "memo": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                "meta": {"anyOf": [{"type": "string"}, {"type": "object"}]},
                "flag": {"type": ["boolean", "string"]},
                "extra": {},
                "note": {"type": "string"},
                "limit": {"type": "integer"},
            },
            "required": ["amount"],
        },
    },
}
USER = [{"role": "user", "content": "Pay it."}]


def _params(source: str) -> ChatParams:
    return ChatTemplate(source, name="inline").apply(USER, tools=[PAY], call_id_seed=3)


def _unpadded_call(*pairs: tuple[str, str], close: str = "</tool_call>") -> str:
    body = "".join(f"<k>{k}</k>\n<v>{v}</v>\n" for k, v in pairs)
    return f"<tool_call>pay\n{body}{close}"


def _arguments(params: ChatParams, text: str) -> list[dict[str, Any]]:
    """The calls' arguments of the parse, after checking every stream folds into it."""
    check_streaming(params, text, count=6, seed=len(text))
    return [json.loads(c.arguments) for c in params.parse(text).tool_calls]


def test_the_inline_templates_analyse_as_tagged_arguments() -> None:
    for source, prefix in ((UNPADDED, "<k>"), (PADDED, "<p=")):
        tools = ChatTemplate(source, name="inline").analyze().tools
        assert tools.format.mode.value == "tag_with_tagged"
        assert tools.arguments.name_prefix == prefix


@pytest.mark.parametrize(
    ("name", "raw", "value"),
    [
        # A value valid as one of the union's other types is that value ...
        ("amount", "12", 12),
        ("memo", "null", None),
        ("memo", "7", 7),
        ("meta", '{"a": 1}', {"a": 1}),
        ("meta", "{'a': 1}", {"a": 1}),  # a Python literal, as str() prints a dict
        ("flag", "true", True),
        ("flag", "True", True),
        ("extra", "[1, 2]", [1, 2]),
        # ... anything else is the string, exactly as written (never a rejected call,
        # never the rest of the value leaking into content).
        ("amount", "2 dollars", "2 dollars"),
        ("amount", "1abc", "1abc"),
        ("amount", "{not valid json", "{not valid json"),
        ("amount", '"12"', '"12"'),  # quoted: the string as written, quotes included
        ("meta", "{broken", "{broken"),
        ("flag", "yes", "yes"),
        ("extra", "x y", "x y"),
    ],
)
def test_union_with_string_reads_other_types_else_the_string(
    name: str, raw: str, value: Any
) -> None:
    params = _params(UNPADDED)
    pairs = [("amount", "5")] if name != "amount" else []
    text = "Paying. " + _unpadded_call(*pairs, (name, raw))
    message = params.parse(text)
    assert message.content == "Paying."
    assert _arguments(params, text) == [{**dict((k, 5) for k, _ in pairs), name: value}]


def test_values_are_kept_exactly_where_the_template_writes_no_padding() -> None:
    params = _params(UNPADDED)
    text = _unpadded_call(("note", "  two  spaces\n"), ("amount", "\ncode\n"))
    assert _arguments(params, text) == [{"note": "  two  spaces\n", "amount": "\ncode\n"}]


def test_only_the_padding_the_template_writes_is_stripped() -> None:
    params = _params(PADDED)
    text = "<call>\n<fn=pay>\n<p=note>\n  indented\n\n</p>\n<p=amount>\n3\n</p>\n</fn>\n</call>"
    # One newline either side is the template's; the rest is the value's.
    assert _arguments(params, text) == [{"note": "  indented\n", "amount": 3}]


@pytest.mark.parametrize(
    "value",
    [
        "Wrap each call in <tool_call> and </tool_call> tags",
        "a </v> inside, then more",
        "ends with </tool_call> here",
        "x </tool_call> y </v> z",
    ],
)
def test_marker_text_inside_a_value_is_text(value: str) -> None:
    """A closer ends a value only where what follows continues the format."""
    params = _params(UNPADDED)
    text = _unpadded_call(("note", value), ("amount", "3"))
    assert _arguments(params, text) == [{"note": value, "amount": 3}]


def test_a_closer_ends_a_value_where_the_format_goes_on() -> None:
    params = _params(UNPADDED)
    # GLM's missing last value suffix right before the call's close ...
    text = "<tool_call>pay\n<k>note</k>\n<v>hi</v>\n<k>amount</k>\n<v>3</tool_call>"
    assert _arguments(params, text) == [{"note": "hi", "amount": 3}]
    # ... and a value left unclosed where the next argument opens (the whitespace
    # before that opener is the joint's).
    text = "<tool_call>pay\n<k>note</k>\n<v>hi\n<k>amount</k>\n<v>3</v>\n</tool_call>"
    assert _arguments(params, text) == [{"note": "hi", "amount": 3}]


def test_marker_inside_a_value_streams_holding_back_only_the_ambiguous_tail() -> None:
    params = _params(UNPADDED)
    head = "<tool_call>pay\n<k>note</k>\n<v>see </v"
    parser = params.stream(tool_call_deltas="incremental")
    deltas = parser.feed(head)
    sent = "".join(tc["function"]["arguments"] for d in deltas for tc in d.get("tool_calls", []))
    # "</v" waits (it may close the value), and so does the space before it (it would
    # be the joint's if the value ended unclosed there).
    assert sent.endswith('"note": "see')
    more = parser.feed("> here</v>\n</tool_call>") + parser.finish()
    sent += "".join(tc["function"]["arguments"] for d in more for tc in d.get("tool_calls", []))
    assert json.loads(sent) == {"note": "see </v> here"}


def test_junk_between_arguments_makes_no_call() -> None:
    """Never a partial call: the call is not whole, so its text stays content."""
    params = _params(UNPADDED)
    text = "<tool_call>pay\n<k>note</k>\n<v>cats</v>junk<k>amount</k>\n<v>3</v>\n</tool_call>"
    assert _arguments(params, text) == []
    assert params.parse(text).content == text
    after = _unpadded_call(("amount", "3")) + " trailing words, no close"
    after = after.replace("</tool_call>", "")
    assert _arguments(params, after) == []
    assert params.parse(after).content == after.strip()


def test_a_call_the_output_ends_inside_is_neither_call_nor_content() -> None:
    params = _params(UNPADDED)
    first = _unpadded_call(("amount", "3"))
    second = "<tool_call>pay\n<k>note</k>\n<v>half a val"
    text = "Paying twice.\n" + first + "\n" + second
    message = params.parse(text)
    assert [json.loads(c.arguments) for c in message.tool_calls] == [{"amount": 3}]
    assert message.content == "Paying twice."
    assert message.truncated and message.truncated_call == second
    assert message.to_openai().keys() == {"role", "content", "tool_calls"}
    check_streaming(params, text, count=6, seed=1)
    for pieces in splits(text, 4, 2):
        deltas, streamed = stream(params, pieces)  # "whole": nothing of the cut call
        folded = accumulate(deltas)
        assert folded["content"] == "Paying twice."
        assert len(folded["tool_calls"]) == 1
        assert streamed.truncated_call == second


def test_finish_reason_length_cuts_a_call_missing_its_close() -> None:
    params = _params(UNPADDED)
    text = _unpadded_call(("amount", "3"), close="")
    assert len(params.parse(text).tool_calls) == 1  # a stop: the close tag left out
    cut = params.parse(text, finish_reason="length")
    assert cut.tool_calls == [] and cut.content is None
    assert cut.truncated and cut.truncated_call == text.strip()


# Kimi-like: a section of calls, each ``functions.NAME:IDX<|args|>{json}<|call_end|>``.
SECTIONED = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- if message.tool_calls %}<|calls|>
{%- for tc in message.tool_calls %}
{{- '<|call|>functions.' + tc.function.name + ':' + loop.index0 | string + '<|args|>' }}
{{- tc.function.arguments | tojson }}<|call_end|>
{%- endfor %}<|calls_end|>
{%- endif %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""

ARGS = '{"amount": 3}'


@pytest.mark.parametrize(
    "text",
    [
        f"<|calls|><|call|>functions.pay:0<|args|>{ARGS}<|call_end|><|calls_end|>",
        # Whitespace at marker joints the template writes none at.
        f"<|calls|>\n<|call|>functions.pay:0 <|args|> {ARGS}<|call_end|>\n<|calls_end|>",
        # The plain-text namespace before the name left out.
        f"<|calls|><|call|>pay:0<|args|>{ARGS}<|call_end|><|calls_end|>",
    ],
)
def test_markers_written_differently_still_make_the_call(text: str) -> None:
    params = _params(SECTIONED)
    assert _arguments(params, text) == [{"amount": 3}]
    assert params.parse(text).content is None


def test_an_empty_section_is_no_call_and_no_content() -> None:
    params = _params(SECTIONED)
    text = "Nothing to call.<|calls|><|calls_end|>"
    assert _arguments(params, text) == []
    message = params.parse(text)
    assert message.content == "Nothing to call." and not message.truncated


# How PADDED prints a non-string value: as JSON, with str(), or mappings as JSON and lists
# with str() (LFM2.5's macro); whether the analysis says the template prints objects or
# arrays the Python way.
PRINTERS = {
    "json": ("(v if v is string else v | tojson)", False),
    "str": ("(v if v is string else v | string)", True),
    "mapping json, list str": (
        "(v if v is string else (v | tojson if v is mapping else v | string))",
        True,
    ),
}
BASKET = {
    "type": "function",
    "function": {
        "name": "basket",
        "parameters": {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "string"}},
                "meta": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        },
    },
}


@pytest.mark.parametrize("printer", PRINTERS, ids=list(PRINTERS))
def test_python_literal_objects_and_arrays_are_in_the_grammar_only_where_the_template_prints_them(
    printer: str,
) -> None:
    """The grammar allows ``['a']`` / ``{'n': 1}`` for array / object parameters exactly
    where the template prints them so (the model was shown them); JSON always; the parser
    reads both either way."""
    from helpers.gbnf_oracle import accepts

    expression, python = PRINTERS[printer]
    source = PADDED.replace("(v if v is string else v | tojson)", expression)
    template = ChatTemplate(source, name=printer)
    assert template.analyze().tools.arguments.values_as_python is python
    params = template.apply(USER, tools=[BASKET], tool_choice="required")
    assert params.grammar is not None

    def call(items: str, meta: str) -> str:
        return (
            f"<call>\n<fn=basket>\n<p=items>\n{items}\n</p>\n<p=meta>\n{meta}\n</p>\n</fn>\n</call>"
        )

    as_json, as_python = call('["a"]', '{"n": 1}'), call("['a']", "{'n': 1}")
    assert accepts(params.grammar, as_json)
    assert accepts(params.grammar, as_python) is python
    for text in (as_json, as_python):
        assert _arguments(params, text) == [{"items": ["a"], "meta": {"n": 1}}]
