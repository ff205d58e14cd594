"""``autoparser serve`` against a stand-in engine: wire format, backend fields, errors,
concurrency. Outputs are rendered by the project's own templates (tests/templates)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

import aiohttp
from helpers.generate_cases import CASE_BY_NAME, TOOLS, accumulate, scenarios
from helpers.serve_standin import LoopThread, StandIn, as_text

from autoparser import ChatTemplate
from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig

# Families: JSON in tags (Hermes/Qwen), tagged parameters (Qwen3-Coder), JSON-native
# (Mistral [TOOL_CALLS]), reasoning in <think> tags.
FAMILIES = ["hermes", "qwen3coder", "mistral", "think_tag"]
KINDS = ["llama.cpp", "openai"]


class Served:
    """A stand-in engine and an autoparser server in front of it."""

    def __init__(self, loop: LoopThread, template: ChatTemplate | None, kind: str, **kw: Any):
        self.standin = StandIn(kind, props=kw.pop("props", None))
        self.backend_url = loop.serve(self.standin.app())
        config = ServeConfig(self.backend_url, template=template, **kw)
        self.url = loop.serve(create_app(config))
        self.template = template

    def post(self, body: Any, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + "/v1/chat/completions",
            data=data,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as f:
                status, text = f.status, f.read().decode()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode()
        if body is not None and isinstance(body, dict) and body.get("stream") and status == 200:
            return status, sse_events(text)
        return status, json.loads(text)

    def get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=60) as f:
                return f.status, json.loads(f.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def sent(self) -> dict[str, Any]:
        """The last generation request the engine received (not a /tokenize)."""
        return next(b for path, b in reversed(self.standin.received) if path != "/tokenize")

    def sent_prompt(self) -> str:
        """The last prompt sent, as text (a mixed array of text and plain-text ids read
        back through the stand-in's tokenizer)."""
        return as_text(self.sent()["prompt"])


def sse_events(text: str) -> list[Any]:
    """The data payloads of an SSE body; the last must be [DONE]."""
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    assert events[-1] == "[DONE]"
    return events[:-1]


def stream_message(events: list[Any]) -> tuple[dict[str, Any], str | None]:
    """Fold chunks into a message (checking the chunk shape); the finish reason."""
    chunks = [e for e in events if e.get("choices")]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0].get("role") == "assistant"
    assert all("role" not in d for d in deltas[1:])
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert all(r is None for r in reasons[:-1]) and deltas[-1] == {}
    assert not any("reasoning_content" in d for d in deltas)  # the default field: reasoning
    names = {"reasoning": "reasoning_content"}
    body = [
        {names.get(k, k): v for k, v in d.items() if k != "role" and v != ""} for d in deltas[:-1]
    ]
    return accumulate([d for d in body if d]), reasons[-1]


def as_message(openai_message: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {
            "id": c["id"],
            "name": c["function"]["name"],
            "arguments": c["function"]["arguments"],
        }
        for c in openai_message.get("tool_calls") or []
    ]
    return {
        "content": openai_message.get("content"),
        # The server's default field is vLLM's current name, "reasoning".
        "reasoning_content": openai_message.get("reasoning"),
        "tool_calls": calls,
    }


def comparable(message: dict[str, Any], ids: bool) -> dict[str, Any]:
    calls = [
        {
            "name": c["name"],
            "arguments": json.loads(c["arguments"]),
            **({"id": c["id"]} if ids else {}),
        }
        for c in message["tool_calls"]
    ]
    return {**message, "tool_calls": calls}


def scenario_calls(message: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []
    ]


@pytest.fixture(scope="module")
def family_servers(loop: LoopThread) -> dict[tuple[str, str], Served]:
    return {
        (name, kind): Served(loop, CASE_BY_NAME[name].load(), kind)
        for name in FAMILIES
        for kind in KINDS
    }


CASES = [
    pytest.param(name, scenario, kind, id=f"{name}-{scenario}-{kind}")
    for name in FAMILIES
    for scenario in scenarios(CASE_BY_NAME[name])
    for kind in KINDS
]


@pytest.mark.parametrize(("family", "scenario", "kind"), CASES)
def test_stream_and_whole_equal_the_library(
    family_servers: dict[tuple[str, str], Served], family: str, scenario: str, kind: str
) -> None:
    case = CASE_BY_NAME[family]
    served = family_servers[(family, kind)]
    message = scenarios(case)[scenario]
    tools = case.request_tools
    key = served.standin.add(f"{family}_{scenario}", case.output(message, tools))
    body: dict[str, Any] = {"messages": [{"role": "user", "content": f"Hi {key}"}]}
    if tools:
        body["tools"] = tools

    status, whole = served.post(body)
    assert status == 200, whole
    assert whole["object"] == "chat.completion"
    choice = whole["choices"][0]
    got = as_message(choice["message"])
    assert choice["message"]["role"] == "assistant"

    # The library on the same request and output is the reference...
    assert served.template is not None
    params = served.template.apply(body["messages"], tools=tools)
    text = served.standin.replies[f"{family}_{scenario}"].text
    expected = params.parse(text)
    reference = {
        "content": expected.content,
        "reasoning_content": expected.reasoning_content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in expected.tool_calls
        ],
    }
    assert comparable(got, case.ids) == comparable(reference, case.ids)
    # ...and the calls are the ones the template rendered.
    assert [(c["name"], json.loads(c["arguments"])) for c in got["tool_calls"]] == scenario_calls(
        message
    )
    assert choice["finish_reason"] == ("tool_calls" if got["tool_calls"] else "stop")

    status, events = served.post({**body, "stream": True})
    assert status == 200
    streamed, reason = stream_message(events)
    assert reason == choice["finish_reason"]
    assert comparable(streamed, case.ids) == comparable(got, case.ids)


def test_llamacpp_request_fields(loop: LoopThread) -> None:
    case = CASE_BY_NAME["hermes"]
    served = Served(loop, case.load(), "llama.cpp")
    key = served.standin.add("fields", "Hello.")
    messages = [{"role": "user", "content": f"Hi {key}"}]
    status, _ = served.post(
        {
            "messages": messages,
            "tools": TOOLS,
            "max_tokens": 33,
            "stop": ["STOP"],
            "temperature": 0.5,
            "top_p": 0.9,
            "seed": 11,
            "top_k": 5,
            "logit_bias": {"42": 3.5},
        }
    )
    assert status == 200
    sent = served.sent()
    assert [p for p, _ in served.standin.received][-2:] == ["/tokenize", "/completion"]
    params = case.load().apply(messages, tools=TOOLS)
    assert served.sent_prompt() == params.prompt
    assert sent["stream"] is False
    assert sent["n_predict"] == 33
    assert sent["stop"] == [*params.additional_stops, "STOP"]
    assert (sent["temperature"], sent["top_p"], sent["seed"], sent["top_k"]) == (0.5, 0.9, 11, 5)
    assert sent["logit_bias"] == {"42": 3.5}
    assert sent["grammar"] == params.grammar
    assert sent["grammar_lazy"] is True and params.grammar_lazy
    kinds = {"word": 1, "token": 1, "pattern": 2, "pattern_full": 3}
    assert sent["grammar_triggers"] == [
        {"type": kinds[t.kind], "value": t.value} for t in params.grammar_triggers
    ]
    assert set(params.preserved_tokens) <= set(sent["preserved_tokens"])
    words = {t.value for t in params.grammar_triggers if t.kind in ("word", "token")}
    assert words <= set(sent["preserved_tokens"])

    # tool_choice required: the grammar applies from the first token, no triggers.
    served.post({"messages": messages, "tools": TOOLS, "tool_choice": "required"})
    sent = served.sent()
    assert sent["grammar_lazy"] is False and "grammar_triggers" not in sent
    assert (
        sent["grammar"] == case.load().apply(messages, tools=TOOLS, tool_choice="required").grammar
    )
    # No tools, no response format: no grammar at all.
    served.post({"messages": messages, "stream": True})
    sent = served.sent()
    assert "grammar" not in sent and sent["stream"] is True


def test_openai_request_fields(loop: LoopThread) -> None:
    case = CASE_BY_NAME["hermes"]
    served = Served(loop, case.load(), "openai")
    key = served.standin.add("fields", "Hello.")
    messages = [{"role": "user", "content": f"Hi {key}"}]
    status, whole = served.post(
        {"messages": messages, "tools": TOOLS, "max_completion_tokens": 21, "temperature": 0.1}
    )
    assert status == 200 and whole["model"] == "standin-model"
    path, sent = served.standin.received[-1]
    assert path == "/v1/completions"
    params = case.load().apply(messages, tools=TOOLS)
    # No control token in the user's text: the prompt goes as text, as the engine
    # tokenizes it by itself.
    assert sent["model"] == "standin-model" and sent["prompt"] == params.prompt
    assert sent["max_tokens"] == 21 and sent["temperature"] == 0.1
    assert sent["stop"] == params.additional_stops
    # tool_choice auto needs a lazy grammar, which these engines cannot take: none sent.
    assert "structured_outputs" not in sent and "grammar" not in sent
    served.post({"messages": messages, "tools": TOOLS, "tool_choice": "required", "stream": True})
    sent = served.sent()
    required = case.load().apply(messages, tools=TOOLS, tool_choice="required")
    assert sent["structured_outputs"] == {"grammar": required.grammar}
    assert sent["stream_options"] == {"include_usage": True}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    served.post({"messages": messages, "response_format": fmt})
    with_format = case.load().apply(messages, response_format=fmt)
    assert served.sent()["structured_outputs"] == {"grammar": with_format.grammar}


def test_template_and_model_from_props(loop: LoopThread) -> None:
    source = (CASE_BY_NAME["hermes"].load()).source
    props = {
        "chat_template": source,
        "bos_token": "<B>",
        "eos_token": "<E>",
        "model_path": "/m/tiny.gguf",
    }
    served = Served(loop, None, "llama.cpp", props=props)
    key = served.standin.add("props", "Hi there.")
    messages = [{"role": "user", "content": f"Hi {key}"}]
    status, whole = served.post({"messages": messages})
    assert status == 200 and whole["model"] == "tiny.gguf"
    expected = ChatTemplate(source, bos_token="<B>", eos_token="<E>").apply(messages).prompt
    assert served.sent_prompt() == expected
    assert served.get("/v1/models")[1]["data"][0]["id"] == "tiny.gguf"
    assert served.get("/health") == (200, {"status": "ok", "backend": "llama.cpp"})


def test_kind_detected_and_model_flag(loop: LoopThread) -> None:
    served = Served(loop, CASE_BY_NAME["hermes"].load(), "openai", model="my-name")
    served.standin.add("k", "x")
    assert served.get("/health")[1]["backend"] == "openai"
    status, whole = served.post({"messages": [{"role": "user", "content": "[[k]]"}]})
    assert status == 200 and whole["model"] == "my-name"
    assert served.sent()["model"] == "my-name"


def test_template_kwargs_and_reasoning_effort_reach_the_template(loop: LoopThread) -> None:
    source = (
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
        "[effort={{ reasoning_effort | default('none') }} flag={{ flag | default('off') }}]"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    served = Served(loop, ChatTemplate(source), "llama.cpp")
    served.standin.add("k", "ok")
    body = {
        "messages": [{"role": "user", "content": "[[k]]"}],
        "reasoning_effort": "high",
        "chat_template_kwargs": {"flag": "on"},
    }
    assert served.post(body)[0] == 200
    assert "[effort=high flag=on]" in served.sent_prompt()


def test_reasoning_budget_reaches_the_grammar(loop: LoopThread) -> None:
    """``reasoning_budget`` bounds the forced grammar's reasoning (docs/streaming.md)."""
    source = (
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
        "{% if tools %}{{ tools | tojson }}{% endif %}"
        "{%- for m in messages %}{%- for tc in m.tool_calls or [] %}<tool_call>"
        '{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}'
        "</tool_call>{%- endfor %}{%- endfor %}"
        "{% if add_generation_prompt %}<|assistant|><think>{% endif %}"
    )
    served = Served(loop, ChatTemplate(source), "llama.cpp")
    served.standin.add("k", "ok")
    body = {
        "messages": [{"role": "user", "content": "[[k]]"}],
        "tools": TOOLS,
        "tool_choice": "required",
        "reasoning_budget": 7,
    }
    served.post(body)
    grammar = served.sent()["grammar"]
    assert "{0,7}" in grammar
    served.post({**body, "reasoning_budget": None})
    assert "{0,7}" not in served.sent()["grammar"]


@pytest.mark.parametrize("kind", KINDS)
def test_finish_reason_and_usage(loop: LoopThread, kind: str) -> None:
    case = CASE_BY_NAME["hermes"]
    served = Served(loop, case.load(), kind)
    call = scenarios(case)["one_call"]
    text = case.output(call, TOOLS)
    served.standin.add("limit", "A long answer that goes on", hit_limit=True)
    served.standin.add("cut", text[: len(text) // 2], hit_limit=True)
    served.standin.add("call", text)
    for key, reason in (("limit", "length"), ("cut", "length"), ("call", "tool_calls")):
        body = {"messages": [{"role": "user", "content": f"[[{key}]]"}], "tools": TOOLS}
        status, whole = served.post(body)
        assert status == 200 and whole["choices"][0]["finish_reason"] == reason, key
        sent_prompt = served.sent_prompt()
        chunks = served.standin._chunks(served.standin.replies[key].text, key)
        usage = {"prompt_tokens": len(sent_prompt.split()), "completion_tokens": len(chunks)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        assert whole["usage"] == usage
        status, events = served.post(
            {**body, "stream": True, "stream_options": {"include_usage": True}}
        )
        assert status == 200
        _, streamed_reason = stream_message(events)
        assert streamed_reason == reason
        assert events[-1]["choices"] == [] and events[-1]["usage"] == usage
        status, events = served.post({**body, "stream": True})
        assert "usage" not in events[-1]


ERROR_CASES = [
    pytest.param({"messages": "hi"}, "messages", id="messages-not-list"),
    pytest.param({"messages": None}, "messages", id="messages-missing"),
    pytest.param({"messages": [{"content": "x"}]}, "messages[0].role", id="message-without-role"),
    pytest.param({"n": 17}, "n", id="n-beyond-the-cap"),
    pytest.param({"n": 0}, "n", id="n-0"),
    pytest.param({"top_logprobs": 2}, "top_logprobs", id="top-logprobs-without-logprobs"),
    pytest.param({"logprobs": True, "top_logprobs": 21}, "top_logprobs", id="top-logprobs-21"),
    pytest.param({"logprobs": "yes"}, "logprobs", id="logprobs-type"),
    pytest.param({"stop": 3}, "stop", id="stop-type"),
    pytest.param({"max_tokens": 0}, "max_tokens", id="max-tokens-0"),
    pytest.param({"temperature": "hot"}, "temperature", id="temperature-type"),
    pytest.param({"stream": "yes"}, "stream", id="stream-type"),
    pytest.param(
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
        "tool_choice.function.name",
        id="unknown-tool",
    ),
    pytest.param({"tool_choice": "required"}, "tool_choice", id="required-without-tools"),
    pytest.param(
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 5}}}]},
        "tools[0].function.parameters",
        id="invalid-tool-schema",
    ),
    pytest.param(
        {"chat_template_kwargs": {"tools": []}}, "chat_template_kwargs", id="reserved-kwarg"
    ),
    pytest.param({"reasoning_budget": -1}, "reasoning_budget", id="negative-budget"),
    pytest.param({"reasoning_budget": "5"}, "reasoning_budget", id="budget-type"),
]


@pytest.mark.parametrize(("extra", "param"), ERROR_CASES)
def test_invalid_requests_are_400_naming_the_field(
    family_servers: dict[tuple[str, str], Served], extra: dict[str, Any], param: str
) -> None:
    served = family_servers[("hermes", "llama.cpp")]
    before = len(served.standin.received)
    status, body = served.post({"messages": [{"role": "user", "content": "hi"}], **extra})
    assert status == 400
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == param and body["error"]["message"]
    assert len(served.standin.received) == before  # refused before reaching the backend


def test_malformed_json_and_unknown_route(family_servers: dict[tuple[str, str], Served]) -> None:
    served = family_servers[("hermes", "llama.cpp")]
    status, body = served.post(None, raw=b"{not json")
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    status, body = served.post(None, raw=b"[1, 2]")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = served.get("/v1/nothing")
    assert status == 404 and body["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["garbage", "http500"])
def test_failing_backend_is_502(loop: LoopThread, kind: str, mode: str) -> None:
    served = Served(loop, CASE_BY_NAME["hermes"].load(), kind)
    served.standin.add("k", "fine")
    body = {"messages": [{"role": "user", "content": "[[k]]"}]}
    served.standin.mode = mode
    for stream in (False, True):
        # Streaming too: the first event is read before the response starts.
        status, answer = served.post({**body, "stream": stream})
        assert status == 502
        assert answer["error"]["type"] == "backend_error"
        assert "HTTP 500" in answer["error"]["message"] or "not JSON" in answer["error"]["message"]
    served.standin.mode = "ok"  # the server is unharmed
    assert served.post(body)[1]["choices"][0]["message"]["content"] == "fine"


def test_backend_down_and_broken_stream(loop: LoopThread) -> None:
    served = Served(loop, CASE_BY_NAME["hermes"].load(), "llama.cpp")
    served.standin.add("k", "a fairly long reply")
    body = {"messages": [{"role": "user", "content": "[[k]]"}], "stream": True}
    served.standin.mode = "broken_stream"
    status, events = served.post(body)
    assert status == 200 and "without its final event" in events[-1]["error"]["message"]
    served.standin.mode = "ok"
    # Nothing listens on the port of a closed socket: unreachable -> 502.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    config = ServeConfig(dead, backend_kind="llama.cpp", template=CASE_BY_NAME["hermes"].load())
    url = loop.serve(create_app(config))
    for stream in (False, True):
        request = urllib.request.Request(
            url + "/v1/chat/completions",
            data=json.dumps({**body, "stream": stream}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=60)
        assert info.value.code == 502
        error = json.loads(info.value.read())["error"]
        assert error["type"] == "backend_error" and "unreachable" in error["message"]


@pytest.mark.parametrize("kind", KINDS)
def test_32_concurrent_streams_equal_their_whole_results(loop: LoopThread, kind: str) -> None:
    served = Served(loop, CASE_BY_NAME["qwen3coder"].load(), kind)
    case = CASE_BY_NAME["qwen3coder"]
    msgs = list(scenarios(case).values())
    bodies = []
    for i in range(32):
        key = served.standin.add(f"c{i}", case.output(msgs[i % len(msgs)], TOOLS))
        bodies.append({"messages": [{"role": "user", "content": f"{key}"}], "tools": TOOLS})

    async def one(session: aiohttp.ClientSession, body: dict[str, Any]) -> tuple[Any, Any]:
        url = served.url + "/v1/chat/completions"
        async with session.post(url, json={**body, "stream": True}) as r:
            assert r.status == 200
            events = sse_events(await r.text())
        async with session.post(url, json=body) as r:
            assert r.status == 200
            whole = await r.json()
        return events, whole

    async def run_all() -> list[tuple[Any, Any]]:
        async with aiohttp.ClientSession() as session:
            return await asyncio.gather(*(one(session, b) for b in bodies))

    results = asyncio.run(run_all())
    for i, (events, whole) in enumerate(results):
        streamed, reason = stream_message(events)
        got = as_message(whole["choices"][0]["message"])
        assert comparable(streamed, False) == comparable(got, False), i
        assert reason == whole["choices"][0]["finish_reason"]
        expected = scenario_calls(msgs[i % len(msgs)])
        assert [(c["name"], json.loads(c["arguments"])) for c in got["tool_calls"]] == expected


@pytest.mark.parametrize("policy", ["whole", "incremental"])
def test_tool_call_delta_policy(loop: LoopThread, policy: str) -> None:
    case = CASE_BY_NAME["hermes"]
    served = Served(loop, case.load(), "llama.cpp", tool_call_deltas=policy)
    message = scenarios(case)["two_calls"]
    key = served.standin.add("two", case.output(message, TOOLS))
    body = {"messages": [{"role": "user", "content": key}], "tools": TOOLS, "stream": True}
    status, events = served.post(body)
    assert status == 200
    deltas = [e["choices"][0]["delta"] for e in events if e.get("choices")]
    call_deltas = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    streamed, _ = stream_message(events)
    assert [
        (c["name"], json.loads(c["arguments"])) for c in streamed["tool_calls"]
    ] == scenario_calls(message)
    if policy == "whole":
        assert len(call_deltas) == 2
        assert all(json.loads(tc[0]["function"]["arguments"]) for tc in call_deltas)
    else:
        assert len(call_deltas) > 2  # arguments arrive in pieces


def test_tool_call_delta_policy_of_the_library_by_default(loop: LoopThread) -> None:
    """No server option: the library's default, one delta per call; a call cut off by the
    token limit is never announced, and its text is not content either."""
    case = CASE_BY_NAME["hermes"]
    served = Served(loop, case.load(), "llama.cpp")
    text = case.output(scenarios(case)["two_calls"], TOOLS)
    key = served.standin.add("cut", text[: text.rindex('"') - 2], hit_limit=True)
    body = {"messages": [{"role": "user", "content": key}], "tools": TOOLS, "stream": True}
    status, events = served.post(body)
    assert status == 200
    call_deltas = [
        d["tool_calls"]
        for e in events
        if e.get("choices")
        for d in [e["choices"][0]["delta"]]
        if "tool_calls" in d
    ]
    assert len(call_deltas) == 1 and json.loads(call_deltas[0][0]["function"]["arguments"])
    streamed, reason = stream_message(events)
    assert "<tool_call>" not in (streamed["content"] or "")
    assert reason == "length"  # cut by the token limit, one whole call before it


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_cut_between_arguments_by_the_token_limit_is_not_a_call(
    loop: LoopThread, stream: bool
) -> None:
    """A tagged call cut after a whole argument, before its close tag: with the backend's
    "length" it is no call and not content (truncated); the same text ended by a stop
    token is the call
    (a model may leave the close tag out at the very end)."""
    case = CASE_BY_NAME["qwen3coder"]
    served = Served(loop, case.load(), "llama.cpp")
    text = case.output(scenarios(case)["one_call"], TOOLS)
    cut = text[: text.index("</parameter>") + len("</parameter>")]
    served.standin.add("cut", cut, hit_limit=True)
    served.standin.add("stopped", cut)
    for key, reason, calls in (("cut", "length", 0), ("stopped", "tool_calls", 1)):
        body = {"messages": [{"role": "user", "content": f"[[{key}]]"}], "tools": TOOLS}
        if stream:
            status, events = served.post({**body, "stream": True})
            message, got = stream_message(events)
        else:
            status, whole = served.post(body)
            message, got = whole["choices"][0]["message"], whole["choices"][0]["finish_reason"]
        assert status == 200 and got == reason, key
        assert len(message.get("tool_calls") or []) == calls, key
        if not calls:
            assert "<function=" not in (message["content"] or "")


def test_official_openai_client(loop: LoopThread) -> None:
    openai = pytest.importorskip("openai")
    case = CASE_BY_NAME["hermes"]
    served = Served(loop, case.load(), "llama.cpp")
    message = scenarios(case)["content_call"]
    key = served.standin.add("client", case.output(message, TOOLS))
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": key}]
    result = client.chat.completions.create(model="x", messages=messages, tools=TOOLS)
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check."
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == scenario_calls(
        message
    )
    pieces, names, args = [], [], ""
    for chunk in client.chat.completions.create(
        model="x", messages=messages, tools=TOOLS, stream=True
    ):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        pieces.append(delta.content or "")
        for tc in delta.tool_calls or []:
            if tc.function and tc.function.name:
                names.append(tc.function.name)
            args += (tc.function.arguments or "") if tc.function else ""
    assert "".join(pieces) == "Let me check."
    assert names == ["get_weather"] and json.loads(args) == scenario_calls(message)[0][1]
    many = client.chat.completions.create(
        model="x", messages=messages, n=3, logprobs=True, top_logprobs=1
    )
    assert [c.index for c in many.choices] == [0, 1, 2]
    for choice in many.choices:
        assert choice.logprobs is not None and choice.logprobs.content
        assert all(len(t.top_logprobs) == 1 for t in choice.logprobs.content)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="x", messages=messages, n=100)


def test_core_does_not_import_aiohttp() -> None:
    code = (
        "import sys, autoparser, autoparser.cli\n"
        "autoparser.cli.build_argument_parser()\n"
        "assert 'aiohttp' not in sys.modules, 'aiohttp imported by the core'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_serve_arguments() -> None:
    from autoparser.cli import build_argument_parser
    from autoparser.serve import command

    given = build_argument_parser().parse_args(
        ["serve", "--backend", "http://127.0.0.1:9", "--tool-call-deltas", "whole", "--port", "0"]
    )
    args = command.settings(given, {})  # defaults filled, no environment
    assert (args.command, args.backend, args.backend_kind) == (
        "serve",
        "http://127.0.0.1:9",
        "auto",
    )
    assert (args.tool_call_deltas, args.port, args.template) == ("whole", 0, None)
