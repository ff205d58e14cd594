"""The streamed chunks' fast path against the slow one, byte for byte.

The fast path writes each delta's chunk from parts prepared once per response
(``ChatSink`` over ``openai_format.ChunkEvents``, one-text-field deltas written directly)
and answers each batch of engine pieces that arrived together with one write. The slow
path is what serve wrote before: every chunk object through ``json.dumps``, one batch per
piece. A mixed output (reasoning, content, two calls, text with quotes, escapes and
non-ASCII) split everywhere, markers included, must give the same bytes on both.
"""

from __future__ import annotations

import json
import random
import re
import urllib.request
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from helpers.generate_cases import CASE_BY_NAME, TOOLS, call
from helpers.serve_standin import LoopThread, StandIn

from autoparser import Reply
from autoparser.serve import create_app
from autoparser.serve import openai_format as oai
from autoparser.serve.app import ServeConfig
from autoparser.serve.chat_completions import (
    REASONING_FIELDS,
    ChatSink,
    _reasoning_keys,
    parse_request,
)
from autoparser.serve.engines.backend import Backend
from autoparser.serve.engines.base import Finished, Generation

CASE = CASE_BY_NAME["glm"]  # reasoning in <think> tags and tool calls
MESSAGE = {
    "role": "assistant",
    "reasoning_content": 'Weigh "both" cities\\n\tfirst: é, 東京, 😀 </thin',
    "content": 'Checking "now" — ok\\',
    "tool_calls": [
        call("get_weather", {"city": 'Zürich "old"', "unit": "celsius"}, ""),
        call("search", {"query": "news\n<tool_call>", "limit": 3}, ""),
    ],
}
IDENT = oai.ResponseIdentity("chatcmpl-abc", 1700000000, 'model "q" ü/ё\\')


def _output() -> str:
    return CASE.output(MESSAGE, TOOLS)


def _splits(text: str) -> list[list[str]]:
    """The text in pieces of 1, 2, 3, 5 and 8 characters, and in random sizes."""
    out = [[text[i : i + n] for i in range(0, len(text), n)] for n in (1, 2, 3, 5, 8)]
    rng = random.Random(37)
    for _ in range(3):
        pieces, at = [], 0
        while at < len(text):
            size = rng.randint(1, 12)
            pieces.append(text[at : at + size])
            at += size
        out.append(pieces)
    return out


def _slow(deltas: list[Any], field: str) -> bytes:
    """What serve wrote for ``deltas`` before the fast path: each chunk through json.dumps."""
    return b"".join(
        b"data: "
        + json.dumps(
            oai.chunk(IDENT, _reasoning_keys(d.to_openai(), field)), ensure_ascii=False
        ).encode()
        + b"\n\n"
        for d in deltas
    )


@pytest.mark.parametrize("policy", ["whole", "incremental"])
@pytest.mark.parametrize("field", REASONING_FIELDS)
def test_sink_chunks_equal_json_dumps_of_each_chunk(field: str, policy: str) -> None:
    params = CASE.params(TOOLS)
    req = parse_request({"messages": [{"role": "user", "content": "hi"}], "stream": True}, False)
    text = _output()
    kinds: set[str] = set()
    for pieces in _splits(text):
        reply = Reply(params, tool_call_deltas=policy)
        sink = ChatSink(IDENT, req, field)
        fast, slow = [], []
        for piece in [*pieces, None]:
            deltas = reply.feed(piece) if piece is not None else reply.finish()
            fast.append(sink.feed(deltas))
            slow.append(_slow(deltas, field))
            for d in deltas:
                kinds |= {k for k in ("content", "reasoning_content") if getattr(d, k)}
                kinds |= {"tool_calls"} if d.tool_calls else set()
        assert b"".join(fast) == b"".join(slow)
        message = reply.message
        assert message.reasoning_content and message.content and len(message.tool_calls) == 2
    assert kinds == {"content", "reasoning_content", "tool_calls"}


@pytest.mark.parametrize("index", [0, 3])
@pytest.mark.parametrize("logprobs", [None, {"content": [{"token": 'é"', "logprob": -0.5}]}])
@pytest.mark.parametrize("reason", [None, "stop"])
def test_chunk_events_equal_json_dumps(index: int, logprobs: Any, reason: str | None) -> None:
    """Extra fields of a chunk (another choice's index, a logprobs object, the finish
    reason) come out as json.dumps writes them."""
    events = oai.ChunkEvents(IDENT)
    for delta in ({}, {"content": 'a "b" \\ é 😀\n'}, {"reasoning": "x", "content": ""}):
        whole = oai.chunk(IDENT, delta, reason)
        whole["choices"] = [{**whole["choices"][0], "index": index, "logprobs": logprobs}]  # type: ignore[index]
        expected = "data: " + json.dumps(whole, ensure_ascii=False) + "\n\n"
        assert events.event(oai.to_json(delta), index, logprobs, reason) == expected


def _body(url: str, body: dict[str, Any]) -> str:
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as f:
        text: str = f.read().decode()
    # one response's own ids and time
    text = re.sub(r'"id": "call_\w+"', "CALL", text)
    return re.sub(
        r'"id": "chatcmpl-\w+", "object": "chat.completion.chunk", "created": \d+', "ID", text
    )


def _regrouped(how: str) -> Any:
    """``Backend.stream_batches`` with its pieces regrouped: all in one batch, or each
    piece alone."""
    original = Backend.stream_batches

    async def regrouped(
        self: Backend, gen: Generation
    ) -> AsyncGenerator[list[str] | Finished, None]:
        held: list[str] = []
        async for item in original(self, gen):
            if isinstance(item, Finished):
                if held:
                    yield held
                yield item
            elif how == "alone":
                for piece in item:
                    yield [piece]
            else:
                held.extend(item)

    return regrouped


@pytest.mark.parametrize("policy", ["whole", "incremental"])
def test_a_batch_answered_at_once_equals_its_pieces_one_by_one(
    loop: LoopThread, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin = StandIn("llama.cpp")
    standin.max_chunk = 3
    key = standin.add("mixed", _output())
    config = ServeConfig(loop.serve(standin.app()), template=CASE.load(), tool_call_deltas=policy)
    url = loop.serve(create_app(config))
    body = {"messages": [{"role": "user", "content": key}], "tools": TOOLS, "stream": True}
    bodies = {}
    for how in ("together", "alone"):
        monkeypatch.setattr(Backend, "stream_batches", _regrouped(how))
        bodies[how] = _body(url, body)
    assert bodies["together"] == bodies["alone"]
    chunks = bodies["alone"].count("data: ")
    assert chunks > 10 and '"tool_calls"' in bodies["alone"] and '"reasoning"' in bodies["alone"]
