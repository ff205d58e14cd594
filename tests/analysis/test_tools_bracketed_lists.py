"""Calls as a bracketed list (issue 21 §5): Llama 4's pythonic ``[name(k="v"), ...]`` and
Apriel's ``<tool_calls>[{"name": ..., "arguments": ...}, ...]</tool_calls>``.

Both are derived from the renders: the Python list's brackets are the section markers, the
JSON array inside the tag is the array-wrapped call list. Each is parsed whole and
streamed however split, with the spacing and quoting models write rather than only the
template's own, and the grammar (llguidance) takes what the template writes.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import TOOLS, USER, check_streaming, corpus_template, lazy_start
from helpers.gbnf_oracle import accepts

from autoparser import ChatParams, ChatTemplate
from autoparser.generate.pythonic import is_pythonic

# Llama 4 (vLLM's pythonic template): values written with '"%s"|format(v)'.
PYTHONIC = (
    "{%- for message in messages %}<|header_start|>{{ message.role }}<|header_end|>\n\n"
    "{%- if message.tool_calls %}[{%- for tc in message.tool_calls %}{{ tc.function.name }}("
    "{%- for k, v in tc.function.arguments.items() %}{{ k }}=\"{{ '%s' | format(v) }}\""
    "{%- if not loop.last %}, {% endif %}{%- endfor %})"
    "{%- if not loop.last %}, {% endif %}{%- endfor %}]"
    "{%- else %}{{ message.content }}{%- endif %}<|eot|>"
    "{%- endfor %}"
    "{%- if tools %}<|header_start|>tools<|header_end|>\n\n{{ tools | tojson }}<|eot|>{% endif %}"
    "{%- if add_generation_prompt %}<|header_start|>assistant<|header_end|>\n\n{% endif %}"
)
# Apriel: content, then the calls as one JSON array inside <tool_calls>.
TAGGED_ARRAY = (
    "{%- if tools %}<|system|>\n{{ tools | tojson }}\n<|end|>\n{% endif %}"
    "{%- for message in messages %}<|{{ message.role }}|>\n{{ message.content or '' }}"
    "{%- if message.tool_calls %}\n<tool_calls>["
    "{%- for tc in message.tool_calls %}"
    '{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}'
    "{%- if not loop.last %}, {% endif %}{%- endfor %}]</tool_calls>"
    "{%- endif %}\n<|end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

PARIS = ("get_weather", {"city": "Paris"})
PING = ("ping", {})


def _params(source: str, **options: object) -> ChatParams:
    return ChatTemplate(source).apply(USER, tools=TOOLS, **options)  # type: ignore[arg-type]


def _calls(params: ChatParams, text: str) -> list[tuple[str, object]]:
    return [(c.name, json.loads(c.arguments)) for c in params.parse(text).tool_calls]


def test_the_python_list_is_the_section() -> None:
    analysis = ChatTemplate(PYTHONIC).analyze()
    assert is_pythonic(analysis)
    assert (analysis.tools.format.section_start, analysis.tools.format.section_end) == ("[", "]")


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ('[get_weather(city="Paris")]', None, [PARIS]),
        ("[get_weather(city='Paris'), ping()]", None, [PARIS, PING]),
        (' [ get_weather(city="Paris") ]\n', None, [PARIS]),
        ('Checking. [get_weather(city="Paris")]', "Checking.", [PARIS]),
        (
            "[search(query='cats', filters={'a': 1}, exact=False, cursor=None)]",
            None,
            [("search", {"query": "cats", "filters": {"a": 1}, "exact": False, "cursor": None})],
        ),
    ],
)
def test_pythonic_list(text: str, content: str | None, calls: list[tuple[str, object]]) -> None:
    params = _params(PYTHONIC)
    assert params.parse(text).content == content
    assert _calls(params, text) == calls
    check_streaming(params, text, count=8)


@pytest.mark.parametrize("text", ["A list [1, 2] of numbers.", "[see above]", "get_weather"])
def test_pythonic_prose_is_content(text: str) -> None:
    params = _params(PYTHONIC)
    message = params.parse(text)
    assert message.tool_calls == [] and message.content == text
    check_streaming(params, text, count=4)


def test_pythonic_grammar() -> None:
    params = _params(PYTHONIC)
    assert params.grammar is not None
    text = 'Checking. [get_weather(city="Paris"), ping()]'
    assert accepts(params.grammar, text[lazy_start(params, text) :])
    assert not accepts(params.grammar, '[get_weather(town="Paris")]')


def test_the_tagged_array_is_the_section() -> None:
    fmt = ChatTemplate(TAGGED_ARRAY).analyze().tools.format
    assert (fmt.section_start, fmt.section_end) == ("<tool_calls>", "</tool_calls>")
    assert fmt.tools_array_wrapped


ARRAY = (
    '[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "ping", "arguments": {}}]'
)


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (f"<tool_calls>{ARRAY}</tool_calls>", None, [PARIS, PING]),
        (f"Sure.\n<tool_calls>{ARRAY}</tool_calls>", "Sure.", [PARIS, PING]),
        (
            ' <tool_calls>[\n    {"name": "get_weather", "arguments": {"city": "Paris"}}\n]'
            "</tool_calls>",
            None,
            [PARIS],
        ),
        ('<tool_calls>[{"name":"get_weather","arguments":{"city":"Paris"}}]', None, [PARIS]),
    ],
)
def test_tagged_array(text: str, content: str | None, calls: list[tuple[str, object]]) -> None:
    params = _params(TAGGED_ARRAY)
    assert params.parse(text).content == content
    assert _calls(params, text) == calls
    check_streaming(params, text, count=8)


def test_tagged_array_grammar() -> None:
    params = _params(TAGGED_ARRAY)
    assert params.grammar is not None
    text = f"Sure.\n<tool_calls>{ARRAY}</tool_calls>"
    assert accepts(params.grammar, text[lazy_start(params, text) :])
    unknown = '<tool_calls>[{"name": "nope", "arguments": {}}]</tool_calls>'
    assert not accepts(params.grammar, unknown)


@pytest.mark.parametrize(
    ("filename", "prefix"),
    [
        ("unsloth-Apriel-1.5.jinja", ""),
        ("Apriel-1.6-15b-Thinker-fixed.jinja", "Thinking.\n[BEGIN FINAL RESPONSE]\n"),
    ],
)
def test_apriel_corpus_templates(filename: str, prefix: str) -> None:
    params = corpus_template(filename, "Apriel").apply(USER, tools=TOOLS)
    text = f"{prefix}Sure.\n<tool_calls>{ARRAY}</tool_calls>"
    message = params.parse(text)
    assert message.content == "Sure."
    assert _calls(params, text) == [PARIS, PING]
    check_streaming(params, text, count=4)
