"""``messages_api.to_chat`` over what Claude Code really sends (tests/data/agent_requests,
captured from the CLI) and the shapes it is documented to send (tests/data/agent_shapes):
every field accepted or mapped, nothing refused that a text-only engine path can serve."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.paths import TESTS_DIR

from autoparser.serve import messages_api
from autoparser.serve.limits import InvalidRequest
from autoparser.serve.media import placeholder_text

REAL = TESTS_DIR / "data" / "agent_requests"
SHAPES = TESTS_DIR / "data" / "agent_shapes"
CAPTURED = sorted(p.name for p in REAL.glob("messages_*.json"))


def captured(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REAL / name).read_text(encoding="utf-8"))["body"]
    return body


def roles(chat: dict[str, Any]) -> list[str]:
    return [m["role"] for m in chat["messages"]]


@pytest.mark.parametrize("name", CAPTURED)
def test_every_captured_request_maps(name: str) -> None:
    """The system text blocks (with ``cache_control``) are one system prompt; the system
    message Claude Code puts after the user's stays a system message there; adaptive
    thinking turns the template's thinking on, ``output_config.effort`` is its effort;
    ``metadata``, ``context_management`` and the rest change nothing."""
    body = captured(name)
    mapped = messages_api.to_chat(body)
    chat = mapped.chat
    system = "\n".join(block["text"] for block in body["system"])
    assert chat["messages"][0] == {"role": "system", "content": system}
    assert roles(chat)[1:3] == ["user", "system"]
    reminder = body["messages"][1]["content"]
    if isinstance(reminder, list):  # text blocks, with cache_control
        reminder = "\n".join(block["text"] for block in reminder)
    assert chat["messages"][2]["content"] == reminder
    assert chat["chat_template_kwargs"] == {"enable_thinking": True}
    assert chat["reasoning_effort"] == body["output_config"]["effort"]
    offered = [t["name"] for t in body["tools"] if not t.get("defer_loading")]
    assert [t["function"]["name"] for t in chat["tools"]] == offered
    assert mapped.stream is True
    trimmed = {k: v for k, v in body.items() if k not in ("metadata", "context_management")}
    assert messages_api.to_chat(trimmed).chat == chat


def test_a_thinking_block_with_an_empty_signature_comes_back_as_reasoning() -> None:
    body = captured("messages_claude_code_tool_result.json")
    turn = body["messages"][2]
    thinking = next(b for b in turn["content"] if b["type"] == "thinking")
    assert thinking["signature"] == ""
    chat = messages_api.to_chat(body).chat
    assert roles(chat)[3:] == ["assistant", "tool"]
    assistant = chat["messages"][3]
    assert assistant["reasoning_content"] == thinking["thinking"]
    use = next(b for b in turn["content"] if b["type"] == "tool_use")
    assert assistant["tool_calls"][0]["id"] == use["id"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == use["input"]


def test_an_image_in_a_tool_result_becomes_a_placeholder() -> None:
    body = captured("messages_claude_code_tool_result_image.json")
    mapped = messages_api.to_chat(body)
    tool = mapped.chat["messages"][-1]
    assert tool["role"] == "tool"
    assert tool["content"] == placeholder_text("image (image/png)")
    assert [(d.what, d.detail) for d in mapped.degraded] == [
        (
            "media",
            "messages[3].content[0].content[0]: image (image/png) replaced by a text placeholder",
        )
    ]
    with pytest.raises(InvalidRequest) as info:
        messages_api.to_chat(body, "reject")
    assert info.value.param == "messages[3].content[0].content[0]"


def test_the_documented_shapes_map() -> None:
    """A mid-conversation system reminder, a user image, an image in a tool result, a
    thinking block with an empty signature (tests/data/agent_shapes)."""
    body = json.loads((SHAPES / "claude_code_messages.json").read_text(encoding="utf-8"))
    mapped = messages_api.to_chat(body)
    chat = mapped.chat
    assert roles(chat) == [
        "system",
        "user",
        "system",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
    ]
    assert chat["messages"][6]["content"] == placeholder_text("image (image/png)")
    assert chat["messages"][7]["content"] == body["messages"][5]["content"][1]["text"]
    assert [d.what for d in mapped.degraded] == ["media"]


def test_leading_system_messages_join_the_system_prompt() -> None:
    body = {
        "max_tokens": 5,
        "system": [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "B"}]},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "C"},
        ],
    }
    chat = messages_api.to_chat(body).chat
    assert chat["messages"] == [
        {"role": "system", "content": "A\n\nB"},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "C"},
    ]
    del body["system"]
    assert messages_api.to_chat(body).chat["messages"][0] == {"role": "system", "content": "B"}


def test_anthropic_run_tools_are_left_out_with_a_warning() -> None:
    body = {
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
            {"name": "f", "input_schema": {"type": "object"}},
            {"type": "code_execution_20250825", "name": "code_execution"},
        ],
    }
    mapped = messages_api.to_chat(body)
    assert [t["function"]["name"] for t in mapped.chat["tools"]] == ["f"]
    assert [(d.what, d.detail.split(":")[0]) for d in mapped.degraded] == [
        ("hosted_tool", "tools[0]"),
        ("hosted_tool", "tools[2]"),
    ]


@pytest.mark.parametrize(
    ("thinking", "effort", "enabled", "reasoning_effort"),
    [
        ({"type": "adaptive"}, "high", True, "high"),
        ({"type": "enabled", "budget_tokens": 2048}, None, True, None),
        ({"type": "disabled"}, "high", False, None),
    ],
)
def test_thinking_maps_onto_the_templates_switch(
    thinking: dict[str, Any], effort: str | None, enabled: bool, reasoning_effort: str | None
) -> None:
    body: dict[str, Any] = {
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": thinking,
    }
    if effort:
        body["output_config"] = {"effort": effort}
    chat = messages_api.to_chat(body).chat
    assert chat["chat_template_kwargs"] == {"enable_thinking": enabled}
    assert chat.get("reasoning_effort") == reasoning_effort


def test_an_unknown_role_is_worded_as_anthropic_words_it() -> None:
    body = {"max_tokens": 5, "messages": [{"role": "robot", "content": "hi"}]}
    with pytest.raises(InvalidRequest) as info:
        messages_api.to_chat(body)
    assert info.value.param == "messages[0].role"
    assert str(info.value).startswith("messages[0].role: unexpected role 'robot'")


def test_deferred_tools_join_once_a_tool_reference_loaded_them() -> None:
    """Claude Code's first request has a ``defer_loading`` placeholder tool: not offered.
    A ``tool_reference`` in a ToolSearch result loads its tool, as Anthropic's search does."""
    body = captured("messages_claude_code_first.json")
    deferred = [t["name"] for t in body["tools"] if t.get("defer_loading")]
    assert deferred == ["DeferredToolPlaceholder"]
    names = [t["function"]["name"] for t in messages_api.to_chat(body).chat["tools"]]
    assert "DeferredToolPlaceholder" not in names and "ToolSearch" in names
    later = {
        "max_tokens": 5,
        "tools": [
            {"name": "ToolSearch", "input_schema": {"type": "object"}},
            {"name": "WebFetch", "input_schema": {"type": "object"}, "defer_loading": True},
            {"name": "Cron", "input_schema": {"type": "object"}, "defer_loading": True},
        ],
        "messages": [
            {"role": "user", "content": "fetch it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "tool_reference", "tool_name": "WebFetch"}],
                    }
                ],
            },
        ],
    }
    chat = messages_api.to_chat(later).chat
    assert [t["function"]["name"] for t in chat["tools"]] == ["ToolSearch", "WebFetch"]
    assert chat["messages"][-1]["content"] == "Tool WebFetch loaded."


def test_a_user_image_becomes_a_placeholder() -> None:
    body = captured("messages_claude_code_user_image.json")
    mapped = messages_api.to_chat(body)
    user = next(m for m in mapped.chat["messages"] if m["role"] == "user")
    texts = user["content"] if isinstance(user["content"], list) else [user["content"]]
    texts = [t["text"] if isinstance(t, dict) else t for t in texts]
    assert any(placeholder_text("image (image/png)") in t for t in texts)
    assert [d.what for d in mapped.degraded] == ["media"]
