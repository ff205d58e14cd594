"""``autoparser serve`` end to end in front of a real llama.cpp server running a tiny
random-weight model: random text, but under our grammars the output must be well-formed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

CACHE = Path.home() / ".cache" / "autoparser" / "llama.cpp"
SERVER = Path(os.environ.get("AUTOPARSER_LLAMA_SERVER", CACHE / "bin" / "llama-server"))
VOCAB = CACHE / "vocab" / "ggml-vocab-qwen2.gguf"
TEMPLATES = Path(__file__).parent / "templates"
pytestmark = pytest.mark.skipif(
    not SERVER.exists() or not VOCAB.exists(),
    reason=f"no llama-server at {SERVER} (set AUTOPARSER_LLAMA_SERVER or run "
    f"scripts/build_llamacpp.sh) or no vocabulary at {VOCAB}",
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "enum": ["Paris", "Rome"]},
                "days": {"type": "integer", "enum": [1, 2, 3]},
            },
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
NOTE = {
    "type": "function",
    "function": {
        "name": "note",
        "parameters": {
            "type": "object",
            "properties": {"kind": {"type": "string", "enum": ["a", "b"]}},
            "required": ["kind"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, NOTE]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
# Hermes/Qwen JSON in tags (also the model's own template, read from GET /props),
# Qwen3-Coder tagged parameters, Mistral-style JSON-native [TOOL_CALLS].
FAMILIES = {
    "hermes": None,
    "qwen3coder": TEMPLATES / "formats/qwen3coder_like.jinja",
    "mistral": TEMPLATES / "formats/mistral_like.jinja",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"{url}: process exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as f:
                if f.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    pytest.fail(f"{url}: not up: {log.read_text()[-2000:]}")


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as f:
        text = f.read().decode()
    if not body.get("stream"):
        return json.loads(text)
    return [json.loads(b[6:]) for b in text.split("\n\n") if b.startswith("data: {")]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from helpers.tiny_gguf import write_tiny_model

    tmp = tmp_path_factory.mktemp("e2e")
    hermes = (TEMPLATES / "formats/chatml_hermes.jinja").read_text(encoding="utf-8")
    model = write_tiny_model(VOCAB, tmp / "tiny.gguf", hermes)
    port = _free_port()
    log = tmp / "llama.log"
    cmd = [str(SERVER), "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", "4096", "-t", "1", "-np", "2", "--jinja"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc, log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def servers(llama: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("serve")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs, urls = [], {}
    try:
        for name, template in FAMILIES.items():
            port = _free_port()
            cmd = [sys.executable, "-m", "autoparser.cli", "serve", "--backend", llama]
            cmd += ["--port", str(port)]
            if template is not None:
                cmd += ["--template", str(template)]
            log = tmp / f"{name}.log"
            with log.open("wb") as out:
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env))
            urls[name] = f"http://127.0.0.1:{port}"
            _wait(urls[name], procs[-1], log)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)


def _message(answer: Any, stream: bool) -> tuple[dict[str, Any], str]:
    if not stream:
        choice = answer["choices"][0]
        return choice["message"], choice["finish_reason"]
    content, calls, reason = "", {}, ""
    for event in answer:
        for choice in event.get("choices", []):
            delta = choice["delta"]
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls", []):
                entry = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                entry["name"] += tc.get("function", {}).get("name") or ""
                entry["arguments"] += tc.get("function", {}).get("arguments") or ""
            reason = choice["finish_reason"] or reason
    message = {
        "content": content or None,
        "tool_calls": [{"function": calls[i]} for i in sorted(calls)],
    }
    return message, reason


def _check_calls(message: dict[str, Any], only: str | None = None) -> None:
    calls = message.get("tool_calls") or []
    assert calls, f"no tool call: {message}"
    for call in calls:
        name = call["function"]["name"]
        assert name in SCHEMAS and (only is None or name == only), name
        jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[name])


# Every call grammar here is finite (bounded whitespace, enum values), at most ~350 characters,
# so 600 tokens always reach its end whatever a random model samples.
BASE = {"max_tokens": 600, "temperature": 1.0, "seed": 3}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("choice", ["required", "named"])
def test_forced_tool_calls_validate(
    servers: dict[str, str], family: str, choice: str, stream: bool
) -> None:
    tool_choice: Any = "required"
    if choice == "named":
        tool_choice = {"type": "function", "function": {"name": "note"}}
    body = {
        **BASE,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": TOOLS,
        "tool_choice": tool_choice,
        "parallel_tool_calls": False,
        "stream": stream,
    }
    message, reason = _message(_post(servers[family] + "/v1/chat/completions", body), stream)
    assert reason == "tool_calls"
    _check_calls(message, "note" if choice == "named" else None)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_response_format_content_validates(servers: dict[str, str], stream: bool) -> None:
    schema = SCHEMAS["get_weather"]
    body = {
        **BASE,
        "messages": [{"role": "user", "content": "Weather as JSON"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": schema}},
        "stream": stream,
    }
    message, reason = _message(_post(servers["hermes"] + "/v1/chat/completions", body), stream)
    assert reason == "stop"
    jsonschema.validate(json.loads(message["content"]), schema)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_auto_lazy_grammar_engages_on_the_opener(
    llama: str, servers: dict[str, str], stream: bool
) -> None:
    """A logit bias makes the random model write the call opener; the trigger switches the
    lazy grammar on, so what follows is a valid call."""
    tokens = _post(llama + "/tokenize", {"content": "<tool_call>", "parse_special": True})
    assert len(tokens["tokens"]) == 1, tokens  # a special token in the Qwen2 vocabulary
    body = {
        **BASE,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "logit_bias": {str(tokens["tokens"][0]): 100},
        "stream": stream,
    }
    message, reason = _message(_post(servers["hermes"] + "/v1/chat/completions", body), stream)
    _check_calls(message)
    assert reason == "tool_calls"


# ----------------------------------------------------------- the Responses and Messages APIs
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ANTHROPIC_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_responses_forced_call_validates(
    servers: dict[str, str], family: str, stream: bool
) -> None:
    """The official client through /v1/responses: with tool_choice required the random
    model's call validates against its schema; streamed, the final response holds it."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=servers[family] + "/v1", api_key="unused", max_retries=0)
    kw: dict[str, Any] = {
        "model": "tiny",
        "input": "Weather in Paris?",
        "tools": RESPONSES_TOOLS,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_output_tokens": BASE["max_tokens"],
        "temperature": BASE["temperature"],
        "extra_body": {"seed": BASE["seed"]},
    }
    if stream:
        with client.responses.stream(**kw) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(**kw)
    assert response.status == "completed"
    calls = [item for item in response.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].call_id
    jsonschema.validate(json.loads(calls[0].arguments), SCHEMAS[calls[0].name])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_messages_forced_call_validates(servers: dict[str, str], family: str, stream: bool) -> None:
    """The official client through /v1/messages: tool_choice any, one call whose input
    validates against its schema; stop_reason tool_use."""
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=servers[family], api_key="unused", max_retries=0)
    kw: dict[str, Any] = {
        "model": "tiny",
        "max_tokens": BASE["max_tokens"],
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": ANTHROPIC_TOOLS,
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "extra_body": {"temperature": BASE["temperature"], "seed": BASE["seed"]},
    }
    if stream:
        with client.messages.stream(**kw) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kw)
    assert message.stop_reason == "tool_use"
    uses = [block for block in message.content if block.type == "tool_use"]
    assert len(uses) == 1 and uses[0].id
    jsonschema.validate(uses[0].input, SCHEMAS[uses[0].name])
    counted = client.messages.count_tokens(
        model="tiny", messages=kw["messages"], tools=ANTHROPIC_TOOLS, tool_choice=kw["tool_choice"]
    )
    assert counted.input_tokens == message.usage.input_tokens  # llama.cpp counted both
