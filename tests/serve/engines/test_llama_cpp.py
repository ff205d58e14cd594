"""llama.cpp's dialect: the ``/completion`` body (lazy grammar, triggers, preserved tokens),
its readers, and its detection by ``GET /props``. End to end through serve in
tests/serve/test_app.py (stand-in) and tests/serve/test_app_llama_server.py (a real one)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.serve_standin import Answers, NoChannel

from autoparser import GrammarTrigger
from autoparser.serve.engines.base import BackendError, Generation
from autoparser.serve.engines.llama_cpp import LlamaCpp


def test_llamacpp_token_triggers_are_sent_as_preserved_words() -> None:
    """llama.cpp needs a token trigger's id; sent as a word that is also preserved, the
    server looks the id up itself."""
    gen = Generation(
        prompt="p",
        grammar="root ::= x",
        grammar_lazy=True,
        grammar_triggers=(
            GrammarTrigger("token", "<|call|>"),
            GrammarTrigger("pattern_full", "a(b)"),
        ),
        preserved_tokens=("<|x|>",),
    )
    body = LlamaCpp(NoChannel()).payload(gen, gen.prompt, stream=False)
    assert body["grammar_triggers"] == [
        {"type": 1, "value": "<|call|>"},
        {"type": 3, "value": "a(b)"},
    ]
    assert body["preserved_tokens"] == ["<|x|>", "<|call|>"]


def test_the_prompt_sent_is_the_prepared_one() -> None:
    gen = Generation(prompt="text", max_tokens=5)
    body = LlamaCpp(NoChannel()).payload(gen, ["", 1, "text"], stream=True)
    assert body["prompt"] == ["", 1, "text"] and body["n_predict"] == 5 and body["stream"]


def test_props_tell_the_template_tokens_and_model() -> None:
    props = {
        "chat_template": "{{ x }}",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "model_path": "/models/tiny.gguf",
    }
    info = asyncio.run(LlamaCpp.detect(Answers({"/props": (200, props)})))
    assert info is not None
    assert (info.kind, info.chat_template, info.bos_token, info.eos_token, info.model) == (
        "llama.cpp",
        "{{ x }}",
        "<s>",
        "</s>",
        "tiny.gguf",
    )


@pytest.mark.parametrize(
    "answer", [(404, None), (200, None), (200, ["not", "an", "object"]), (200, {"data": []})]
)
def test_other_answers_are_not_llama_cpp(answer: tuple[int, object]) -> None:
    assert asyncio.run(LlamaCpp.detect(Answers({"/props": answer}))) is None


def test_a_loading_server_is_not_ready() -> None:
    with pytest.raises(BackendError, match="still loading") as failed:
        asyncio.run(LlamaCpp.detect(Answers({"/props": (503, None)})))
    assert failed.value.status == 502 and failed.value.kind == "http"


def test_readers() -> None:
    dialect = LlamaCpp(NoChannel())
    text, end = dialect.read_whole(
        {"content": "hi", "stop_type": "word", "stopping_word": "END", "tokens_predicted": 2},
        "w",
    )
    assert (text, end.stop_word, end.hit_limit, end.usage.completion_tokens) == (
        "hi",
        "END",
        False,
        2,
    )
    state: dict[str, object] = {}
    assert dialect.read_event({"content": "a"}, state, "w") == "a"
    with pytest.raises(BackendError, match="without its final event"):
        dialect.read_end(state, "w")
    dialect.read_event({"content": "", "stop": True, "stop_type": "limit"}, state, "w")
    assert dialect.read_end(state, "w").hit_limit
    with pytest.raises(BackendError, match="no 'content' string"):
        dialect.read_whole({"choices": []}, "w")


def test_the_engines_slots_are_read_from_props() -> None:
    look = Answers({"/props": (200, {"default_generation_settings": {}, "total_slots": 4})})
    info = asyncio.run(LlamaCpp.detect(look))
    assert info is not None and info.slots == 4
    look = Answers({"/props": (200, {"default_generation_settings": {}, "total_slots": "4"})})
    info = asyncio.run(LlamaCpp.detect(look))
    assert info is not None and info.slots == 0  # not a count: unknown


def test_logprobs_are_asked_as_n_probs_and_read_in_openais_shape() -> None:
    dialect = LlamaCpp(NoChannel())
    assert "n_probs" not in dialect.payload(Generation(prompt="p"), "p", stream=True)
    assert dialect.payload(Generation(prompt="p", logprobs=3), "p", stream=True)["n_probs"] == 3
    # n_probs 0 would give no probabilities at all: the chosen token's needs one
    assert dialect.payload(Generation(prompt="p", logprobs=0), "p", stream=True)["n_probs"] == 1
    event = {
        "content": "é",
        "stop": False,
        "completion_probabilities": [
            {
                "id": 5,
                "token": "é",
                "bytes": [195, 169],
                "logprob": -0.25,
                "top_logprobs": [
                    {"id": 5, "token": "é", "bytes": [195, 169], "logprob": -0.25},
                    {"id": 9, "token": "e", "bytes": [101], "logprob": -1.5},
                ],
            }
        ],
    }
    assert dialect.read_logprobs(event, 1) == [
        {
            "token": "é",
            "logprob": -0.25,
            "bytes": [195, 169],
            "top_logprobs": [{"token": "é", "logprob": -0.25, "bytes": [195, 169]}],
        }
    ]
    assert dialect.read_logprobs({"content": "x"}, 1) is None  # none given
