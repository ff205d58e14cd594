"""The per-tool call cache (issue 22 §2): a request that adds a tool to a set seen before
builds only that tool's calls, a changed tool is built again, and a grammar built from
cached calls is the grammar built from scratch."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from helpers.many_tools import many_tools
from helpers.paths import own_path

from autoparser import CACHES, ChatTemplate
from autoparser.generate import sections

HI = [{"role": "user", "content": "What is the weather in Paris?"}]
_FRESH = itertools.count()  # tool names never built before in this process


@pytest.fixture(scope="module", params=["chatml_hermes", "qwen3coder_like"])
def template(request: pytest.FixtureRequest) -> ChatTemplate:
    loaded = ChatTemplate.from_file(own_path(request.param))
    loaded.analyze()
    return loaded


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tools whose call parsers get built, in order."""
    names: list[str] = []
    real = sections.single_call

    def counting(ctx: Any, tool: Any, strict: bool) -> Any:
        names.append(tool.name)
        return real(ctx, tool, strict)

    monkeypatch.setattr(sections, "single_call", counting)
    return names


def test_adding_a_tool_builds_only_that_tool(template: ChatTemplate, built: list[str]) -> None:
    tools = many_tools(40, f"known{next(_FRESH)}")
    template.apply(HI, tools=tools)
    assert len(built) == 2 * 40  # the lenient and the strict call of each
    built.clear()
    new = many_tools(1, f"new{next(_FRESH)}")
    params = template.apply(HI, tools=[*tools, *new])
    assert built == [new[0]["function"]["name"]] * 2
    assert params.grammar is not None and new[0]["function"]["name"] in params.grammar


def test_a_changed_tool_is_built_again(template: ChatTemplate, built: list[str]) -> None:
    tool = many_tools(1, f"changed{next(_FRESH)}")[0]
    first = template.apply(HI, tools=[tool]).grammar
    changed = {**tool, "function": {**tool["function"], "parameters": {"type": "object"}}}
    built.clear()
    second = template.apply(HI, tools=[changed]).grammar
    assert built == [tool["function"]["name"]] * 2
    assert first != second


def test_a_grammar_from_cached_calls_is_the_one_built_from_scratch(
    template: ChatTemplate,
) -> None:
    tools = many_tools(30, f"same{next(_FRESH)}")
    template.apply(HI, tools=tools[:20])  # the first 20 tools' calls are cached
    from_cache = template.apply(HI, tools=tools)
    for name in ("tool_calls", "request_builds", "request_contexts"):
        CACHES.store(name, 1).clear()  # the name exists: its size stays as configured
    fresh = template.apply(HI, tools=tools)
    assert from_cache.grammar == fresh.grammar
    assert from_cache.grammar_triggers == fresh.grammar_triggers
