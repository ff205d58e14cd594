"""What real agent CLIs send, replayed to serve: every body of tests/data/agent_requests/
(captured from Claude Code and Codex CLI, see its README) posted as is, in process, to serve
in front of the scripted Qwen3 engine the capture ran against.

Each body must be accepted and its stream run to its end with the answer the script gives at
that step: the first request's tool call, a follow-up's final text. Issue 31: serve answered
every one of them 400 before (a tool schema bound past its limit, a ``system`` message inside
``messages``, an image in a tool result or user turn, a ``namespace`` tool, Codex's items
out of order); each is now read or degraded, never refused. The captures are also
checked to hold every row of the issue's table that these CLI versions send (Claude Code
2.1.332 sends no ``propertyNames``), and to name nothing of the machine they were taken on."""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.agent_clis import (
    FIXTURES,
    ScriptedEngine,
    load_fixture,
    qwen3_answer,
    qwen3_call,
    qwen3_template,
)
from helpers.serve_standin import LoopThread, as_text

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig

WROTE = "Created hello.txt."
SAW = "The image is one flat colour."
DESCRIBED = "A flat-coloured square."
PATCHED = "Added patched.txt."
PATCH = "*** Begin Patch\n*** Add File: patched.txt\n+hi\n*** End Patch\n"

# What each body's answer holds: ("call", tool name) or ("text", the final answer).
EXPECTED = {
    "messages_claude_code_first": ("call", "Write"),
    "messages_claude_code_first_all_tools": ("call", "Write"),
    "messages_claude_code_tool_result": ("text", WROTE),
    "messages_claude_code_tool_result_image": ("text", SAW),
    "messages_claude_code_user_image": ("text", DESCRIBED),
    "responses_codex_first": ("call", "exec_command"),
    "responses_codex_function_call_output": ("text", WROTE),
    "responses_codex_view_image": ("text", SAW),
    "responses_codex_user_image": ("text", DESCRIBED),
    "responses_codex_apply_patch": ("call", "apply_patch"),
    "responses_codex_custom_output": ("text", PATCHED),
}
FILES = sorted(FIXTURES.glob("*.json"))


def test_every_captured_body_has_an_expectation() -> None:
    assert FILES, f"no captured bodies in {FIXTURES}"
    assert {p.stem for p in FILES} == set(EXPECTED)


# What a capture must not keep: the machine's temporary dirs (the run's own home and working
# directory are replaced by /home/user...) and its kernel release.
MACHINE = re.compile(r"(?<!/home/user)/tmp/|pytest-of-|\b\d+\.\d+\.\d+-\w+-v\d+\b")


def _schemas(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object nested in ``value``."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _schemas(item)
    elif isinstance(value, list):
        for item in value:
            yield from _schemas(item)


def _body(name: str) -> dict[str, Any]:
    body: dict[str, Any] = load_fixture(FIXTURES / f"{name}.json")["body"]
    return body


def _blocks(body: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if message["role"] == role and isinstance(message["content"], list)
        for block in message["content"]
    ]


# Issue 31's table, row by row: what each capture must hold for the replay tests to cover
# it (a re-capture by newer CLIs that lost one would leave a row untested).
ROWS: dict[str, Callable[[], bool]] = {
    "claude: a tool bound past the limit (maxLength 524288)": lambda: any(
        s.get("maxLength") == 524288 for s in _schemas(_body("messages_claude_code_first")["tools"])
    ),
    "claude: a system message inside messages": lambda: any(
        m["role"] == "system" for m in _body("messages_claude_code_first")["messages"]
    ),
    "claude: system text blocks with cache_control": lambda: any(
        "cache_control" in block for block in _body("messages_claude_code_first")["system"]
    ),
    "claude: adaptive thinking, context_management, output_config.effort, metadata": lambda: (
        _body("messages_claude_code_first")["thinking"]["type"] == "adaptive"
        and {"context_management", "output_config", "metadata"}
        <= set(_body("messages_claude_code_first"))
    ),
    "claude: its thinking block sent back with an empty signature": lambda: any(
        block["type"] == "thinking" and block["signature"] == ""
        for block in _blocks(_body("messages_claude_code_tool_result"), "assistant")
    ),
    "claude: an image in a tool result": lambda: any(
        block["type"] == "tool_result"
        and any(part.get("type") == "image" for part in block["content"])
        for block in _blocks(_body("messages_claude_code_tool_result_image"), "user")
    ),
    "claude: an image in the user's message": lambda: any(
        block["type"] == "image"
        for block in _blocks(_body("messages_claude_code_user_image"), "user")
    ),
    "codex: a namespace tool and hosted web_search": lambda: (
        {"namespace", "web_search"}
        <= {tool["type"] for tool in _body("responses_codex_first")["tools"]}
    ),
    "codex: developer items, reasoning.summary, store false, include, cache key, metadata": (
        lambda: (
            any(i.get("role") == "developer" for i in _body("responses_codex_first")["input"])
            and _body("responses_codex_first")["reasoning"].get("summary") is not None
            and _body("responses_codex_first")["store"] is False
            and "reasoning.encrypted_content" in _body("responses_codex_first")["include"]
            and {"prompt_cache_key", "client_metadata"} <= set(_body("responses_codex_first"))
        )
    ),
    "codex: an image in a function_call_output (view_image)": lambda: any(
        item["type"] == "function_call_output"
        and isinstance(item["output"], list)
        and any(part.get("type") == "input_image" for part in item["output"])
        for item in _body("responses_codex_view_image")["input"]
    ),
    "codex: an image in the user's message": lambda: any(
        part.get("type") == "input_image"
        for item in _body("responses_codex_user_image")["input"]
        if item.get("role") == "user"
        for part in item["content"]
    ),
    "codex: apply_patch as a custom tool with a Lark grammar": lambda: any(
        tool["type"] == "custom" and tool["format"]["syntax"] == "lark"
        for tool in _body("responses_codex_apply_patch")["tools"]
    ),
    "codex: a custom_tool_call and its output sent back": lambda: (
        {"custom_tool_call", "custom_tool_call_output"}
        <= {item["type"] for item in _body("responses_codex_custom_output")["input"]}
    ),
    "codex: items sent back as [function_call, reasoning, function_call_output]": lambda: (
        [item["type"] for item in _body("responses_codex_function_call_output")["input"][-3:]]
        == ["function_call", "reasoning", "function_call_output"]
    ),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_captures_hold_the_row(row: str) -> None:
    assert ROWS[row]()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_captured_body_names_nothing_of_the_machine(path: Path) -> None:
    text = path.read_text()
    assert MACHINE.findall(text) == []
    assert os.uname().release not in text
    assert "/home/user/project" in text


def engine(first_call: str) -> ScriptedEngine:
    """The scripts the capture ran (tests/serve/test_app_agent_clis.py), by their keys; the
    write script starts with the client's own tool (``Write`` or ``exec_command``)."""
    standin = ScriptedEngine()
    project = "/home/user/project"
    write = {"Write": {"file_path": f"{project}/hello.txt", "content": "hi\n"}}
    write["exec_command"] = {"cmd": "printf hi > hello.txt"}
    look = {"Read": {"file_path": f"{project}/pixel.png"}}
    look["view_image"] = {"path": f"{project}/pixel.png"}
    image_call = "Read" if first_call == "Write" else "view_image"
    standin.script(
        "write",
        [
            qwen3_call(first_call, write[first_call], "Write the file."),
            qwen3_answer(WROTE, "The file is written."),
        ],
    )
    standin.script(
        "image",
        [
            qwen3_call(image_call, look[image_call], "Look at it."),
            qwen3_answer(SAW, "I saw the image."),
        ],
    )
    standin.script("uimg", [qwen3_answer(DESCRIBED, "The user attached an image.")])
    standin.script(
        "patch",
        [
            qwen3_call("apply_patch", {"input": PATCH}, "Patch it."),
            qwen3_answer(PATCHED, "The patch is applied."),
        ],
    )
    return standin


@pytest.fixture(scope="module")
def served(loop: LoopThread) -> dict[str, tuple[str, ScriptedEngine]]:
    """Serve in front of the scripted engine, one per API (each client's own tools): the
    URL and the engine, by API path."""
    template = qwen3_template()
    out = {}
    for path, first_call in (("/v1/messages", "Write"), ("/v1/responses", "exec_command")):
        standin = engine(first_call)
        config = ServeConfig(loop.serve(standin.app()), template=template, model="qwen3")
        out[path] = (loop.serve(create_app(config)), standin)
    return out


def post(url: str, record: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        url + record["path"],
        data=json.dumps(record["body"]).encode(),
        headers={**record["headers"], "Content-Type": "application/json"},
        method=record["method"],
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def events(stream: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE stream, in order."""
    return [
        json.loads(line[5:])
        for line in stream.splitlines()
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
    ]


def answer(path: str, payloads: list[dict[str, Any]]) -> tuple[list[str], str, bool]:
    """Tool names called, text answered, and whether the stream ended as its API ends one."""
    names, text = [], []
    if path == "/v1/messages":
        for e in payloads:
            block = e.get("content_block") or {}
            if e.get("type") == "content_block_start" and block.get("type") == "tool_use":
                names.append(block["name"])
            delta = e.get("delta") or {}
            if e.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                text.append(delta["text"])
        return names, "".join(text), any(e.get("type") == "message_stop" for e in payloads)
    for e in payloads:
        item = e.get("item") or {}
        done = e.get("type") == "response.output_item.done"
        if done and item.get("type") in ("function_call", "custom_tool_call"):
            names.append(item["name"])
        if e.get("type") == "response.output_text.delta":
            text.append(e["delta"])
    return names, "".join(text), any(e.get("type") == "response.completed" for e in payloads)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_captured_body_is_served(served: dict[str, tuple[str, ScriptedEngine]], path: Path) -> None:
    record = load_fixture(path)
    assert record["body"].get("stream") is True, "the CLIs stream by default"
    status, stream = post(served[record["path"]][0], record)
    assert status == 200, stream[:500]
    names, text, ended = answer(record["path"], events(stream))
    kind, want = EXPECTED[path.stem]
    assert ended, stream[-500:]
    if kind == "call":
        assert names == [want]
    else:
        assert (names, text.strip()) == ([], want)


def test_codex_item_order_makes_one_assistant_turn(
    served: dict[str, tuple[str, ScriptedEngine]],
) -> None:
    """Codex's follow-up sends ``[function_call, reasoning, function_call_output]``: the
    reasoning belongs to the call's turn, so the model sees one assistant turn (its thinking,
    then its call) before the tool's response, not a second turn holding only ``<think>``."""
    record = load_fixture(FIXTURES / "responses_codex_function_call_output.json")
    kinds = [item["type"] for item in record["body"]["input"][-3:]]
    assert kinds == ["function_call", "reasoning", "function_call_output"]
    url, standin = served["/v1/responses"]
    status, stream = post(url, record)
    assert status == 200, stream[:500]
    completions = [body for where, body in standin.received if where == "/completion"]
    prompt = as_text(completions[-1]["prompt"])
    turn = prompt[prompt.rindex("[[write]]") :]
    assistant = re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", turn, re.S)
    assert len(assistant) == 1, turn
    assert assistant[0].index("<think>") < assistant[0].index("<tool_call>")
    assert turn.index("</tool_call>") < turn.index("<tool_response>")
