"""serve reads a chat body with the library's one reader (``RequestOptions.from_openai``)
and applies its tolerances to what it read: the same defaults and field-named errors as
every face (tests/test_session_reader.py), answered as 400s naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.formats import TOOLS, USER, WEATHER

from autoparser import RequestOptions
from autoparser.serve import messages_api, responses_api
from autoparser.serve.chat_completions import parse_request
from autoparser.serve.limits import InvalidRequest


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, "none"),
        ({"tools": TOOLS}, "auto"),
        ({"tools": TOOLS, "tool_choice": "required"}, "required"),
    ],
)
def test_the_tool_choice_default_is_the_readers(extra: dict[str, Any], expected: str) -> None:
    body = {"messages": USER, **extra}
    assert parse_request(body, False).options.tool_choice == expected
    assert RequestOptions.from_openai(body).tool_choice == expected


def test_the_agent_apis_leave_the_default_to_the_reader() -> None:
    """A Responses or Messages request without tools and without a tool_choice maps onto a
    chat body the reader gives OpenAI's default ("none"), as a chat request gets."""
    responses = responses_api.to_chat({"model": "m", "input": "Hi"}).chat
    messages = messages_api.to_chat(
        {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}
    ).chat
    for chat in (responses, messages):
        assert parse_request(chat, False).options.tool_choice == "none"
    with_tools = responses_api.to_chat(
        {"model": "m", "input": "Hi", "tools": [{"type": "function", **WEATHER["function"]}]}
    ).chat
    assert parse_request(with_tools, False).options.tool_choice == "auto"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [WEATHER, 3]}, "tools[1]"),
        ({"tools": "x"}, "tools"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"chat_template_kwargs": {"provenance": True}}, "chat_template_kwargs"),
        ({"reasoning_budget": "5"}, "reasoning_budget"),
        ({"reasoning_effort": 2}, "reasoning_effort"),
    ],
)
def test_the_readers_errors_are_400s_naming_the_field(extra: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_request({"messages": USER, **extra}, False)
    assert info.value.param == param
    assert info.value.status == 400
    assert str(info.value).startswith(f"{param}: ")


def test_serves_tolerances_apply_to_the_read_options() -> None:
    """Content parts joined (a template taking strings) on the options the reader read; the
    rest of them untouched."""
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    body = {"messages": [{"role": "user", "content": parts}], "tools": TOOLS, "x": 1}
    req = parse_request(body, False)
    assert req.options.messages[0]["content"] == "a\nb"
    assert req.options.tools == tuple(TOOLS)
    assert req.messages is req.options.messages
