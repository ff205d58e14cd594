"""General rules the corpus drove (issue 10 §2), on small templates of our own.

Each template is written here, unlike any corpus one, so that the rule is what is tested:
a recipient header with a differing value (``to=self`` / ``to=user`` / ``to=NAME``) and a
function name written twice; a call id before the name; a wrapper around string values
holding markup; and the diff helpers behind them.
"""

from __future__ import annotations

import json

from autoparser import ChatTemplate
from autoparser.analysis.diff import attribute_start
from autoparser.analysis.model import CallIdPosition, ToolFormat
from autoparser.analysis.reasoning import without_role_header

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
USER = {"role": "user", "content": "Weather in Paris?"}

# Recipient headers: every part of the answer is a message "<|msg|>assistant to=WHO<|body|>"
# ended by "<|more|>" (another part follows) or "<|done|>"; calls name the function in the
# header and again inside <call fn="NAME">.
RECIPIENT = """{%- for m in messages -%}
{%- if m.role == 'user' -%}<|msg|>user<|body|>{{ m.content }}<|done|>
{%- elif m.role == 'assistant' -%}
{%- if m.reasoning_content -%}
<|msg|>assistant to=thoughts<|body|>{{ m.reasoning_content }}<|more|>
{%- endif -%}
{%- if m.tool_calls -%}
{%- for c in m.tool_calls -%}
<|msg|>assistant to={{ c.function.name }}<|body|><call fn="{{ c.function.name }}">
{%- for k, v in c.function.arguments.items() %}<arg key="{{ k }}">{{ v }}</arg>{% endfor -%}
</call>{{ '<|done|>' if loop.last else '<|more|>' }}
{%- endfor -%}
{%- else -%}<|msg|>assistant to=reader<|body|>{{ m.content }}<|done|>
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if tools %}<|msg|>tools<|body|>{{ tools | tojson }}<|done|>{% endif -%}
{%- if add_generation_prompt -%}<|msg|>assistant{%- endif -%}"""


def test_recipient_headers_and_a_name_written_twice() -> None:
    template = ChatTemplate(RECIPIENT, name="recipient")
    analysis = template.analyze()
    assert analysis.verification is not None and analysis.verification.verified
    r, f = analysis.reasoning, analysis.tools.function
    assert r.start == "to=thoughts<|body|>"  # the key stays with its value
    assert r.end.startswith("<|more|>") and r.end.endswith("<|msg|>assistant")
    assert analysis.content.start == "to=reader<|body|>"
    assert f.name_prefix == "to="
    assert f.name_suffix_after_name.strip() == '">'
    params = template.apply([USER], tools=[WEATHER], parallel_tool_calls=True)
    # The plain-text prefix "to=" alone also opens content and reasoning: no trigger there.
    assert {t.value for t in params.grammar_triggers} == {"to=get_weather"}
    out = (
        " to=thoughts<|body|>Check Paris.<|more|><|msg|>assistant"
        ' to=get_weather<|body|><call fn="get_weather"><arg key="city">Paris</arg></call><|more|>'
        '<|msg|>assistant to=get_weather<|body|><call fn="get_weather"><arg key="city">Rome</arg>'
        '<arg key="days">2</arg></call>'
    )
    message = params.parse(out)
    assert message.reasoning_content == "Check Paris."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome", "days": 2}),
    ]
    text = params.parse(" to=reader<|body|>It is sunny.")
    assert (text.content, text.tool_calls) == ("It is sunny.", [])


# Calls after a role header the call turn repeats, with the call id before the name.
ID_FIRST = """{%- for m in messages -%}
{%- if m.role == 'user' -%}<|turn|>user<|text|>{{ m.content }}<|stop|>
{%- elif m.role == 'assistant' -%}
{%- if m.tool_calls -%}<|turn|>assistant<|calls|>
{%- for c in m.tool_calls -%}
<|call|>{{ c.id }}<|fn|>{{ c.function.name -}}
<|args|>{{ c.function.arguments | tojson }}<|/call|>
{%- endfor -%}
<|stop|>
{%- else -%}<|turn|>assistant<|text|>{{ m.content }}<|stop|>
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if tools %}<|turn|>tools<|text|>{{ tools | tojson }}<|stop|>{% endif -%}
{%- if add_generation_prompt -%}<|turn|>assistant{%- endif -%}"""


def test_a_call_id_before_the_name_is_a_variable() -> None:
    template = ChatTemplate(ID_FIRST, name="id_first")
    analysis = template.analyze()
    assert analysis.verification is not None and analysis.verification.verified
    t = analysis.tools
    assert t.format.mode is ToolFormat.TAG_WITH_JSON
    assert t.format.section_start == "<|calls|>"  # the repeated role header is the prompt's
    assert t.format.per_call_start == "<|call|>"
    assert (t.call_id.position, t.call_id.suffix) == (CallIdPosition.PRE_FUNC_NAME, "<|fn|>")
    params = template.apply([USER], tools=[WEATHER], parallel_tool_calls=True)
    out = (
        '<|calls|><|call|>Ab3dE5gH7<|fn|>get_weather<|args|>{"city": "Paris"}<|/call|>'
        '<|call|>Xy9kL2mN4<|fn|>get_weather<|args|>{"city": "Rome"}<|/call|>'
    )
    calls = params.parse(out).tool_calls
    assert [(c.id, c.name) for c in calls] == [
        ("Ab3dE5gH7", "get_weather"),
        ("Xy9kL2mN4", "get_weather"),
    ]


# String values holding markup, '&' or a newline are written inside «« ... »».
WRAPPED = """{%- for m in messages -%}
{%- if m.role == 'user' -%}<|user|>{{ m.content }}<|end|>
{%- elif m.role == 'assistant' -%}<|assistant|>
{%- if m.tool_calls -%}
{%- for c in m.tool_calls -%}<invoke name="{{ c.function.name }}">
{%- for k, v in c.function.arguments.items() -%}<param name="{{ k }}">
{%- if v is string and ('<' in v or '&' in v or '\n' in v) -%}««{{ v }}»»
{%- else -%}{{ v }}{%- endif -%}
</param>{%- endfor -%}</invoke>{%- endfor -%}
{%- else -%}{{ m.content }}{%- endif -%}<|end|>
{%- endif -%}
{%- endfor -%}
{%- if tools %}<|tools|>{{ tools | tojson }}<|end|>{% endif -%}
{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"""


def test_a_wrapper_around_string_values_holding_markup() -> None:
    template = ChatTemplate(WRAPPED, name="wrapped")
    analysis = template.analyze()
    a = analysis.tools.arguments
    assert (a.value_wrapper_open, a.value_wrapper_close) == ("««", "»»")
    params = template.apply([USER], tools=[WEATHER])
    out = '<invoke name="get_weather"><param name="city">««<b>Paris</b> & co»»</param></invoke>'
    call = params.parse(out).tool_calls[0]
    assert json.loads(call.arguments) == {"city": "<b>Paris</b> & co"}
    plain = params.parse('<invoke name="get_weather"><param name="city">Paris</param></invoke>')
    assert json.loads(plain.tool_calls[0].arguments) == {"city": "Paris"}


def test_attribute_start_keeps_a_key_with_its_value() -> None:
    assert attribute_start("<|start|>assistant to=", 22) == 19
    assert attribute_start("<|msg|>recipient:", 17) == 7
    assert attribute_start("<tool_call>\n", 12) == 12  # no key: unchanged
    assert attribute_start("name=", 5) == 0
    assert attribute_start("xname=", 6) == 0
    assert attribute_start('"name": "', 9) == 9  # a JSON key is no attribute


def test_without_role_header() -> None:
    assert without_role_header("<|turn|>assistant<|calls|>", "<|turn|>assistant") == "<|calls|>"
    assert without_role_header("<|turn|>assistant", "<|turn|>assistant") == "<|turn|>assistant"
    assert without_role_header("<|calls|>", "<|turn|>assistant") == "<|calls|>"
