"""Markup models write around or instead of a call's template form (issue 21 §2), each
derived from what the template shows: a call turn's content wrapper (Llama 4's
``<|python_start|>``..``<|python_end|>``), which models also put around the calls; an XML
call element closed at once (``<invoke name="submit"/>``, a call with no arguments); the
special token a template writes before built-in calls (``<|python_tag|>``), which models
put before any call. The parser tolerates each; the grammar keeps the template's form.
Inline templates of our own, parsed whole and streamed (1-character and random chunks).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.formats import check_streaming, lazy_start
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate
from autoparser.params import ChatParams

# Llama-4-like: a call turn writes its content between two tokens, then bare JSON calls.
WRAPPED_CONTENT = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|hdr|>assistant<|hdr_end|>
{%- if message.tool_calls %}<|py_open|>{{ message.content or '' }}<|py_close|>
{%- for tc in message.tool_calls %}
{{- '{"name": "' + tc.function.name + '", "parameters": ' + tc.function.arguments | tojson + '}' }}
{%- endfor %}
{%- else %}{{ message.content }}{% endif %}<|eot|>
{%- else %}<|hdr|>{{ message.role }}<|hdr_end|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|hdr|>tools<|hdr_end|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|hdr|>assistant<|hdr_end|>{% endif %}"""

# DeepSeek-DSML-like: each call an XML element whose attribute names the function.
XML_ELEMENTS = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- if message.tool_calls %}<calls>
{%- for tc in message.tool_calls %}
<invoke name="{{ tc.function.name }}">
{%- for k, v in tc.function.arguments | items %}
<param name="{{ k }}">{{ v if v is string else v | tojson }}</param>
{%- endfor %}
</invoke>
{%- endfor %}
</calls>{% endif %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""

# Llama-3.x-like: built-in tools' calls are written after <|python_tag|>, others as JSON.
BUILTIN_TAG = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- for tc in message.tool_calls or [] %}
{%- if builtin_tools is defined and tc.function.name in builtin_tools %}
{{- '<|python_tag|>' + tc.function.name + '.call(' }}
{%- for k, v in tc.function.arguments | items %}{{ k + '="' + v|string + '"' }}
{%- if not loop.last %}, {% endif %}{% endfor %})
{%- else %}
{{- '{"name": "' + tc.function.name + '", "parameters": ' + tc.function.arguments | tojson + '}' }}
{%- endif %}
{%- endfor %}
{%- if message.content %}{{ message.content }}{% endif %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""


def _tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


WEATHER = _tool("get_weather", {"city": {"type": "string"}}, ["city"])
SUBMIT = _tool("submit", {}, [])
USER = [{"role": "user", "content": "Go."}]
PARIS = '{"name": "get_weather", "parameters": {"city": "Paris"}}'


def _params(source: str) -> ChatParams:
    return ChatTemplate(source, name="inline").apply(USER, tools=[WEATHER, SUBMIT], call_id_seed=9)


def _read(params: ChatParams, text: str) -> tuple[str | None, list[tuple[str, Any]]]:
    """(content, calls) of the parse, after checking every stream folds into it."""
    check_streaming(params, text, count=6, seed=len(text))
    message = params.parse(text)
    return message.content, [(c.name, json.loads(c.arguments)) for c in message.tool_calls]


# --- a call turn's content wrapper -------------------------------------------------------


def test_the_pair_around_a_call_turns_content_is_its_wrapper_not_a_section() -> None:
    fmt = ChatTemplate(WRAPPED_CONTENT, name="inline").analyze().tools.format
    assert (fmt.content_wrap_start, fmt.content_wrap_end) == ("<|py_open|>", "<|py_close|>")
    assert fmt.section_start == ""
    analysis = ChatTemplate(WRAPPED_CONTENT, name="inline").analyze()
    assert "<|py_open|>" in analysis.preserved_tokens


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # The template's own form: content in the wrapper, then the call ...
        (f"<|py_open|>Checking.<|py_close|>{PARIS}", "Checking.", 1),
        # ... an empty wrapper, the wrapper around the calls (as models write it) ...
        (f"<|py_open|><|py_close|>{PARIS}", None, 1),
        (f"<|py_open|>{PARIS}<|py_close|>", None, 1),
        (f"<|py_open|>{PARIS}{PARIS}<|py_close|>", None, 2),
        # ... no wrapper at all, and a text answer that has none.
        (PARIS, None, 1),
        ("Just text.", "Just text.", 0),
        # A stray wrapper token is markup, never content.
        ("Hello <|py_open|>there", "Hello there", 0),
    ],
)
def test_the_content_wrapper_is_dropped_around_content_or_calls(
    text: str, content: str | None, calls: int
) -> None:
    got_content, got_calls = _read(_params(WRAPPED_CONTENT), text)
    assert got_content == content
    assert got_calls == [("get_weather", {"city": "Paris"})] * calls


def test_the_grammar_keeps_the_templates_form_after_the_wrapper() -> None:
    params = _params(WRAPPED_CONTENT)
    text = f"<|py_open|>Checking.<|py_close|>{PARIS}"
    start = lazy_start(params, text)
    assert text[:start] == "<|py_open|>Checking.<|py_close|>"
    assert accepts(params.grammar, text[start:])


# --- an XML call element closed at once ---------------------------------------------------


@pytest.mark.parametrize("closed", ['<invoke name="submit"/>', '<invoke name="submit" />'])
def test_a_self_closed_call_element_is_a_call_without_arguments(closed: str) -> None:
    params = _params(XML_ELEMENTS)
    text = f"Done.<calls>\n{closed}\n</calls>"
    assert _read(params, text) == ("Done.", [("submit", {})])
    both = (
        f'<calls>\n{closed}\n<invoke name="get_weather">\n<param name="city">Paris</param>\n'
        "</invoke>\n</calls>"
    )
    assert _read(params, both) == (None, [("submit", {}), ("get_weather", {"city": "Paris"})])


def test_a_self_closed_element_naming_no_tool_is_no_call() -> None:
    params = _params(XML_ELEMENTS)
    text = '<calls>\n<invoke name="nothing"/>\n</calls>'
    assert _read(params, text) == (text, [])


def test_the_grammar_writes_the_call_element_as_the_template_does() -> None:
    params = _params(XML_ELEMENTS)
    own = '<calls>\n<invoke name="submit">\n</invoke>\n</calls>'
    closed = '<calls>\n<invoke name="submit"/>\n</calls>'
    assert accepts(params.grammar, own[lazy_start(params, own) :])
    assert not accepts(params.grammar, closed[lazy_start(params, closed) :])


# --- the token a template writes before built-in calls ------------------------------------


def test_the_builtin_call_token_is_found_and_read_before_any_call() -> None:
    fmt = ChatTemplate(BUILTIN_TAG, name="inline").analyze().tools.format
    assert fmt.call_prefix_token == "<|python_tag|>"
    params = _params(BUILTIN_TAG)
    assert _read(params, f"<|python_tag|>{PARIS}") == (None, [("get_weather", {"city": "Paris"})])
    assert _read(params, PARIS) == (None, [("get_weather", {"city": "Paris"})])
    # Not before a call: the token is left as the model wrote it.
    assert _read(params, "see <|python_tag|> here") == ("see <|python_tag|> here", [])


# --- markup repeated right after the reasoning closes --------------------------------------

# Gemma-4-like: reasoning in <|ch>thought ... <ch|>, then the answer.
CHANNEL_REASONING = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.reasoning_content %}<|ch>thought\n{{ message.reasoning_content }}<ch|>{% endif %}
{{- message.content }}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""


@pytest.mark.parametrize(
    "text",
    [
        "<|ch>thought\nHmm.<ch|><|ch>thought\n<ch|>Answer.",  # a second, empty block
        "<|ch>thought\nHmm.<ch|>\n<|ch>thought\n\n<ch|>\nAnswer.",
        "<|ch>thought\nHmm.<ch|><ch|>Answer.",  # a stray closer
        "<|ch>thought\nHmm.<ch|>\n<ch|>\n<|ch>thought<ch|>Answer.",
    ],
)
def test_markup_repeated_after_the_reasoning_closes_is_dropped(text: str) -> None:
    template = ChatTemplate(CHANNEL_REASONING, name="inline")
    assert template.analyze().reasoning.end == "<ch|>"
    params = template.apply(USER, enable_thinking=True)
    check_streaming(params, text, count=6, seed=len(text))
    message = params.parse(text)
    assert (message.reasoning_content, message.content) == ("Hmm.", "Answer.")


def test_a_closer_after_more_text_stays_content_as_written() -> None:
    params = ChatTemplate(CHANNEL_REASONING, name="inline").apply(USER, enable_thinking=True)
    text = "<|ch>thought\nHmm.<ch|>Answer.<ch|> more"
    check_streaming(params, text, count=6, seed=3)
    assert params.parse(text).content == "Answer.<ch|> more"
