"""The routes of the APIs agents speak, over the chat-completions request path.

``POST /v1/responses`` (OpenAI Responses), ``POST /v1/messages`` and
``POST /v1/messages/count_tokens`` (Anthropic Messages). Each reads its body through
``limits.read_body``, maps it onto a chat-completions body (``responses_api`` /
``messages_api``), and then takes the chat route's own steps (``Chat.prepare``: the same
field, sampling and limit checks, ``EngineLink``; ``Chat.generate`` / ``Chat.relay``: the
engine, the library's parser); only the shapes in and out differ. Auth, request ids, the
concurrency limit, the access log, metrics and error bodies are ``observe``'s middleware
(Anthropic-shaped for the Messages routes, through ``ERROR_SHAPES``). Streams use the
parser's "whole" tool-call policy whatever ``--tool-call-deltas`` says, so a call announced
is always in the final answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from autoparser import ChatMessage, StreamDelta
from autoparser.serve import messages_api, responses_api
from autoparser.serve.chat_completions import Chat, Prepared
from autoparser.serve.engines.base import BackendError, Finished
from autoparser.serve.limits import (
    Degradation,
    InvalidRequest,
    SystemMessageRefused,
    read_body,
)
from autoparser.serve.observe import ErrorShape, error_reply, info

Rename = Callable[[str | None], str | None]
# Anthropic's own words for a system message in ``messages``: Claude Code reacts to them
# (it sends its reminders as user text instead), so a refusal says exactly this.
ANTHROPIC_SYSTEM_ROLE = (
    'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
    'parameter, not "system" as an input message role.'
)


def _renamed(exc: InvalidRequest, rename: Rename) -> InvalidRequest:
    """A chat-completions field named in an error, as the API's own field."""
    message, param = str(exc), rename(exc.param)
    if exc.param and param != exc.param and message.startswith(exc.param):
        message = str(param) + message[len(exc.param) :]
    return type(exc)(message, param, exc.status)  # its kind kept (SystemMessageRefused)


async def _prepare(
    chat: Chat,
    request: web.Request,
    body: Mapping[str, object],
    rename: Rename,
    degraded: tuple[Degradation, ...] = (),
) -> Prepared:
    """The chat route's ``prepare``, after logging what the mapping served in a lesser
    form; errors name the API's own fields."""
    state = info(request)
    for found in degraded:
        state.degrade(found.what, found.label, found.detail)
    try:
        return await chat.prepare(request, body)
    except InvalidRequest as exc:
        raise _renamed(exc, rename) from exc


# --------------------------------------------------------------------------- /v1/responses
class _ResponsesSink:
    def __init__(self, events: responses_api.ResponseEvents) -> None:
        self.events = events

    def start(self) -> bytes:
        return b"".join(map(responses_api.sse, self.events.start()))

    def feed(self, deltas: list[StreamDelta]) -> bytes:
        events = self.events.feed(deltas)
        return b"".join(map(responses_api.sse, events))

    def finish(self, message: ChatMessage, end: Finished) -> tuple[bytes, str]:
        events = self.events.finish(message, end.hit_limit, end.usage)
        return b"".join(map(responses_api.sse, events)), responses_api.status_of(
            message, end.hit_limit
        )

    def fail(self, message: str, kind: str) -> bytes:
        return b"".join(map(responses_api.sse, self.events.failed(message)))

    def close(self) -> bytes:
        return b""


class Responses:
    """``POST /v1/responses``."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = read_body(await request.read(), self.chat.limits)
        settings = self.chat.settings
        try:
            mapped = responses_api.to_chat(body, settings.media, settings.strict_schemas)
        except InvalidRequest as exc:
            raise _renamed(exc, responses_api.param_name) from exc
        prepared = await _prepare(
            self.chat, request, mapped.chat, responses_api.param_name, mapped.degraded
        )
        info(request).stream = mapped.stream
        ident = responses_api.Identity.new(prepared.served.model)
        if mapped.stream:
            events = responses_api.ResponseEvents(ident, mapped.echo, mapped.tools)
            return await self.chat.relay(request, prepared, _ResponsesSink(events), "whole")
        done = await self.chat.generate(request, prepared)
        if isinstance(done, web.Response):
            return done
        message, end = done
        answer = responses_api.response(
            ident, mapped.echo, message, end.hit_limit, end.usage, mapped.tools
        )
        self.chat.account(request, message, end, str(answer["status"]))
        return web.json_response(answer)


# --------------------------------------------------------------------------- /v1/messages
class _MessagesSink:
    def __init__(self, events: messages_api.MessageEvents, stops: tuple[str, ...]) -> None:
        self.events = events
        self.stops = stops

    @staticmethod
    def _sse(events: list[tuple[str, dict[str, object]]]) -> bytes:
        return b"".join(messages_api.sse(name, data) for name, data in events)

    def start(self) -> bytes:
        return self._sse(self.events.start())

    def feed(self, deltas: list[StreamDelta]) -> bytes:
        return self._sse(self.events.feed(deltas))

    def finish(self, message: ChatMessage, end: Finished) -> tuple[bytes, str]:
        reason = messages_api.stop_reason(message, end.hit_limit, end.stop_word, self.stops)
        return self._sse(self.events.finish(reason, end.usage)), reason[0]

    def fail(self, message: str, kind: str) -> bytes:
        status = 504 if kind == "timeout_error" else 502
        return messages_api.sse("error", messages_api.error_body(status, message))

    def close(self) -> bytes:
        return b""


class Messages:
    """``POST /v1/messages`` and ``POST /v1/messages/count_tokens``."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    async def _mapped(
        self, request: web.Request, counting: bool
    ) -> tuple[messages_api.MessagesRequest, Prepared]:
        body = read_body(await request.read(), self.chat.limits)
        if counting and body.get("max_tokens") is None:
            body = {**body, "max_tokens": 1}  # not a field of count_tokens
        mapped = messages_api.to_chat(body, self.chat.settings.media)
        try:
            prepared = await _prepare(
                self.chat, request, mapped.chat, messages_api.param_name, mapped.degraded
            )
        except SystemMessageRefused as exc:
            info(request).error = str(exc)
            raise InvalidRequest(ANTHROPIC_SYSTEM_ROLE, "messages") from exc
        info(request).stream = mapped.stream
        return mapped, prepared

    async def handle(self, request: web.Request) -> web.StreamResponse:
        mapped, prepared = await self._mapped(request, False)
        model = prepared.served.model
        ident = messages_api.new_id()
        if mapped.stream:
            sink = _MessagesSink(messages_api.MessageEvents(ident, model), mapped.stop_sequences)
            return await self.chat.relay(request, prepared, sink, "whole")
        done = await self.chat.generate(request, prepared)
        if isinstance(done, web.Response):
            return done
        message, end = done
        reason = messages_api.stop_reason(
            message, end.hit_limit, end.stop_word, mapped.stop_sequences
        )
        self.chat.account(request, message, end, reason[0])
        return web.json_response(messages_api.message(ident, model, message, reason, end.usage))

    async def count_tokens(self, request: web.Request) -> web.StreamResponse:
        """The rendered prompt, tokenized by the engine as a generation would send it."""
        _, prepared = await self._mapped(request, True)
        try:
            count = await prepared.served.backend.count_tokens(prepared.gen)
        except BackendError as exc:
            return self.chat.engine_failed(request, exc)
        if count is None:
            return error_reply(
                request, 501, "count_tokens: the engine cannot tokenize", "api_error"
            )
        return web.json_response({"input_tokens": count})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PATHS = ("/v1/responses", "/v1/messages", "/v1/messages/count_tokens")
# The Messages routes answer every error (the middleware's too) in Anthropic's shape.
ERROR_SHAPES: dict[str, ErrorShape] = {
    "/v1/messages": messages_api.error_shape,
    "/v1/messages/count_tokens": messages_api.error_shape,
}


def handlers(chat: Chat) -> dict[str, Handler]:
    """The handlers of ``PATHS``, over ``chat``'s request path."""
    responses, messages = Responses(chat), Messages(chat)
    return dict(zip(PATHS, (responses.handle, messages.handle, messages.count_tokens), strict=True))
