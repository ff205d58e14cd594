"""The sandboxed jinja2 environment: transformers' options, and guards for untrusted code."""

from __future__ import annotations

from datetime import datetime

import pytest
from jinja2.exceptions import SecurityError

from autoparser.errors import TemplateError, TemplateLimitError
from autoparser.template.environment import (
    DATE_STRING_FORMAT,
    clock_variables,
    fixed_date_variables,
    make_environment,
    make_mutable_environment,
    sandbox,
)
from autoparser.template.limits import RenderLimits, render_limits
from autoparser.template.renderer import Renderer


def _render(source: str, **context: object) -> str:
    return Renderer(source).render_raw(context)


def test_options_are_transformers_ones() -> None:
    env = make_environment()
    assert env.trim_blocks and env.lstrip_blocks
    assert "jinja2.ext.LoopControlExtension" in env.extensions
    assert env is not make_environment() and sandbox(False) is sandbox(False)
    assert sandbox(True) is not sandbox(False)


def test_tojson_is_plain_json_dumps() -> None:
    value = {"html": "<b>&'\"</b>", "é": [1, None]}
    assert _render("{{ v | tojson }}", v=value) == '{"html": "<b>&\'\\"</b>", "é": [1, null]}'
    assert _render("{{ v | tojson(indent=2) }}", v=[1]) == "[\n  1\n]"
    # a lazy sequence serialises as the list it yields (llama.cpp does the same)
    assert _render("{{ v | map(attribute='a') | tojson }}", v=[{"a": 1}, {"a": 2}]) == "[1, 2]"


def test_generation_tags_render_their_body() -> None:
    assert _render("a{% generation %}b{{ x }}{% endgeneration %}c", x=1) == "ab1c"


def test_raise_exception_is_a_template_error_with_the_message() -> None:
    with pytest.raises(TemplateError, match="roles must alternate"):
        _render("{{ raise_exception('roles must alternate') }}")


def test_namespace_and_dict_work_and_underscores_stay_out() -> None:
    assert _render("{% set ns = namespace(n=1) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}") == "2"
    assert _render("{{ dict(a=1)['a'] }}") == "1"
    with pytest.raises(TemplateError):
        _render("{% set ns = namespace(__class__=1) %}")


def test_the_sandbox_refuses_internals() -> None:
    with pytest.raises(TemplateError):
        _render("{{ ''.__class__.__mro__ }}")
    assert _render("{{ f.__globals__ }}", f=_render) == ""  # unsafe attributes are undefined


def test_only_the_mutable_sandbox_lets_templates_change_lists() -> None:
    source = "{{ x.append(1) or x }}"
    assert make_mutable_environment().from_string(source).render(x=[]) == "[1]"
    with pytest.raises(SecurityError):
        make_environment().from_string(source).render(x=[])


@pytest.mark.parametrize(
    ("source", "limit"),
    [
        ("{{ 'x' * 100000 }}", "max_value_size"),
        ("{{ 2 ** 100000 }}", "max_value_size"),
        ("{% for i in range(20000) %}{% endfor %}", "max_steps"),
        ("{% for i in range(2000) %}{{ 'abcdefghij' * 10 }}{% endfor %}", "max_output_chars"),
    ],
)
def test_guards_stop_work_past_the_limits(source: str, limit: str) -> None:
    small = RenderLimits(max_output_chars=100_000, max_value_size=50_000, max_steps=10_000)
    with render_limits(small), pytest.raises(TemplateLimitError) as info:
        _render(source)
    assert info.value.limit == limit


def test_dates_come_from_the_given_clock() -> None:
    day = datetime(2024, 7, 26, 13, 5)
    pinned = fixed_date_variables(day)
    assert pinned["date_string"] == day.strftime(DATE_STRING_FORMAT) == "26 Jul 2024"
    source = "{{ strftime_now('%Y-%m-%d %H:%M') }}"
    assert _render(source, **pinned) == "2024-07-26 13:05"
    assert _render(source, **clock_variables(lambda: day)) == "2024-07-26 13:05"
    assert "date_string" not in clock_variables(lambda: day)
