"""Conventional variables: supplied only to a template that cannot render without them,
never over the caller's value, dates from the render's clock."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from helpers.paths import CORPUS_SKIP_REASON, corpus_dir, own_path

from autoparser import ChatTemplate
from autoparser.errors import TemplateError

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
HELLO = [{"role": "user", "content": "hi"}]
PINNED = dt.datetime(2031, 5, 6, 7, 8, 9)


def own() -> ChatTemplate:
    return ChatTemplate.from_file(own_path("conventional_variables"))


def test_template_reading_tools_as_text_gets_them_as_json() -> None:
    rendered = own().render(HELLO, [WEATHER], now=PINNED)
    functions = rendered.split("Functions:\n", 1)[1].split("<|im_end|>", 1)[0]
    assert json.loads(functions) == [WEATHER]
    assert "Today is May 06 2031." in rendered


def test_without_tools_the_tools_text_is_empty() -> None:
    rendered = own().render(HELLO, now=PINNED)
    assert "Functions:\n<|im_end|>" in rendered


def test_dates_follow_the_injected_clock() -> None:
    source = own_path("conventional_variables").read_text(encoding="utf-8")
    template = ChatTemplate(source, clock=lambda: dt.datetime(2027, 1, 2))
    assert "Today is Jan 02 2027." in template.render(HELLO)
    assert "Today is Jan 02 2027." in template.apply(HELLO).prompt
    # A pinned ``now`` wins over the clock.
    assert "Today is May 06 2031." in template.render(HELLO, now=PINNED)


def test_the_callers_values_win() -> None:
    rendered = own().render(HELLO, [WEATHER], functions="MY TOOLS", datetime="someday")
    assert "Today is someday.\nFunctions:\nMY TOOLS<|im_end|>" in rendered
    # One passed, the other still supplied.
    assert "Today is May 06 2031.\nFunctions:\nMY TOOLS" in own().render(
        HELLO, now=PINNED, functions="MY TOOLS"
    )


def test_a_template_that_renders_without_them_is_left_alone() -> None:
    """A template guarding the variable renders exactly as transformers does (no date)."""
    guarded = ChatTemplate(
        "{% if current_date is defined %}Date: {{ current_date }}. {% endif %}"
        "{{ current_date ~ '' }}{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    assert guarded.renderer.conventional_variables == frozenset({"current_date"})
    assert guarded.render(HELLO, now=PINNED) == "hi"


def test_other_undefined_variables_still_fail() -> None:
    template = ChatTemplate("{{ 'x' + my_own_variable }}{{ 'y' + functions }}")
    with pytest.raises(TemplateError, match="'my_own_variable' is undefined"):
        template.render(HELLO)


def test_variables_the_template_defines_are_not_conventional() -> None:
    source = "{% set functions = 'mine' %}{{ functions }}{{ datetime is defined }}"
    assert ChatTemplate(source).renderer.conventional_variables == frozenset({"datetime"})


def test_the_analysis_and_apply_work_through_them() -> None:
    template = own()
    analysis = template.analyze()
    assert analysis.verification is not None and analysis.verification.verified
    assert analysis.tools.format.per_call_start == "<tool_call>\n"
    params = template.apply(HELLO, [WEATHER], now=PINNED)
    assert '"name": "get_weather"' in params.prompt
    parsed = params.parse(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    )
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]


@pytest.mark.skipif(corpus_dir() is None, reason=CORPUS_SKIP_REASON)
def test_firefunction_v2_renders_as_its_handlers_do() -> None:
    """FireFunction v2 reads ``functions`` and ``datetime`` unguarded: the analysis is no
    longer the template's error, and the prompt lists the tools and the date."""
    path = Path(str(corpus_dir())) / "fireworks-ai-llama-3-firefunction-v2.jinja"
    template = ChatTemplate.from_file(path)
    assert template.renderer.conventional_variables == frozenset({"functions", "datetime"})
    prompt = template.apply(HELLO, [WEATHER], now=PINNED).prompt
    assert "Available functions as JSON spec:\n[\n" in prompt
    assert "\nToday is May 06 2031.<|eot_id|>" in prompt
