"""``/v1/responses`` and ``/v1/messages`` with the official ``openai`` and ``anthropic``
clients, against ``autoparser serve`` in front of the stand-in engine. The reference for
every answer is the library itself on the same request and output."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("openai")
pytest.importorskip("anthropic")

import anthropic
import openai
from helpers.gbnf_oracle import accepts
from helpers.generate_cases import CASE_BY_NAME, TOOLS, scenarios
from helpers.paths import TESTS_DIR
from helpers.serve_standin import LoopThread, StandIn, as_text, standin_tokens

from autoparser import ChatMessage, ChatTemplate, StreamDelta, ToolCallDelta
from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig

# JSON in tags (Hermes), tagged arguments + <think> reasoning (GLM-like), reasoning only.
FAMILIES = ["hermes", "glm", "think_tag"]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        **({"description": t["function"]["description"]} if "description" in t["function"] else {}),
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]


class Served:
    """A stand-in engine and an autoparser server in front of it, with both clients."""

    def __init__(self, loop: LoopThread, template: ChatTemplate, kind: str = "llama.cpp"):
        self.standin = StandIn(kind)
        self.template = template
        config = ServeConfig(loop.serve(self.standin.app()), template=template)
        self.url = loop.serve(create_app(config))
        self.openai = openai.OpenAI(base_url=self.url + "/v1", api_key="k", max_retries=0)
        self.anthropic = anthropic.Anthropic(base_url=self.url, api_key="k", max_retries=0)

    def sent(self) -> dict[str, Any]:
        return self.standin.received[-1][1]

    def prompt(self) -> str:
        """The last prompt sent, as text (user spans go as token ids)."""
        return as_text(self.sent()["prompt"])

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + path,
            data=body if isinstance(body, bytes) else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as f:
                return f.status, json.loads(f.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def servers(loop: LoopThread) -> dict[str, Served]:
    return {name: Served(loop, CASE_BY_NAME[name].load()) for name in FAMILIES}


def canonical(message: ChatMessage) -> dict[str, Any]:
    return {
        "reasoning": message.reasoning_content or None,
        "content": message.content or None,
        "calls": [(c.name, json.loads(c.arguments)) for c in message.tool_calls],
    }


def from_response(response: Any) -> dict[str, Any]:
    """A Responses answer (the client's object) as reasoning / text / calls."""
    reasoning, text, calls = [], [], []
    for item in response.output:
        if item.type == "reasoning":
            reasoning += [c.text for c in item.content]
        elif item.type == "message":
            text += [c.text for c in item.content]
        elif item.type == "function_call":
            assert item.call_id and item.id
            calls.append((item.name, json.loads(item.arguments)))
    return {
        "reasoning": "".join(reasoning) or None,
        "content": "".join(text) or None,
        "calls": calls,
    }


def from_message(message: Any) -> dict[str, Any]:
    """An Anthropic answer (the client's object) as reasoning / text / calls."""
    reasoning, text, calls = [], [], []
    for block in message.content:
        if block.type == "thinking":
            reasoning.append(block.thinking)
        elif block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            assert block.id
            calls.append((block.name, block.input))
    return {
        "reasoning": "".join(reasoning) or None,
        "content": "".join(text) or None,
        "calls": calls,
    }


CASES = [
    pytest.param(name, scenario, id=f"{name}-{scenario}")
    for name in FAMILIES
    for scenario in scenarios(CASE_BY_NAME[name])
    if scenario not in ("complex_args",)
]


# --------------------------------------------------------------------------- Responses
@pytest.mark.parametrize(("family", "scenario"), CASES)
def test_responses_whole_and_stream_equal_the_library(
    servers: dict[str, Served], family: str, scenario: str
) -> None:
    case = CASE_BY_NAME[family]
    served = servers[family]
    message = scenarios(case)[scenario]
    text = case.output(message, case.request_tools)
    key = served.standin.add(f"r_{family}_{scenario}", text)
    tools = RESPONSES_TOOLS if case.calls else None
    kw: dict[str, Any] = {"model": "m", "input": f"Hi {key}"}
    if tools:
        kw["tools"] = tools
    whole = served.openai.responses.create(**kw)
    chat = [{"role": "user", "content": f"Hi {key}"}]
    params = served.template.apply(chat, tools=case.request_tools)
    assert served.prompt() == params.prompt  # the same request path
    expected = canonical(params.parse(text))
    assert from_response(whole) == expected
    assert whole.status == "completed" and whole.incomplete_details is None
    assert whole.object == "response" and whole.id.startswith("resp_")
    assert whole.usage is not None and whole.usage.output_tokens > 0
    assert whole.output_text == (expected["content"] or "")

    kinds = []
    with served.openai.responses.stream(**kw) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_response()
    assert from_response(final) == expected
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == len(final.output)
    assert kinds.count("response.output_item.done") == len(final.output)
    if expected["reasoning"]:
        assert "response.reasoning_text.delta" in kinds
    if expected["content"]:
        assert "response.output_text.delta" in kinds and "response.output_text.done" in kinds
    calls = len(expected["calls"])
    assert kinds.count("response.function_call_arguments.done") == calls


def test_responses_stream_accumulates_to_the_final_response(servers: dict[str, Served]) -> None:
    """Raw events: each text delta adds to its item; the added/done items and the final
    output agree; nothing is announced that the final response lacks."""
    case = CASE_BY_NAME["glm"]
    served = servers["glm"]
    text = case.output(scenarios(case)["reasoning_call"], TOOLS)
    key = served.standin.add("r_raw", text)
    events = list(
        served.openai.responses.create(
            model="m",
            input=key,
            tools=RESPONSES_TOOLS,
            stream=True,  # type: ignore[arg-type]
        )
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    texts: dict[int, str] = {}
    for event in events:
        if event.type in ("response.reasoning_text.delta", "response.output_text.delta"):
            texts[event.output_index] = texts.get(event.output_index, "") + event.delta
        if event.type == "response.function_call_arguments.delta":
            texts[event.output_index] = texts.get(event.output_index, "") + event.delta
    for index, item in enumerate(final.output):
        if item.type == "function_call":
            assert texts[index] == item.arguments
        else:
            assert texts[index] == item.content[0].text
    done = {e.output_index: e.item for e in events if e.type == "response.output_item.done"}
    assert [done[i].id for i in sorted(done)] == [item.id for item in final.output]


def test_responses_tool_loop_over_turns(servers: dict[str, Served]) -> None:
    """call -> output -> answer, then a second question: every turn's input renders as the
    equivalent chat conversation (reasoning items back as the assistant's reasoning)."""
    case = CASE_BY_NAME["glm"]
    served = servers["glm"]
    text = case.output(scenarios(case)["reasoning_call"], TOOLS)
    k1 = served.standin.add("loop1", text)
    first = served.openai.responses.create(model="m", input=f"Weather? {k1}", tools=RESPONSES_TOOLS)
    call = next(item for item in first.output if item.type == "function_call")
    assert (call.name, json.loads(call.arguments)) == (
        "get_weather",
        {"city": "Paris", "unit": "celsius"},
    )
    k2 = served.standin.add("loop2", case.output({"role": "assistant", "content": "Sunny."}))
    history: list[Any] = [{"role": "user", "content": f"Weather? {k1}"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "sunny"})
    history.append({"role": "system", "content": f"continue {k2}"})
    second = served.openai.responses.create(model="m", input=history, tools=RESPONSES_TOOLS)
    assert second.output_text == "Sunny."
    chat = [
        {"role": "user", "content": f"Weather? {k1}"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I need the weather.",
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": "sunny"},
        {"role": "system", "content": f"continue {k2}"},
    ]
    assert served.prompt() == served.template.apply(chat, tools=TOOLS).prompt


def test_responses_instructions_reasoning_and_format_reach_the_template(
    servers: dict[str, Served],
) -> None:
    served = servers["glm"]
    key = served.standin.add("r_opts", '{"a": 1}')
    user = [{"role": "user", "content": key}]
    for effort, thinking in (("none", False), ("high", True)):
        served.openai.responses.create(
            model="m", input=key, instructions="Be brief.", reasoning={"effort": effort}
        )
        chat = [{"role": "system", "content": "Be brief."}, *user]
        expected = served.template.apply(chat, enable_thinking=thinking, reasoning_effort=effort)
        assert served.prompt() == expected.prompt
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    answer = served.openai.responses.create(
        model="m",
        input=key,
        text={"format": {"type": "json_schema", "name": "a", "schema": schema}},
        max_output_tokens=17,
        temperature=0.25,
    )
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    sent = served.sent()
    assert sent["grammar"] == served.template.apply(user, response_format=fmt).grammar
    assert (sent["n_predict"], sent["temperature"]) == (17, 0.25)
    assert json.loads(answer.output_text) == {"a": 1}
    assert answer.max_output_tokens == 17 and answer.text.format.type == "json_schema"
    served.openai.responses.create(
        model="m",
        input=key,
        tools=RESPONSES_TOOLS,
        tool_choice={"type": "function", "name": "ping"},
        parallel_tool_calls=False,
    )
    named = {"type": "function", "function": {"name": "ping"}}
    expected = served.template.apply(
        user, tools=TOOLS, tool_choice=named, parallel_tool_calls=False
    )
    assert served.sent()["grammar"] == expected.grammar


def test_responses_truncation_is_incomplete(servers: dict[str, Served]) -> None:
    served = servers["hermes"]
    case = CASE_BY_NAME["hermes"]
    text = case.output(scenarios(case)["content_call"], TOOLS)
    key = served.standin.add("r_cut", text[: len(text) - 8], hit_limit=True)
    whole = served.openai.responses.create(
        model="m", input=key, tools=RESPONSES_TOOLS, max_output_tokens=5
    )
    assert whole.status == "incomplete"
    assert whole.incomplete_details is not None
    assert whole.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in whole.output] == ["message"]  # the cut call is no call
    events = list(
        served.openai.responses.create(
            model="m",
            input=key,
            tools=RESPONSES_TOOLS,
            stream=True,  # type: ignore[arg-type]
        )
    )
    assert events[-1].type == "response.incomplete"
    assert from_response(events[-1].response) == from_response(whole)
    assert not any(e.type == "response.function_call_arguments.done" for e in events)


RESPONSES_ERRORS = [
    pytest.param({"previous_response_id": "resp_1"}, "previous_response_id", id="previous"),
    pytest.param({"conversation": "c"}, "conversation", id="conversation"),
    pytest.param({"input": []}, "input", id="empty-input"),
    pytest.param({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type", id="ref"),
    pytest.param(
        {"input": [{"role": "user", "content": [{"type": "input_hologram"}]}]},
        "input[0].content[0]",
        id="unknown-part",
    ),
    pytest.param({"tools": [{"type": 5}]}, "tools[0].type", id="tool-type"),
    pytest.param(
        {"tools": RESPONSES_TOOLS, "tool_choice": {"type": "function", "name": "nope"}},
        "tool_choice.name",
        id="unknown-tool",
    ),
    pytest.param(
        {"tools": [{"type": "function", "name": "f", "parameters": {"type": 5}}]},
        "tools[0].parameters",
        id="bad-schema",
    ),
    pytest.param({"max_output_tokens": 0}, "max_output_tokens", id="max-output-0"),
    pytest.param({"reasoning": {"effort": "huge"}}, "reasoning.effort", id="effort"),
    pytest.param({"temperature": "hot"}, "temperature", id="temperature"),
    pytest.param({"text": {"format": {"type": "xml"}}}, "text.format.type", id="format"),
]


@pytest.mark.parametrize(("extra", "param"), RESPONSES_ERRORS)
def test_responses_client_mistakes_are_400_naming_the_field(
    servers: dict[str, Served], extra: dict[str, Any], param: str
) -> None:
    served = servers["hermes"]
    before = len(served.standin.received)
    with pytest.raises(openai.BadRequestError) as info:
        served.openai.responses.create(**{"model": "m", "input": "hi", **extra})
    error = info.value.body
    assert isinstance(error, dict) and error["param"] == param, error
    assert error["message"].startswith(param) or param in error["message"]
    assert len(served.standin.received) == before


def test_responses_engine_failures(loop: LoopThread) -> None:
    served = Served(loop, CASE_BY_NAME["hermes"].load())
    served.standin.add("k", "fine")
    served.standin.mode = "http500"
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as info:
            served.openai.responses.create(model="m", input="[[k]]", stream=stream)
        assert info.value.status_code == 502
        assert "http://" not in str(info.value.body)  # no engine URL in the answer
    served.standin.mode = "broken_stream"
    events = list(served.openai.responses.create(model="m", input="[[k]]", stream=True))
    assert events[-1].type == "response.failed"
    assert "http://" not in json.dumps(events[-1].response.model_dump())
    served.standin.mode = "ok"
    assert served.openai.responses.create(model="m", input="[[k]]").output_text == "fine"


# --------------------------------------------------------------------------- Messages
@pytest.mark.parametrize(("family", "scenario"), CASES)
def test_messages_whole_and_stream_equal_the_library(
    servers: dict[str, Served], family: str, scenario: str
) -> None:
    case = CASE_BY_NAME[family]
    served = servers[family]
    message = scenarios(case)[scenario]
    text = case.output(message, case.request_tools)
    key = served.standin.add(f"m_{family}_{scenario}", text)
    kw: dict[str, Any] = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": f"Hi {key}"}],
    }
    if case.calls:
        kw["tools"] = ANTHROPIC_TOOLS
    whole = served.anthropic.messages.create(**kw)
    chat = [{"role": "user", "content": f"Hi {key}"}]
    params = served.template.apply(chat, tools=case.request_tools)
    assert served.prompt() == params.prompt
    expected = canonical(params.parse(text))
    assert from_message(whole) == expected
    assert whole.stop_reason == ("tool_use" if expected["calls"] else "end_turn")
    assert whole.type == "message" and whole.role == "assistant"
    assert whole.usage.output_tokens > 0 and whole.usage.input_tokens > 0

    names = []
    with served.anthropic.messages.stream(**kw) as stream:
        for event in stream:
            names.append(event.type)
        final = stream.get_final_message()
    assert from_message(final) == expected
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert names.count("content_block_start") == names.count("content_block_stop")
    assert names.count("content_block_start") == len(final.content)


def test_messages_tool_loop_over_turns(servers: dict[str, Served]) -> None:
    """tool_use -> tool_result (one an error) -> answer; the history renders as the
    equivalent chat conversation (thinking blocks as the assistant's reasoning)."""
    case = CASE_BY_NAME["glm"]
    served = servers["glm"]
    text = case.output(scenarios(case)["reasoning_call"], TOOLS)
    k1 = served.standin.add("mloop1", text)
    messages: list[Any] = [{"role": "user", "content": f"Weather? {k1}"}]
    first = served.anthropic.messages.create(
        model="m", max_tokens=200, messages=messages, tools=ANTHROPIC_TOOLS
    )
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert (use.name, use.input) == ("get_weather", {"city": "Paris", "unit": "celsius"})
    k2 = served.standin.add("mloop2", case.output({"role": "assistant", "content": "Sunny."}))
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"},
                {"type": "text", "text": f"and? {k2}"},
            ],
        }
    )
    second = served.anthropic.messages.create(
        model="m", max_tokens=200, messages=messages, tools=ANTHROPIC_TOOLS, system="Be kind."
    )
    assert second.stop_reason == "end_turn" and from_message(second)["content"] == "Sunny."
    chat = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": f"Weather? {k1}"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I need the weather.",
            "tool_calls": [
                {
                    "id": use.id,
                    "type": "function",
                    "function": {"name": use.name, "arguments": json.dumps(use.input)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": use.id, "name": use.name, "content": "sunny"},
        {"role": "user", "content": f"and? {k2}"},
    ]
    assert served.prompt() == served.template.apply(chat, tools=TOOLS).prompt
    # An error result is marked in the tool message the template renders.
    messages[-1]["content"][0]["is_error"] = True
    served.anthropic.messages.create(model="m", max_tokens=9, messages=messages)
    assert "Error: sunny" in served.prompt()


def test_messages_options_reach_the_template_and_engine(servers: dict[str, Served]) -> None:
    served = servers["glm"]
    key = served.standin.add("m_opts", "ok")
    user = [{"role": "user", "content": key}]
    base: dict[str, Any] = {"model": "m", "max_tokens": 33, "messages": user}
    for thinking, on in (
        ({"type": "enabled", "budget_tokens": 1024}, True),
        ({"type": "disabled"}, False),
    ):
        served.anthropic.messages.create(**base, thinking=thinking)  # type: ignore[arg-type]
        assert served.prompt() == served.template.apply(user, enable_thinking=on).prompt
    served.anthropic.messages.create(
        **base,
        tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        stop_sequences=["END"],
        # this client version has no sampling arguments; the API still takes them
        extra_body={"temperature": 0.5, "top_p": 0.9, "top_k": 7},
    )
    sent = served.sent()
    required = served.template.apply(
        user, tools=TOOLS, tool_choice="required", parallel_tool_calls=False
    )
    assert sent["grammar"] == required.grammar and sent["grammar_lazy"] is False
    assert (sent["n_predict"], sent["temperature"], sent["top_p"], sent["top_k"]) == (
        33,
        0.5,
        0.9,
        7,
    )
    assert "END" in sent["stop"]
    served.anthropic.messages.create(
        **base,
        tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
        tool_choice={"type": "tool", "name": "ping"},
    )
    named = {"type": "function", "function": {"name": "ping"}}
    assert (
        served.sent()["grammar"]
        == served.template.apply(user, tools=TOOLS, tool_choice=named).grammar
    )
    served.anthropic.messages.create(
        **base,
        tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
        tool_choice={"type": "none"},
    )
    assert "grammar" not in served.sent()


@pytest.mark.parametrize("kind", ["llama.cpp", "openai"])
def test_messages_stop_reasons(loop: LoopThread, kind: str) -> None:
    case = CASE_BY_NAME["hermes"]
    served = Served(loop, case.load(), kind)
    text = case.output(scenarios(case)["one_call"], TOOLS)
    served.standin.add("limit", "A long answer", hit_limit=True)
    served.standin.add("cut", text[: len(text) // 2], hit_limit=True)
    served.standin.add("stopped", "Up to here", stop_word="END")
    served.standin.add("call", text)
    served.standin.add("plain", "Done.")
    for key, reason, sequence in (
        ("limit", "max_tokens", None),
        ("cut", "max_tokens", None),
        ("stopped", "stop_sequence", "END"),
        ("call", "tool_use", None),
        ("plain", "end_turn", None),
    ):
        kw: dict[str, Any] = {
            "model": "m",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": f"[[{key}]]"}],
            "tools": ANTHROPIC_TOOLS,
            "stop_sequences": ["END"],
        }
        whole = served.anthropic.messages.create(**kw)
        assert (whole.stop_reason, whole.stop_sequence) == (reason, sequence), key
        with served.anthropic.messages.stream(**kw) as stream:
            final = stream.get_final_message()
        assert (final.stop_reason, final.stop_sequence) == (reason, sequence), key
        assert from_message(final) == from_message(whole)


def test_count_tokens(loop: LoopThread) -> None:
    for kind in ("llama.cpp", "openai"):
        served = Served(loop, CASE_BY_NAME["hermes"].load(), kind)
        messages = [{"role": "user", "content": "How many tokens are these?"}]
        counted = served.anthropic.messages.count_tokens(
            model="m",
            messages=messages,
            tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
        )
        prompt = served.template.apply(messages, tools=TOOLS).prompt
        assert counted.input_tokens == len(standin_tokens(prompt, True))  # as it tokenizes
        assert served.standin.received[-1][0] == "/tokenize"


MESSAGES_ERRORS = [
    pytest.param({"max_tokens": None}, "max_tokens", id="max-tokens-missing"),
    pytest.param({"messages": []}, "messages", id="no-messages"),
    pytest.param({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", id="role"),
    pytest.param(
        {"messages": [{"role": "user", "content": [{"type": "hologram", "source": {}}]}]},
        "messages[0].content[0].type",
        id="unknown-block",
    ),
    pytest.param(
        {"tools": [{"name": "f", "input_schema": {"type": 5}}]},
        "tools[0].input_schema",
        id="bad-schema",
    ),
    pytest.param(
        {"tools": ANTHROPIC_TOOLS, "tool_choice": {"type": "tool", "name": "nope"}},
        "tool_choice.name",
        id="unknown-tool",
    ),
    pytest.param({"thinking": {"type": "enabled"}}, "thinking.budget_tokens", id="budget"),
    pytest.param({"stop_sequences": "END"}, "stop_sequences", id="stops"),
    pytest.param({"temperature": "hot"}, "temperature", id="temperature"),
]


@pytest.mark.parametrize(("extra", "field"), MESSAGES_ERRORS)
def test_messages_client_mistakes_are_anthropic_400s(
    servers: dict[str, Served], extra: dict[str, Any], field: str
) -> None:
    served = servers["hermes"]
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    body.update(extra)
    body = {k: v for k, v in body.items() if v is not None}
    before = len(served.standin.received)
    status, answer = served.post("/v1/messages", body)
    assert status == 400
    assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"].startswith(field), answer
    assert len(served.standin.received) == before
    if "max_tokens" not in body:
        return  # the client itself insists on max_tokens
    sampling = {k: body.pop(k) for k in ("temperature",) if k in body}
    with pytest.raises(anthropic.BadRequestError):
        served.anthropic.messages.create(**body, extra_body=sampling)


def test_messages_malformed_bodies_and_engine_failures(loop: LoopThread) -> None:
    served = Served(loop, CASE_BY_NAME["hermes"].load())
    status, answer = served.post("/v1/messages", b"{not json")
    assert status == 400 and answer["error"]["type"] == "invalid_request_error"
    status, answer = served.post("/v1/messages", [1, 2])
    assert status == 400 and answer["type"] == "error"
    served.standin.add("k", "fine")
    served.standin.mode = "http500"
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "[[k]]"}],
    }
    for stream in (False, True):
        with pytest.raises(anthropic.APIStatusError) as info:
            served.anthropic.messages.create(**body, stream=stream)
        assert info.value.status_code == 502
        assert "http://" not in json.dumps(info.value.body)
    served.standin.mode = "broken_stream"
    with (  # the stream's error event
        pytest.raises(anthropic.APIStatusError) as info,
        served.anthropic.messages.stream(**body) as stream,
    ):
        stream.get_final_message()
    assert "http://" not in str(info.value)
    served.standin.mode = "ok"
    assert from_message(served.anthropic.messages.create(**body))["content"] == "fine"


def test_count_tokens_without_an_engine_tokenizer_is_501(loop: LoopThread) -> None:
    """An OpenAI-style engine without ``/tokenize`` (llama.cpp's server always has it)."""
    served = Served(loop, CASE_BY_NAME["hermes"].load(), "openai")
    served.standin.tokenize = False
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    status, answer = served.post("/v1/messages/count_tokens", body)
    assert status == 501 and answer["type"] == "error"
    assert "cannot tokenize" in answer["error"]["message"]
    status, answer = served.post("/v1/messages/count_tokens", {"messages": "hi"})
    assert status == 400 and answer["error"]["message"].startswith("messages")


# ------------------------------------------------------- text resuming after a call (units)
INTERLEAVED = [
    StreamDelta(reasoning_content="Think. "),
    StreamDelta(content="Before. "),
    StreamDelta(tool_calls=(ToolCallDelta(0, '{"x": 1}', id="call_1", name="f"),)),
    StreamDelta(content="After."),
    StreamDelta(reasoning_content="More."),
]


def test_responses_events_when_text_resumes_after_a_call() -> None:
    """Open reasoning and message items are done before a call's item is added (as OpenAI
    streams them: Codex stores items in the order they are done); text after the call is
    a new item. Every delta goes to the one item open; the final output holds what was
    streamed."""
    from autoparser.serve import responses_api
    from autoparser.serve.openai_format import Usage

    events = responses_api.ResponseEvents(responses_api.Identity("resp_1", 0, "m"), {})
    out = events.start() + events.feed(INTERLEAVED)
    message = ChatMessage(content="Before. After.", reasoning_content="Think. More.")
    out += events.finish(message, False, Usage(3, 4))
    added: list[int] = []
    done: list[int] = []
    texts: dict[int, str] = {}
    for event in out:
        index = event.get("output_index")
        if event["type"] == "response.output_item.added":
            assert added == done, "an item added while another is open"
            added.append(index)
        elif event["type"] == "response.output_item.done":
            done.append(index)
        elif index is not None:
            assert index == added[-1] and index not in done, event
            if event["type"].endswith(".delta"):
                texts[index] = texts.get(index, "") + event["delta"]
    final = out[-1]["response"]
    assert out[-1]["type"] == "response.completed" and added == done == [0, 1, 2, 3, 4]
    assert [item["type"] for item in final["output"]] == [
        "reasoning", "message", "function_call", "message", "reasoning"
    ]  # fmt: skip
    assert texts == {0: "Think. ", 1: "Before. ", 2: '{"x": 1}', 3: "After.", 4: "More."}
    assert final["output"][3]["content"][0]["text"] == "After."
    assert [e["sequence_number"] for e in out] == list(range(len(out)))


def test_messages_events_when_text_resumes_after_a_call() -> None:
    """One block open at a time: a new text block after the tool_use block."""
    from autoparser.serve import messages_api
    from autoparser.serve.openai_format import Usage

    events = messages_api.MessageEvents("msg_1", "m")
    out = events.start() + events.feed(INTERLEAVED)
    out += events.finish(("tool_use", None), Usage(3, 4))
    blocks: list[dict[str, Any]] = []
    open_index = None
    for name, data in out:
        if name == "content_block_start":
            assert open_index is None
            open_index = data["index"]
            assert open_index == len(blocks)
            blocks.append(dict(data["content_block"]))
        elif name == "content_block_delta":
            assert data["index"] == open_index
            delta = data["delta"]
            block = blocks[open_index]
            key = {"text_delta": "text", "thinking_delta": "thinking"}.get(delta["type"])
            if key:
                block[key] += delta[key]
            else:
                block["input"] = json.loads(delta["partial_json"])
        elif name == "content_block_stop":
            assert data["index"] == open_index
            open_index = None
    assert open_index is None
    assert [n for n, _ in out[:2]] == ["message_start", "ping"]
    assert [n for n, _ in out[-2:]] == ["message_delta", "message_stop"]
    assert [(b["type"], b.get("text") or b.get("thinking") or b.get("input")) for b in blocks] == [
        ("thinking", "Think. "),
        ("text", "Before. "),
        ("tool_use", {"x": 1}),
        ("text", "After."),
        ("thinking", "More."),
    ]


# Codex's apply_patch tool: a custom tool whose input a Lark grammar constrains.
APPLY_PATCH_TOOL = next(
    t
    for t in json.loads((TESTS_DIR / "data/agent_shapes/codex_responses.json").read_text())["tools"]
    if t.get("name") == "apply_patch"
)
PATCH_AS_FUNCTION = [
    {
        "type": "function",
        "function": {
            "name": "apply_patch",
            "parameters": {"type": "object", "properties": {"input": {"type": "string"}}},
        },
    }
]


def _patch_call(patch: str) -> dict[str, Any]:
    call = {"name": "apply_patch", "arguments": json.dumps({"input": patch})}
    return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": call}]}


@pytest.mark.parametrize(
    "family",
    ["hermes", "glm"],
)
def test_responses_custom_tool_lark_grammar_reaches_the_engine(
    servers: dict[str, Served], family: str
) -> None:
    """The engine's grammar takes the model's call only with a patch the Lark grammar
    takes; the call comes back as a ``custom_tool_call`` whose ``input`` is the patch."""
    case, served = CASE_BY_NAME[family], servers[family]
    patch = (
        "*** Begin Patch\n*** Add File: hi.txt\n+hi\n"
        "*** Update File: a.py\n@@ def f():\n-x\n+y\n*** End Patch\n"
    )
    text = case.output(_patch_call(patch), PATCH_AS_FUNCTION)
    key = served.standin.add(f"patch_{family}", text)
    answer = served.openai.responses.create(
        model="m",
        input=f"Add hi.txt {key}",
        tools=[APPLY_PATCH_TOOL],
        tool_choice={"type": "custom", "name": "apply_patch"},
    )
    [item] = [i for i in answer.output if i.type == "custom_tool_call"]
    assert (item.name, item.input) == ("apply_patch", patch)
    grammar = served.sent()["grammar"]
    assert accepts(grammar, text)
    for bad in ("*** Begin Patch\n*** End Patch\n", patch.replace("+hi", "hi"), patch + "x"):
        assert not accepts(grammar, case.output(_patch_call(bad), PATCH_AS_FUNCTION)), bad
