"""The parity conversations, a fixed clock and conventional variables
(tests/corpus/test_render_parity.py, tests/test_training.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from autoparser import ChatTemplate
from autoparser.template.conventions import conventional_values

chat_template_utils = pytest.importorskip("transformers.utils.chat_template_utils")


FIXED_NOW = dt.datetime(2025, 3, 14, 15, 9, 26)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


USER = {"role": "user", "content": "What's the weather in Paris?"}
CONVERSATIONS: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "Hello, how are you?"}]},
    "system": {
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is 2+2?"},
        ]
    },
    "tools": {"messages": [USER], "tools": [WEATHER, TIME]},
    "tool_call": {
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call("call_1", "get_weather", {"city": "Paris"})],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21}'},
        ],
        "tools": [WEATHER, TIME],
    },
    "parallel_calls": {
        "messages": [
            {"role": "user", "content": "Weather and time in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _call("call_1", "get_weather", {"city": "Paris", "unit": "celsius"}),
                    _call("call_2", "get_time", {"city": "Paris"}),
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21}'},
            {"role": "tool", "tool_call_id": "call_2", "content": '{"time": "14:05"}'},
        ],
        "tools": [WEATHER, TIME],
    },
    "reasoning": {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {
                "role": "assistant",
                "content": "The answer is 4.",
                "reasoning_content": "Two plus two makes four.",
            },
        ],
        "add_generation_prompt": False,
    },
    "multi_turn": {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
            {"role": "assistant", "content": "Why did the chicken cross the road?"},
            {"role": "user", "content": "Why?"},
        ]
    },
    "thinking_off": {
        "messages": [{"role": "user", "content": "Quick question: capital of France?"}],
        "kwargs": {"enable_thinking": False},
    },
}


class _FixedDatetime(dt.datetime):
    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _FixedDatetime:  # type: ignore[override]
        return cls.fromtimestamp(FIXED_NOW.timestamp(), tz)


def our_clock() -> dt.datetime:
    """The clock our renders are given (``ChatTemplate(clock=...)``)."""
    return FIXED_NOW


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """transformers reads ``datetime.now()`` with no way to pass a clock: patched there
    (ours is injected, ``our_clock``), so both engines see the same date."""
    monkeypatch.setattr(chat_template_utils, "datetime", _FixedDatetime)
    yield


def with_conventional_variables(template: ChatTemplate, case: dict[str, Any]) -> dict[str, Any]:
    """The case with the conventional variables our renderer supplies this template passed
    explicitly (as a caller of transformers would have to)."""
    names = template.renderer.conventional_variables
    dated = {"strftime_now": our_clock().strftime}  # the date our renders are given
    supplied = conventional_values(names, {"tools": case.get("tools"), **dated})
    return {**case, "kwargs": {**supplied, **case.get("kwargs", {})}}
