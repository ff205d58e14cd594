"""Findings (issue 34): what a parse tolerated or refused, and why, the same whole and
streamed; and the tolerant reading of an argument the schema does not declare.

Each class has a small inline template of our own, in the style of the format it stands
for: Qwen3-Coder's ``<parameter=k>``, GLM's ``<arg_key>``, a pythonic list, Hermes' JSON
call, and a ChatML one whose model writes ``<think>``. Every output is parsed whole and
streamed under random splits: the stream's message, findings included, is the parse's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.formats import USER, accumulate, check_streaming, splits, stream
from helpers.gbnf_oracle import accepts

from autoparser import FINDING_KINDS, ChatMessage, ChatParams, ChatTemplate, Finding
from autoparser.errors import RequestError

_TURNS = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}<|im_start|>assistant\n"
    "{%- if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
    "{%- endif %}{{ message.content or '' }}CALLS<|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}"
    "{%- if tools %}<|im_start|>system\ntools: {{ tools | tojson }}<|im_end|>\n{%- endif %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_EACH = "{%- for tc in message.tool_calls or [] %}{%- set f = tc.function %}BODY{%- endfor %}"


def _template(body: str) -> str:
    return _TURNS.replace("CALLS", _EACH.replace("BODY", body))


QWEN_CODER = _template(
    "<tool_call>\n<function={{ f.name }}>\n{%- for k, v in f.arguments | items %}\n"
    "<parameter={{ k }}>\n{{ v if v is string else v | tojson }}\n</parameter>"
    "{%- endfor %}\n</function>\n</tool_call>"
)
GLM = _template(
    "<tool_call>{{ f.name }}\n{%- for k, v in f.arguments | items %}"
    "<arg_key>{{ k }}</arg_key>\n<arg_value>{{ v if v is string else v | tojson }}</arg_value>\n"
    "{%- endfor %}</tool_call>"
)
PYTHONIC = _TURNS.replace(
    "CALLS",
    "{%- if message.tool_calls %}[{%- for tc in message.tool_calls %}{%- set f = tc.function %}"
    "{{ f.name }}({%- for k, v in f.arguments | items %}{{ k }}={{ v | tojson }}"
    "{%- if not loop.last %}, {% endif %}{%- endfor %})"
    "{%- if not loop.last %}, {% endif %}{%- endfor %}]{%- endif %}",
)
HERMES = _template(
    '<tool_call>\n{"name": "{{ f.name }}", "arguments": {{ f.arguments | tojson }}}\n</tool_call>'
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}

# The same call with an argument the schema does not declare (``days``), as each writes it.
UNDECLARED = {
    "qwen3-coder": (
        QWEN_CODER,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
    ),
    "glm": (
        GLM,
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
    ),
    "pythonic": (PYTHONIC, '[get_weather(city="Paris", days=3)]'),
}


def _params(source: str, **options: Any) -> ChatParams:
    return ChatTemplate(source).apply(USER, tools=[WEATHER], call_id_seed=1, **options)


def _streamed(
    params: ChatParams,
    text: str,
    count: int = 12,
    *,
    tolerance: str = "keep",
    finish_reason: str | None = None,
) -> None:
    """Every split's message, findings and truncation included, is the whole parse's."""
    whole = params.parse(text, tolerance=tolerance, finish_reason=finish_reason)
    for pieces in splits(text, count, seed=len(text)):
        parser = params.stream(tolerance=tolerance)
        deltas = [d for piece in pieces for d in parser.feed(piece)]
        deltas += parser.finish(finish_reason=finish_reason)
        assert parser.message == whole, pieces
        assert accumulate(deltas)["content"] == whole.content


def _kinds(message: ChatMessage) -> list[tuple[str, str, str]]:
    return [(f.kind, f.outcome, f.detail) for f in message.findings]


@pytest.mark.parametrize("name", list(UNDECLARED))
def test_an_undeclared_argument_keeps_the_call_with_a_finding(name: str) -> None:
    source, text = UNDECLARED[name]
    params = _params(source)
    message = params.parse(text)
    [call] = message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris", "days": 3})
    assert message.content is None and not message.refused
    assert _kinds(message) == [("undeclared_argument", "kept", "days")]
    assert message.findings[0].call == 0
    written = text[message.findings[0].start : message.findings[0].end]  # the call
    assert written.startswith(("<tool_call>", "get_weather(")) and "days" in written
    _streamed(params, text)
    check_streaming(params, text, count=6, seed=1)


@pytest.mark.parametrize("name", list(UNDECLARED))
def test_the_reject_tolerance_refuses_it_and_keeps_its_text(name: str) -> None:
    source, text = UNDECLARED[name]
    params = _params(source)
    message = params.parse(text, tolerance="reject")
    assert message.tool_calls == [] and message.content == text
    assert _kinds(message) == [("undeclared_argument", "refused", "days")]
    assert message.refused and message.findings[0].call is None
    _streamed(params, text, tolerance="reject")


def test_an_undeclared_value_is_json_where_it_parses_else_the_text() -> None:
    params = _params(QWEN_CODER)
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        '<parameter=opts>\n{"a": [1, true]}\n</parameter>\n'
        "<parameter=note>\nnot {json\n</parameter>\n</function>\n</tool_call>"
    )
    message = params.parse(text)
    [call] = message.tool_calls
    assert json.loads(call.arguments) == {
        "city": "Paris",
        "opts": {"a": [1, True]},
        "note": "not {json",
    }
    assert sorted(f.detail for f in message.findings) == ["note", "opts"]
    _streamed(params, text)


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (QWEN_CODER, UNDECLARED["qwen3-coder"][1].replace("days>\n3", "unit>\nC")),
        (
            GLM,
            UNDECLARED["glm"][1].replace(
                "days</arg_key>\n<arg_value>3", "unit</arg_key>\n<arg_value>C"
            ),
        ),
        (PYTHONIC, '[get_weather(city="Paris", unit="C")]'),
        (
            HERMES,
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}'
            "\n</tool_call>",
        ),
    ],
    ids=["qwen3-coder", "glm", "pythonic", "hermes"],
)
def test_a_call_as_the_schema_says_has_no_finding(source: str, text: str) -> None:
    """The normal path: the declared reading reads it, nothing is reported."""
    params = _params(source)
    message = params.parse(text)
    [call] = message.tool_calls
    assert json.loads(call.arguments) == {"city": "Paris", "unit": "C"}
    assert message.findings == () and not message.refused
    _streamed(params, text, count=4)


def test_invalid_arguments_are_refused_and_kept_as_content() -> None:
    """GigaChat-style ``{invalid json}``: not a call, never lost: content, with a finding
    whose span is the call's text."""
    params = _params(HERMES)
    text = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {invalid json}}\n</tool_call>'
    message = params.parse(text)
    assert message.tool_calls == [] and message.content == text
    [finding] = message.findings
    assert (finding.kind, finding.outcome) == ("invalid_arguments", "refused")
    assert text[finding.start : finding.end].startswith("<tool_call>")
    assert text[finding.start : finding.end].rstrip().endswith("</tool_call>")
    assert message.refused
    _streamed(params, text)


def test_a_call_cut_off_is_a_cut_finding_and_its_text_is_kept() -> None:
    params = _params(HERMES)
    text = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"ci'
    message = params.parse(text, finish_reason="length")
    assert message.truncated and message.tool_calls == [] and message.content == "Sure."
    [finding] = message.findings
    assert (finding.kind, finding.outcome, finding.detail) == ("truncated", "cut", "call")
    assert text[finding.start :].strip() == message.truncated_call
    assert message.refused
    _streamed(params, text, finish_reason="length")


def test_reasoning_left_open_is_cut_but_refuses_no_call() -> None:
    params = _params(HERMES)
    text = "<think>Let me see"
    message = params.parse(text)
    assert message.truncated and message.reasoning_content == "Let me see"
    assert _kinds(message) == [("truncated", "cut", "reasoning")]
    assert not message.refused
    _streamed(params, text)


def test_a_call_written_inside_reasoning_leaves_no_raw_marker_in_content() -> None:
    params = _params(HERMES)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    text = f"<think>maybe {call} hmm</think>Answer."
    message = params.parse(text)
    assert message.content == "Answer."
    assert message.reasoning_content is not None and "hmm" in message.reasoning_content
    assert "</think>" not in (message.content or "") + message.reasoning_content
    assert [c.name for c in message.tool_calls] == ["get_weather"]
    assert _kinds(message) == [("call_in_reasoning", "kept", "")]
    _streamed(params, text)


def test_findings_are_plain_frozen_data() -> None:
    finding = Finding("undeclared_argument", "kept", 0, 9, "days", 0)
    assert finding.to_dict() == {
        "kind": "undeclared_argument",
        "outcome": "kept",
        "start": 0,
        "end": 9,
        "detail": "days",
        "call": 0,
    }
    assert "undeclared argument 'days'" in finding.describe()
    assert set(FINDING_KINDS) >= {"undeclared_argument", "invalid_arguments", "truncated"}
    with pytest.raises(AttributeError):
        finding.kind = "truncated"  # type: ignore[misc]


def test_an_unknown_tolerance_is_a_request_error() -> None:
    params = _params(HERMES)
    with pytest.raises(RequestError, match="tolerance"):
        params.parse("hi", tolerance="lenient")
    with pytest.raises(RequestError, match="tolerance"):
        params.stream(tolerance="lenient")


def test_stream_helper_agrees() -> None:
    """The shared helper folds the same deltas (a sanity check of ``_streamed``)."""
    source, text = UNDECLARED["glm"]
    params = _params(source)
    deltas, message = stream(params, list(text))
    assert message == params.parse(text)
    assert json.loads(accumulate(deltas)["tool_calls"][0]["arguments"])["days"] == 3


def test_findings_do_not_leak_into_the_next_parse() -> None:
    """A parse with nothing to report allocates no findings of its own (issue 36): the
    empty default is shared, so one parse's findings must never reach another's."""
    source, text = UNDECLARED["qwen3-coder"]
    params = _params(source)
    clean = text.replace("<parameter=days>\n3\n</parameter>\n", "")
    assert _kinds(params.parse(text)) == [("undeclared_argument", "kept", "days")]
    assert params.parse(clean).findings == ()
    assert _kinds(params.parse(text)) == [("undeclared_argument", "kept", "days")]
    stream = params.stream()
    stream.feed(clean)
    stream.finish()
    assert stream.message.findings == ()


def test_a_kept_call_after_an_unread_opener_is_indexed_among_the_calls() -> None:
    """The index of a kept call's finding counts only the message's calls, not an opener
    before it that started no call (worked out only when there are findings)."""
    source, text = UNDECLARED["qwen3-coder"]
    params = _params(source)
    unread = "<tool_call>\n<function=no_such_tool>\n</function>\n</tool_call>\n"
    message = params.parse(f"Hm.\n{unread}{text}")
    assert [c.name for c in message.tool_calls] == ["get_weather"]
    # Each opener that started no call is reported (the section's, then the call's).
    assert _kinds(message) == [
        ("invalid_arguments", "refused", "<tool_call>"),
        ("invalid_arguments", "refused", "<function="),
        ("undeclared_argument", "kept", "days"),
    ]
    assert [f.call for f in message.findings] == [None, None, 0]
    assert message.findings[0].start == len("Hm.\n")
    _streamed(params, f"Hm.\n{unread}{text}")


COUNTED = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}

# The same call with a value that is not of its declared type (``days``: an integer).
MISTYPED = {
    "qwen3-coder": (
        QWEN_CODER,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\nthree or four\n</parameter>\n</function>\n</tool_call>",
    ),
    "glm": (
        GLM,
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>three or four</arg_value>\n</tool_call>",
    ),
}


@pytest.mark.parametrize("name", list(MISTYPED))
def test_a_value_not_of_its_type_keeps_the_call_as_the_text_written(name: str) -> None:
    """One value the schema-typed reading refuses does not cost the call (issue 34): the
    reading by the format's markers keeps it as the text, a JSON string, and reports it."""
    source, text = MISTYPED[name]
    params = ChatTemplate(source).apply(USER, tools=[COUNTED], call_id_seed=1)
    message = params.parse(text)
    [call] = message.tool_calls
    assert json.loads(call.arguments) == {"city": "Paris", "days": "three or four"}
    assert message.content is None and not message.refused
    assert _kinds(message) == [("type_mismatch", "kept", "days")]
    assert message.findings[0].call == 0
    _streamed(params, text)
    check_streaming(params, text, count=6, seed=1)
    refused = params.parse(text, tolerance="reject")
    assert refused.tool_calls == [] and refused.content == text
    assert _kinds(refused) == [("type_mismatch", "refused", "days")]
    _streamed(params, text, tolerance="reject")
    # A value of its type is no finding.
    fine = params.parse(text.replace("three or four", "3"))
    assert json.loads(fine.tool_calls[0].arguments)["days"] == 3 and not fine.findings


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            QWEN_CODER,
            "<tool_call>\n<function=get_weather>\n<parameter=unit>\nC\n</parameter>\n"
            "</function>\n</tool_call>",
        ),
        (
            GLM,
            "<tool_call>get_weather\n<arg_key>unit</arg_key>\n<arg_value>C</arg_value>\n"
            "</tool_call>",
        ),
        (PYTHONIC, '[get_weather(unit="C")]'),
    ],
    ids=["qwen3-coder", "glm", "pythonic"],
)
def test_a_required_argument_left_out_keeps_the_call_with_a_finding(source: str, text: str) -> None:
    """``city`` is required: the call without it is kept as written and reported; under
    ``tolerance="reject"`` it is refused, its text content. The grammar never leaves it
    out."""
    params = _params(source)
    message = params.parse(text)
    [call] = message.tool_calls
    assert json.loads(call.arguments) == {"unit": "C"}
    assert _kinds(message) == [("missing_required", "kept", "city")]
    _streamed(params, text)
    refused = params.parse(text, tolerance="reject")
    assert refused.tool_calls == [] and refused.content == text
    assert _kinds(refused) == [("missing_required", "refused", "city")]
    assert not accepts(params.grammar, text)
