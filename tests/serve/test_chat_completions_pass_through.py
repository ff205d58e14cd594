"""``/v1/chat/completions`` passing through what the engine supports: token logprobs
(``logprobs``/``top_logprobs``) in OpenAI's shape, stream and not, and ``n`` > 1 choices,
each generated and parsed on its own, against the stand-in engine in every dialect."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.generate_cases import CASE_BY_NAME, accumulate, scenarios
from helpers.serve_standin import LoopThread, StandIn, alternatives, piece_logprob

from autoparser import ChatTemplate
from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig


class Served:
    """A stand-in engine and a server in front of it."""

    def __init__(self, loop: LoopThread, template: ChatTemplate, kind: str, **kw: Any) -> None:
        self.standin = StandIn(kind, props=kw.pop("props", None))
        self.url = loop.serve(
            create_app(ServeConfig(loop.serve(self.standin.app()), **kw, template=template))
        )

    def post(self, body: dict[str, Any], path: str = "/v1/chat/completions") -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as f:
                status, text = f.status, f.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())
        return status, sse_events(text) if body.get("stream") else json.loads(text)

    def sent(self) -> dict[str, Any]:
        """The last generation request the engine received."""
        return next(b for path, b in reversed(self.standin.received) if path != "/tokenize")


def sse_events(text: str) -> list[Any]:
    """The data payloads of an SSE body, which must end with one [DONE]."""
    blocks = [b for b in text.split("\n\n") if b.strip() and not b.startswith(":")]
    assert all(b.startswith("data: ") for b in blocks)
    payloads = [b[len("data: ") :] for b in blocks]
    assert payloads[-1] == "[DONE]" and payloads.count("[DONE]") == 1
    return [json.loads(p) for p in payloads[:-1]]


KINDS = ["llama.cpp", "openai"]
PLAIN = "The answer is forty two, as every reader of the guide knows by now."


@pytest.fixture(scope="module")
def servers(loop: LoopThread) -> dict[str, Served]:
    return {kind: Served(loop, CASE_BY_NAME["hermes"].load(), kind) for kind in KINDS}


def tool_output(served: Served, name: str) -> tuple[str, dict[str, Any]]:
    """A stand-in reply that makes a tool call, its key, and the request asking for it."""
    name = key_name(name)
    case = CASE_BY_NAME["hermes"]
    message = next(m for m in scenarios(case).values() if m.get("tool_calls"))
    key = served.standin.add(name, case.output(message, case.request_tools))
    body = {"messages": [{"role": "user", "content": f"Hi {key}"}], "tools": case.request_tools}
    return name, body


def key_name(name: str) -> str:
    """A stand-in reply key (word characters only)."""
    return "".join(c if c.isalnum() else "_" for c in name)


def plain_body(served: Served, name: str, text: str = PLAIN) -> dict[str, Any]:
    key = served.standin.add(key_name(name), text)
    return {"messages": [{"role": "user", "content": f"Hi {key}"}]}


def per_choice(events: list[Any]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        for choice in event.get("choices", []):
            out.setdefault(choice["index"], []).append(choice)
    return out


def metric(served: Served, name: str, labels: str) -> float:
    with urllib.request.urlopen(served.url + "/metrics", timeout=30) as f:
        text = f.read().decode()
    for line in text.splitlines():
        if line.startswith(f"{name}{{{labels}}}"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("kind", KINDS)
def test_whole_answer_logprobs_cover_every_generated_token(
    servers: dict[str, Served], kind: str
) -> None:
    served = servers[kind]
    name, body = tool_output(served, f"lp-whole-{kind}")
    status, answer = served.post({**body, "logprobs": True, "top_logprobs": 2})
    assert status == 200, answer
    choice = answer["choices"][0]
    assert choice["message"]["tool_calls"]  # parsed as ever
    content = choice["logprobs"]["content"]
    text = served.standin.replies[name].text
    assert "".join(t["token"] for t in content) == text  # every token, in order
    for entry in content:
        assert entry["logprob"] == piece_logprob(entry["token"])
        assert entry["bytes"] == list(entry["token"].encode())
        top = entry["top_logprobs"]
        want = alternatives(entry["token"], 2)
        assert [(t["token"], t["logprob"]) for t in top] == want
        assert all(set(t) == {"token", "logprob", "bytes"} for t in top)
    sent = served.sent()
    assert sent["n_probs" if kind == "llama.cpp" else "logprobs"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_top_logprobs_zero_gives_the_chosen_tokens_only(
    servers: dict[str, Served], kind: str
) -> None:
    served = servers[kind]
    status, answer = served.post({**plain_body(served, f"lp-zero-{kind}"), "logprobs": True})
    assert status == 200, answer
    content = answer["choices"][0]["logprobs"]["content"]
    assert "".join(t["token"] for t in content) == PLAIN
    assert all(t["top_logprobs"] == [] for t in content)
    # llama.cpp gives no probabilities for n_probs 0: one is asked for, and left out
    assert served.sent()["n_probs" if kind == "llama.cpp" else "logprobs"] == (
        1 if kind == "llama.cpp" else 0
    )


@pytest.mark.parametrize("kind", KINDS)
def test_streamed_logprobs_go_with_the_chunk_of_their_piece(
    servers: dict[str, Served], kind: str
) -> None:
    served = servers[kind]
    body = plain_body(served, f"lp-stream-{kind}")
    status, events = served.post({**body, "stream": True, "logprobs": True, "top_logprobs": 1})
    assert status == 200
    seen_text = seen_tokens = ""
    for chunk in per_choice(events)[0]:
        probs = chunk["logprobs"]
        seen_text += chunk["delta"].get("content") or ""
        seen_tokens += "".join(t["token"] for t in probs["content"]) if probs else ""
        # each chunk carries the tokens of the pieces its text came from: the tokens run
        # ahead of the text only by what the parser holds back (a trailing space)
        assert seen_tokens.startswith(seen_text)
        assert not seen_tokens[len(seen_text) :].strip()
    assert seen_tokens == PLAIN


@pytest.mark.parametrize("kind", KINDS)
def test_streamed_logprobs_of_held_back_text_are_never_lost(
    servers: dict[str, Served], kind: str
) -> None:
    served = servers[kind]
    name, body = tool_output(served, f"lp-stream-call-{kind}")
    status, events = served.post({**body, "stream": True, "logprobs": True})
    assert status == 200
    chunks = per_choice(events)[0]
    assert chunks[-1]["finish_reason"] == "tool_calls"
    tokens = "".join(t["token"] for c in chunks if c["logprobs"] for t in c["logprobs"]["content"])
    assert tokens == served.standin.replies[name].text


@pytest.mark.parametrize("stream", [False, True])
def test_an_engine_without_logprobs_degrades_to_null(
    servers: dict[str, Served], stream: bool
) -> None:
    served = servers["openai"]
    before = metric(served, "autoparser_degraded_total", 'what="logprobs"')
    served.standin.logprobs = False
    try:
        body = plain_body(served, f"lp-none-{stream}")
        status, answer = served.post({**body, "logprobs": True, "stream": stream})
    finally:
        served.standin.logprobs = True
    assert status == 200
    if stream:
        assert all(c["logprobs"] is None for c in per_choice(answer)[0])
    else:
        assert answer["choices"][0]["logprobs"] is None
        assert answer["choices"][0]["message"]["content"] == PLAIN
    assert metric(served, "autoparser_degraded_total", 'what="logprobs"') == before + 1


@pytest.mark.parametrize("kind", KINDS)
def test_n_choices_are_generated_and_parsed_each(servers: dict[str, Served], kind: str) -> None:
    served = servers[kind]
    _, body = tool_output(served, f"n-whole-{kind}")
    status, one = served.post(body)
    assert status == 200
    before = len([p for p, _ in served.standin.received if p != "/tokenize"])
    status, answer = served.post({**body, "n": 3, "seed": 5})
    assert status == 200, answer
    sent = [b for p, b in served.standin.received if p != "/tokenize"][before:]
    assert len(sent) == 3
    assert sorted(b["seed"] for b in sent) == [5, 6, 7]  # each choice its own sample
    choices = answer["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    for choice in choices:
        calls = choice["message"]["tool_calls"]
        assert [c["function"] for c in calls] == [
            c["function"] for c in one["choices"][0]["message"]["tool_calls"]
        ]
        assert choice["finish_reason"] == "tool_calls"
    ids = {c["id"] for choice in choices for c in choice["message"]["tool_calls"]}
    assert len(ids) == len(choices) * len(one["choices"][0]["message"]["tool_calls"])
    usage = answer["usage"]
    assert usage["prompt_tokens"] == one["usage"]["prompt_tokens"]
    assert usage["completion_tokens"] == 3 * one["usage"]["completion_tokens"]


@pytest.mark.parametrize("kind", KINDS)
def test_n_choices_stream_each_under_its_index(servers: dict[str, Served], kind: str) -> None:
    served = servers[kind]
    _, body = tool_output(served, f"n-stream-{kind}")
    status, one = served.post(body)
    assert status == 200
    status, events = served.post(
        {**body, "n": 2, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert status == 200
    by_index = per_choice(events)
    assert sorted(by_index) == [0, 1]
    for chunks in by_index.values():
        assert chunks[0]["delta"].get("role") == "assistant"
        assert [c["finish_reason"] for c in chunks].count("tool_calls") == 1
        assert chunks[-1]["finish_reason"] == "tool_calls"
        deltas = [
            {k: v for k, v in c["delta"].items() if k != "role" and v != ""} for c in chunks[:-1]
        ]
        message = accumulate([d for d in deltas if d])
        want = one["choices"][0]["message"]["tool_calls"]
        got = message["tool_calls"]
        assert [(c["name"], json.loads(c["arguments"])) for c in got] == [
            (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in want
        ]
    usage = [e for e in events if not e.get("choices")]
    assert len(usage) == 1 and usage[0] is events[-1]
    assert usage[0]["usage"]["completion_tokens"] == 2 * one["usage"]["completion_tokens"]


def test_n_with_an_engine_down_is_one_502(servers: dict[str, Served]) -> None:
    served = servers["llama.cpp"]
    body = plain_body(served, "n-down")
    served.standin.mode = "http500"
    try:
        for stream in (False, True):
            status, answer = served.post({**body, "n": 2, "stream": stream})
            assert status == 502
            assert answer["error"]["type"] == "backend_error"
    finally:
        served.standin.mode = "ok"


def test_n_choices_a_stream_that_breaks_ends_with_an_error_event(
    servers: dict[str, Served],
) -> None:
    served = servers["llama.cpp"]
    body = plain_body(served, "n-broken")
    served.standin.mode = "broken_stream"  # one piece, then the stream ends, unfinished
    try:
        status, events = served.post({**body, "n": 2, "stream": True})
    finally:
        served.standin.mode = "ok"
    assert status == 200  # the first piece came: the error is an event
    errors = [e for e in events if "error" in e]
    assert len(errors) == 1 and errors[0]["error"]["type"] == "backend_error"
    assert events[-1] is errors[0]
