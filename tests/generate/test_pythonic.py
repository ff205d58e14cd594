"""Pythonic tool calls (``[f(a="x", n=1), g()]``): Python-literal values, parse = stream = grammar.

A small template of the family (written here, so the test needs no corpus) is analysed; calls
are then written as a model writes them, with Python's ``repr`` for every value (either quote,
escapes, nested lists and dicts, True/False/None), plus the variations models produce (raw
strings, JSON words, no spaces, trailing commas). Each text must parse to the same calls,
stream (in random chunks) to the same deltas, and be accepted by the grammar in llguidance.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from helpers.gbnf_oracle import accepts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import ChatTemplate
from autoparser.peg import end
from autoparser.peg.python_literal import python_literal, to_json

TEMPLATE = """{{- bos_token -}}
{%- for m in messages -%}
{%- if m.role == 'assistant' and m.tool_calls -%}
<|im_start|>assistant
[{%- for c in m.tool_calls -%}{{ c.function.name }}(
{%- for k, v in c.function.arguments.items() -%}{{ k }}={{ v | tojson }}
{%- if not loop.last %}, {% endif -%}{%- endfor -%}){%- if not loop.last %}, {% endif -%}
{%- endfor -%}]<|im_end|>
{% else -%}
<|im_start|>{{ m.role }}
{%- if loop.first and tools %}
Tools: {{ tools | tojson }}{% endif %}
{{ m.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""

ANY_ARGS = {"type": "object", "properties": {}}
NAMES = ("get_weather", "_private_tool", "f", "search2")
TOOLS = [
    {"type": "function", "function": {"name": n, "description": "x", "parameters": ANY_ARGS}}
    for n in NAMES
]
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def params() -> Any:
    template = ChatTemplate(TEMPLATE, bos_token="<s>", eos_token="</s>", name="own_pythonic")
    return template.apply(USER, tools=TOOLS, call_id_seed=7)


def write(calls: list[tuple[str, dict[str, Any]]], comma: str = ", ") -> str:
    """Calls as a model writes them: ``[name(key=repr(value), ...), ...]``."""
    parts = [f"{n}({comma.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls]
    return "[" + comma.join(parts) + "]"


def calls_of(message: Any) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in message.tool_calls]


def streamed(params: Any, text: str, seed: int) -> tuple[str | None, list[tuple[str, Any]]]:
    rng = random.Random(seed)
    stream = params.stream()
    deltas: list[dict[str, Any]] = []
    pos = 0
    while pos < len(text):
        step = rng.randint(1, 7)
        deltas += stream.feed(text[pos : pos + step])
        pos += step
    deltas += stream.finish()
    content: str | None = None
    calls: list[list[str]] = []
    for d in deltas:
        if d.get("content") is not None:
            content = (content or "") + d["content"]
        for c in d.get("tool_calls") or []:
            if c["index"] == len(calls):
                calls.append([c["function"]["name"], ""])
            calls[c["index"]][1] += c["function"].get("arguments", "")
    return content, [(n, json.loads(a)) for n, a in calls]


def check(params: Any, text: str, expected: list[tuple[str, Any]], seed: int = 0) -> None:
    message = params.parse(text)
    assert calls_of(message) == expected, text
    assert message.content is None, text
    assert streamed(params, text, seed) == (None, expected), text
    start = re.search(params.grammar_triggers[0].value, text)
    assert start is not None and start.start() == 0, params.grammar_triggers
    assert accepts(params.grammar, text), f"grammar rejects {text!r}"


# Strings with quotes, backslashes, brackets, newlines, unicode (no surrogates: not text).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
SCALARS = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | TEXT
SCALARS = SCALARS | st.floats(allow_nan=False, allow_infinity=False)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
CALLS = st.lists(
    st.tuples(st.sampled_from(NAMES), st.dictionaries(KEYS, VALUES, max_size=3)),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS, comma=st.sampled_from([", ", ",", " ,\n "]), seed=st.integers(0, 99))
def test_repr_written_calls_round_trip(
    params: Any, calls: list[tuple[str, dict[str, Any]]], comma: str, seed: int
) -> None:
    expected = [(n, json.loads(json.dumps(a))) for n, a in calls]
    check(params, write(calls, comma), expected, seed)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        (r"[f(p=r'C:\new\d+')]", {"p": "C:\\new\\d+"}),
        ('[f(p=r"a\\"b")]', {"p": 'a\\"b'}),
        ('[f(s=\'it\\\'s\', t="say \\"hi\\"")]', {"s": "it's", "t": 'say "hi"'}),
        ("[f(a=true,b=null,c=[false],)]", {"a": True, "b": None, "c": [False]}),
        ("[f(x='\\u00e9\\x41\\U0001F600')]", {"x": "éA😀"}),
        ("[f(d={'k': [1, {'n': None}], 2: 'two'})]", {"d": {"k": [1, {"n": None}], "2": "two"}}),
        ("[f(s='a)b],c=d')]", {"s": "a)b],c=d"}),
        ("[f()]", {}),
    ],
)
def test_python_literal_forms(params: Any, text: str, args: dict[str, Any]) -> None:
    check(params, text, [("f", args)])


def test_bare_bracket_does_not_trigger(params: Any) -> None:
    """Prose with brackets stays content and never wakes the lazy grammar (issue 10 §6)."""
    text = "Use a list [1, 2] or call f [later] (maybe)."
    assert params.parse(text).content == text
    assert params.parse(text).tool_calls == []
    assert all(re.search(t.value, text) is None for t in params.grammar_triggers)


def test_not_python_stays_content(params: Any) -> None:
    """A value that is no Python literal (a variable) is not a call: the text is kept."""
    text = "[get_weather(city=paris_var)]"
    message = params.parse(text)
    assert message.tool_calls == []
    assert message.content == text


@given(value=VALUES)
@settings(max_examples=100, deadline=None)
def test_literal_parser_and_converter_agree_with_python(value: Any) -> None:
    text = repr(value)
    assert (python_literal() + end()).parse(text).status.name == "SUCCESS", text
    assert json.loads(to_json(text)) == json.loads(json.dumps(value))


# ------------------------------------------------- a template that quotes every value

QUOTED_TOOL = {
    "type": "function",
    "function": {
        "name": "plan",
        "description": "Plan a trip.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "window": {"type": "object"},
                "code": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
        },
    },
}


def _quoted_params() -> Any:
    from helpers.formats import own_template

    template = own_template("formats/pythonic_quoted.jinja")
    return template.apply([{"role": "user", "content": "Hi"}], tools=[QUOTED_TOOL])


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # The template's own writing: str() of every value in quotes, typed by the schema.
        (
            'plan(city="Oslo", days="3", ratio="0.5", ok="True", '
            "tags=\"['a', 'b \"x\"']\", window=\"{'d': None}\")",
            {
                "city": "Oslo",
                "days": 3,
                "ratio": 0.5,
                "ok": True,
                "tags": ["a", 'b "x"'],
                "window": {"d": None},
            },
        ),
        # A quote inside a string is text where no value can end there.
        ('plan(city="say "hi" now", days="1")', {"city": 'say "hi" now', "days": 1}),
        # A string is allowed: the quoted text stays the string.
        ('plan(code="42")', {"code": "42"}),
        # What models write from Python's notation is read too.
        ("plan(city='Oslo', days=3, ok=False)", {"city": "Oslo", "days": 3, "ok": False}),
    ],
)
def test_quoted_values_are_typed_by_the_schema(call: str, expected: dict[str, Any]) -> None:
    params = _quoted_params()
    text = f"[{call}]"
    message = params.parse(text)
    assert [json.loads(c.arguments) for c in message.tool_calls] == [expected]
    rng = random.Random(len(text))
    stream = params.stream()
    at = 0
    while at < len(text):
        step = rng.randint(1, 7)
        stream.feed(text[at : at + step])
        at += step
    stream.finish()
    assert stream.message.tool_calls == message.tool_calls


def test_a_quoted_value_the_schema_rejects_is_kept_as_text_with_a_finding() -> None:
    """Not an integer: the call is kept, the value the text written, and reported (issue
    34); ``tolerance="reject"`` refuses the call, its text content."""
    params = _quoted_params()
    text = '[plan(city="Oslo", days="soon")]'
    message = params.parse(text)
    assert [json.loads(c.arguments) for c in message.tool_calls] == [
        {"city": "Oslo", "days": "soon"}
    ]
    assert [(f.kind, f.outcome, f.detail) for f in message.findings] == [
        ("type_mismatch", "kept", "days")
    ]
    refused = params.parse(text, tolerance="reject")
    assert refused.tool_calls == [] and refused.content == text
    assert [f.kind for f in refused.findings] == ["type_mismatch"]


def test_the_grammar_allows_quoted_and_bare_values() -> None:
    params = _quoted_params()
    assert accepts(params.grammar, '[plan(city="Oslo", days="3", ok="True")]')
    assert accepts(params.grammar, "[plan(city='Oslo', days=3, ok=True)]")
    assert not accepts(params.grammar, '[plan(days="soon")]')
