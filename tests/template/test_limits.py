"""Hostile templates end in TemplateLimitError naming the limit, under a 1 GiB memory cap.

Each case runs in a child process whose address space is capped with RLIMIT_AS: reaching the
cap would show as a MemoryError (or a killed child), never as the expected limit error.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autoparser import ChatTemplate, TemplateError
from autoparser.errors import TemplateLimitError
from autoparser.template.limits import RenderLimits, render_limits

# name -> (template, the RenderLimits field it must end on; "|" when either may come first)
HOSTILE: dict[str, tuple[str, str]] = {
    "tilde_doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
        "max_value_size",
    ),
    "list_plus_doubling": (
        "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}"
        "{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
        "max_value_size",
    ),
    "repeat_doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
        "{% set ns.s = ns.s * 2 %}{% endfor %}",
        "max_value_size",
    ),
    "lipsum": ("{{ lipsum(10**6) }}", "max_value_size"),
    "nested_ranges": (
        "{% for i in range(10000) %}{% for j in range(10000) %}{% for k in range(10000) %}"
        "{% endfor %}{% endfor %}{% endfor %}",
        "max_steps",
    ),
    "ljust": ("{{ 'x'.ljust(10**10) }}", "max_value_size"),
    "center": ("{{ 'x'|center(10**9) }}", "max_value_size"),
    "format_width": ("{{ ('%9999999s' * 200)|format(*range(200)) }}", "max_value_size"),
    "str_format_width": ("{{ ('{:>9999999}' * 200).format(*range(200)) }}", "max_value_size"),
    "join_huge": ("{{ ((range(100000)|list) * 100)|join(',') }}", "max_value_size"),
    "replace_doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
        "{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}",
        "max_value_size",
    ),
    "indent_by_itself": (
        "{% set ns = namespace(s='a\\nb') %}{% for i in range(40) %}"
        "{% set ns.s = (ns.s ~ '\\n' ~ ns.s)|indent(ns.s) %}{% endfor %}",
        "max_value_size",
    ),
    "output_flood": (
        "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
        "max_output_chars",
    ),
    "macro_fanout": (
        "{% macro m(n) %}{% if n < 40 %}{{ m(n+1) }}{{ m(n+1) }}{% endif %}{% endmacro %}"
        "{{ m(0) }}",
        "max_steps|max_seconds",
    ),
}

CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from autoparser import ChatTemplate
from autoparser.errors import TemplateLimitError
try:
    ChatTemplate(sys.argv[1], name="hostile").render([{"role": "user", "content": "hi"}])
    print(json.dumps({"outcome": "rendered"}))
except TemplateLimitError as exc:
    print(json.dumps({"outcome": "limit", "limit": exc.limit, "message": str(exc)}))
except MemoryError:
    print(json.dumps({"outcome": "memory"}))
"""


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_template_stops_on_its_limit_under_a_memory_cap(name: str) -> None:
    source, limit = HOSTILE[name]
    run = subprocess.run(
        [sys.executable, "-c", CHILD, source], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "limit", result
    assert result["limit"] in limit.split("|")
    assert result["limit"] in result["message"]


def test_limits_are_configurable_and_named() -> None:
    source = "{% for i in range(50) %}{{ i }}{% endfor %}"
    assert ChatTemplate(source).render([]).startswith("0123")
    with render_limits(RenderLimits(max_steps=10)), pytest.raises(TemplateLimitError) as info:
        ChatTemplate(source).render([])
    assert info.value.limit == "max_steps"
    assert isinstance(info.value, TemplateError)


def test_limit_errors_stop_caps_and_analysis() -> None:
    # Renders fine on a tiny conversation, but every probe goes past a small step budget.
    source = (
        "{% for m in messages %}{% for i in range(100) %}{% endfor %}{{ m.content }}{% endfor %}"
    )
    template = ChatTemplate(source)
    with render_limits(RenderLimits(max_steps=50)):
        with pytest.raises(TemplateLimitError):
            template.analyze()
        with pytest.raises(TemplateLimitError):
            ChatTemplate(source).caps  # noqa: B018


def test_template_that_always_raises_is_an_error_for_caps_and_analysis() -> None:
    source = "{{ raise_exception('I always fail') }}"
    with pytest.raises(TemplateError, match="I always fail"):
        ChatTemplate(source).caps  # noqa: B018
    with pytest.raises(TemplateError, match="I always fail"):
        ChatTemplate(source + " ").analyze()


def test_limit_checks_keep_generator_arguments_whole() -> None:
    """The size checks measure a filter's input without using up a generator (``map``)."""
    template = ChatTemplate(
        "{{ tools | map(attribute='function') | tojson(indent=2) }}"
        "|{{ tools | map(attribute='function') | map(attribute='name') | join(',') }}"
    )
    tools = [{"type": "function", "function": {"name": "f"}}]
    rendered = template.render([{"role": "user", "content": "x"}], tools)
    assert rendered == '[\n  {\n    "name": "f"\n  }\n]|f'
