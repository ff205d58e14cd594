"""Wrapper tokens a model adds around its calls (issue 34 §4): Llama 3.2 writes
``<|python_tag|>`` before a JSON call its template never shows; Llama 4 wraps a Python list
in ``<|python_start|>`` ... ``<|python_end|>``. The rule is general, read from the template:
a special token spelled as the template spells its own (``<|...|>`` here) right before a
call is markup, and so is its partner right after the calls; the calls are read and the
tokens never reach content. Anywhere else such a token is content as written. Inline
templates of our own, parsed whole and streamed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.formats import USER, check_streaming

from autoparser import ChatParams, ChatTemplate

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
# Llama 3.2's way: bare JSON calls, tokens spelled <|...|>.
JSON_CALLS = (
    "{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\n"
    "{{ tools | tojson }}<|eot_id|>{%- endif %}"
    "{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}"
    '{"name": "{{ tc.function.name }}", "parameters": {{ tc.function.arguments | tojson }}}'
    "{%- endfor %}{%- else %}{{ m.content }}{%- endif %}<|eot_id|>{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    "{%- endif %}"
)
# Llama 4's way: a Python list of calls.
PYTHON_LIST = (
    "{%- if tools %}<|header_start|>system<|header_end|>\n\n"
    "{{ tools | tojson }}<|eot|>{%- endif %}"
    "{%- for m in messages %}<|header_start|>{{ m.role }}<|header_end|>\n\n"
    "{%- if m.tool_calls %}[{%- for tc in m.tool_calls %}{{ tc.function.name }}("
    "{%- for k, v in tc.function.arguments.items() %}{{ k }}={{ v | tojson }}"
    "{%- if not loop.last %}, {% endif %}{%- endfor %})"
    "{%- if not loop.last %}, {% endif %}{%- endfor %}]"
    "{%- else %}{{ m.content }}{%- endif %}<|eot|>{%- endfor %}"
    "{%- if add_generation_prompt %}<|header_start|>assistant<|header_end|>\n\n{%- endif %}"
)
# The same JSON calls from a template that prints no special token at all.
NO_TOKENS = (
    JSON_CALLS.replace("<|start_header_id|>", "### ")
    .replace("<|end_header_id|>", ":")
    .replace("<|eot_id|>", "\n\n")
)
JSON_CALL = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
PY_CALL = '[get_weather(city="Paris")]'
PARIS = [("get_weather", {"city": "Paris"})]


def _params(source: str) -> ChatParams:
    return ChatTemplate(source).apply(USER, tools=[WEATHER], call_id_seed=1)


def _read(params: ChatParams, text: str) -> tuple[str | None, list[Any]]:
    message = params.parse(text)
    check_streaming(params, text, count=12, seed=5)
    return message.content, [(c.name, json.loads(c.arguments)) for c in message.tool_calls]


@pytest.mark.parametrize(
    ("source", "text", "content"),
    [
        (JSON_CALLS, f"<|python_tag|>{JSON_CALL}", None),
        (JSON_CALLS, f"Let me check.\n<|python_tag|>{JSON_CALL}", "Let me check."),
        (JSON_CALLS, f"<|python_tag|>{JSON_CALL}<|eom_id|>", None),
        (PYTHON_LIST, f"<|python_start|>{PY_CALL}<|python_end|>", None),
        (PYTHON_LIST, f"<|python_start|>\n{PY_CALL}\n<|python_end|>", None),
        (PYTHON_LIST, f"Sure. <|python_start|>{PY_CALL}<|python_end|>", "Sure."),
    ],
    ids=["tag", "tag-after-text", "tag-and-partner", "pair", "pair-spaced", "pair-after-text"],
)
def test_tokens_around_calls_are_dropped(source: str, text: str, content: str | None) -> None:
    assert _read(_params(source), text) == (content, PARIS)


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (JSON_CALLS, "A token <|python_tag|> in text, no call."),
        (PYTHON_LIST, "Write <|python_start|>code<|python_end|> like this."),
        (JSON_CALLS, "Cut <|python_tag|>"),
    ],
)
def test_tokens_without_a_call_stay_content(source: str, text: str) -> None:
    assert _read(_params(source), text) == (text, [])


def test_a_partner_without_a_leading_token_stays_content() -> None:
    content, calls = _read(_params(PYTHON_LIST), f"{PY_CALL}<|python_end|>")
    assert (content, calls) == ("<|python_end|>", PARIS)


def test_the_end_of_turn_keeps_its_meaning() -> None:
    """A token the template ends turns with is not a call's partner: the turn ends there."""
    params = _params(JSON_CALLS)
    assert _read(params, f"<|python_tag|>{JSON_CALL}<|eot_id|>Next turn") == (None, PARIS)


def test_a_template_printing_no_tokens_leaves_them_as_text() -> None:
    """The spelling is read from the template: one that prints no ``<|...|>`` token gives
    no reason to take such text for markup."""
    assert _read(_params(NO_TOKENS), f"<|python_tag|>{JSON_CALL}") == ("<|python_tag|>", PARIS)


def test_the_grammar_stays_exact() -> None:
    """The grammar does not take the tokens: constrained decoding writes the template's calls."""
    from helpers.gbnf_oracle import accepts

    params = ChatTemplate(JSON_CALLS).apply(USER, tools=[WEATHER], tool_choice="required")
    assert params.grammar is not None
    assert accepts(params.grammar, JSON_CALL)
    assert not accepts(params.grammar, f"<|python_tag|>{JSON_CALL}")


@pytest.mark.parametrize(
    ("source", "text", "tokens"),
    [
        (JSON_CALLS, f"<|python_tag|>{JSON_CALL}", ["<|python_tag|>"]),
        (
            JSON_CALLS,
            f"Let me check.\n<|python_tag|>{JSON_CALL}<|eom_id|>",
            ["<|python_tag|>", "<|eom_id|>"],
        ),
        (
            PYTHON_LIST,
            f"<|python_start|>{PY_CALL}<|python_end|>",
            ["<|python_start|>", "<|python_end|>"],
        ),
    ],
)
def test_a_dropped_token_is_reported_with_its_text(
    source: str, text: str, tokens: list[str]
) -> None:
    """Nothing of the output goes unaccounted for: each token dropped around the calls is a
    ``wrapper_token`` finding (``dropped``) keeping its exact text and place; the same
    streamed."""
    params = _params(source)
    message = params.parse(text)
    found = [f for f in message.findings if f.kind == "wrapper_token"]
    assert [f.detail for f in found] == tokens
    assert all(f.outcome == "dropped" and text[f.start : f.end] == f.detail for f in found)
    assert not message.refused
    stream = params.stream()
    for piece in (text[:5], text[5:17], text[17:]):
        stream.feed(piece)
    stream.finish()
    assert stream.message.findings == message.findings
