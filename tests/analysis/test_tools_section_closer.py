"""A call section's closer is not an end of turn (issue 21, corpus class).

The template writes a text turn as ``<|assistant|>\\nTEXT</s>`` and a call turn without the
role header, ``\\n<tool_call>\\n[...]\\n</tool_call></s>``. Diffing the two, the text turn's
extra text is its header, not a closer the call turn replaces, so the call turn's last
marker ``</tool_call>`` closes the section: it is ``section_end``, never a stop string (a
stop at ``</tool_call>`` would cut every call turn there).
"""

from __future__ import annotations

import json

from helpers.formats import TOOLS, USER, check_streaming

from autoparser import ChatTemplate

SOURCE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}"
    "\n<tool_call>\n{{ message.tool_calls | tojson }}\n</tool_call>{{ eos_token }}"
    "{%- elif message.role == 'assistant' %}<|assistant|>\n{{ message.content }}{{ eos_token }}"
    "{%- else %}<|{{ message.role }}|>\n{{ message.content }}\n{%- endif %}{%- endfor %}"
    "{%- if tools %}<|tools|>{{ tools | tojson }}\n{%- endif %}"
    "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _template() -> ChatTemplate:
    return ChatTemplate(SOURCE, eos_token="</s>")


def test_the_closer_is_the_sections_and_no_stop() -> None:
    analysis = _template().analyze()
    assert analysis.tools.format.section_start.strip() == "<tool_call>"
    assert analysis.tools.format.section_end.strip() == "</tool_call>"
    assert analysis.end_of_turn == ("</s>",)
    params = _template().apply(USER, tools=TOOLS)
    assert "</tool_call>" not in params.additional_stops


def test_calls_parse_whole_and_streamed() -> None:
    params = _template().apply(USER, tools=TOOLS, call_id_seed=4)
    body = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
        }
    ]
    text = f"\n<tool_call>\n{json.dumps(body)}\n</tool_call></s>"
    message = params.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert message.content is None and not message.truncated
    check_streaming(params, text, count=6)
