"""Completion engines the server talks to: llama.cpp's ``/completion`` and any OpenAI-style
``/v1/completions``, with SSE reading and backend-kind detection (``GET /props``).

A backend turns one ``Generation`` (prompt, limits, sampling, grammar) into text, whole or
as a stream of pieces, and reports how it ended (token limit or not) and its token counts.
Every way a backend can fail (down, HTTP error, an answer that is not what its API
promises) becomes a ``BackendError``, which the server answers with HTTP 502.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import aiohttp

from autoparser import GrammarTrigger
from autoparser.serve.kinds import BACKEND_KINDS, BACKENDS
from autoparser.serve.openai_format import Usage

# llama.cpp's integer trigger kinds (common_grammar_trigger_type): token, word, pattern,
# pattern_full. A "token" trigger needs the token id, which only the engine knows; sent as
# a word, llama.cpp tokenizes it and turns a single preserved token into a token trigger.
LLAMA_TRIGGER_TYPES = {"token": 1, "word": 1, "pattern": 2, "pattern_full": 3}


class BackendError(Exception):
    """The backend is unreachable or its answer is not what its API promises (HTTP 502)."""


@dataclasses.dataclass(frozen=True)
class Generation:
    """One completion request, engine-neutral."""

    prompt: str
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    sampling: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    grammar: str | None = None
    grammar_lazy: bool = False
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a generation ended: on the token limit or not, and the backend's token counts."""

    hit_limit: bool
    usage: Usage

    @property
    def reason(self) -> str:
        """The finish reason the parser takes (``"length"`` makes a cut call not a call)."""
        return "length" if self.hit_limit else "stop"


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """What ``GET /props`` (llama.cpp) told about the model, when it answered."""

    kind: str
    chat_template: str = ""
    bos_token: str = ""
    eos_token: str = ""
    model: str = ""


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BackendError(f"{where}: the backend answered something that is not JSON") from exc


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


async def _sse_events(response: aiohttp.ClientResponse, where: str) -> AsyncIterator[Any]:
    """The JSON payloads of a ``text/event-stream`` body, until ``[DONE]`` or its end."""
    try:
        async for raw in response.content:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value.strip()
            if field == "error":
                raise BackendError(f"{where}: the backend reported an error: {value}")
            if field != "data":
                continue
            if value == "[DONE]":
                return
            event = _json(value, where)
            if isinstance(event, Mapping) and "error" in event:
                raise BackendError(f"{where}: the backend reported an error: {event['error']}")
            yield event
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        if isinstance(exc, BackendError):
            raise
        raise BackendError(f"{where}: the backend stream broke off: {exc!r}") from exc


class Backend:
    """Base: one shared HTTP session, JSON POSTs with every failure mapped to BackendError."""

    kind = ""
    path = ""

    def __init__(self, url: str, session: aiohttp.ClientSession, model: str = "") -> None:
        self.url = url.rstrip("/")
        self.session = session
        self.model = model

    def payload(self, gen: Generation, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    async def _post(self, body: Mapping[str, Any]) -> aiohttp.ClientResponse:
        where = f"{self.url}{self.path}"
        try:
            response = await self.session.post(where, json=body)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise BackendError(f"{where}: backend unreachable: {exc!r}") from exc
        if response.status != 200:
            try:
                detail = (await response.text())[:500]
            except (aiohttp.ClientError, asyncio.TimeoutError):
                detail = ""
            finally:
                response.release()
            raise BackendError(f"{where}: the backend answered HTTP {response.status}: {detail}")
        return response

    async def complete(self, gen: Generation) -> tuple[str, Finished]:
        """The whole generated text and how it ended."""
        response = await self._post(self.payload(gen, stream=False))
        where = f"{self.url}{self.path}"
        try:
            text = await response.text()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise BackendError(f"{where}: reading the answer failed: {exc!r}") from exc
        finally:
            response.release()
        return self.read_whole(_json(text, where), where)

    async def stream(self, gen: Generation) -> AsyncGenerator[str | Finished, None]:
        """Pieces of generated text, then one ``Finished`` (always the last item)."""
        response = await self._post(self.payload(gen, stream=True))
        where = f"{self.url}{self.path}"
        state: dict[str, Any] = {}
        try:
            async for event in _sse_events(response, where):
                piece = self.read_event(event, state, where)
                if piece:
                    yield piece
        finally:
            response.release()
        yield self.read_end(state, where)

    def read_whole(self, body: Any, where: str) -> tuple[str, Finished]:
        raise NotImplementedError

    def read_event(self, event: Any, state: dict[str, Any], where: str) -> str:
        raise NotImplementedError

    def read_end(self, state: dict[str, Any], where: str) -> Finished:
        raise NotImplementedError


class LlamaCppBackend(Backend):
    """llama.cpp server's native ``POST /completion``: the one engine API that takes a lazy
    grammar with triggers and preserved tokens, so tool_choice auto is constrained too."""

    kind = "llama.cpp"
    path = "/completion"

    def payload(self, gen: Generation, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {**gen.sampling, "prompt": gen.prompt, "stream": stream}
        if gen.max_tokens is not None:
            body["n_predict"] = gen.max_tokens
        if gen.stop:
            body["stop"] = list(gen.stop)
        if gen.grammar:
            body["grammar"] = gen.grammar
            body["grammar_lazy"] = gen.grammar_lazy
            if gen.grammar_lazy:
                body["grammar_triggers"] = [
                    {"type": LLAMA_TRIGGER_TYPES[t.kind], "value": t.value}
                    for t in gen.grammar_triggers
                ]
        # A trigger word that is one token must be preserved (llama.cpp refuses it
        # otherwise), and preserved special tokens are the ones it prints as text.
        words = [t.value for t in gen.grammar_triggers if t.kind in ("word", "token")]
        preserved = list(dict.fromkeys([*gen.preserved_tokens, *words]))
        if preserved:
            body["preserved_tokens"] = preserved
        return body

    @staticmethod
    def _finished(body: Mapping[str, Any]) -> Finished:
        usage = Usage(_int(body.get("tokens_evaluated")), _int(body.get("tokens_predicted")))
        return Finished(body.get("stop_type") == "limit", usage)

    def read_whole(self, body: Any, where: str) -> tuple[str, Finished]:
        if not isinstance(body, Mapping) or not isinstance(body.get("content"), str):
            raise BackendError(f"{where}: expected an object with a 'content' string")
        return body["content"], self._finished(body)

    def read_event(self, event: Any, state: dict[str, Any], where: str) -> str:
        if not isinstance(event, Mapping) or not isinstance(event.get("content", ""), str):
            raise BackendError(f"{where}: expected stream events with a 'content' string")
        if event.get("stop"):
            state["end"] = self._finished(event)
        return str(event.get("content", ""))

    def read_end(self, state: dict[str, Any], where: str) -> Finished:
        end = state.get("end")
        if not isinstance(end, Finished):
            raise BackendError(f"{where}: the stream ended without its final event")
        return end


class OpenAIBackend(Backend):
    """Any OpenAI-compatible ``POST /v1/completions`` (vLLM, SGLang, TGI...).

    These engines take no lazy grammar, so a grammar is sent only when it applies from the
    first token (tool_choice required or named, response_format), as vLLM takes it:
    ``structured_outputs: {"grammar": ...}``. With tool_choice auto the output is parsed
    unconstrained.
    """

    kind = "openai"
    path = "/v1/completions"

    def payload(self, gen: Generation, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            **gen.sampling,
            "model": self.model,
            "prompt": gen.prompt,
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if gen.max_tokens is not None:
            body["max_tokens"] = gen.max_tokens
        if gen.stop:
            body["stop"] = list(gen.stop)
        if gen.grammar and not gen.grammar_lazy:
            body["structured_outputs"] = {"grammar": gen.grammar}
        return body

    @staticmethod
    def _usage(body: Mapping[str, Any]) -> Usage:
        usage = body.get("usage")
        if not isinstance(usage, Mapping):
            return Usage()
        return Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))

    @staticmethod
    def _choice(body: Any, where: str) -> Mapping[str, Any] | None:
        if not isinstance(body, Mapping) or not isinstance(body.get("choices"), list):
            raise BackendError(f"{where}: expected an object with a 'choices' list")
        choices = body["choices"]
        if not choices:
            return None
        choice = choices[0]
        if not isinstance(choice, Mapping) or not isinstance(choice.get("text", ""), str):
            raise BackendError(f"{where}: expected choices with a 'text' string")
        return choice

    def read_whole(self, body: Any, where: str) -> tuple[str, Finished]:
        choice = self._choice(body, where)
        if choice is None:
            raise BackendError(f"{where}: the answer has no choices")
        finished = Finished(choice.get("finish_reason") == "length", self._usage(body))
        return str(choice.get("text", "")), finished

    def read_event(self, event: Any, state: dict[str, Any], where: str) -> str:
        choice = self._choice(event, where)
        if isinstance(event, Mapping) and isinstance(event.get("usage"), Mapping):
            state["usage"] = self._usage(event)
        if choice is None:
            return ""
        if choice.get("finish_reason"):
            state["reason"] = choice["finish_reason"]
        return str(choice.get("text", ""))

    def read_end(self, state: dict[str, Any], where: str) -> Finished:
        usage = state.get("usage")
        return Finished(
            state.get("reason") == "length", usage if isinstance(usage, Usage) else Usage()
        )


async def probe(url: str, session: aiohttp.ClientSession) -> BackendInfo | None:
    """``GET /props``: llama.cpp's server answers with its chat template and special tokens;
    anything else (404, not JSON, not an object) means "not llama.cpp" (None)."""
    try:
        async with session.get(f"{url.rstrip('/')}/props") as response:
            if response.status != 200:
                return None
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None
    if not isinstance(body, Mapping) or not (
        "chat_template" in body or "default_generation_settings" in body
    ):
        return None
    model = body.get("model_alias") or body.get("model_path") or ""
    return BackendInfo(
        kind="llama.cpp",
        chat_template=str(body.get("chat_template") or ""),
        bos_token=str(body.get("bos_token") or ""),
        eos_token=str(body.get("eos_token") or ""),
        model=str(model).rsplit("/", 1)[-1],
    )


async def first_model(url: str, session: aiohttp.ClientSession) -> str:
    """The first model id of an OpenAI-style ``GET /v1/models`` (the name to send)."""
    where = f"{url.rstrip('/')}/v1/models"
    try:
        async with session.get(where) as response:
            if response.status != 200:
                raise BackendError(f"{where}: the backend answered HTTP {response.status}")
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        raise BackendError(f"{where}: cannot list the backend's models: {exc!r}") from exc
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], Mapping):
        raise BackendError(f"{where}: no model listed; pass --model")
    return str(data[0].get("id", ""))


def make_backend(kind: str, url: str, session: aiohttp.ClientSession, model: str = "") -> Backend:
    """The backend of ``kind``, as the registry in ``serve/kinds.py`` names it."""
    name = BACKENDS.get(kind)
    if name is None:
        raise ValueError(f"backend kind must be one of {', '.join(BACKEND_KINDS)}, got {kind!r}")
    backend: type[Backend] = globals()[name]
    return backend(url, session, model)
