"""``POST /v1/completions``: OpenAI's completions API passed through to the engine, for
evaluation harnesses (lm-eval-harness sends a prompt, ``max_tokens``, ``logprobs`` and
``echo``). No chat template is applied: the prompt goes to the engine as the client wrote it.

OpenAI-style engines (vLLM, SGLang, any ``/v1/completions``) get the body as it came, with
the engine's model named, and their answer comes back as they wrote it (the served model
named). llama.cpp's server gets it translated to its ``/completion``: one request per prompt
and choice, ``max_tokens`` as ``n_predict``, ``logprobs`` as ``n_probs``; its answers are
written back in the completions shape (``logprobs`` as ``tokens``, ``token_logprobs``,
``top_logprobs``, ``text_offset``). What llama.cpp cannot give (the prompt's own logprobs
under ``echo``) is a degradation: a log line, the metric, and the generated tokens' only.

Auth, limits, admission, the access log and the metrics are the middleware's, as for every
route.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping, Sequence
from typing import cast

from aiohttp import web

from autoparser.serve.engine import EngineLink
from autoparser.serve.engines.base import BackendError, TokenLogprob, as_int, token_ids
from autoparser.serve.engines.llama_cpp import LlamaCpp
from autoparser.serve.limits import MAX_CHOICES, InvalidRequest, Limits, read_body
from autoparser.serve.observe import error_body, error_reply, info, public_text
from autoparser.serve.options import SamplingOptions, boolean, number

PATH = "/v1/completions"
MAX_GENERATIONS = 64  # prompts times n in one request: each is a generation of its own
MAX_LOGPROBS = 20  # alternatives per token a completions request may ask for
DEFAULT_MAX_TOKENS = 16  # OpenAI's default for this API
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}

Prompt = str | list[int]


@dataclasses.dataclass(frozen=True)
class CompletionRequest:
    """A validated completions request: its prompts (a batch is several), and what the
    llama.cpp translation needs; ``body`` as it came (what OpenAI-style engines get)."""

    body: Mapping[str, object]
    prompts: tuple[Prompt, ...]
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    echo: bool = False
    logprobs: int | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    sampling: SamplingOptions = dataclasses.field(default_factory=SamplingOptions)


def _token_ids(value: list[object]) -> list[int] | None:
    """``value`` when it is token ids (non-negative integers), else None."""
    if value and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        return [t for t in value if isinstance(t, int)]
    return None


def read_prompts(prompt: object) -> tuple[Prompt, ...]:
    """``prompt`` as OpenAI takes it: a string, a list of strings, token ids, or a list of
    token-id lists; 400 naming ``prompt`` for anything else."""
    if isinstance(prompt, str):
        return (prompt,)
    if isinstance(prompt, list) and prompt:
        ids = _token_ids(prompt)
        if ids is not None:
            return (ids,)
        if all(isinstance(p, str) for p in prompt):
            return tuple(p for p in prompt if isinstance(p, str))
        batch = [_token_ids(p) if isinstance(p, list) else None for p in prompt]
        if all(ids is not None for ids in batch):
            return tuple(ids for ids in batch if ids is not None)
    raise InvalidRequest(
        "prompt: must be a string, a list of strings, a list of token ids (non-negative "
        "integers) or a list of such lists, and not empty",
        "prompt",
    )


def parse_completion_request(body: Mapping[str, object]) -> CompletionRequest:
    """The fields serve reads checked (types, ranges, the bound on generations); the rest
    of the body goes to an OpenAI-style engine as it came."""
    if "prompt" not in body:
        raise InvalidRequest("prompt: is required", "prompt")
    prompts = read_prompts(body["prompt"])
    n = number(body.get("n", 1), "n", 1, MAX_CHOICES, True) if body.get("n") is not None else 1
    if len(prompts) * n > MAX_GENERATIONS:
        raise InvalidRequest(
            f"prompt: {len(prompts)} prompt(s) times n={n} is more than the "
            f"{MAX_GENERATIONS} generations one request may ask for",
            "prompt",
        )
    logprobs = None
    if body.get("logprobs") is not None:
        logprobs = number(body["logprobs"], "logprobs", 0, MAX_LOGPROBS, True)
    max_tokens = DEFAULT_MAX_TOKENS
    if body.get("max_tokens") is not None:
        max_tokens = number(body["max_tokens"], "max_tokens", 0, 10_000_000, True)
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, Mapping):
        raise InvalidRequest("stream_options: must be an object", "stream_options")
    return CompletionRequest(
        body=body,
        prompts=prompts,
        n=n,
        stream=boolean(body.get("stream", False), "stream"),
        include_usage=boolean(
            stream_options.get("include_usage", False), "stream_options.include_usage"
        ),
        echo=boolean(body.get("echo", False), "echo"),
        logprobs=logprobs,
        max_tokens=max_tokens,
        sampling=SamplingOptions.from_fields(body, ()),
    )


@dataclasses.dataclass(frozen=True)
class Identity:
    """What every object of one answer repeats."""

    id: str
    created: int
    model: str

    @classmethod
    def new(cls, model: str) -> Identity:
        return cls(f"cmpl-{uuid.uuid4().hex}", int(time.time()), model)

    def object(self, choices: list[dict[str, object]], **more: object) -> dict[str, object]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **more,
        }


def legacy_logprobs(tokens: Sequence[TokenLogprob], offset: int) -> dict[str, object]:
    """Token logprobs (OpenAI's chat shape, as the dialects read them) in the completions
    API's shape; ``offset``: where the first token starts in the choice's text."""
    texts = [str(t["token"]) for t in tokens]
    offsets, at = [], offset
    for text in texts:
        offsets.append(at)
        at += len(text)
    tops: list[dict[str, object]] = []
    for entry in tokens:
        alternatives = entry.get("top_logprobs")
        tops.append(
            {
                str(alt["token"]): alt["logprob"]
                for alt in (alternatives if isinstance(alternatives, list) else [])
                if isinstance(alt, Mapping)
            }
        )
    return {
        "tokens": texts,
        "token_logprobs": [t["logprob"] for t in tokens],
        "top_logprobs": tops,
        "text_offset": offsets,
    }


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n\n"


class Completions:
    """The route, bound to the engine link and the limits."""

    def __init__(self, link: EngineLink, limits: Limits) -> None:
        self.link = link
        self.limits = limits

    async def handle(self, request: web.Request) -> web.StreamResponse:
        req = parse_completion_request(read_body(await request.read(), self.limits))
        state = info(request)
        state.stream = req.stream
        served = await self.link.resolve()
        ident = Identity.new(served.model)
        dialect = served.backend.dialect
        try:
            if isinstance(dialect, LlamaCpp):
                return await LlamaCompletions(self, request, req, ident).answer()
            return await self.forward(request, req, ident)
        except BackendError as exc:
            return self.engine_failed(request, exc)

    def engine_failed(self, request: web.Request, exc: BackendError) -> web.Response:
        """An engine's failure before any answer: 502/504, or a 400 when the engine refused
        the request itself (a 4xx: the client's mistake, which serve passes on)."""
        state = info(request)
        state.engine_error, state.error = exc.kind, exc.detail
        if 400 <= exc.http_status < 500:
            return error_reply(
                request,
                400,
                f"the engine refused the request (HTTP {exc.http_status})",
                "invalid_request_error",
            )
        self.link.record(exc)
        kind = "timeout_error" if exc.status == 504 else "backend_error"
        return error_reply(request, exc.status, exc.public, kind)

    def account(self, request: web.Request, usage: object, reason: object) -> None:
        state = info(request)
        if isinstance(usage, Mapping):
            state.prompt_tokens = as_int(usage.get("prompt_tokens"))
            state.completion_tokens = as_int(usage.get("completion_tokens"))
        state.finish_reason = str(reason or "")
        state.truncated = reason == "length"

    async def forward(
        self, request: web.Request, req: CompletionRequest, ident: Identity
    ) -> web.StreamResponse:
        """An OpenAI-style engine: the body as it came (the engine's model named), the
        answer as it wrote it (the served model named)."""
        backend = self.link.served.backend if self.link.served else None
        assert backend is not None  # resolved by handle
        payload = {**req.body, "model": backend.dialect.model or ident.model}
        transport, path = backend.transport, backend.dialect.path
        if not req.stream:
            answer = await transport.post_json(payload, path)
            if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
                raise BackendError("the engine's answer has no 'choices' list", path)
            self.link.record(None)
            answer["model"] = ident.model
            choices = answer["choices"]
            first = choices[0] if choices and isinstance(choices[0], Mapping) else {}
            self.account(request, answer.get("usage"), first.get("finish_reason"))
            return web.json_response(answer)
        # an async generator (closed here: a client that leaves stops the engine's stream)
        events = cast("AsyncGenerator[object, None]", transport.post_events(payload, path))
        try:
            return await self._relay(request, ident, events)
        finally:
            await events.aclose()

    async def _relay(
        self, request: web.Request, ident: Identity, events: AsyncGenerator[object, None]
    ) -> web.StreamResponse:
        first = await anext(events, None)  # a failure before it is a 502, not an event
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        reason: object = None
        try:
            event = first
            while event is not None:
                if isinstance(event, dict):
                    event["model"] = ident.model
                    for choice in event.get("choices") or ():
                        if isinstance(choice, Mapping) and choice.get("finish_reason"):
                            reason = choice["finish_reason"]
                    if event.get("usage"):
                        self.account(request, event["usage"], reason)
                await response.write(_sse(event))
                event = await anext(events, None)
            self.link.record(None)
            info(request).finish_reason = str(reason or "")
        except BackendError as exc:
            await response.write(_stream_error(self.link, request, exc))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _stream_error(link: EngineLink, request: web.Request, exc: BackendError) -> bytes:
    state = info(request)
    link.record(exc)
    state.engine_error, state.error = exc.kind, exc.detail
    kind = "timeout_error" if exc.status == 504 else "backend_error"
    return _sse(error_body(public_text(exc.public), kind))


class LlamaCompletions:
    """One completions request to llama.cpp's ``/completion``: a generation per prompt and
    choice (choice ``i * n + j`` is prompt ``i``'s ``j``-th), answers translated back."""

    def __init__(
        self, route: Completions, request: web.Request, req: CompletionRequest, ident: Identity
    ) -> None:
        self.route, self.request, self.req, self.ident = route, request, req, ident
        served = route.link.served
        assert served is not None  # resolved by the route
        self.backend = served.backend
        self.dialect = served.backend.dialect
        if req.echo and any(isinstance(p, list) for p in req.prompts):
            info(request).degrade(
                "echo",
                "echo",
                "echo: a prompt of token ids is not echoed (llama.cpp's /completion does "
                "not return the prompt's text)",
            )
        if req.echo and req.logprobs is not None:
            info(request).degrade(
                "logprobs",
                "echo",
                "echo: llama.cpp gives no logprobs of the prompt's tokens; only the "
                "generated tokens' are returned",
            )

    def body(self, prompt: Prompt, index: int, stream: bool) -> dict[str, object]:
        req = self.req
        body: dict[str, object] = {
            **req.sampling.engine_fields(),
            "prompt": prompt,
            "n_predict": req.max_tokens,
            "stream": stream,
        }
        seed = body.get("seed")
        if isinstance(seed, int) and seed >= 0 and index:  # each choice its own sample
            body["seed"] = (seed + index) % 2**32
        if req.sampling.stop:
            body["stop"] = list(req.sampling.stop)
        if req.logprobs is not None:
            body["n_probs"] = max(req.logprobs, 1)
        return body

    def runs(self) -> list[tuple[int, Prompt, int]]:
        """(choice index, prompt, its choice number) of every generation."""
        n = self.req.n
        return [(i * n + j, p, j) for i, p in enumerate(self.req.prompts) for j in range(n)]

    def echoed(self, prompt: Prompt) -> str:
        """What ``echo`` puts before the text: the prompt (when given as text)."""
        return prompt if self.req.echo and isinstance(prompt, str) else ""

    def scores(self, answer: object, offset: int) -> dict[str, object] | None:
        if self.req.logprobs is None:
            return None
        found = self.dialect.read_logprobs(answer, self.req.logprobs)
        if found is None:
            return None
        return legacy_logprobs(found, offset)

    def usage(self, answers: Sequence[Mapping[str, object]]) -> dict[str, int]:
        prompt = sum(as_int(a.get("tokens_evaluated")) for a in answers) // max(self.req.n, 1)
        completion = sum(as_int(a.get("tokens_predicted")) for a in answers)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    async def _whole(self, prompt: Prompt, number: int) -> object:
        """One generation's answer (llama.cpp's shape)."""
        if self.req.max_tokens == 0:
            return await self._nothing(prompt)
        return await self.backend.transport.post_json(
            self.body(prompt, number, False), self.dialect.path
        )

    async def _nothing(self, prompt: Prompt) -> dict[str, object]:
        """``max_tokens: 0`` (a harness scoring the prompt): no generation, for llama.cpp
        generates a token even at ``n_predict: 0``; the prompt counted by ``/tokenize``, as
        ``/completion`` would take it."""
        if isinstance(prompt, list):
            count = len(prompt)
        else:
            body = {"content": prompt, "add_special": True, "parse_special": True}
            found = await self.backend.transport.post_json(body, "/tokenize")
            count = len(token_ids(found, "/tokenize"))
        return {
            "content": "",
            "stop": True,
            "stop_type": "limit",
            "tokens_evaluated": count,
            "tokens_predicted": 0,
            "completion_probabilities": [],
        }

    async def answer(self) -> web.StreamResponse:
        if self.req.stream:
            return await self.stream()
        path = self.dialect.path
        runs = self.runs()
        answers = await _every([self._whole(p, j) for _, p, j in runs])
        choices: list[dict[str, object]] = []
        for (index, prompt, _), answer in zip(runs, answers, strict=True):
            if not isinstance(answer, Mapping) or not isinstance(answer.get("content"), str):
                raise BackendError("the engine's answer has no 'content' string", path)
            echo = self.echoed(prompt)
            choices.append(
                {
                    "index": index,
                    "text": echo + answer["content"],
                    "logprobs": self.scores(answer, len(echo)),
                    "finish_reason": _reason(answer),
                }
            )
        self.route.link.record(None)
        mappings = [a for a in answers if isinstance(a, Mapping)]
        usage = self.usage(mappings)
        self.route.account(self.request, usage, choices[0]["finish_reason"])
        return web.json_response(self.ident.object(choices, usage=usage))

    async def stream(self) -> web.StreamResponse:
        """Every generation's events, interleaved as they come, as completion chunks; one
        usage chunk (asked for) after the last has finished."""
        merged = _merge(
            [self._events(index, prompt, number) for index, prompt, number in self.runs()]
        )
        try:
            first = await anext(merged, None)
        except BackendError:
            await merged.aclose()
            raise
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(self.request)
        finals: list[Mapping[str, object]] = []
        reason = ""
        try:
            item = first
            while item is not None:
                chunk, final = item
                if final is not None:
                    finals.append(final)
                    reason = reason or _reason(final)
                await response.write(_sse(chunk))
                item = await anext(merged, None)
            self.route.link.record(None)
            usage = self.usage(finals)
            self.route.account(self.request, usage, reason)
            if self.req.include_usage:
                await response.write(_sse(self.ident.object([], usage=usage)))
        except BackendError as exc:
            await response.write(_stream_error(self.route.link, self.request, exc))
        finally:
            await merged.aclose()
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _events(self, index: int, prompt: Prompt, number: int) -> AsyncGenerator[Item, None]:
        """One generation's chunks, each with the engine's final event on the last."""
        echo = self.echoed(prompt)
        offset = len(echo)
        if echo:
            yield self.ident.object([_choice(index, echo, None, None)]), None
        transport, path = self.backend.transport, self.dialect.path
        if self.req.max_tokens == 0:
            events: AsyncIterator[object] = _one(await self._nothing(prompt))
        else:
            events = transport.post_events(self.body(prompt, number, True), path)
        async for event in events:
            if not isinstance(event, Mapping) or not isinstance(event.get("content", ""), str):
                raise BackendError("the engine's stream events have no 'content' string", path)
            text = str(event.get("content", ""))
            scores = self.scores(event, offset)
            offset += len(text)
            final = event.get("stop") is True
            reason = _reason(event) if final else None
            if text or scores or final:
                chunk = self.ident.object([_choice(index, text, scores, reason)])
                yield chunk, event if final else None
            if final:
                return
        raise BackendError("the engine's stream ended without its final event", path)


async def _one(event: object) -> AsyncIterator[object]:
    yield event


def _choice(
    index: int, text: str, logprobs: dict[str, object] | None, reason: str | None
) -> dict[str, object]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason}


def _reason(answer: Mapping[str, object]) -> str:
    return "length" if answer.get("stop_type") == "limit" else "stop"


Item = tuple[dict[str, object], Mapping[str, object] | None]


async def _every(calls: list[Coroutine[object, None, object]]) -> list[object]:
    """Every call's result, in order; the first failure is raised and the other calls
    stopped (no generation left running for an answer nobody will read)."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _merge(streams: list[AsyncIterator[Item]]) -> AsyncGenerator[Item, None]:
    """The items of ``streams`` as they come; the first failure is raised (the others
    stopped)."""
    queue: asyncio.Queue[Item | BackendError | None] = asyncio.Queue()  # None: one ended

    async def pump(stream: AsyncIterator[Item]) -> None:
        try:
            async for item in stream:
                queue.put_nowait(item)
        except BackendError as exc:
            queue.put_nowait(exc)
        finally:
            queue.put_nowait(None)

    tasks = [asyncio.ensure_future(pump(s)) for s in streams]
    try:
        left = len(tasks)
        while left:
            item = await queue.get()
            if item is None:
                left -= 1
            elif isinstance(item, BackendError):
                raise item
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
