"""Compiling a template once: what the code generator records, and one code for both sandboxes."""

from __future__ import annotations

import jinja2
import pytest
from helpers.paths import corpus_templates, own_templates
from jinja2 import meta, nodes

from autoparser import CACHES, ChatTemplate
from autoparser.template.compiled import compile_source
from autoparser.template.environment import make_environment, sandbox


def _tested_names(tree: nodes.Template) -> set[str]:
    """The names read in the tests of if / elif / conditional expressions, by a tree walk."""
    tested: set[str] = set()
    for node in tree.find_all((nodes.If, nodes.CondExpr)):
        test = node.test
        tested |= {test.name} if isinstance(test, nodes.Name) else set()
        tested |= {name.name for name in test.find_all(nodes.Name)}
    return tested


def test_recorded_names_match_jinja2_introspection() -> None:
    """What the one code generation records equals what a second parse and jinja2.meta's
    introspection pass (the work it replaces) find, on every template at hand."""
    checked = 0
    for path in corpus_templates() + own_templates():
        source = path.read_text(encoding="utf-8")
        try:
            compiled = compile_source(source)
        except jinja2.TemplateSyntaxError:
            continue  # the corpus holds a few templates jinja2 cannot compile
        checked += 1
        tree = make_environment().parse(source)
        assert compiled.reads == meta.find_undeclared_variables(tree)
        assert compiled.tested == _tested_names(tree)
    assert checked > 20


def test_names_read_and_tested() -> None:
    source = (
        "{% set mode = 'x' %}{% if enable_thinking and mode %}A{% endif %}"
        "{% for m in messages %}{{ m.content if verbose else '' }}{% endfor %}"
        "{% if x %}{% elif reasoning_effort == 'high' %}{% endif %}{{ raise_exception }}"
    )
    compiled = compile_source(source)
    assert compiled.reads == {"enable_thinking", "messages", "verbose", "x", "reasoning_effort"}
    assert compiled.tested == {"enable_thinking", "mode", "verbose", "x", "reasoning_effort"}


def test_syntax_error_is_jinja2s() -> None:
    with pytest.raises(jinja2.TemplateSyntaxError):
        compile_source("{% if %}")
    with pytest.raises(jinja2.TemplateSyntaxError, match="No filter named"):
        compile_source("{{ x | no_such_filter }}")


def test_a_mutating_template_is_compiled_once() -> None:
    """The mutable sandbox runs the same code: no second compile of the text."""
    source = "{% set xs = [] %}{{ xs.append(1) or '' }}{{ xs }}|compiled once"
    store = CACHES.store("compile", 0)
    store.clear()
    before = store.stats()
    assert ChatTemplate(source).render([{"role": "user", "content": "a"}]) == "[1]|compiled once"
    after = store.stats()
    assert (after.misses - before.misses, after.entries) == (1, 1)
    compiled = compile_source(source)
    assert compiled.template.environment is sandbox(mutable=False)
    assert compiled.mutable_template.environment is sandbox(mutable=True)
    assert compiled.mutable_template is compiled.mutable_template
