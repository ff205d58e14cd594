"""A second engine adapter, written only against the public session API (``autoparser``'s
``Session``, ``Reply``, ``merge_deltas``, ``ReasoningSplit``), proving the API suffices.

The "engine" is a toy: it takes a prompt, stop strings and an optional grammar, and returns
canned text cut at the first stop, in chunks. The adapter turns OpenAI chat-completion
requests into engine calls and the engine's text into an OpenAI response or chunk deltas,
with tools and reasoning, in under 100 lines (counted below). The oracle is the library's
own facade: ``ChatTemplate.apply(...).parse`` on the same request and text, and the model
output comes from the template itself (an assistant turn rendered, then cut at the stop).
"""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from helpers.paths import own_path

import autoparser
from autoparser import ChatTemplate, ReasoningSplit, Reply, Session, StreamDelta, merge_deltas

# ---------------------------------------------------------------- the toy engine


class CannedEngine:
    """Returns ``canned`` for any prompt, cut at the first stop string, in ``pieces``."""

    def __init__(self, canned: str, pieces: int = 1, seed: int = 0) -> None:
        self.canned, self.pieces, self.rng = canned, pieces, random.Random(seed)
        self.seen: list[tuple[str, list[str], str | None]] = []

    def generate(self, prompt: str, stop: list[str], grammar: str | None) -> Iterator[str]:
        self.seen.append((prompt, stop, grammar))
        text = self.canned
        cuts = [at for at in (text.find(s) for s in stop) if at >= 0]
        text = text[: min(cuts)] if cuts else text
        bounds = sorted(self.rng.sample(range(1, len(text)), min(self.pieces - 1, len(text) - 1)))
        for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True):
            yield text[a:b]


# ---------------------------------------------------------------- the adapter (< 100 lines)


class ToyAdapter:
    """OpenAI chat completions on the toy engine, through autoparser's session API."""

    def __init__(self, engine: CannedEngine, template: str) -> None:
        self.engine = engine
        self.session = Session.for_source(template, name="toy")

    def _start(self, request: Mapping[str, object]) -> tuple[Reply, Iterator[str]]:
        params = self.session.params(request)
        parallel = request.get("parallel_tool_calls")
        reply = Reply(params, parallel_tool_calls=parallel if isinstance(parallel, bool) else None)
        # A lazy grammar waits for its trigger: a toy engine without triggers leaves it out.
        grammar = None if params.grammar_lazy else params.grammar
        return reply, self.engine.generate(params.prompt, params.additional_stops, grammar)

    def complete(self, request: Mapping[str, object]) -> dict[str, Any]:
        """A ``chat.completion`` response."""
        reply, pieces = self._start(request)
        message = reply.parse("".join(pieces))
        finish = "tool_calls" if message.tool_calls else "stop"
        choice = {"index": 0, "message": message.to_openai(), "finish_reason": finish}
        return {"object": "chat.completion", "choices": [choice]}

    def stream(self, request: Mapping[str, object]) -> Iterator[dict[str, Any]]:
        """``chat.completion.chunk`` objects, one per engine piece that made a delta."""
        reply, pieces = self._start(request)
        calls = False
        for piece in [*pieces, None]:
            found = reply.feed(piece) if piece is not None else reply.finish()
            delta = merge_deltas(found)
            if delta is not None:
                calls = calls or bool(delta.tool_calls)
                yield _chunk(delta.to_openai(), None)
        yield _chunk({}, "tool_calls" if calls else "stop")

    def split_reasoning(self, request: Mapping[str, object]) -> tuple[str, str]:
        """The raw output as (reasoning, the text after it), split as it streams: for an
        engine that hands the rest to another parser."""
        params = self.session.params(request)
        kwargs = request.get("chat_template_kwargs") or {}
        thinking = kwargs.get("enable_thinking") if isinstance(kwargs, Mapping) else None
        split = self.session.reasoning_split(
            params.prompt, thinking if isinstance(thinking, bool) else None
        )
        pieces = self.engine.generate(params.prompt, params.additional_stops, None)
        parts = [split.feed(p) for p in pieces]
        parts.append(split.finish())
        return "".join(r for r, _ in parts), "".join(t for _, t in parts)


def _chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "choices": [choice]}


# ---------------------------------------------------------------- the checks

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
USER = {"role": "user", "content": "Weather in Paris and Oslo?"}
CALLS = [
    {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": c}},
    }
    for i, c in enumerate(["Paris", "Oslo"])
]
# (own template, the assistant turn the model writes, request fields beside messages)
CASES = {
    "tools+reasoning": (
        "tools_only_reasoning",
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Two cities.",
            "tool_calls": CALLS,
        },
        {"tools": TOOLS},
    ),
    "forced-open reasoning": (
        "forced_open",
        {"role": "assistant", "content": "Sunny.", "reasoning_content": "Look it up."},
        {},
    ),
    "content and calls": (
        "chatml_hermes",
        {"role": "assistant", "content": "Checking.", "tool_calls": CALLS},
        {"tools": TOOLS},
    ),
}


def _setup(
    name: str, pieces: int = 1, seed: int = 0
) -> tuple[ToyAdapter, ChatTemplate, str, dict[str, Any]]:
    stem, turn, fields = CASES[name]
    source = own_path(stem).read_text(encoding="utf-8")
    template = ChatTemplate(source)
    tools = fields.get("tools")
    prompt = template.render([USER], tools=tools, add_generation_prompt=True)
    whole = template.render([USER, turn], tools=tools, add_generation_prompt=False)
    assert whole.startswith(prompt), "the template renders the turn after its generation prompt"
    canned = whole[len(prompt) :]
    request = {"messages": [USER], **fields}
    return ToyAdapter(CannedEngine(canned, pieces, seed), source), template, canned, request


def _view(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message without call ids (fresh per response), arguments as data."""
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    return {
        "content": message.get("content") or None,
        "reasoning": message.get("reasoning_content") or None,
        "calls": calls,
    }


def _accumulate(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Stream deltas added up into one message, as an OpenAI client does."""
    content, reasoning, calls = "", "", {}
    for chunk in chunks:
        delta = chunk["choices"][0]["delta"]
        content += delta.get("content") or ""
        reasoning += delta.get("reasoning_content") or ""
        for tc in delta.get("tool_calls", ()):
            call = calls.setdefault(tc["index"], {"id": tc.get("id"), "function": {}})
            call["function"]["name"] = tc["function"].get("name") or call["function"].get("name")
            call["function"]["arguments"] = (
                call["function"].get("arguments", "") + tc["function"]["arguments"]
            )
    ordered = [calls[i] for i in sorted(calls)]
    return {"content": content, "reasoning_content": reasoning, "tool_calls": ordered}


@pytest.mark.parametrize("name", CASES)
def test_whole_response_is_the_librarys_parse(name: str) -> None:
    adapter, template, canned, request = _setup(name)
    response = adapter.complete(request)
    params = template.apply([USER], request.get("tools"))
    prompt, stops, _ = adapter.engine.seen[-1]
    assert prompt == params.prompt
    assert stops == params.additional_stops
    expected = params.parse(
        canned[: min([canned.find(s) for s in stops if s in canned] or [len(canned)])]
    )
    got = response["choices"][0]["message"]
    assert _view(got) == _view(expected.to_openai())
    assert _view(got)["calls"] or _view(got)["reasoning"]  # the case shows what it is for
    finish = response["choices"][0]["finish_reason"]
    assert finish == ("tool_calls" if expected.tool_calls else "stop")


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("pieces", [1, 3, 17])
def test_streamed_deltas_add_up_to_the_whole_response(name: str, pieces: int) -> None:
    for seed in range(5):
        adapter, _, _, request = _setup(name, pieces, seed)
        whole = adapter.complete(request)["choices"][0]["message"]
        chunks = list(adapter.stream(request))
        assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "tool_calls")
        streamed = _accumulate(chunks)
        assert _view(streamed) == _view(whole)
        assert all(c["id"].startswith("call_") for c in streamed["tool_calls"])


def test_call_ids_are_fresh_per_response_and_one_call_without_parallel_calls() -> None:
    adapter, _, _, request = _setup("tools+reasoning")
    first = adapter.complete(request)["choices"][0]["message"]["tool_calls"]
    second = adapter.complete(request)["choices"][0]["message"]["tool_calls"]
    assert len(first) == 2
    assert {c["id"] for c in first}.isdisjoint(c["id"] for c in second)
    single = {**request, "parallel_tool_calls": False}
    assert len(adapter.complete(single)["choices"][0]["message"]["tool_calls"]) == 1
    streamed = _accumulate(list(adapter.stream(single)))
    assert [c["function"]["name"] for c in streamed["tool_calls"]] == ["get_weather"]


@pytest.mark.parametrize("name", ["tools+reasoning", "forced-open reasoning"])
@pytest.mark.parametrize("pieces", [1, 4, 23])
def test_the_reasoning_split_agrees_with_the_parse(name: str, pieces: int) -> None:
    """Split on the raw text, the reasoning is what the parse finds; the text after it
    parses (reasoning off) to the parse's content and calls."""
    adapter, _, _, request = _setup(name, pieces)
    whole = adapter.complete(request)["choices"][0]["message"]
    reasoning, rest = adapter.split_reasoning(request)
    assert reasoning == whole["reasoning_content"]
    after = adapter.session.params(request, reasoning=False).parse(rest)
    assert _view(after.to_openai()) == {**_view(whole), "reasoning": None}


def test_the_adapter_is_short() -> None:
    """The point of the session API: an engine adapter fits in under 100 lines."""
    lines = inspect.getsource(ToyAdapter).splitlines() + inspect.getsource(_chunk).splitlines()
    assert len([line for line in lines if line.strip()]) < 100


def test_the_session_api_is_public() -> None:
    for name in ("Session", "Reply", "RequestOptions", "ReasoningSplit", "merge_deltas"):
        assert name in autoparser.__all__
        assert getattr(autoparser, name) is getattr(autoparser.session, name)


def test_merge_deltas_joins_one_steps_deltas() -> None:
    from autoparser import ToolCallDelta

    call = ToolCallDelta(0, '{"a"', "call_1", "f")
    merged = merge_deltas(
        [StreamDelta("a"), StreamDelta(reasoning_content="r"), StreamDelta("b", None, (call,))]
    )
    assert merged == StreamDelta("ab", "r", (call,))
    assert merge_deltas([StreamDelta(), StreamDelta("")]) is None


def test_a_bad_request_field_is_a_request_error_naming_it() -> None:
    adapter, _, _, _ = _setup("content and calls")
    for field, value in [
        ("tools", "x"),
        ("parallel_tool_calls", "yes"),
        ("chat_template_kwargs", [1]),
    ]:
        with pytest.raises(autoparser.RequestError, match=field):
            adapter.session.params({"messages": [USER], field: value})


def test_sessions_and_params_are_cached_in_the_one_store() -> None:
    source = own_path("chatml_hermes").read_text(encoding="utf-8")
    assert Session.for_source(source) is Session.for_source(str(source))
    stats = autoparser.CACHES.stats()
    assert {"session_templates", "session_params"} <= set(stats)
    before = stats["session_params"].hits
    request = {"messages": [USER], "tools": TOOLS}
    first = Session.for_source(source).params(request)
    assert Session.for_source(source).params(json.loads(json.dumps(request))) is first
    assert autoparser.CACHES.stats()["session_params"].hits > before


def test_reasoning_split_is_the_one_implementation() -> None:
    """The engine plug-ins use the library's split (no twin of their own)."""
    from autoparser.integrations import adapter

    assert adapter.ReasoningSplit is ReasoningSplit
    session = Session.for_source(
        own_path("reasoning/forced_open.jinja").read_text(encoding="utf-8")
    )
    params = session.params({"messages": [USER]})
    assert params.thinking_forced_open
    split = session.reasoning_split(params.prompt, None)
    assert split.split("a</think>b") == ("a", "b")
    # Built from the response's own parser: the split is what the parse reads.
    assert ReasoningSplit(params).split("a</think>b") == ("a", "b")
    assert params.parse("a</think>b").reasoning_content == "a"
