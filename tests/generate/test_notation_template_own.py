"""A template's own notation for nested values (issue 34 §4): FunctionGemma's template
writes non-string values bare and objects and arrays in its own unquoted-key,
``<escape>``-string notation (``filters:{lang:<escape>fr<escape>,safe:true}``). The
analysis verifies (``typed_nested_args`` reads the render back), the parser reads it whole
and streamed, and the grammar accepts the template's own render. An inline template of our
own, written like FunctionGemma's.
"""

from __future__ import annotations

import json

from helpers.formats import USER, check_streaming
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate

FG = (
    "{%- macro fmt(v) -%}"
    "{%- if v is string -%}<escape>{{ v }}<escape>"
    "{%- elif v is mapping -%}{{ '{' }}{%- for k, x in v.items() -%}{{ k }}:{{ fmt(x) }}"
    "{%- if not loop.last -%},{%- endif -%}{%- endfor -%}{{ '}' }}"
    "{%- elif v is sequence -%}[{%- for x in v -%}{{ fmt(x) }}"
    "{%- if not loop.last -%},{%- endif -%}{%- endfor -%}]"
    "{%- elif v is true -%}true{%- elif v is false -%}false{%- elif v is none -%}null"
    "{%- else -%}{{ v }}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if tools %}<start_of_turn>developer\n{%- for t in tools %}<start_function_declaration>"
    "{{ t.function.name }}<end_function_declaration>{%- endfor %}<end_of_turn>\n{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}<start_of_turn>model\n"
    "{%- for tc in m.tool_calls or [] %}<start_function_call>call:{{ tc.function.name }}{{ '{' }}"
    "{%- for k, v in tc.function.arguments.items() %}{{ k }}:{{ fmt(v) }}"
    "{%- if not loop.last %},{% endif %}{%- endfor %}{{ '}' }}<end_function_call>{%- endfor %}"
    "{{ m.content or '' }}<end_of_turn>\n"
    "{%- elif m.role == 'tool' %}<start_function_response>{{ m.content }}<end_function_response>"
    "{%- else %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<start_of_turn>model\n{%- endif %}"
)
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {"lang": {"type": "string"}, "safe": {"type": "boolean"}},
                },
                "tags": {"type": "array", "items": {"type": "string"}},
                "n": {"type": "integer"},
                "score": {"type": ["number", "null"]},
            },
            "required": ["query"],
        },
    },
}
ARGS = {
    "query": "x, y: z",
    "filters": {"lang": "fr", "safe": True, "deep": {"k": [1, None]}},
    "tags": ["a", "b,c"],
    "n": 3,
    "score": None,
}


def _render_call() -> str:
    call = {"type": "function", "id": "c1", "function": {"name": "search_docs", "arguments": ARGS}}
    turn = [*USER, {"role": "assistant", "content": "", "tool_calls": [call]}]
    text = ChatTemplate(FG).render(turn, tools=[SEARCH])
    start = text.index("<start_function_call>")
    end = text.index("<end_function_call>") + len("<end_function_call>")
    return text[start:end]


def test_the_analysis_reads_its_nested_render_back() -> None:
    verification = ChatTemplate(FG).analyze().verification
    assert verification is not None and "typed_nested_args" in verification.checks
    assert verification.verified, verification.summary()


def test_nested_values_parse_whole_and_streamed() -> None:
    text = _render_call()
    assert "filters:{lang:<escape>fr<escape>,safe:true," in text
    params = ChatTemplate(FG).apply(USER, tools=[SEARCH], call_id_seed=1)
    message = params.parse(text)
    assert message.content is None
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("search_docs", ARGS)
    ]
    check_streaming(params, text, count=12, seed=2)


def test_the_grammar_accepts_the_templates_own_render() -> None:
    text = _render_call()
    params = ChatTemplate(FG).apply(USER, tools=[SEARCH], tool_choice="required")
    assert params.grammar is not None
    assert accepts(params.grammar, text)
    # Still a grammar: an unclosed object or a stray token is not a value.
    assert not accepts(params.grammar, text.replace("null]}}", "null]}"))
    assert not accepts(params.grammar, text.replace("n:3", "n:<x>"))
