"""A prompt ending inside an opener that content and calls share (issue 21 §5, functionary v2).

Every message is ``\\n<|from|>ROLE\\n<|recipient|>TO\\n<|content|>TEXT``: text goes to the
recipient ``all``, each call is a message to the tool's name with its arguments. The
generation prompt ends ``<|recipient|>``, so the output starts with a recipient: ``all``
(content) or a tool's name (a call). The renders show the call opener only between calls
(as the separator), so the analysis takes the separator that ends the prompt for the
per-call opener. The parser starts inside the first call or reads content; the grammar
stays lazy, triggered by a tool's name at the output's start or by a later full opener.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import TOOLS, USER, check_streaming, corpus_template, trigger_start
from helpers.gbnf_oracle import accepts
from helpers.paths import own_path

from autoparser import ChatParams, ChatTemplate

OPENER = "<|from|>assistant\n<|recipient|>"
# Functionary v2's layout: each message opens with "\n", the prompt holds the whole opener.
SOURCE = (
    "{{- '<|from|>system\\n<|recipient|>all\\n<|content|>' -}}"
    "{%- if tools %}{{ tools | tojson }}{% endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role != 'assistant' -%}"
    "{{- '\\n<|from|>' + message.role + '\\n<|recipient|>all\\n<|content|>' + message.content -}}"
    "{%- else -%}"
    "{%- if message.content -%}"
    "{{- '\\n<|from|>assistant\\n<|recipient|>all\\n<|content|>' + message.content -}}"
    "{%- endif -%}"
    "{%- for call in message.tool_calls or [] -%}"
    "{{- '\\n<|from|>assistant\\n<|recipient|>' + call.function.name + '\\n<|content|>' "
    "+ (call.function.arguments | tojson) -}}"
    "{%- endfor -%}<|stop|>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '\\n<|from|>assistant\\n<|recipient|>' -}}{%- endif -%}"
)

PARIS = ("get_weather", {"city": "Paris"})
PING = ("ping", {})
CALL = 'get_weather\n<|content|>{"city": "Paris"}'
TEXT = "all\n<|content|>Let me check."
SECOND = f"\n{OPENER}ping\n<|content|>{{}}"


def _params(**options: object) -> ChatParams:
    return ChatTemplate(SOURCE).apply(USER, tools=TOOLS, **options)  # type: ignore[arg-type]


def _calls(params: ChatParams, text: str) -> list[tuple[str, object]]:
    return [(c.name, json.loads(c.arguments)) for c in params.parse(text).tool_calls]


def test_the_separator_ending_the_prompt_is_the_call_opener() -> None:
    analysis = ChatTemplate(SOURCE).analyze()
    assert analysis.tools.format.per_call_start == OPENER
    assert analysis.tools.call_separator == "\n"
    assert analysis.content.start == "all\n<|content|>"
    assert _params().prompt.endswith(OPENER)


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (CALL, None, [PARIS]),
        (CALL + SECOND, None, [PARIS, PING]),
        (f"{TEXT}\n{OPENER}{CALL}", "Let me check.", [PARIS]),
        (f"{TEXT}\n{OPENER}{CALL}{SECOND}", "Let me check.", [PARIS, PING]),
        (TEXT, "Let me check.", []),
    ],
)
def test_content_or_a_call_after_the_prompt(
    text: str, content: str | None, calls: list[tuple[str, object]]
) -> None:
    params = _params()
    assert params.parse(text).content == content
    assert _calls(params, text) == calls
    check_streaming(params, text, count=8)


def test_the_grammar_is_lazy_and_takes_both_starts() -> None:
    params = _params()
    assert params.grammar is not None and params.grammar_lazy
    assert trigger_start(params, TEXT) == -1
    assert trigger_start(params, "all\n<|content|>I could call get_weather\n<|content|>") == -1
    for text in (CALL, CALL + SECOND, f"{TEXT}\n{OPENER}{CALL}"):
        start = trigger_start(params, text)
        assert start >= 0, text
        assert accepts(params.grammar, text[start:]), text[start:]
    assert trigger_start(params, CALL) == 0
    assert not accepts(params.grammar, 'get_weather\n<|content|>{"town": "Paris"}')


def test_required_calls_apply_from_the_first_byte() -> None:
    params = _params(tool_choice="required")
    assert params.grammar is not None and not params.grammar_lazy
    assert accepts(params.grammar, CALL + SECOND)
    assert not accepts(params.grammar, TEXT)


@pytest.mark.parametrize(
    "filename", ["functionary-v2.jinja", "hfjs-meetkai-functionary-medium-v2.2.jinja"]
)
def test_functionary_v2_corpus_templates(filename: str) -> None:
    params = corpus_template(filename, "functionary v2").apply(USER, tools=TOOLS)
    text = f"{TEXT}\n{OPENER}{CALL}{SECOND}"
    message = params.parse(text)
    assert message.content == "Let me check."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [PARIS, PING]
    check_streaming(params, text, count=4)
    assert params.grammar is not None
    start = trigger_start(params, text)
    assert start > 0 and accepts(params.grammar, text[start:])


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ('get_weather\n{"city": "Paris"}', None, [PARIS]),
        ('get_weather\n{"city": "Paris"}\n>>>ping\n{}', None, [PARIS, PING]),
        ("assistant: Let me check.", "Let me check.", []),
        ('assistant: Let me check.\n>>>get_weather\n{"city": "Paris"}', "Let me check.", [PARIS]),
    ],
)
def test_name_prefix_opener(
    text: str, content: str | None, calls: list[tuple[str, object]]
) -> None:
    """The same idea where the name prefix is the opener the prompt wrote (``>>>NAME\n``)
    and content has its own opener (the own template string_args: ``assistant: text``)."""
    template = ChatTemplate.from_file(own_path("string_args"))
    analysis = template.analyze()
    assert (analysis.tools.function.name_prefix, analysis.generation_prompt) == (">>>", ">>>")
    params = template.apply(USER, tools=TOOLS)
    assert params.parse(text).content == content
    assert _calls(params, text) == calls
    check_streaming(params, text, count=6)
    assert params.grammar is not None and params.grammar_lazy
    start = trigger_start(params, text)
    if not calls:
        assert start == -1
        return
    assert start >= 0 and accepts(params.grammar, text[start:]), text[start:]


# Functionary v3's layout: '>>>' opens every message, 'all' is the text recipient, and the
# prompt ends with '>>>' (punctuation alone, no markup; it also follows the '>' of the
# previous turn's '<|eot|>', which a search for the header must not take for its start).
ARROWS = (
    "{%- for message in messages -%}"
    "{%- if message.role == 'assistant' -%}"
    "{%- if message.content -%}>>>all\n{{ message.content }}{%- endif -%}"
    "{%- for call in message.tool_calls or [] -%}"
    ">>>{{ call.function.name }}\n{{ call.function.arguments | tojson }}"
    "{%- endfor -%}<|eot|>"
    "{%- else -%}<|{{ message.role }}|>{{ message.content }}<|eot|>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif -%}"
    "{%- if add_generation_prompt -%}>>>{%- endif -%}"
)


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ('get_weather\n{"city": "Paris"}', None, [PARIS]),
        ('get_weather\n{"city": "Paris"}>>>ping\n{}', None, [PARIS, PING]),
        ("all\nLet me check.", "Let me check.", []),
        ('all\nLet me check.>>>get_weather\n{"city": "Paris"}', "Let me check.", [PARIS]),
    ],
)
def test_arrow_recipients(text: str, content: str | None, calls: list[tuple[str, object]]) -> None:
    template = ChatTemplate(ARROWS)
    analysis = template.analyze()
    assert analysis.tools.format.per_call_start == ">>>"
    assert analysis.content.start == "all"
    assert analysis.verification is not None and not analysis.verification.failures
    params = template.apply(USER, tools=TOOLS)
    assert params.parse(text).content == content
    assert _calls(params, text) == calls
    check_streaming(params, text, count=6)
    assert params.grammar is not None and params.grammar_lazy
    start = trigger_start(params, text)
    if not calls:
        assert start == -1
        return
    assert start >= 0 and accepts(params.grammar, text[start:]), text[start:]
