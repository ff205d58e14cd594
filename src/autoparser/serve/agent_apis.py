"""The routes of the APIs agents speak, over the chat-completions request path.

``POST /v1/responses`` (OpenAI Responses), ``POST /v1/messages`` and
``POST /v1/messages/count_tokens`` (Anthropic Messages). Each maps its request onto a
chat-completions body (``responses_api`` / ``messages_api``), which goes through the same
``parse_request`` -> ``template.apply`` -> engine -> parser path as ``/v1/chat/completions``;
only the shapes in and out differ. Streams use the parser's "whole" tool-call policy
whatever ``--tool-call-deltas`` says, so a call announced is always in the final answer.

Engine failures answer 502 with a fixed message (the details, which name the engine's URL,
go to the log); a client's mistake is a 400 naming the field in the API's own terms.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from autoparser import ChatMessage, ChatParams
from autoparser.serve import messages_api, responses_api
from autoparser.serve import openai_format as oai
from autoparser.serve.app import (
    STATE,
    ChatRequest,
    InvalidRequest,
    ServeConfig,
    ServerState,
    build_params,
    generation,
    parse_request,
)
from autoparser.serve.app import create_app as create_chat_app
from autoparser.serve.backends import BackendError, Finished, Generation

log = logging.getLogger("autoparser.serve")
ENGINE_FAILED = "the engine failed to generate (details in the server log)"
STREAM_BROKE = "the engine's stream broke off (details in the server log)"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class Sink(Protocol):
    """One API's stream events, as SSE bytes."""

    def start(self) -> bytes: ...
    def feed(self, deltas: list[dict[str, Any]]) -> bytes: ...
    def finish(self, message: ChatMessage, end: Finished) -> bytes: ...
    def fail(self, text: str) -> bytes: ...


async def _body(request: web.Request) -> Any:
    """The JSON body; a body that is not JSON is the client's mistake (400)."""
    try:
        return await request.json()
    except ValueError as exc:
        raise InvalidRequest("the request body is not valid JSON") from exc


async def _prepare(
    state: ServerState, chat: Mapping[str, Any]
) -> tuple[ChatRequest, ChatParams, Generation]:
    """The chat-completions path: validate, apply the template, the engine's request."""
    req = parse_request(chat)
    params = await build_params(state, req)
    return req, params, generation(params, req)


async def _relay(
    request: web.Request,
    state: ServerState,
    params: ChatParams,
    gen: Generation,
    sink: Sink,
    refuse: Callable[[int, str], web.Response],
) -> web.StreamResponse:
    """Engine pieces -> the library's stream parser -> the API's events. The engine's first
    piece is awaited before the response starts, so an engine that is down is still a 502."""
    pieces = state.backend.stream(gen)
    async with contextlib.aclosing(pieces):
        try:
            item: str | Finished = await pieces.__anext__()
        except BackendError as exc:
            log.warning("engine failed: %s", exc)
            return refuse(502, ENGINE_FAILED)
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        parser = params.stream(tool_call_deltas="whole")
        out = [sink.start()]
        try:
            while not isinstance(item, Finished):
                out.append(sink.feed(parser.feed(item)))
                chunk = b"".join(out)
                if chunk:
                    await response.write(chunk)
                out.clear()
                item = await pieces.__anext__()
            out.append(sink.feed(parser.finish(finish_reason=item.reason)))
            out.append(sink.finish(parser.message, item))
        except (BackendError, StopAsyncIteration) as exc:
            log.warning("engine stream broke off: %s", exc)
            out.append(sink.fail(STREAM_BROKE))
        await response.write(b"".join(out))
        await response.write_eof()
        return response


# --------------------------------------------------------------------------- /v1/responses
def _openai_error(status: int, message: str, param: str | None = None) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 502:
        kind = "backend_error"
    return web.json_response(oai.error_body(message, kind=kind, param=param), status=status)


class _ResponsesSink:
    def __init__(self, events: responses_api.ResponseEvents) -> None:
        self.events = events

    def start(self) -> bytes:
        return b"".join(map(responses_api.sse, self.events.start()))

    def feed(self, deltas: list[dict[str, Any]]) -> bytes:
        return b"".join(map(responses_api.sse, self.events.feed(deltas)))

    def finish(self, message: ChatMessage, end: Finished) -> bytes:
        events = self.events.finish(message, end.hit_limit, end.usage)
        return b"".join(map(responses_api.sse, events))

    def fail(self, text: str) -> bytes:
        return b"".join(map(responses_api.sse, self.events.failed(text)))


async def responses(request: web.Request) -> web.StreamResponse:
    """``POST /v1/responses``."""
    state = request.app[STATE]
    try:
        mapped = responses_api.to_chat(await _body(request))
        _, params, gen = await _prepare(state, mapped.chat)
    except InvalidRequest as exc:
        message = str(exc)
        param = exc.param if exc.param is None else responses_api.param_name(exc.param)
        if exc.param and param != exc.param and message.startswith(exc.param):
            message = str(param) + message[len(exc.param) :]
        return _openai_error(400, message, param)
    ident = responses_api.Identity.new(state.model)
    if mapped.stream:
        sink = _ResponsesSink(responses_api.ResponseEvents(ident, mapped.echo))
        return await _relay(request, state, params, gen, sink, _openai_error)
    try:
        text, end = await state.backend.complete(gen)
    except BackendError as exc:
        log.warning("engine failed: %s", exc)
        return _openai_error(502, ENGINE_FAILED)
    parsed = params.parse(text, finish_reason=end.reason)
    body = responses_api.response(ident, mapped.echo, parsed, end.hit_limit, end.usage)
    return web.json_response(body)


# --------------------------------------------------------------------------- /v1/messages
def _anthropic_error(status: int, message: str) -> web.Response:
    return web.json_response(messages_api.error_body(status, message), status=status)


class _MessagesSink:
    def __init__(self, events: messages_api.MessageEvents, stops: tuple[str, ...]) -> None:
        self.events = events
        self.stops = stops

    @staticmethod
    def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
        return b"".join(messages_api.sse(name, data) for name, data in events)

    def start(self) -> bytes:
        return self._sse(self.events.start())

    def feed(self, deltas: list[dict[str, Any]]) -> bytes:
        return self._sse(self.events.feed(deltas))

    def finish(self, message: ChatMessage, end: Finished) -> bytes:
        reason = messages_api.stop_reason(message, end.hit_limit, end.stop_word, self.stops)
        return self._sse(self.events.finish(reason, end.usage))

    def fail(self, text: str) -> bytes:
        return messages_api.sse("error", messages_api.error_body(502, text))


def _anthropic_invalid(exc: InvalidRequest) -> web.Response:
    message = str(exc)
    if exc.param:
        param = str(messages_api.param_name(exc.param))
        if message.startswith(exc.param):
            message = param + message[len(exc.param) :]
    return _anthropic_error(400, message)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _anthropic_shaped(handler: Handler) -> Handler:
    """Every failure of an Anthropic route answers in Anthropic's error shape."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except InvalidRequest as exc:
            return _anthropic_invalid(exc)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _anthropic_error(exc.status, f"{request.method} {request.path}: {exc.reason}")
        except Exception:
            log.exception("request failed")
            return _anthropic_error(500, "internal error (details in the server log)")

    return wrapped


async def messages(request: web.Request) -> web.StreamResponse:
    """``POST /v1/messages``."""
    state = request.app[STATE]
    mapped = messages_api.to_chat(await _body(request))
    _, params, gen = await _prepare(state, mapped.chat)
    ident = messages_api.new_id()
    if mapped.stream:
        sink = _MessagesSink(messages_api.MessageEvents(ident, state.model), mapped.stop_sequences)
        return await _relay(request, state, params, gen, sink, _anthropic_error)
    try:
        text, end = await state.backend.complete(gen)
    except BackendError as exc:
        log.warning("engine failed: %s", exc)
        return _anthropic_error(502, ENGINE_FAILED)
    parsed = params.parse(text, finish_reason=end.reason)
    reason = messages_api.stop_reason(parsed, end.hit_limit, end.stop_word, mapped.stop_sequences)
    return web.json_response(messages_api.message(ident, state.model, parsed, reason, end.usage))


async def _token_count(state: ServerState, prompt: str) -> int | None:
    """The engine's count of the prompt's tokens (``POST /tokenize``, which llama.cpp's
    server and vLLM have); None when the engine has no such route."""
    backend = state.backend
    if backend.kind == "llama.cpp":
        body: dict[str, Any] = {"content": prompt, "add_special": True, "parse_special": True}
    else:
        body = {"model": backend.model, "prompt": prompt}
    try:
        async with backend.session.post(f"{backend.url}/tokenize", json=body) as response:
            if response.status in (404, 405):
                return None
            if response.status != 200:
                raise BackendError(f"/tokenize answered HTTP {response.status}")
            answer = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise BackendError(f"/tokenize failed: {exc!r}") from exc
    if isinstance(answer, Mapping) and isinstance(answer.get("tokens"), list):
        return len(answer["tokens"])
    if isinstance(answer, Mapping) and isinstance(answer.get("count"), int):
        return int(answer["count"])
    raise BackendError("/tokenize answered without 'tokens' or 'count'")


async def count_tokens(request: web.Request) -> web.StreamResponse:
    """``POST /v1/messages/count_tokens``: the rendered prompt, counted by the engine."""
    state = request.app[STATE]
    body = await _body(request)
    if isinstance(body, Mapping) and body.get("max_tokens") is None:
        body = {**body, "max_tokens": 1}  # not a field of this route
    mapped = messages_api.to_chat(body)
    _, params, _ = await _prepare(state, mapped.chat)
    try:
        count = await _token_count(state, params.prompt)
    except BackendError as exc:
        log.warning("engine failed to tokenize: %s", exc)
        return _anthropic_error(502, "the engine failed to count tokens (details in the log)")
    if count is None:
        return _anthropic_error(501, "count_tokens: the engine cannot tokenize")
    return web.json_response({"input_tokens": count})


def _openai_shaped(handler: Handler) -> Handler:
    """An unexpected failure is a 500 whose body names no Python object (the log has it)."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except (web.HTTPException, ConnectionResetError):
            raise
        except Exception:
            log.exception("request failed")
            return _openai_error(500, "internal error (details in the server log)")

    return wrapped


ROUTES: tuple[tuple[str, Handler], ...] = (
    ("/v1/responses", _openai_shaped(responses)),
    ("/v1/messages", _anthropic_shaped(messages)),
    ("/v1/messages/count_tokens", _anthropic_shaped(count_tokens)),
)


def create_app(config: ServeConfig) -> web.Application:
    """The chat-completions application plus these routes."""
    app = create_chat_app(config)
    for path, handler in ROUTES:
        app.router.add_post(path, handler)
    return app
