"""What serve passes through, checked against a real llama.cpp server (a tiny random-weight
model, two slots): token logprobs in OpenAI's chat shape, ``n`` > 1 choices,
``/v1/completions`` for evaluation harnesses, and the concurrency limit taken from the
engine's slots (issue 37 §7)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import llama_server
from helpers.paths import TESTS_DIR

aiohttp = pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytestmark = pytest.mark.skipif(not llama_server.available(), reason=llama_server.MISSING)

TEMPLATES = TESTS_DIR / "templates"
SLOTS = 2
HI = [{"role": "user", "content": "Say something."}]


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as f:
        text = f.read().decode()
    if not body.get("stream"):
        return json.loads(text)
    blocks = [b[len("data: ") :] for b in text.split("\n\n") if b.startswith("data: ")]
    assert blocks[-1] == "[DONE]"
    return [json.loads(b) for b in blocks[:-1]]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(serve's URL, the engine's URL): serve with no --max-concurrent given."""
    from helpers.tiny_gguf import write_tiny_model

    tmp = tmp_path_factory.mktemp("pass")
    hermes = (TEMPLATES / "formats/chatml_hermes.jinja").read_text(encoding="utf-8")
    model = write_tiny_model(llama_server.VOCAB, tmp / "tiny.gguf", hermes)
    with (
        llama_server.llama_server(model, tmp / "llama.log", slots=SLOTS) as (engine, _),
        llama_server.autoparser_serve(engine, tmp / "serve.log") as (url, _),
    ):
        deadline = time.monotonic() + 60  # the engine found out (its slots with it)
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "/ready", timeout=5):
                    break
            except OSError:
                time.sleep(0.2)
        yield url, engine


def _tokens(content: list[dict[str, Any]]) -> str:
    return "".join(t["token"] for t in content)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_logprobs_one_per_generated_token(served: tuple[str, str], stream: bool) -> None:
    url, _ = served
    body = {"messages": HI, "max_tokens": 12, "seed": 1, "logprobs": True, "top_logprobs": 3}
    body |= {"stream": stream, "stream_options": {"include_usage": True}} if stream else {}
    answer = _post(url + "/v1/chat/completions", body)
    if stream:
        usage = answer[-1]["usage"]
        content = [
            t
            for e in answer
            for c in e["choices"]
            if c["logprobs"]
            for t in c["logprobs"]["content"]
        ]
        text = "".join(c["delta"].get("content") or "" for e in answer for c in e["choices"])
    else:
        usage = answer["usage"]
        content = answer["choices"][0]["logprobs"]["content"]
        text = answer["choices"][0]["message"]["content"] or ""
    assert len(content) == usage["completion_tokens"] > 0  # every token, none twice
    assert text.strip() in _tokens(content)  # the text is made of those tokens
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["logprob"] <= 0 and isinstance(entry["bytes"], list)
        assert len(entry["top_logprobs"]) == 3
        values = [t["logprob"] for t in entry["top_logprobs"]]
        assert values == sorted(values, reverse=True)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_n_choices_each_generated(served: tuple[str, str], stream: bool) -> None:
    url, _ = served
    body: dict[str, Any] = {"messages": HI, "max_tokens": 8, "n": 3, "temperature": 1.0}
    body |= {"stream": stream, "stream_options": {"include_usage": True}} if stream else {}
    answer = _post(url + "/v1/chat/completions", body)
    if stream:
        indexes = {c["index"] for e in answer for c in e["choices"]}
        finished = [c["index"] for e in answer for c in e["choices"] if c["finish_reason"]]
        assert indexes == {0, 1, 2} and sorted(finished) == [0, 1, 2]
        assert answer[-1]["usage"]["completion_tokens"] > 0
    else:
        assert [c["index"] for c in answer["choices"]] == [0, 1, 2]
        assert all(c["finish_reason"] in ("stop", "length") for c in answer["choices"])
        assert answer["usage"]["completion_tokens"] <= 3 * 8


def test_completions_as_lm_eval_asks(served: tuple[str, str]) -> None:
    url, _ = served
    prompt = "The capital of France is"
    body = {"prompt": prompt, "max_tokens": 6, "logprobs": 2, "echo": True, "temperature": 0}
    answer = _post(url + "/v1/completions", body)
    assert answer["object"] == "text_completion"
    choice = answer["choices"][0]
    assert choice["text"].startswith(prompt)
    probs = choice["logprobs"]
    assert len(probs["tokens"]) == answer["usage"]["completion_tokens"] > 0
    assert len(probs["token_logprobs"]) == len(probs["top_logprobs"]) == len(probs["tokens"])
    assert all(0 < len(top) <= 2 for top in probs["top_logprobs"])
    assert probs["text_offset"][0] == len(prompt)
    # greedy: the chosen token is the most likely one
    for token, value, top in zip(
        probs["tokens"], probs["token_logprobs"], probs["top_logprobs"], strict=True
    ):
        assert max(top.values()) == pytest.approx(value, abs=1e-4) or token not in top


def test_completions_stream_and_batch(served: tuple[str, str]) -> None:
    url, _ = served
    body = {
        "prompt": ["One", "Two"],
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = _post(url + "/v1/completions", body)
    *chunks, usage = events
    assert {c["choices"][0]["index"] for c in chunks} == {0, 1}
    assert sum(1 for c in chunks if c["choices"][0]["finish_reason"]) == 2
    assert 0 < usage["usage"]["completion_tokens"] <= 10


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as f:
        text = f.read().decode()
    return float(next(x for x in text.splitlines() if x.startswith(name + " ")).split()[1])


def test_the_limit_is_the_engines_slots_and_the_rest_waits(served: tuple[str, str]) -> None:
    url, _ = served
    assert _metric(url, "autoparser_concurrency_limit") == SLOTS

    async def load() -> list[int]:
        async with aiohttp.ClientSession() as session:

            async def one() -> int:
                body = {"messages": HI, "max_tokens": 4}
                async with session.post(url + "/v1/chat/completions", json=body) as r:
                    await r.read()
                    return r.status

            return await asyncio.gather(*(one() for _ in range(12)))

    assert asyncio.run(load()) == [200] * 12


def test_completions_max_tokens_zero_scores_nothing_and_generates_nothing(
    served: tuple[str, str],
) -> None:
    """llama.cpp generates a token even at ``n_predict: 0``: serve asks it for none."""
    url, _ = served
    prompt = "The capital of France is"
    answer = _post(url + "/v1/completions", {"prompt": prompt, "max_tokens": 0, "echo": True})
    choice = answer["choices"][0]
    assert choice["text"] == prompt and choice["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 0 and answer["usage"]["prompt_tokens"] > 0
