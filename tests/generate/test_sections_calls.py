"""The tool section's calls (generate.sections._calls, issue 22 §2): a grammar is the same
whatever earlier requests built (families and templates kept across requests change no
byte of it), a request adding a tool to a known set builds at most that tool's new forms,
and a changed tool is written from its new schema."""

from __future__ import annotations

import itertools

import pytest
from helpers.builds import counted_calls
from helpers.many_tools import many_tools, varied_tools
from helpers.paths import own_path

from autoparser import CACHES, ChatTemplate

HI = [{"role": "user", "content": "What is the weather in Paris?"}]
_FRESH = itertools.count()  # tool names never built before in this process
TEMPLATES = ["chatml_hermes", "qwen3coder_like", "glm_like", "pythonic_like"]


@pytest.fixture(params=TEMPLATES)
def template(request: pytest.FixtureRequest) -> ChatTemplate:
    loaded = ChatTemplate.from_file(own_path(request.param))
    loaded.analyze()
    return loaded


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tools whose call parsers get built, in order."""
    return counted_calls(monkeypatch)


def test_a_grammar_is_the_same_whatever_was_built_before(template: ChatTemplate) -> None:
    tools = varied_tools(30, next(_FRESH), prefix=f"same{next(_FRESH)}")
    template.apply(HI, tools=tools[:20])  # families and templates of 20 of them kept
    warm = template.apply(HI, tools=tools)
    CACHES.clear()
    cold = template.apply(HI, tools=tools)
    assert warm.grammar == cold.grammar
    assert warm.grammar_triggers == cold.grammar_triggers


def test_a_tool_of_a_known_form_builds_no_call(template: ChatTemplate, built: list[str]) -> None:
    """Calls are built per form, not per tool: the first call of each form a grammar
    writes (a form with one tool is written from its call), none for the tools after."""
    tools = many_tools(40, f"known{next(_FRESH)}")
    new = many_tools(7, f"new{next(_FRESH)}")[6:]  # the first shape again, another name
    params = template.apply(HI, tools=[*tools, *new])
    name = new[0]["function"]["name"]
    assert name not in built
    assert len(set(built)) <= 12, built  # six forms, lenient and strict
    assert params.grammar is not None and name in params.grammar


def test_a_changed_tool_is_written_from_its_new_schema(template: ChatTemplate) -> None:
    tool = many_tools(1, f"changed{next(_FRESH)}")[0]
    first = template.apply(HI, tools=[tool]).grammar
    changed = {
        **tool,
        "function": {
            **tool["function"],
            "parameters": {"type": "object", "properties": {"z": {"type": "boolean"}}},
        },
    }
    second = template.apply(HI, tools=[changed]).grammar
    assert first != second
    CACHES.clear()
    assert second == template.apply(HI, tools=[changed]).grammar  # nothing stale in it
