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


@pytest.mark.parametrize("index", [0, 2])
def test_scored_chunks_of_a_choice_equal_json_dumps(index: int) -> None:
    """With logprobs asked (the scored path) and under another choice's index, the chunks
    still come from the prepared parts, byte for byte what json.dumps of each chunk gives:
    the first of a piece's deltas carries its tokens' logprobs, the rest null."""
    params = CASE.params(TOOLS)
    req = parse_request({"messages": [{"role": "user", "content": "hi"}], "stream": True}, False)
    field = "reasoning"
    reply = Reply(params)
    sink = ChatSink(IDENT, req, field, index)
    tokens = [{"token": 'é"', "logprob": -0.5, "bytes": [195, 169, 34], "top_logprobs": []}]
    fast, slow = [], []
    for piece in [_output()[i : i + 7] for i in range(0, len(_output()), 7)]:
        deltas = reply.feed(piece)
        fast.append(sink.feed_scored(deltas, tokens) if deltas else sink.feed(deltas))
        slow.extend(
            b"data: "
            + json.dumps(
                oai.chunk(
                    IDENT,
                    _reasoning_keys(d.to_openai(), field),
                    index=index,
                    logprobs=tokens if i == 0 else None,
                ),
                ensure_ascii=False,
            ).encode()
            + b"\n\n"
            for i, d in enumerate(deltas)
        )
    assert b"".join(fast) == b"".join(slow)
    assert b"".join(fast).count(b'"logprobs": {"content"') > 10


def test_the_batch_path_without_logprobs_and_the_scored_path_with(
    loop: LoopThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream that asks no logprobs reads the engine in batches; one that asks reads
    scored pieces (``Backend.stream``), its chunks carrying every token's logprobs."""
    standin = StandIn("llama.cpp")
    key = standin.add("mixed", _output())
    config = ServeConfig(loop.serve(standin.app()), template=CASE.load())
    url = loop.serve(create_app(config))
    calls: list[str] = []
    original = Backend.stream_batches

    def counted(self: Backend, gen: Generation) -> AsyncGenerator[list[str] | Finished, None]:
        calls.append("batches")
        return original(self, gen)

    monkeypatch.setattr(Backend, "stream_batches", counted)
    body: dict[str, Any] = {"messages": [{"role": "user", "content": key}], "stream": True}
    plain = _body(url, {**body, "tools": TOOLS})
    assert calls == ["batches"] and '"logprobs": {' not in plain
    scored = _body(url, {**body, "tools": TOOLS, "logprobs": True, "top_logprobs": 2})
    assert calls == ["batches"]  # the scored path does not read batches
    tokens = []
    for line in scored.splitlines():
        if line.startswith("data: {"):
            line = line.replace("ID", '"id": 0', 1).replace("CALL", '"id": 0')
            choices = json.loads(line[6:]).get("choices") or []
            for choice in choices:
                tokens.extend((choice.get("logprobs") or {}).get("content") or [])
    assert "".join(t["token"] for t in tokens) == _output()
    # the same deltas either way: only the logprobs differ
    strip = re.compile(r'"logprobs": (\{.*?"refusal": null\}|null)')
    assert strip.sub("L", plain) == strip.sub("L", scored)
