"""Rendering semantics against transformers, errors, and the sandbox."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoparser import ChatTemplate
from autoparser.errors import TemplateError
from autoparser.examples import example_path

chat_template_utils = pytest.importorskip("transformers.utils.chat_template_utils")

FIXED_NOW = dt.datetime(2024, 2, 29, 23, 59, 1)


class _FixedDatetime(dt.datetime):
    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _FixedDatetime:  # type: ignore[override]
        return cls.fromtimestamp(FIXED_NOW.timestamp(), tz)


def fixed_clock() -> dt.datetime:
    """The clock our renders are given (``ChatTemplate(clock=...)``)."""
    return FIXED_NOW


@pytest.fixture(autouse=True)
def fixed_oracle_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers reads ``datetime.now()`` with no way to pass a clock: patched there."""
    monkeypatch.setattr(chat_template_utils, "datetime", _FixedDatetime)


def transformers_render(
    source: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    **kwargs: Any,
) -> str:
    cleaned = [{k: v for k, v in m.items() if v is not None} for m in messages]
    rendered, _ = chat_template_utils.render_jinja_template(
        conversations=[cleaned],
        tools=tools,
        chat_template=source,
        add_generation_prompt=add_generation_prompt,
        **{"bos_token": "<s>", "eos_token": "</s>", **kwargs},
    )
    return str(rendered[0])


def both(source: str, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[str, str]:
    ours = ChatTemplate(source, bos_token="<s>", eos_token="</s>", clock=fixed_clock).render(
        messages, polyfills=False, **kwargs
    )
    return ours, transformers_render(source, messages, **kwargs)


HELLO = [{"role": "user", "content": "héllo <b>&amp;</b>"}]

# Each template exercises one feature of transformers' environment.
FEATURES = {
    "tojson_plain": "{{ messages | tojson }}",
    "tojson_options": "{{ messages | tojson(indent=2, sort_keys=true) }}",
    "tojson_ascii": "{{ messages[0].content | tojson(ensure_ascii=true) }}",
    "tojson_separators": "{{ {'a': [1, 2]} | tojson(separators=(',', ':')) }}",
    "strftime": "{{ strftime_now('%d %B %Y %H:%M:%S') }}",
    "trim_lstrip": "  {% if true %}\nA\n  {% endif %}\nB",
    "loopcontrols": "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}"
    "{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "generation": "{% generation %}G{{ bos_token }}{% endgeneration %}{{ eos_token }}",
    "namespace": "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "{% endfor %}{{ ns.n }}",
    "dict_global": "{{ dict(a=1, b=2) | tojson }}{{ dict.fromkeys(['x'], 0) | tojson }}",
    "tools_defined": "{{ tools is defined }}|{{ tools is none }}|{{ documents is none }}",
    "kwargs": "{{ enable_thinking }}|{{ custom_flag }}",
    "generation_prompt": "{{ add_generation_prompt }}",
    "reasoning_alias": "{% for m in messages %}{{ m.thinking }}|{{ m.reasoning_content }}|"
    "{{ m.reasoning }}|{{ m | list | join(',') }};{% endfor %}",
    "none_dropped": "{% for m in messages %}{{ m.content is defined }}{{ m | length }}{% endfor %}",
}


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_environment_matches_transformers(name: str) -> None:
    messages: list[dict[str, Any]] = [
        *HELLO,
        {"role": "assistant", "content": None, "reasoning": "thought", "tool_calls": []},
        {"role": "assistant", "content": "x", "reasoning_content": "r", "thinking": None},
    ]
    ours, theirs = both(FEATURES[name], messages, enable_thinking=False, custom_flag=[1, "a"])
    assert ours == theirs


def test_render_defaults_add_generation_prompt() -> None:
    template = ChatTemplate("{{ add_generation_prompt }}")
    assert template.render(HELLO) == "True"
    assert template.render(HELLO, add_generation_prompt=False) == "False"


def test_render_does_not_mutate_inputs() -> None:
    source = "{% for m in messages %}{{ m.content }}{% endfor %}"
    messages = [{"role": "user", "content": "a", "reasoning_content": None}]
    ChatTemplate(source).render(messages)
    assert messages == [{"role": "user", "content": "a", "reasoning_content": None}]


@settings(max_examples=40, deadline=None)
@given(
    contents=st.lists(st.text(max_size=40), min_size=1, max_size=4),
    thinking=st.one_of(st.none(), st.booleans()),
)
def test_example_template_matches_transformers(contents: list[str], thinking: bool | None) -> None:
    source = example_path().read_text(encoding="utf-8")
    roles = ["user", "assistant"]
    messages = [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]
    kwargs = {} if thinking is None else {"enable_thinking": thinking}
    ours, theirs = both(source, messages, **kwargs)
    assert ours == theirs


# ------------------------------------------------------------------------ errors


def test_syntax_error_names_template_and_line() -> None:
    with pytest.raises(TemplateError, match=r"mytpl: syntax error at line 2: .*"):
        ChatTemplate("ok\n{% if %}", name="mytpl")


def test_undefined_variable_names_template_and_line() -> None:
    template = ChatTemplate("line1\n{{ nothing.here }}", name="mytpl")
    with pytest.raises(
        TemplateError, match=r"mytpl: render failed at line 2: .*'nothing' is undefined"
    ):
        template.render(HELLO)


def test_plain_undefined_renders_empty_like_transformers() -> None:
    ours, theirs = both("[{{ nothing }}]", HELLO)
    assert ours == theirs == "[]"


def test_raise_exception_names_template_line_and_message() -> None:
    source = "a\nb\n{{ raise_exception('Only user roles, please') }}"
    with pytest.raises(TemplateError) as info:
        ChatTemplate(source, name="strict").render(HELLO)
    message = str(info.value)
    assert message.startswith("strict: template raised an exception at line 3")
    assert message.endswith("Only user roles, please")


def test_type_error_is_template_error() -> None:
    with pytest.raises(TemplateError, match="TypeError"):
        ChatTemplate("{{ 'a' + 1 }}").render(HELLO)


# ----------------------------------------------------------------------- sandbox

HOSTILE = {
    "class_mro": "{{ ''.__class__.__mro__ }}",
    "class_subclasses": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "cycler_globals": "{{ cycler.__init__.__globals__ }}",
    "joiner_globals": "{{ joiner.__init__.__globals__.os }}",
    "namespace_dunder": "{% set ns = namespace(__class__=1) %}{{ ns }}",
    "namespace_setattr": "{% set ns = namespace() %}{% set ns._private = 1 %}{{ ns }}",
    "huge_range": "{% for i in range(10**9) %}{% endfor %}",
    "huge_repeat": "{{ 'x' * 10**10 }}",
    "huge_list_repeat": "{{ ([0] * 100000) * 100000 }}",
    "huge_power": "{{ 10 ** 100000 }}",
    "format_map_attr": "{{ '{0.__class__.__mro__}'.format_map(['']) }}",
    "huge_ljust": "{{ 'x'.ljust(10**9) }}",
    "huge_format_width": "{{ '{:>999999999}'.format('x') }}",
    "huge_printf_width": "{{ '%999999999s' % 'x' }}",
    "printf_star_width": "{{ '%*s' % (10**9, 'x') }}",
    "huge_center_filter": "{{ 'x' | center(10**9) }}",
    "huge_indent_filter": "{{ 'a\nb' | indent(10**9) }}",
    "huge_format_filter": "{{ '%999999999s' | format('x') }}",
    "deep_recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_template_fails_cleanly(name: str) -> None:
    template = ChatTemplate(HOSTILE[name], name=name)
    with pytest.raises(TemplateError, match=name):
        template.render(HELLO)


def test_size_guards_leave_ordinary_formatting_alone() -> None:
    source = (
        "{{ '**%s**' % 'b' }}|{{ '%5.2f' % 3.14159 }}|{{ '{:>4}'.format('x') }}|"
        "{{ 'x' | center(5) }}|{{ 'a\nb' | indent(2) }}|{{ '%s-%d' | format('a', 3) }}|"
        "{{ 'ab' * 3 }}|{{ 2 ** 10 }}|{{ 'abc' | truncate(10) }}"
    )
    ours, theirs = both(source, HELLO)
    assert ours == theirs == "**b**| 3.14|   x|  x  |a\n  b|a-3|ababab|1024|abc"


def test_format_cannot_reach_internals() -> None:
    rendered = ChatTemplate("[{{ '{0.__class__}'.format('') }}]").render(HELLO)
    assert "class" not in rendered


def test_mutating_template_renders_without_touching_inputs() -> None:
    source = "{% set xs = [] %}{{ xs.append(1) or '' }}{{ messages.append(1) or '' }}{{ xs }}"
    messages = [{"role": "user", "content": "a"}]
    assert ChatTemplate(source).render(messages) == "[1]"
    assert messages == [{"role": "user", "content": "a"}]
    with pytest.raises(Exception, match="unsafe"):
        transformers_render(source, messages)


def test_compiled_template_is_shared() -> None:
    source = "{{ messages | length }}"
    assert ChatTemplate(source).renderer._compiled is ChatTemplate(source).renderer._compiled


DATED = (
    "{{ strftime_now('%Y-%m-%d') }}|{{ date_string if date_string is defined else 'unset' }}"
    "{% for m in messages %}|{{ m.content }}{% endfor %}"
)


def test_now_pins_the_date_a_render_sees() -> None:
    """``now`` fixes strftime_now and date_string; without it the clock is read and
    date_string stays undefined (as in transformers)."""
    pinned = dt.datetime(2031, 5, 6, 7, 8, 9)
    template = ChatTemplate(DATED, clock=fixed_clock)
    assert template.render(HELLO) == f"{FIXED_NOW:%Y-%m-%d}|unset|{HELLO[0]['content']}"
    assert template.render(HELLO, now=pinned).startswith("2031-05-06|06 May 2031|")
    # An explicit date_string wins over the one derived from now.
    assert template.render(HELLO, now=pinned, date_string="x").startswith("2031-05-06|x|")
    # Fixed on the template, per render, and passed through apply().
    fixed = ChatTemplate(DATED, now=pinned)
    assert fixed.render(HELLO).startswith("2031-05-06|06 May 2031|")
    assert fixed.render(HELLO, now=FIXED_NOW).startswith(f"{FIXED_NOW:%Y-%m-%d}|")
    assert template.apply(HELLO, now=pinned).prompt.startswith("2031-05-06|")
