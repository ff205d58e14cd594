"""A model writing the other call style of its family (issue 34 §4): LFM2's template teaches
a Python list of calls in its section, ``<|tool_call_start|>[f(city="Paris")]<|tool_call_end|>``,
and LFM2 models also write the JSON objects other formats use there,
``[{"name": "f", "arguments": {"city": "Paris"}}]``. The two are told apart without doubt (a
Python call starts with a name, a JSON one with ``{``), so the lenient parser reads both;
the grammar keeps the template's own style. An inline template of our own, parsed whole and
streamed.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import USER, check_streaming
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate
from autoparser.generate.pythonic import is_pythonic

WEATHER = {
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
PYTHON_CALLS = (
    "{%- if tools %}<|im_start|>system\nList of tools: {{ tools | tojson }}<|im_end|>\n"
    "{%- endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{%- if m.tool_calls %}<|tool_call_start|>["
    "{%- for tc in m.tool_calls %}{{ tc.function.name }}("
    "{%- for k, v in tc.function.arguments.items() %}{{ k }}={{ v | tojson }}"
    "{%- if not loop.last %}, {% endif %}{%- endfor %})"
    "{%- if not loop.last %}, {% endif %}{%- endfor %}]<|tool_call_end|>{%- endif %}"
    "{{ m.content or '' }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
PARIS = ("get_weather", {"city": "Paris", "days": 2})
JSON_CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}'


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ('<|tool_call_start|>[get_weather(city="Paris", days=2)]<|tool_call_end|>', [PARIS]),
        (f"<|tool_call_start|>[{JSON_CALL}]<|tool_call_end|>", [PARIS]),
        (f"<|tool_call_start|>[{JSON_CALL}, {JSON_CALL}]<|tool_call_end|>", [PARIS, PARIS]),
        (
            f'<|tool_call_start|>[{JSON_CALL}, get_weather(city="Paris", days=2)]<|tool_call_end|>',
            [PARIS, PARIS],
        ),
    ],
    ids=["python", "json", "json-parallel", "mixed"],
)
def test_both_styles_are_read(text: str, calls: list[tuple[str, dict[str, object]]]) -> None:
    template = ChatTemplate(PYTHON_CALLS)
    assert is_pythonic(template.analyze())
    params = template.apply(USER, tools=[WEATHER], call_id_seed=1)
    message = params.parse(f"Checking.{text}")
    assert message.content == "Checking."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == calls
    check_streaming(params, f"Checking.{text}", count=10, seed=6)


def test_a_json_object_naming_no_tool_stays_content() -> None:
    params = ChatTemplate(PYTHON_CALLS).apply(USER, tools=[WEATHER])
    text = '<|tool_call_start|>[{"name": "nope", "arguments": {}}]<|tool_call_end|>'
    message = params.parse(text)
    assert not message.tool_calls
    assert message.content == text


def test_the_grammar_keeps_the_templates_style() -> None:
    params = ChatTemplate(PYTHON_CALLS).apply(USER, tools=[WEATHER], tool_choice="required")
    assert params.grammar is not None
    assert accepts(
        params.grammar, '<|tool_call_start|>[get_weather(city="Paris", days=2)]<|tool_call_end|>'
    )
    assert not accepts(params.grammar, f"<|tool_call_start|>[{JSON_CALL}]<|tool_call_end|>")
