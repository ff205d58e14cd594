"""Compiling a template once: what the code generator records, and one code for both sandboxes."""

from __future__ import annotations

import marshal
import stat
from pathlib import Path

import jinja2
import pytest
from helpers.paths import corpus_templates, own_templates
from jinja2 import meta, nodes

from autoparser import CACHES, ChatTemplate
from autoparser.template import compiled as compiled_module
from autoparser.template.compiled import CompiledSource, code_key, code_path, compile_source
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


# ------------------------------------------------------------------ the code kept on disk

SOURCE = (
    "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% if verbose %}!{% endif %}{% endfor %}"
)
MESSAGES = {"messages": [{"role": "user", "content": "hi"}], "verbose": True}


def _forget() -> None:
    CACHES.store("compile", 0).clear()


def _fresh(source: str, directory: Path) -> CompiledSource:
    """The compile a new process makes (nothing in memory)."""
    _forget()
    return compile_source(source, directory)


def _no_codegen(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_source: str) -> CompiledSource:
        raise AssertionError("compiled again instead of loading the kept code")

    monkeypatch.setattr(compiled_module, "_compile", refuse)


def test_a_later_process_loads_the_kept_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _fresh(SOURCE, tmp_path)
    path = code_path(tmp_path, SOURCE)
    assert path.is_file() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    _no_codegen(monkeypatch)
    again = _fresh(SOURCE, tmp_path)
    assert (again.reads, again.tested) == (first.reads, first.tested)
    assert again.template.render(**MESSAGES) == first.template.render(**MESSAGES) == "[user] hi!"
    assert again.mutable_template.environment is sandbox(mutable=True)


@pytest.mark.parametrize("damage", ["corrupt", "other key", "truncated", "not code"])
def test_a_damaged_file_is_compiled_again_and_replaced(tmp_path: Path, damage: str) -> None:
    _fresh(SOURCE, tmp_path)
    path = code_path(tmp_path, SOURCE)
    data = path.read_bytes()
    head, _, _code = data.partition(b"\n\n")
    broken = {
        "corrupt": b"garbage",
        "other key": data.replace(code_key(SOURCE).encode(), b"0" * 64),
        "truncated": data[: len(data) - 20],
        "not code": head + b"\n\n" + marshal.dumps(42),
    }[damage]
    path.write_bytes(broken)
    again = _fresh(SOURCE, tmp_path)
    assert again.template.render(**MESSAGES) == "[user] hi!"
    if damage != "not code":
        assert path.read_bytes() != broken or damage == "other key"


@pytest.mark.parametrize("where", ["file", "folder"])
def test_code_others_may_write_is_never_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    _fresh(SOURCE, tmp_path)
    path = code_path(tmp_path, SOURCE)
    target = path if where == "file" else path.parent
    target.chmod(stat.S_IMODE(target.stat().st_mode) | stat.S_IWOTH)
    verdicts: list[bool] = []
    real = compiled_module._trusted

    def watched(p: Path) -> bool:
        verdicts.append(real(p))
        return verdicts[-1]

    monkeypatch.setattr(compiled_module, "_trusted", watched)
    again = _fresh(SOURCE, tmp_path)
    assert verdicts == [False]  # looked at, refused, compiled again
    assert again.template.render(**MESSAGES) == "[user] hi!"


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    _fresh(SOURCE, tmp_path)
    path = code_path(tmp_path, SOURCE)
    elsewhere = tmp_path / "elsewhere.code"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    assert not compiled_module._trusted(path)


def test_the_key_names_the_text_and_the_code_generator() -> None:
    assert code_key(SOURCE) == code_key(SOURCE) != code_key(SOURCE + " ")
    assert len(code_key(SOURCE)) == 64


def test_a_syntax_error_keeps_nothing(tmp_path: Path) -> None:
    with pytest.raises(jinja2.TemplateSyntaxError):
        _fresh("{% if %}", tmp_path)
    assert not code_path(tmp_path, "{% if %}").exists()


def test_an_unwritable_folder_only_costs_a_compile(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder should be")
    assert _fresh(SOURCE, blocked).template.render(**MESSAGES) == "[user] hi!"


def test_chat_template_keeps_its_code_with_its_analysis(tmp_path: Path) -> None:
    _forget()
    ChatTemplate(SOURCE, analysis_cache=tmp_path)
    assert code_path(tmp_path, SOURCE).is_file()
