"""Tool families (generate.families, issue 22 §2): the grammar written from families is
the grammar of every call built on its own (the same up to rule names,
helpers/gbnf_equivalence.py), for every own template and a quarter of the corpus, for
tools of repeated forms and of varied ones; the lenient parser, which builds a call only
when the output makes it, reads the same messages as one built for every tool."""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers.builds import counted_calls
from helpers.gbnf_equivalence import same_grammar
from helpers.many_tools import many_tools, varied_tools
from helpers.paths import corpus_templates, own_path, own_templates
from helpers.roundtrip import model_output

from autoparser import CACHES, ChatTemplate
from autoparser.errors import AnalysisWarning, AutoparserError
from autoparser.generate import families, sections

TOOL_SETS = {"repeated": many_tools(24, "fam"), "varied": varied_tools(40, 3, prefix="v")}
TEMPLATES = own_templates() + corpus_templates()[::4]
HI = [{"role": "user", "content": "hi"}]


@contextmanager
def _built_alone() -> Iterator[None]:
    """Every call built on its own, at once (no families, no lazy calls)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(families, "call_member", lambda *args: None)
        patch.setattr(sections, "_names_only", lambda ctx: False)
        patch.setattr(sections, "lazy", lambda build, first="": build())
        CACHES.clear()
        yield
    CACHES.clear()


def _grammars(path: Path, tools: list[dict[str, Any]]) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        try:
            template = ChatTemplate.from_file(path)
            template.analyze()
        except AutoparserError as exc:
            return [f"load: {type(exc).__name__}"]
        out: list[Any] = []
        for choice in ("auto", "required"):
            for parallel in (True, False):
                try:
                    p = template.apply(
                        HI, tools=tools, tool_choice=choice, parallel_tool_calls=parallel
                    )
                except AutoparserError as exc:
                    out.append(type(exc).__name__)
                    continue
                out.append((p.grammar, p.grammar_lazy, [t.to_dict() for t in p.grammar_triggers]))
        return out


@pytest.mark.parametrize("kind", TOOL_SETS)
@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_families_write_the_grammar_of_every_call(path: Path, kind: str) -> None:
    tools = TOOL_SETS[kind]
    CACHES.clear()
    written = _grammars(path, tools)
    with _built_alone():
        alone = _grammars(path, tools)
    assert len(written) == len(alone)
    for got, expected in zip(written, alone, strict=True):
        if isinstance(expected, str) or expected[0] is None:
            assert got == expected
            continue
        assert got[1:] == expected[1:]
        assert same_grammar(got[0], expected[0]), path.stem


def _sample(schema: Any, rng: random.Random) -> Any:
    """A value valid for the schemas tests/helpers/many_tools.py writes."""
    if not isinstance(schema, dict):
        return "x"
    if "anyOf" in schema:
        return None if rng.random() < 0.5 else _sample(schema["anyOf"][0], rng)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _sample(v, rng) for k, v in props.items() if rng.random() < 0.7}
    if kind == "array":
        return [_sample(schema.get("items", {}), rng) for _ in range(rng.randint(0, 2))]
    if kind == "integer":
        return schema.get("minimum", 0) + rng.randint(0, 5)
    if kind == "number":
        return 2.5
    if kind == "boolean":
        return True
    return rng.choice(["Paris", "a b", "line\nbreak", 'say "hi"'])


def _calls(tools: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i, tool in enumerate(rng.sample(tools, min(2, len(tools)))):
        fn = tool["function"]
        args = _sample(fn["parameters"], rng)
        out.append(
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": fn["name"], "arguments": json.dumps(args)},
            }
        )
    return out


def _read(params: Any, text: str) -> list[tuple[str, Any]]:
    message = params.parse(text)
    return [(c.name, json.loads(c.arguments)) for c in message.tool_calls] + [
        ("content", message.content),
        ("reasoning", message.reasoning_content),
    ]


@pytest.mark.parametrize("kind", TOOL_SETS)
@pytest.mark.parametrize("path", own_templates(), ids=lambda p: p.stem)
def test_lazy_calls_read_what_calls_built_at_once_read(path: Path, kind: str) -> None:
    tools = TOOL_SETS[kind]
    template = ChatTemplate.from_file(path)
    analysis = template.analyze()
    checked = 0
    for seed in range(6):
        message = {"role": "assistant", "content": "", "tool_calls": _calls(tools, seed)}
        text, _why = model_output(template, analysis, message, tools, {})
        if not text:
            continue
        CACHES.clear()
        lazy = _read(template.apply(HI, tools=tools), text)
        with _built_alone():
            at_once = _read(ChatTemplate.from_file(path).apply(HI, tools=tools), text)
        assert lazy == at_once, text
        checked += 1
    if not checked:
        pytest.skip(f"n/a: {path.stem} renders no call of these tools")


def test_a_thousand_tools_build_no_call_until_one_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the parser nor the grammar builds a call per tool: the grammar is written
    from the few families' representatives; parsing builds the call the output makes."""
    built = counted_calls(monkeypatch)
    for name in ("chatml_hermes", "qwen3coder_like"):
        template = ChatTemplate.from_file(own_path(name))
        template.analyze()
        tools = many_tools(1000, f"thousand{name}")
        built.clear()
        params = template.apply(HI, tools=tools)
        # Per form (six), not per tool: a representative or the first call of the form,
        # and for JSON calls the one lenient call that reads any tool's name.
        assert len(built) <= 24, (name, len(built))
        wanted = tools[421]["function"]["name"]
        message = {"role": "assistant", "content": "", "tool_calls": [_calls([tools[421]], 0)[0]]}
        text, why = model_output(template, template.analyze(), message, tools, {})
        assert text, why
        built.clear()
        assert params.parse(text).tool_calls[0].name == wanted
        assert [n for n in built if not n.startswith("qjwq")] == (
            [] if name == "chatml_hermes" else [wanted]
        )


def test_a_tool_of_no_family_is_built_on_its_own() -> None:
    """Names that are not plain text, or a schema with references, keep their own call."""
    odd = {
        "type": "function",
        "function": {
            "name": "odd tool",
            "parameters": {
                "type": "object",
                "properties": {"first name": {"type": "string"}, "n": {"$ref": "#/$defs/N"}},
                "$defs": {"N": {"type": "integer"}},
            },
        },
    }
    tools = [*many_tools(5, "plain"), odd]
    for name in ("chatml_hermes", "qwen3coder_like", "glm_like"):
        CACHES.clear()
        written = _grammars(own_path(name), tools)
        with _built_alone():
            alone = _grammars(own_path(name), tools)
        for got, expected in zip(written, alone, strict=True):
            assert same_grammar(got[0], expected[0])


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_a_lazy_calls_promise_is_its_calls_own(path: Path) -> None:
    """Each lazy call's first text (from a call named by a placeholder) is a prefix of what
    the call built for the tool itself promises: never more, so a choice skips it only
    where the call would fail."""
    from autoparser.peg.core import Lazy, Ref

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        try:
            template = ChatTemplate.from_file(path)
            params = template.apply(HI, tools=TOOL_SETS["varied"])
        except AutoparserError as exc:
            pytest.skip(f"n/a: {type(exc).__name__}")
    seen: set[int] = set()
    stack = [params.parser]
    checked = 0
    while stack:
        node = stack.pop()
        if node._uid in seen:
            continue
        seen.add(node._uid)
        if isinstance(node, Lazy):
            own = node.target().first_text()
            assert own.startswith(node.first_text()), (node.first_text(), own)
            checked += 1
            continue
        stack.extend([node.target()] if isinstance(node, Ref) else node.children())
    if not checked:
        pytest.skip("n/a: no lazy call (the calls read every tool's name in one, or none)")
