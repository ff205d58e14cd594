"""Hostile templates end in TemplateLimitError naming the limit, under a 1 GiB memory cap.

Each case runs in a child process whose address space is capped with RLIMIT_AS: reaching the
cap would show as a MemoryError (or a killed child), never as the expected limit error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers.cpu_hog import cpu_hogs

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


# A render pinned to one core next to busy hogs pinned there too: the scheduler shares the
# core, so the render's wall time is several times its CPU time (issue 35).
LOADED_CHILD = """
import json, os, sys, time
os.sched_setaffinity(0, [int(sys.argv[1])])
from autoparser import ChatTemplate
from autoparser.errors import TemplateLimitError
from autoparser.template.limits import RenderLimits, render_limits

def timed(template, limits, rounds=0):
    # rounds of 100,000 loop iterations; the probes' messages ask for none
    cpu, wall = time.thread_time(), time.monotonic()
    try:
        with render_limits(limits):
            template.render([{"role": "user", "content": str(rounds)}])
        outcome = "rendered"
    except TemplateLimitError as exc:
        outcome = exc.limit
    return {"outcome": outcome, "cpu": time.thread_time() - cpu, "wall": time.monotonic() - wall}

roomy = RenderLimits(max_steps=10**9, max_seconds=600.0)
template = ChatTemplate(
    "{% for m in messages %}{% for i in range(m.content|int) %}"
    "{% for j in range(100000) %}{% endfor %}{% endfor %}{% endfor %}done"
)
timed(template, roomy)  # compiled and probed before the hogs start
print("ready", flush=True)
sys.stdin.readline()  # the hogs are running now
calibration = timed(template, roomy, 12)
limit = 2 * calibration["cpu"]
bounded = RenderLimits(max_steps=10**9, max_seconds=limit)
legit = timed(template, bounded, 12)
hostile = timed(template, bounded, 100000)
print(json.dumps({"limit": limit, "calibration": calibration, "legit": legit, "hostile": hostile}))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity")
def test_render_limit_counts_the_renders_cpu_time_not_the_machines_load() -> None:
    """A legitimate render is never refused because the machine is busy; a hostile one still is.

    The limit is twice the render's own CPU time, while four hogs on its core make its wall
    time about five times that CPU time: a wall-clock deadline would refuse it.
    """
    core = min(os.sched_getaffinity(0))
    child = subprocess.Popen(
        [sys.executable, "-c", LOADED_CHILD, str(core)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready", child.communicate(timeout=600)[1][-2000:]
    with cpu_hogs(4, cpus=[core], max_seconds=300):
        out, err = child.communicate("go\n", timeout=600)
    assert child.returncode == 0, err[-2000:]
    result = json.loads(out.strip().splitlines()[-1])
    legit, hostile, limit = result["legit"], result["hostile"], result["limit"]
    # The hogs did load the render's core: by wall time it ran past its limit.
    assert legit["wall"] > limit, result
    assert legit["outcome"] == "rendered", result
    # A template that never ends is still stopped, on its CPU time.
    assert hostile["outcome"] == "max_seconds", result
    assert hostile["cpu"] >= limit, result
