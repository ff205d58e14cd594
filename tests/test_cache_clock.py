"""The render clock is injected (``ChatTemplate(clock=...)``), never a module global a test
patches; caches keyed by what a render saw include the date it read; every memo of the
library is bounded and either owned by ``autoparser.cache`` or listed here with its key."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import autoparser
from autoparser import CACHES, ChatTemplate
from autoparser.template import Renderer, environment

SRC = Path(autoparser.__file__).parent

# A template that prints the date in its generation prompt (as vllm-muse_glimmer does), so
# the analysis of the same text differs by the date its renders read.
DATED = (
    "{% set opener = '<|assistant ' + strftime_now('%Y-%m-%d') + '|>' %}"
    "{% for m in messages %}{% if m.role == 'assistant' %}{{ opener }}"
    "{% else %}<|{{ m.role }}|>{% endif %}{{ m.content }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}{{ opener }}{% endif %}"
)
HELLO = [{"role": "user", "content": "hi"}]


def _clock(day: int) -> environment.Clock:
    def now() -> dt.datetime:
        return dt.datetime(2030, 1, day, 12, 0, 0)

    return now


def test_the_environment_has_no_clock_to_patch() -> None:
    assert not hasattr(environment, "clock")


def test_a_renderer_reads_the_clock_it_was_given() -> None:
    renderer = Renderer(DATED, clock=_clock(2))
    assert renderer.render(HELLO).endswith("<|assistant 2030-01-02|>")
    # Raw renders (the analysis' probes) read it too.
    raw = renderer.render_raw({"messages": HELLO, "add_generation_prompt": True})
    assert raw.endswith("<|assistant 2030-01-02|>")
    # A pinned date wins over the clock.
    pinned = renderer.render(HELLO, now=dt.datetime(2031, 5, 6))
    assert pinned.endswith("<|assistant 2031-05-06|>")


def test_the_clock_reaches_apply_variants_and_the_training_template() -> None:
    template = ChatTemplate(DATED, clock=_clock(3), variants={"tool_use": DATED + "!"})
    assert template.apply(HELLO).prompt.endswith("<|assistant 2030-01-03|>")
    assert template.variant("tool_use").render(HELLO).endswith("2030-01-03|>!")


def test_the_analysis_cache_is_keyed_by_the_date_a_render_reads() -> None:
    first = ChatTemplate(DATED, clock=_clock(4)).analyze()
    second = ChatTemplate(DATED, clock=_clock(5)).analyze()
    assert "2030-01-04" in first.generation_prompt
    assert "2030-01-05" in second.generation_prompt
    clock = _clock(6)
    assert ChatTemplate(DATED, clock=clock).analyze() is ChatTemplate(DATED, clock=clock).analyze()


def _memo_decorators() -> dict[str, str]:
    """Every function of src/ memoised by functools (``lru_cache``/``cache``), by
    ``module:function``, with its ``maxsize`` as written (``None`` when unbounded)."""
    found: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for deco in node.decorator_list:
                call = deco if isinstance(deco, ast.Call) else None
                target = call.func if call else deco
                name = (
                    target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                )
                if name not in ("lru_cache", "cache"):
                    continue
                size = "None"
                for kw in call.keywords if call else ():
                    if kw.arg == "maxsize":
                        size = ast.unparse(kw.value)
                module = path.relative_to(SRC).with_suffix("").as_posix()
                found[f"{module}:{node.name}"] = size
    return found


# The functools memos allowed beside ``autoparser.cache``: pure functions of small values
# built inside the library (never a template's text or a request), each bounded.
ALLOWED_MEMOS = {
    "schema/regex:python_class": "4",  # keyed by one of the escapes \d \w \s
    "schema/regex:_all_scalars": "1",  # no key: the one string of every code point
    "peg/charclass:_class_gbnf": "4096",  # keyed by a character set's ranges
    "peg/charclass:_class_regex": "4096",
    "peg/charclass:parse_class": "4096",  # keyed by a character class spec
    "gbnf_text:_short_skeleton": "8192",  # keyed by a short GBNF expression the emitter wrote
    # Keyed by one short string the emitter writes into a grammar (a literal's text, a part
    # of a rule name): pure, a few hundred nanoseconds each, called for every tool.
    "gbnf_text:gbnf_literal": "8192",
    "gbnf_text:name_part": "8192",
    "generate/context:rule_part": "8192",
    "stream/mapper:_markup_openers": "256",  # keyed by a format's call openers
    "template/environment:sandbox": "None",  # keyed by a bool: two environments at most
    "generate/schema_check:_validator_for": "None",  # no key: jsonschema's, imported once
    "template/compiled:_maker_hash": "None",  # no key: the code generator's own hash, once
}
# Unbounded memos are allowed only where the key's domain is (a bool, no key at all).
FINITE_KEYS = {
    "template/environment:sandbox",
    "generate/schema_check:_validator_for",
    "template/compiled:_maker_hash",
}


def test_every_memo_is_bounded_and_known() -> None:
    """A new memo keyed by what callers send belongs in ``autoparser.cache`` (bounded,
    counted, sized by name); this list is what is allowed beside it."""
    found = _memo_decorators()
    assert found == ALLOWED_MEMOS
    assert all(size != "None" for name, size in found.items() if name not in FINITE_KEYS)


def test_the_stores_are_one_owners() -> None:
    """Every template-keyed store, the session API's included, is ``CACHES``'."""
    ChatTemplate(DATED).analyze()
    autoparser.Session.for_source(DATED).params({"messages": HELLO})
    names = set(CACHES.stats())
    assert {"analysis", "verification", "compile", "probe", "caps"} <= names
    assert {"session_templates", "session_params"} <= names
