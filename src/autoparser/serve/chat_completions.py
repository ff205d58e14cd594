"""``POST /v1/chat/completions``: the OpenAI chat-completions mapping, and only it.

Limits, auth, ids, logs and metrics are the middleware's (``observe``); the sampling
options are ``options.SamplingOptions``; the engine path is ``engine``. Here: reading the
chat fields (messages, roles, content parts, tools, response_format...), and writing the
answer as a ``chat.completion`` or as SSE chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from aiohttp import web

from autoparser import ChatMessage, ChatParams
from autoparser.serve import openai_format as oai
from autoparser.serve.backends import BackendError, Finished, Generation
from autoparser.serve.engine import EngineLink, Served, generation
from autoparser.serve.limits import InvalidRequest, Limits, read_body
from autoparser.serve.observe import RequestInfo, error_body, error_response, info, public_text
from autoparser.serve.options import SamplingOptions, boolean

log = logging.getLogger("autoparser.serve")

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
REASONING_FIELDS = ("reasoning", "reasoning_content", "both")
# OpenAI fields this server cannot honour: refused, not silently ignored.
REFUSED_FIELDS = {
    "logprobs": "log probabilities are not supported",
    "top_logprobs": "log probabilities are not supported",
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
    "functions": "the legacy 'functions' field is not supported; use 'tools'",
    "function_call": "the legacy 'function_call' field is not supported; use 'tool_choice'",
    "web_search_options": "web search is not supported",
}
# Names ``template.apply`` binds itself; chat_template_kwargs may not override them.
RESERVED_TEMPLATE_KWARGS = frozenset(
    {"messages", "tools", "tool_choice", "parallel_tool_calls", "response_format"}
    | {"reasoning_format", "add_generation_prompt", "polyfills", "provenance"}
)
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
HEADERS_AFTER = 1.0  # seconds of engine silence before SSE headers go out anyway


@dataclasses.dataclass(frozen=True)
class ChatSettings:
    """The server's chat-completions options (command-line flags)."""

    tool_call_deltas: str | None = None
    reasoning_field: str = "reasoning"
    plain_user_text: bool = True


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """A validated chat-completion request."""

    messages: list[dict[str, Any]]
    options: Mapping[str, Any]  # keyword arguments of template.apply
    stream: bool
    include_usage: bool
    sampling: SamplingOptions
    parallel_tool_calls: bool | None


def _field(body: Mapping[str, Any], name: str, kinds: type | tuple[type, ...], what: str) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise InvalidRequest(f"{name}: must be {what}", name)
    if not isinstance(value, kinds):
        raise InvalidRequest(f"{name}: must be {what}, got {type(value).__name__}", name)
    return value


def _content(content: Any, where: str, typed: bool) -> Any:
    """A message's content: a string, null, or content parts. Text parts are joined with
    newlines for templates that take strings (as vLLM does), kept for templates that read
    parts; image, audio and file parts are refused (no engine path carries them)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}: must be a string or a list of content parts", where)
    texts: list[str] = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidRequest(f"{at}: must be an object with a 'type'", at)
        if part["type"] != "text":
            raise InvalidRequest(
                f"{at}: {part['type']} content parts are not supported by this server (text only)",
                at,
            )
        if not isinstance(part.get("text"), str):
            raise InvalidRequest(f"{at}.text: must be a string", f"{at}.text")
        texts.append(part["text"])
    if typed:
        return [{"type": "text", "text": t} for t in texts]
    return "\n".join(texts)


def check_messages(messages: Any, typed_content: bool) -> list[dict[str, Any]]:
    """Roles and contents checked; content parts made what the template takes."""
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: must be a non-empty list of message objects", "messages")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise InvalidRequest(f"{where}: must be an object with a 'role'", where)
        role = message.get("role")
        if not isinstance(role, str):
            raise InvalidRequest(f"{where}: must be an object with a 'role'", f"{where}.role")
        if role not in ROLES:
            raise InvalidRequest(
                f"{where}.role: must be one of {', '.join(sorted(ROLES))}", f"{where}.role"
            )
        copy = dict(message)
        copy["content"] = _content(message.get("content"), f"{where}.content", typed_content)
        if "reasoning" in copy and "reasoning_content" not in copy:
            copy["reasoning_content"] = copy.pop("reasoning")  # vLLM's current name
        if copy.get("reasoning_content") is not None and not isinstance(
            copy["reasoning_content"], str
        ):
            raise InvalidRequest(f"{where}.reasoning_content: must be a string", where)
        if role == "tool" and not isinstance(copy.get("content"), (str, list)):
            raise InvalidRequest(f"{where}.content: a tool result must have content", where)
        out.append(copy)
    return out


def parse_request(body: Mapping[str, Any], typed_content: bool, provenance: bool) -> ChatRequest:
    """Check the body's fields (types, ranges, refused features); the template checks the
    rest (tools, tool_choice, response_format) naming the field too."""
    for name, why in REFUSED_FIELDS.items():
        if body.get(name) not in (None, False):
            raise InvalidRequest(f"{name}: {why}", name)
    n = _field(body, "n", int, "an integer")
    if n is not None and n != 1:
        raise InvalidRequest("n: only one choice per request (n=1) is supported", "n")
    modalities = _field(body, "modalities", list, "a list")
    if modalities is not None and modalities != ["text"]:
        raise InvalidRequest("modalities: only ['text'] is supported", "modalities")
    messages = check_messages(body.get("messages"), typed_content)

    stream = _field(body, "stream", bool, "a boolean") or False
    stream_options = _field(body, "stream_options", Mapping, "an object") or {}
    include_usage = stream_options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise InvalidRequest("stream_options.include_usage: must be a boolean", "stream_options")
    sampling = SamplingOptions.from_fields(body, ("max_completion_tokens", "max_tokens"))

    kwargs = _field(body, "chat_template_kwargs", Mapping, "an object") or {}
    clash = sorted(RESERVED_TEMPLATE_KWARGS & set(kwargs))
    if clash:
        raise InvalidRequest(
            f"chat_template_kwargs: {', '.join(clash)} must be given as request fields",
            "chat_template_kwargs",
        )
    parallel = body.get("parallel_tool_calls")
    if parallel is not None:
        boolean(parallel, "parallel_tool_calls")
    options: dict[str, Any] = {
        **kwargs,
        "tools": _field(body, "tools", list, "a list of tools"),
        "tool_choice": body.get("tool_choice", "auto"),
        "parallel_tool_calls": parallel,
        "response_format": _field(body, "response_format", Mapping, "an object"),
        "provenance": provenance,
    }
    effort = _field(body, "reasoning_effort", str, "a string")
    if effort is not None:
        options["reasoning_effort"] = effort
    reasoning_format = _field(body, "reasoning_format", str, "a string")
    if reasoning_format is not None:
        options["reasoning_format"] = reasoning_format
    return ChatRequest(messages, options, stream, include_usage, sampling, parallel)


def _reasoning_keys(obj: dict[str, Any], field: str) -> dict[str, Any]:
    """The message or delta with reasoning under the configured field name(s)."""
    if "reasoning_content" not in obj or field == "reasoning_content":
        return obj
    out = dict(obj)
    value = out.pop("reasoning_content") if field == "reasoning" else out["reasoning_content"]
    out["reasoning"] = value
    return out


class Chat:
    """The route, bound to the engine link, the limits and the chat settings."""

    def __init__(self, link: EngineLink, limits: Limits, settings: ChatSettings) -> None:
        self.link = link
        self.limits = limits
        self.settings = settings

    async def handle(self, request: web.Request) -> web.StreamResponse:
        state = info(request)
        body = read_body(await request.read(), self.limits)
        served = await self.link.resolve()
        typed = served.template.caps.requires_typed_content
        req = parse_request(body, typed, self.settings.plain_user_text)
        state.stream = req.stream
        params = await self.link.prepare(served, req.messages, req.options)
        gen = generation(params, req.sampling, self.settings.plain_user_text)
        ident = oai.ResponseIdentity.new(served.model)
        if req.stream:
            return await self._stream(request, state, served, params, req, gen, ident)
        try:
            text, end = await served.backend.complete(gen)
        except BackendError as exc:
            return self._engine_failed(state, exc)
        self.link.record(None)
        message = params.parse(text, finish_reason=end.reason)
        message = self._single_call(state, req, message)
        reason = oai.finish_reason(message, end.hit_limit)
        self._account(state, message, end, reason)
        answer = oai.completion(ident, message, reason, end.usage)
        choice = answer["choices"][0]
        choice["message"] = _reasoning_keys(choice["message"], self.settings.reasoning_field)
        return web.json_response(answer)

    def _engine_failed(self, state: RequestInfo, exc: BackendError) -> web.Response:
        self.link.record(exc)
        state.engine_error = exc.kind
        state.error = exc.detail
        log.warning("request %s: engine failed: %s", state.id, exc.detail)
        kind = "timeout_error" if exc.status == 504 else "backend_error"
        return error_response(exc.status, exc.public, kind)

    @staticmethod
    def _single_call(state: RequestInfo, req: ChatRequest, message: ChatMessage) -> ChatMessage:
        """parallel_tool_calls=false holds whatever the engine did: one call at most."""
        if req.parallel_tool_calls is False and len(message.tool_calls) > 1:
            state.rejected_calls += len(message.tool_calls) - 1
            return dataclasses.replace(message, tool_calls=message.tool_calls[:1])
        return message

    @staticmethod
    def _account(state: RequestInfo, message: ChatMessage, end: Finished, reason: str) -> None:
        state.prompt_tokens = end.usage.prompt_tokens
        state.completion_tokens = end.usage.completion_tokens
        state.tool_calls = len(message.tool_calls)
        state.finish_reason = reason
        state.truncated = end.hit_limit

    async def _stream(
        self,
        request: web.Request,
        state: RequestInfo,
        served: Served,
        params: ChatParams,
        req: ChatRequest,
        gen: Generation,
        ident: oai.ResponseIdentity,
    ) -> web.StreamResponse:
        """SSE: the role, the parser's deltas as the engine's pieces arrive, the finish
        reason (and usage when asked), ``[DONE]``. An engine that fails at once is still a
        502/504; one that is slow gets the headers after ``HEADERS_AFTER`` seconds and
        keep-alive comments until its first piece (then an error is an event)."""
        pieces: AsyncGenerator[str | Finished, None] = served.backend.stream(gen)
        async with contextlib.aclosing(pieces):
            first = asyncio.ensure_future(pieces.__anext__())
            first.add_done_callback(lambda _: setattr(state, "first_token", time.perf_counter()))
            try:
                done, _ = await asyncio.wait({first}, timeout=HEADERS_AFTER)
                if done and first.exception() is not None:
                    exc = first.exception()
                    if isinstance(exc, BackendError):
                        return self._engine_failed(state, exc)
                response = web.StreamResponse(headers=SSE_HEADERS)
                await response.prepare(request)
                while not first.done():
                    done, _ = await asyncio.wait({first}, timeout=self.limits.keepalive_interval)
                    if not done:
                        await response.write(b": keep-alive\n\n")
            finally:
                if not first.done():
                    first.cancel()
                    with contextlib.suppress(asyncio.CancelledError, BackendError):
                        await first
            return await self._stream_body(response, state, params, req, ident, pieces, first)

    async def _stream_body(
        self,
        response: web.StreamResponse,
        state: RequestInfo,
        params: ChatParams,
        req: ChatRequest,
        ident: oai.ResponseIdentity,
        pieces: AsyncGenerator[str | Finished, None],
        first: asyncio.Future[str | Finished],
    ) -> web.StreamResponse:
        field = self.settings.reasoning_field
        policy = self.settings.tool_call_deltas
        deltas = params.stream() if policy is None else params.stream(tool_call_deltas=policy)
        single = req.parallel_tool_calls is False

        def sse(delta: dict[str, Any], reason: str | None = None) -> bytes:
            if single and "tool_calls" in delta:
                calls = [c for c in delta["tool_calls"] if c.get("index", 0) == 0]
                state.rejected_calls += len(delta["tool_calls"]) - len(calls)
                delta = {k: v for k, v in delta.items() if k != "tool_calls"}
                if calls:
                    delta["tool_calls"] = calls
                elif not delta:
                    return b""
            return _sse(oai.chunk(ident, _reasoning_keys(delta, field), reason))

        out = [sse({"role": "assistant", "content": ""})]
        end: Finished | None = None
        try:
            item = first.result()
            while True:
                if isinstance(item, Finished):
                    end = item
                    break
                out.extend(sse(d) for d in deltas.feed(item))
                if out:
                    await response.write(b"".join(out))
                    out.clear()
                item = await pieces.__anext__()
        except BackendError as exc:
            self.link.record(exc)
            state.engine_error, state.error = exc.kind, exc.detail
            kind = "timeout_error" if exc.status == 504 else "backend_error"
            out.append(_sse(error_body(public_text(exc.public), kind)))
        except StopAsyncIteration:
            out.append(_sse(error_body("the engine's stream ended early", "backend_error")))
        if end is not None:
            self.link.record(None)
            out.extend(sse(d) for d in deltas.finish(finish_reason=end.reason))
            if deltas.dropped_calls:
                log.info("request %s: stream dropped tool calls %s", state.id, deltas.dropped_calls)
                state.rejected_calls += len(deltas.dropped_calls)
            message = self._single_call(state, req, deltas.message)
            reason = oai.finish_reason(message, end.hit_limit)
            self._account(state, message, end, reason)
            out.append(_sse(oai.chunk(ident, {}, reason)))
            if req.include_usage:
                out.append(_sse(oai.usage_chunk(ident, end.usage)))
        out.append(b"data: [DONE]\n\n")
        await response.write(b"".join(out))
        await response.write_eof()
        return response


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n\n"
