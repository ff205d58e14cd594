"""``responses_api`` over what Codex really sends (tests/data/agent_requests, captured from
the CLI) and the shapes it is documented to send (tests/data/agent_shapes): tools
flattened, custom tools served as one string, hosted tools left out, items grouped into the
turn they belong to, and calls given back in the shape the client routes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers.paths import TESTS_DIR

from autoparser import ChatMessage, StreamDelta, ToolCall, ToolCallDelta
from autoparser.serve import responses_api
from autoparser.serve.limits import InvalidRequest
from autoparser.serve.media import placeholder_text
from autoparser.serve.openai_format import Usage

REAL = TESTS_DIR / "data" / "agent_requests"
SHAPES = TESTS_DIR / "data" / "agent_shapes"
CAPTURED = sorted(p.name for p in REAL.glob("responses_*.json"))


def captured(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REAL / name).read_text(encoding="utf-8"))["body"]
    return body


def shapes() -> dict[str, Any]:
    body: dict[str, Any] = json.loads((SHAPES / "codex_responses.json").read_text("utf-8"))
    return body


def turns(chat: dict[str, Any]) -> list[tuple[str, bool, int, bool]]:
    """(role, has content, calls, has reasoning) of each message."""
    return [
        (
            m["role"],
            bool(m.get("content")),
            len(m.get("tool_calls") or []),
            "reasoning_content" in m,
        )
        for m in chat["messages"]
    ]


@pytest.mark.parametrize("name", CAPTURED)
def test_every_captured_request_maps(name: str) -> None:
    """Developer items are system messages; a namespace's functions are tools under flat
    names; provider-run tools are left out; ``store``, ``include``, ``prompt_cache_key``,
    ``client_metadata`` and ``reasoning.summary`` change nothing."""
    body = captured(name)
    mapped = responses_api.to_chat(body)
    chat = mapped.chat
    leading = [i["role"] for i in body["input"] if i.get("type") == "message"][:4]
    assert leading == ["developer", "developer", "user", "user"]
    assert [m["role"] for m in chat["messages"][:4]] == ["system", "system", "user", "user"]
    names = [t["function"]["name"] for t in chat["tools"]]
    assert len(names) == len(set(names))
    for namespace in [t for t in body["tools"] if t["type"] == "namespace"]:
        flat = [f"{namespace['name']}__{t['name']}" for t in namespace["tools"]]
        assert set(flat) <= set(names)
        assert mapped.tools[flat[0]] == responses_api.ServedTool(
            namespace["tools"][0]["name"], namespace["name"]
        )
    served_kinds = ("function", "custom", "namespace")
    hosted = [f"tools[{i}]" for i, t in enumerate(body["tools"]) if t["type"] not in served_kinds]
    assert any(body["tools"][int(h[6:-1])]["type"] == "web_search" for h in hosted)
    # Codex's default hosted web search (and tool_search): left out, with a warning
    assert [d.detail.split(":")[0] for d in mapped.degraded if d.what == "hosted_tool"] == hosted
    assert "web_search" not in names
    ignored = ("store", "include", "prompt_cache_key", "client_metadata")
    trimmed = {k: v for k, v in body.items() if k not in ignored}
    trimmed["reasoning"] = {k: v for k, v in body["reasoning"].items() if k != "summary"}
    assert responses_api.to_chat(trimmed).chat == chat


@pytest.mark.parametrize(
    "name", ["responses_codex_function_call_output.json", "responses_codex_view_image.json"]
)
def test_reasoning_sent_back_after_its_call_joins_the_calls_turn(name: str) -> None:
    """Codex sends ``[function_call, reasoning, function_call_output]``: one assistant turn
    with the reasoning and the call, then the tool's answer; never a turn holding only
    reasoning."""
    body = captured(name)
    kinds = [item.get("type") for item in body["input"]]
    assert kinds[-3:] == ["function_call", "reasoning", "function_call_output"]
    chat = responses_api.to_chat(body).chat
    assert turns(chat)[-2:] == [("assistant", False, 1, True), ("tool", True, 0, False)]
    reasoning = body["input"][-2]["content"][0]["text"]
    assert chat["messages"][-2]["reasoning_content"] == reasoning


def test_an_image_in_a_call_output_or_a_user_turn_becomes_a_placeholder() -> None:
    mapped = responses_api.to_chat(captured("responses_codex_view_image.json"))
    assert mapped.chat["messages"][-1]["content"] == placeholder_text("image")
    assert [d.detail for d in mapped.degraded if d.what == "media"] == [
        "input[6].output[0]: image replaced by a text placeholder"
    ]
    mapped = responses_api.to_chat(captured("responses_codex_user_image.json"))
    user = mapped.chat["messages"][-1]
    assert user["role"] == "user"
    assert placeholder_text("image") in [part["text"] for part in user["content"]]
    with pytest.raises(InvalidRequest) as info:
        responses_api.to_chat(captured("responses_codex_view_image.json"), "reject")
    assert info.value.param == "input[6].output[0]"


def test_the_documented_shapes_map() -> None:
    """Custom tools (Codex's apply_patch Lark grammar, a regex), a namespace, hosted tools,
    a namespaced call and a custom call sent back, images in an output and a user turn."""
    body = shapes()
    mapped = responses_api.to_chat(body)
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in mapped.chat["tools"]}
    assert list(tools) == [
        "shell_command", "update_plan", "view_image", "apply_patch", "set_mode",
        "mcp__github__list_issues", "mcp__github__get_issue", "mcp__github__create_issue",
        "mcp__github__comment", "mcp__github__search_code",
    ]  # fmt: skip
    patch = tools["apply_patch"]["properties"]["input"]
    assert patch["type"] == "string"
    assert re.fullmatch(patch["pattern"], body["input"][10]["input"])
    assert not re.fullmatch(patch["pattern"], "*** Begin Patch\n*** End Patch\n")
    assert tools["set_mode"]["properties"] == {
        "input": {"type": "string", "pattern": "^(?:(plan|edit|review))$"}
    }
    assert [(d.what, d.detail.split(":")[0]) for d in mapped.degraded] == [
        ("hosted_tool", "tools[6]"),
        ("hosted_tool", "tools[7]"),
        ("media", "input[7].output[0]"),
        ("media", "input[12].content[1]"),
    ]
    chat = mapped.chat
    calls = [c["function"] for m in chat["messages"] for c in m.get("tool_calls") or []]
    assert [c["name"] for c in calls] == [
        "shell_command",
        "view_image",
        "mcp__github__list_issues",
        "apply_patch",
    ]
    assert json.loads(calls[3]["arguments"]) == {"input": body["input"][10]["input"]}
    tool_names = [m.get("name") for m in chat["messages"] if m["role"] == "tool"]
    assert tool_names == ["shell_command", "view_image", "mcp__github__list_issues", "apply_patch"]
    assert ("assistant", False, 0, True) not in turns(chat)


def _custom_tool(definition: str) -> dict[str, Any]:
    grammar = {"type": "grammar", "syntax": "lark", "definition": definition}
    tool = {"type": "custom", "name": "nest", "format": grammar}
    return {"model": "m", "input": "hi", "tools": [tool]}


NESTED = 'start: "(" start ")" | "x"'


def test_a_lark_grammar_a_regex_cannot_hold_leaves_the_input_free() -> None:
    """Recursion is past a regex: the input is any string, the log and metric say which
    construct; ``--strict-schemas`` makes it a 400 naming the tool's format."""
    mapped = responses_api.to_chat(_custom_tool(NESTED))
    parameters = mapped.chat["tools"][0]["function"]["parameters"]
    assert parameters["properties"] == {"input": {"type": "string"}}
    [degraded] = mapped.degraded
    assert degraded.what == "tool_grammar"
    assert degraded.detail.startswith("tools[0]: the lark grammar of nest: the recursive rule")
    assert degraded.detail.endswith("its input is left free")
    with pytest.raises(InvalidRequest) as info:
        responses_api.to_chat(_custom_tool(NESTED), strict=True)
    assert info.value.param == "tools[0].format"
    assert "nest" in str(info.value) and "recursive rule 'start'" in str(info.value)


@pytest.mark.parametrize(
    ("definition", "problem"),
    [("start: undefined_rule", "'undefined_rule' is not defined"), ("rule: x", "no 'start'")],
)
def test_an_invalid_lark_grammar_is_a_400_naming_the_problem(definition: str, problem: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        responses_api.to_chat(_custom_tool(definition))
    assert info.value.param == "tools[0].format.definition"
    assert "the lark grammar of nest is not valid" in str(info.value) and problem in str(info.value)


def test_a_grammar_of_another_syntax_leaves_the_input_free() -> None:
    body = _custom_tool("root ::= x")
    body["tools"][0]["format"]["syntax"] = "gbnf"
    [degraded] = responses_api.to_chat(body).degraded
    assert "a gbnf grammar (nest) cannot be expressed" in degraded.detail
    with pytest.raises(InvalidRequest) as info:
        responses_api.to_chat(body, strict=True)
    assert info.value.param == "tools[0].format"


def test_items_in_any_order_join_the_turn_they_belong_to() -> None:
    """Two calls answered out of order with reasoning between the answers: one turn;
    reasoning after the last answer starts the next turn, and alone at the end is left
    out."""
    call = {"type": "function_call", "name": "f", "arguments": "{}"}
    items = [
        {"role": "user", "content": "go"},
        {**call, "call_id": "a"},
        {**call, "call_id": "b"},
        {"type": "function_call_output", "call_id": "a", "output": "A"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "R1"}]},
        {"type": "function_call_output", "call_id": "b", "output": "B"},
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "R2"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
        {"role": "user", "content": "again"},
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "R3"}]},
    ]
    chat = responses_api.to_chat({"input": items}).chat
    assert turns(chat) == [
        ("user", True, 0, False),
        ("assistant", False, 2, True),
        ("tool", True, 0, False),
        ("tool", True, 0, False),
        ("assistant", True, 0, True),
        ("user", True, 0, False),
    ]
    assert chat["messages"][1]["reasoning_content"] == "R1"
    assert chat["messages"][4]["reasoning_content"] == "R2"


# ------------------------------------------------------------------------- output
def _served() -> responses_api.ResponsesRequest:
    return responses_api.to_chat(shapes())


def test_calls_come_back_in_the_shape_the_client_routes() -> None:
    """A namespaced function: its own name and ``namespace`` (codex-rs routes a call by
    both); a custom tool: a ``custom_tool_call`` whose ``input`` is the model's string."""
    tools = _served().tools
    patch = "*** Begin Patch\n*** End Patch\n"
    message = ChatMessage(
        tool_calls=(
            ToolCall("c1", "mcp__github__get_issue", '{"repo": "a/b", "number": 1}'),
            ToolCall("c2", "apply_patch", json.dumps({"input": patch})),
            ToolCall("c3", "shell_command", '{"command": "ls"}'),
        )
    )
    ident = responses_api.Identity("resp_1", 0, "m")
    output = responses_api.response(ident, {}, message, False, Usage(1, 1), tools)["output"]
    assert isinstance(output, list)
    assert [{k: v for k, v in item.items() if k != "id"} for item in output] == [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_issue",
            "namespace": "mcp__github__",
            "arguments": '{"repo": "a/b", "number": 1}',
            "status": "completed",
        },
        {
            "type": "custom_tool_call",
            "call_id": "c2",
            "name": "apply_patch",
            "input": patch,
            "status": "completed",
        },
        {
            "type": "function_call",
            "call_id": "c3",
            "name": "shell_command",
            "arguments": '{"command": "ls"}',
            "status": "completed",
        },
    ]


def test_a_streamed_custom_call_has_its_own_events() -> None:
    events = responses_api.ResponseEvents(responses_api.Identity("r", 0, "m"), {}, _served().tools)
    call = ToolCallDelta(0, '{"input": "plan"}', id="c2", name="set_mode")
    out = events.feed([StreamDelta("Switching."), StreamDelta(tool_calls=(call,))])
    kinds = [e["type"] for e in out]
    assert kinds[-4:] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ]
    assert kinds.index("response.output_text.done") < kinds.index(
        "response.custom_tool_call_input.delta"
    )
    assert out[-4]["item"]["input"] == "" and out[-2]["input"] == "plan"
    assert out[-1]["item"]["type"] == "custom_tool_call" and out[-1]["item"]["input"] == "plan"
