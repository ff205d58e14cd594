"""vLLM's dialect: recognised by the owner its ``GET /v1/models`` names, the OpenAI-style
body and readers (the grammar as ``structured_outputs``), its own ``/health``; detected and
served end to end in front of the stand-in."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.generate_cases import CASE_BY_NAME, TOOLS
from helpers.serve_standin import Answers, LoopThread, NoChannel, StandIn, serve_in_front

from autoparser.serve.engines.base import Generation
from autoparser.serve.engines.openai import OpenAIStyle
from autoparser.serve.engines.vllm import VLLM


def models(owner: str) -> dict[str, tuple[int, object]]:
    return {"/v1/models": (200, {"data": [{"id": "org/model", "owned_by": owner}]})}


def test_detected_by_its_models_owner() -> None:
    info = asyncio.run(VLLM.detect(Answers(models("vllm"))))
    assert info is not None and (info.kind, info.model) == ("vllm", "org/model")
    for answers in (models("sglang"), models(""), {"/v1/models": (500, None)}, {}):
        assert asyncio.run(VLLM.detect(Answers(answers))) is None


def test_the_body_is_the_openai_style_one() -> None:
    gen = Generation(prompt="p", grammar="root ::= x", max_tokens=3, stop=("S",))
    ours = VLLM(NoChannel(), "m").payload(gen, "p", stream=True)
    assert ours == OpenAIStyle(NoChannel(), "m").payload(gen, "p", stream=True)
    assert ours["structured_outputs"] == {"grammar": "root ::= x"}
    assert ours["skip_special_tokens"] is False and ours["spaces_between_special_tokens"] is False
    text, end = VLLM(NoChannel()).read_whole(
        {"choices": [{"text": "x", "finish_reason": "stop", "stop_reason": "END"}]}, "w"
    )
    assert (text, end.stop_word) == ("x", "END")


def test_auto_detects_vllm_and_serves_it(loop: LoopThread) -> None:
    case = CASE_BY_NAME["hermes"]
    standin = StandIn("openai")
    standin.owner = "vllm"
    key = standin.add("v", "Sunny.")
    _, ask = serve_in_front(loop, standin, template=case.load())
    messages = [{"role": "user", "content": f"Hi {key}"}]
    status, whole = ask("/v1/chat/completions", {"messages": messages, "tool_choice": "none"})
    assert status == 200 and whole["model"] == "standin-model"
    assert ask("/health", None) == (200, {"status": "ok", "backend": "vllm"})
    ask("/v1/chat/completions", {"messages": messages, "tools": TOOLS, "tool_choice": "required"})
    sent = next(b for p, b in reversed(standin.received) if p == "/v1/completions")
    required = case.load().apply(messages, tools=TOOLS, tool_choice="required")
    assert sent["structured_outputs"] == {"grammar": required.grammar}


def test_vllm_reads_the_bodies_as_sent() -> None:
    """vLLM's own request models take every body the dialect sends, and keep what matters:
    the grammar, special tokens in the text without spaces around them, the stop strings,
    the prompt of ids; its /tokenize body too."""
    from helpers.engine_requests import engine_reads

    dialect = VLLM(NoChannel(), "org/model")
    gen = Generation(prompt="p", grammar='root ::= "a"', max_tokens=7, stop=("S",))
    whole = dialect.payload(gen, [1, 2, 3], stream=False)
    tokenize = {
        "model": "org/model",
        "prompt": "a",
        "add_special_tokens": False,
        "return_token_strs": True,
    }
    read = engine_reads(
        "vllm",
        [
            ("vllm.entrypoints.openai.completion.protocol:CompletionRequest", whole),
            ("vllm.entrypoints.serve.tokenize.protocol:TokenizeCompletionRequest", tokenize),
        ],
    )
    assert read[0]["structured_outputs"]["grammar"] == 'root ::= "a"'
    assert read[0]["prompt"] == [1, 2, 3] and (read[0]["max_tokens"], read[0]["stop"]) == (7, ["S"])
    assert read[0]["skip_special_tokens"] is False
    assert read[0]["spaces_between_special_tokens"] is False
    assert read[1]["return_token_strs"] is True and read[1]["add_special_tokens"] is False
