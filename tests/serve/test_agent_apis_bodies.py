"""Every request body Claude Code and Codex were captured sending (tests/data/agent_requests)
through ``autoparser serve`` as they sent it, headers and streaming included: each is
answered (never a 4xx), what was served in a lesser form is in the log and the metrics.
And a template that takes a system message only first still serves Claude Code's
mid-conversation reminders, folded into the user's turn."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.generate_cases import CASE_BY_NAME
from helpers.paths import TESTS_DIR, corpus_dir
from helpers.serve_standin import LoopThread, StandIn, as_text

from autoparser import ChatTemplate
from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig

REAL = TESTS_DIR / "data" / "agent_requests"
CAPTURED = sorted(REAL.glob("*.json"))
KEY = re.compile(r"\[\[(\w+)\]\]")


def _templates() -> list[Any]:
    params: list[Any] = [pytest.param("hermes", id="hermes")]
    corpus = corpus_dir()
    qwen = corpus / "Qwen-Qwen3-0.6B.jinja" if corpus else None
    if qwen is not None and qwen.exists():
        params.append(pytest.param(str(qwen), id="qwen3"))
    else:
        params.append(pytest.param(None, id="qwen3", marks=pytest.mark.skip("no corpus")))
    return params


class Served:
    def __init__(self, loop: LoopThread, template: ChatTemplate, **config: Any) -> None:
        self.standin = StandIn()
        backend = loop.serve(self.standin.app())
        self.url = loop.serve(create_app(ServeConfig(backend, template=template, **config)))

    def send(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.url + path, json.dumps(body).encode(), {**headers, "x-api-key": "k"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as f:
                return f.status, f.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def completions(self) -> list[dict[str, Any]]:
        """The generation requests the engine received (not its tokenize calls)."""
        return [body for path, body in self.standin.received if path != "/tokenize"]

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as f:
            return str(f.read().decode())


def _events(raw: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(b"data: ") :])
        for line in raw.splitlines()
        if line.startswith(b"data: ") and line != b"data: [DONE]"
    ]


@pytest.fixture(scope="module")
def servers(loop: LoopThread) -> dict[str, Served]:
    out = {}
    for param in _templates():
        source = param.values[0]
        if source is None:
            continue
        template = CASE_BY_NAME["hermes"].load() if source == "hermes" else None
        template = template or ChatTemplate.from_file(Path(source))
        out[param.id] = Served(loop, template)
    return out


@pytest.mark.parametrize("template", _templates())
@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_each_captured_request_is_answered(
    servers: dict[str, Served], template: str, path: Path
) -> None:
    served = servers["hermes" if template == "hermes" else "qwen3"]
    captured = json.loads(path.read_text(encoding="utf-8"))
    body = captured["body"]
    for key in KEY.findall(json.dumps(body)):
        served.standin.add(key, "Done.")
    before = len(served.completions())
    status, raw = served.send(captured["path"], body, captured["headers"])
    assert status == 200, raw[:2000]
    events = _events(raw)
    assert len(served.completions()) == before + 1
    prompt = as_text(served.completions()[-1]["prompt"])
    if captured["path"] == "/v1/messages":
        assert events[-1]["type"] == "message_stop"
        assert "image" not in path.name or "[image (image/png) omitted" in prompt
    else:
        assert events[-1]["type"] == "response.completed"
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        assert text == ("Done." if KEY.search(json.dumps(body["input"][-1])) else text)
        assert "image" not in path.name or "[image omitted" in prompt
    metrics = served.metrics()
    assert 'autoparser_schema_degraded_total{keyword="maxLength"}' in metrics or (
        captured["path"] != "/v1/messages"
    )


# A ChatML template that takes a system message only as the first message.
SYSTEM_FIRST = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' and not loop.first -%}"
    "{{ raise_exception('System message must be at the beginning.') }}"
    "{%- endif -%}"
    "<|im_start|>{{ m.role }}\n{{ m.content if m.content is string else '' }}<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}"
)


def test_a_late_system_message_is_folded_for_a_template_that_refuses_it(
    loop: LoopThread,
) -> None:
    served = Served(loop, ChatTemplate(SYSTEM_FIRST, eos_token="<|im_end|>"))
    served.standin.add("k", "Fine.")
    body = {
        "model": "m",
        "max_tokens": 20,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "first [[k]]"},
            {"role": "system", "content": "<system-reminder>R</system-reminder>"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "second"},
        ],
    }
    status, raw = served.send("/v1/messages", body, {"Content-Type": "application/json"})
    assert status == 200, raw
    assert json.loads(raw)["content"] == [{"type": "text", "text": "Fine."}]
    prompt = as_text(served.completions()[-1]["prompt"])
    assert "<|im_start|>user\n<system-reminder>R</system-reminder>\n\nsecond<|im_end|>" in prompt
    assert prompt.count("<|im_start|>system") == 1
    assert 'autoparser_degraded_total{what="system_message"} 1.0' in served.metrics()


# Refuses a system message anywhere but first, and a user turn that starts with a reminder.
REFUSES_REMINDERS = SYSTEM_FIRST.replace(
    "{%- if m.role == 'system' and not loop.first -%}",
    "{%- if (m.role == 'system' and not loop.first) or (m.role == 'user' and "
    "m.content is string and m.content.startswith('<system-reminder>')) -%}",
)


def test_a_system_message_no_form_of_which_fits_is_refused_in_anthropics_words(
    loop: LoopThread,
) -> None:
    """Claude Code acts on Anthropic's wording of this refusal (it then sends its
    reminders as user text); the chat route keeps the template's own message."""
    served = Served(loop, ChatTemplate(REFUSES_REMINDERS, eos_token="<|im_end|>"))
    messages = [
        {"role": "user", "content": "first"},
        {"role": "system", "content": "<system-reminder>R</system-reminder>"},
        {"role": "user", "content": "second"},
    ]
    body = {"model": "m", "max_tokens": 20, "messages": messages}
    status, raw = served.send("/v1/messages", body, {"Content-Type": "application/json"})
    assert status == 400
    error = json.loads(raw)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == (
        'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
        'parameter, not "system" as an input message role.'
    )
    status, raw = served.send(
        "/v1/chat/completions", {"messages": messages}, {"Content-Type": "application/json"}
    )
    assert status == 400
    assert "System message must be at the beginning" in json.loads(raw)["error"]["message"]
    assert not served.completions()


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_to_a_namespaced_tool_comes_back_with_its_namespace(
    servers: dict[str, Served], stream: bool
) -> None:
    """Codex's first request; the model calls the flat name it saw; the client gets the
    function's own name and the namespace (codex-rs routes a call by both)."""
    served = servers["hermes"]
    captured = json.loads((REAL / "responses_codex_first.json").read_text(encoding="utf-8"))
    body = {**captured["body"], "stream": stream}
    call = {"name": "multi_agent_v1__close_agent", "arguments": {"target": "a1"}}
    served.standin.add("write", f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    status, raw = served.send("/v1/responses", body, {"Content-Type": "application/json"})
    assert status == 200, raw[:2000]
    if stream:
        done = [e["item"] for e in _events(raw) if e["type"] == "response.output_item.done"]
    else:
        done = json.loads(raw)["output"]
    calls = [item for item in done if item["type"] == "function_call"]
    assert [(c["name"], c["namespace"], json.loads(c["arguments"])) for c in calls] == [
        ("close_agent", "multi_agent_v1", {"target": "a1"})
    ]
