"""``POST /v1/completions`` passed through (issue 37 §7): to llama.cpp's ``/completion``
translated (a generation per prompt and choice, ``n_predict``, ``n_probs``, echo, logprobs
in the completions shape), to OpenAI-style engines as it came; validation, auth, admission
and errors as every route. Against the stand-in engine; a real llama-server in
tests/serve/test_app_llama_server.py."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.generate_cases import CASE_BY_NAME
from helpers.serve_standin import LoopThread, StandIn, alternatives, piece_logprob

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig
from autoparser.serve.completions_api import (
    MAX_GENERATIONS,
    legacy_logprobs,
    parse_completion_request,
    read_prompts,
)
from autoparser.serve.limits import InvalidRequest

REPLY = "Paris is the capital of France."


class Front:
    """A stand-in engine of ``kind`` and a server in front of it."""

    def __init__(self, loop: LoopThread, kind: str, **kw: Any) -> None:
        self.standin = StandIn(kind)
        self.standin.add("k", REPLY)
        self.standin.add("j", "Berlin.")
        backend = loop.serve(self.standin.app())
        template = CASE_BY_NAME["hermes"].load()
        self.url = loop.serve(create_app(ServeConfig(backend, template=template, **kw)))

    def post(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + "/v1/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as f:
                status, text = f.status, f.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())
        if body.get("stream"):
            blocks = [b[len("data: ") :] for b in text.split("\n\n") if b.strip()]
            assert blocks[-1] == "[DONE]"
            return status, [json.loads(b) for b in blocks[:-1]]
        return status, json.loads(text)

    def sent(self) -> list[dict[str, Any]]:
        return [b for path, b in self.standin.received if path != "/tokenize"]

    def metric(self, name: str, labels: str) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as f:
            for line in f.read().decode().splitlines():
                if line.startswith(f"{name}{{{labels}}}"):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0


@pytest.fixture(scope="module")
def fronts(loop: LoopThread) -> dict[str, Front]:
    return {kind: Front(loop, kind) for kind in ("llama.cpp", "openai")}


# ------------------------------------------------------------------ reading the request


@pytest.mark.parametrize(
    ("prompt", "read"),
    [
        ("hi", ("hi",)),
        (["a", "b"], ("a", "b")),
        ([1, 2, 3], ([1, 2, 3],)),
        ([[1], [2, 3]], ([1], [2, 3])),
    ],
)
def test_prompts_are_read_in_every_form_openai_takes(prompt: Any, read: tuple[Any, ...]) -> None:
    assert read_prompts(prompt) == read


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"prompt": [1, "a"]}, "prompt"),
        ({"prompt": [-1]}, "prompt"),
        ({"prompt": 5}, "prompt"),
        ({"prompt": "x", "n": 17}, "n"),
        ({"prompt": "x", "logprobs": 21}, "logprobs"),
        ({"prompt": "x", "logprobs": True}, "logprobs"),
        ({"prompt": "x", "max_tokens": -1}, "max_tokens"),
        ({"prompt": "x", "echo": "yes"}, "echo"),
        ({"prompt": "x", "temperature": "hot"}, "temperature"),
        ({"prompt": ["x"] * (MAX_GENERATIONS + 1)}, "prompt"),
        ({"prompt": ["x"] * 8, "n": 9}, "prompt"),
    ],
)
def test_a_bad_request_names_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_completion_request(body)
    assert raised.value.param == param and raised.value.status == 400


def test_legacy_logprobs_are_offset_into_the_text() -> None:
    tokens: list[dict[str, object]] = [
        {"token": "Pa", "logprob": -0.5, "top_logprobs": [{"token": "Pa", "logprob": -0.5}]},
        {"token": "ris", "logprob": -0.25, "top_logprobs": []},
    ]
    assert legacy_logprobs(tokens, 4) == {
        "tokens": ["Pa", "ris"],
        "token_logprobs": [-0.5, -0.25],
        "top_logprobs": [{"Pa": -0.5}, {}],
        "text_offset": [4, 6],
    }


# ------------------------------------------------------------------ llama.cpp, translated


def test_llama_cpp_gets_the_prompt_as_written_and_answers_in_the_completions_shape(
    fronts: dict[str, Front],
) -> None:
    front = fronts["llama.cpp"]
    before = len(front.sent())
    prompt = "Question [[k]] Answer:"
    status, answer = front.post({"prompt": prompt, "max_tokens": 7, "temperature": 0})
    assert status == 200, answer
    sent = front.sent()[before:]
    assert len(sent) == 1
    assert sent[0]["prompt"] == prompt  # no template applied
    assert sent[0]["n_predict"] == 7 and sent[0]["temperature"] == 0
    assert "n_probs" not in sent[0]
    assert answer["object"] == "text_completion" and answer["id"].startswith("cmpl-")
    assert answer["choices"] == [
        {"index": 0, "text": REPLY, "logprobs": None, "finish_reason": "stop"}
    ]
    usage = answer["usage"]
    assert usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_llama_cpp_logprobs_and_echo_as_evaluation_harnesses_ask(
    fronts: dict[str, Front],
) -> None:
    front = fronts["llama.cpp"]
    before = front.metric("autoparser_degraded_total", 'what="logprobs"')
    prompt = "Q: [[k]] A:"
    status, answer = front.post({"prompt": prompt, "logprobs": 2, "echo": True})
    assert status == 200, answer
    assert front.sent()[-1]["n_probs"] == 2
    choice = answer["choices"][0]
    assert choice["text"] == prompt + REPLY
    probs = choice["logprobs"]
    assert "".join(probs["tokens"]) == REPLY  # the generated tokens' (no prompt logprobs)
    assert probs["token_logprobs"] == [piece_logprob(t) for t in probs["tokens"]]
    assert probs["top_logprobs"] == [dict(alternatives(t, 2)) for t in probs["tokens"]]
    offsets = [len(prompt) + len("".join(probs["tokens"][:i])) for i in range(len(probs["tokens"]))]
    assert probs["text_offset"] == offsets
    # llama.cpp has no logprobs of the prompt: said, counted, not refused
    assert front.metric("autoparser_degraded_total", 'what="logprobs"') == before + 1


def test_llama_cpp_batches_and_choices_are_a_generation_each(fronts: dict[str, Front]) -> None:
    front = fronts["llama.cpp"]
    before = len(front.sent())
    status, answer = front.post({"prompt": ["A [[k]]", "B [[j]]"], "n": 2, "seed": 3})
    assert status == 200, answer
    sent = front.sent()[before:]
    assert len(sent) == 4
    assert sorted(b["seed"] for b in sent) == [3, 3, 4, 4]
    assert [(c["index"], c["text"]) for c in answer["choices"]] == [
        (0, REPLY),
        (1, REPLY),
        (2, "Berlin."),
        (3, "Berlin."),
    ]


def test_llama_cpp_streams_completion_chunks(fronts: dict[str, Front]) -> None:
    front = fronts["llama.cpp"]
    status, events = front.post(
        {
            "prompt": ["[[k]]", "[[j]]"],
            "stream": True,
            "logprobs": 1,
            "stream_options": {"include_usage": True},
        }
    )
    assert status == 200
    *chunks, usage = events
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
    assert all(c["object"] == "text_completion" for c in chunks)
    for index, text in ((0, REPLY), (1, "Berlin.")):
        mine = [c["choices"][0] for c in chunks if c["choices"][0]["index"] == index]
        assert "".join(c["text"] for c in mine) == text
        assert [c["finish_reason"] for c in mine].count("stop") == 1
        assert mine[-1]["finish_reason"] == "stop"
        tokens = [t for c in mine if c["logprobs"] for t in c["logprobs"]["tokens"]]
        assert "".join(tokens) == text


def test_an_engine_that_fails_is_a_502(fronts: dict[str, Front]) -> None:
    front = fronts["llama.cpp"]
    front.standin.mode = "http500"
    try:
        for stream in (False, True):
            status, answer = front.post({"prompt": "[[k]]", "stream": stream})
            assert status == 502
            assert answer["error"]["type"] == "backend_error"
            assert "127.0.0.1" not in answer["error"]["message"]  # no engine URL
    finally:
        front.standin.mode = "ok"


# ------------------------------------------------------------------ OpenAI-style, forwarded


def test_openai_style_engines_get_the_body_as_it_came(fronts: dict[str, Front]) -> None:
    front = fronts["openai"]
    body = {
        "model": "whatever-the-client-says",
        "prompt": "Q [[k]]",
        "max_tokens": 0,
        "echo": True,
        "logprobs": 1,
        "best_of": 1,  # a field serve does not read: forwarded all the same
    }
    status, answer = front.post(body)
    assert status == 200, answer
    sent = front.sent()[-1]
    assert sent == {**body, "model": "standin-model"}  # the engine's model named
    assert answer["model"] == "standin-model"
    choice = answer["choices"][0]
    assert choice["text"] == REPLY
    assert "".join(choice["logprobs"]["tokens"]) == REPLY


def test_openai_style_streams_are_relayed(fronts: dict[str, Front]) -> None:
    front = fronts["openai"]
    status, events = front.post(
        {"prompt": "Q [[k]]", "stream": True, "stream_options": {"include_usage": True}}
    )
    assert status == 200
    texts = "".join(c["text"] for e in events for c in e["choices"])
    assert texts == REPLY
    assert events[-1]["usage"]["completion_tokens"] > 0


def test_an_engines_refusal_is_the_clients_400(fronts: dict[str, Front]) -> None:
    front = fronts["openai"]
    front.standin.flavor = "tgi"  # refuses a prompt of token ids with a 400
    try:
        status, answer = front.post({"prompt": [1, 2, 3]})
    finally:
        front.standin.flavor = "vllm"
    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"


# ------------------------------------------------------------------ as every route


def test_auth_holds_for_the_route(loop: LoopThread) -> None:
    front = Front(loop, "llama.cpp", api_keys=("s3cret",))
    status, answer = front.post({"prompt": "[[k]]"})
    assert status == 401
    status, answer = front.post({"prompt": "[[k]]"}, {"Authorization": "Bearer s3cret"})
    assert status == 200 and answer["choices"][0]["text"] == REPLY


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_zero_generates_nothing(fronts: dict[str, Front], stream: bool) -> None:
    """A harness scoring a prompt asks for no tokens; llama.cpp would generate one even at
    ``n_predict: 0``, so nothing is asked of it but the prompt's count."""
    front = fronts["llama.cpp"]
    before = len(front.sent())
    body = {"prompt": "Q [[k]]", "max_tokens": 0, "echo": True, "logprobs": 1, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    status, answer = front.post(body)
    assert status == 200, answer
    assert len(front.sent()) == before  # no generation
    if stream:
        *chunks, last = answer
        choices = [c["choices"][0] for c in chunks]
        assert "".join(c["text"] for c in choices) == "Q [[k]]"
        assert choices[-1]["finish_reason"] == "length"
        usage = last["usage"]
    else:
        choice = answer["choices"][0]
        assert choice["text"] == "Q [[k]]" and choice["finish_reason"] == "length"
        assert choice["logprobs"]["tokens"] == []
        usage = answer["usage"]
    assert usage["completion_tokens"] == 0 and usage["prompt_tokens"] > 0


def test_a_stream_that_breaks_ends_with_an_error_event(fronts: dict[str, Front]) -> None:
    front = fronts["llama.cpp"]
    front.standin.mode = "broken_stream"
    try:
        status, events = front.post({"prompt": ["[[k]]", "[[j]]"], "stream": True})
    finally:
        front.standin.mode = "ok"
    assert status == 200
    errors = [e for e in events if "error" in e]
    assert len(errors) == 1 and errors[-1] is events[-1]
    assert errors[0]["error"]["type"] == "backend_error"
