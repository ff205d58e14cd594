"""The HTTP routes: ``POST /v1/chat/completions`` (whole or streamed), ``GET /v1/models``,
``GET /health``; request validation with OpenAI error bodies.

One request: validate the body -> ``template.apply`` (prompt, grammar, triggers, parser) ->
the backend generates -> the library's parser turns the text into an OpenAI message (or,
streaming, into deltas as the pieces arrive). A bad request is a 400 naming the field, a
failing backend a 502; an unexpected failure is a 500 for that request only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from aiohttp import web

from autoparser import (
    TOOL_CALL_DELTAS,
    ChatParams,
    ChatTemplate,
    RequestError,
    StreamParser,
    TemplateError,
)
from autoparser.serve import openai_format as oai
from autoparser.serve.backends import (
    Backend,
    BackendError,
    Finished,
    Generation,
    first_model,
    make_backend,
    probe,
)
from autoparser.serve.kinds import KIND_CHOICES

log = logging.getLogger("autoparser.serve")

# Sampling fields passed to the backend as they are (llama.cpp and vLLM share these names).
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "repetition_penalty",
    "logit_bias",
    "ignore_eos",
)
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
    | {"reasoning_format", "add_generation_prompt", "polyfills"}
)
_FIELD_PREFIX = re.compile(r"^([A-Za-z_][\w.\[\]]*):")


@dataclasses.dataclass(frozen=True)
class ServeConfig:
    """How to start the server. ``template`` is a path, a loaded template, or None (ask the
    llama.cpp backend's ``GET /props``)."""

    backend_url: str
    backend_kind: str = "auto"  # "auto" (GET /props decides) or a kind of serve/kinds.py
    template: str | ChatTemplate | None = None
    model: str | None = None
    tool_call_deltas: str | None = None  # None: the library's default ("whole")
    host: str = "127.0.0.1"
    port: int = 8000

    def __post_init__(self) -> None:
        if self.backend_kind not in KIND_CHOICES:
            raise ValueError(
                f"backend_kind must be one of {', '.join(KIND_CHOICES)}: {self.backend_kind}"
            )
        if self.tool_call_deltas not in (None, *TOOL_CALL_DELTAS):
            raise ValueError(
                f"tool_call_deltas must be one of {', '.join(TOOL_CALL_DELTAS)}: "
                f"{self.tool_call_deltas}"
            )


class InvalidRequest(Exception):
    """A request the server refuses (HTTP 400), naming the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """A validated chat-completion request."""

    messages: list[Mapping[str, Any]]
    options: Mapping[str, Any]  # keyword arguments of template.apply
    stream: bool
    include_usage: bool
    max_tokens: int | None
    stop: tuple[str, ...]
    sampling: Mapping[str, Any]


@dataclasses.dataclass
class ServerState:
    """What every request shares: the template, the backend client, the model name."""

    template: ChatTemplate
    backend: Backend
    model: str
    tool_call_deltas: str | None


STATE: web.AppKey[ServerState] = web.AppKey("state", ServerState)


def _field(body: Mapping[str, Any], name: str, kinds: type | tuple[type, ...], what: str) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise InvalidRequest(f"{name}: must be {what}", name)
    if not isinstance(value, kinds):
        raise InvalidRequest(f"{name}: must be {what}, got {type(value).__name__}", name)
    return value


def parse_request(body: Any) -> ChatRequest:
    """Check the body's fields (types, refused features); the template checks the rest."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    for name, why in REFUSED_FIELDS.items():
        if body.get(name) not in (None, False):
            raise InvalidRequest(f"{name}: {why}", name)
    n = _field(body, "n", int, "an integer")
    if n is not None and n != 1:
        raise InvalidRequest("n: only one choice per request (n=1) is supported", "n")
    modalities = _field(body, "modalities", list, "a list")
    if modalities is not None and modalities != ["text"]:
        raise InvalidRequest("modalities: only ['text'] is supported", "modalities")

    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: must be a non-empty list of message objects", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidRequest(f"messages[{i}]: must be an object with a 'role'", "messages")

    stream = _field(body, "stream", bool, "a boolean") or False
    stream_options = _field(body, "stream_options", Mapping, "an object") or {}
    include_usage = stream_options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise InvalidRequest("stream_options.include_usage: must be a boolean", "stream_options")

    max_tokens = _field(body, "max_completion_tokens", int, "an integer")
    if max_tokens is None:
        max_tokens = _field(body, "max_tokens", int, "an integer")
    if max_tokens is not None and max_tokens < 1:
        raise InvalidRequest("max_tokens: must be at least 1", "max_tokens")

    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    else:
        raise InvalidRequest("stop: must be a string or a list of strings", "stop")

    sampling = {k: body[k] for k in SAMPLING_FIELDS if body.get(k) is not None}
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        if name in sampling and (
            isinstance(sampling[name], bool) or not isinstance(sampling[name], (int, float))
        ):
            raise InvalidRequest(f"{name}: must be a number", name)
    if "logit_bias" in sampling and not isinstance(sampling["logit_bias"], (Mapping, list)):
        raise InvalidRequest("logit_bias: must be an object of token id -> bias", "logit_bias")

    kwargs = _field(body, "chat_template_kwargs", Mapping, "an object") or {}
    clash = sorted(RESERVED_TEMPLATE_KWARGS & set(kwargs))
    if clash:
        raise InvalidRequest(
            f"chat_template_kwargs: {', '.join(clash)} must be given as request fields",
            "chat_template_kwargs",
        )
    options: dict[str, Any] = {
        **kwargs,
        "tools": _field(body, "tools", list, "a list of tools"),
        "tool_choice": body.get("tool_choice", "auto"),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "response_format": _field(body, "response_format", Mapping, "an object"),
    }
    effort = _field(body, "reasoning_effort", str, "a string")
    if effort is not None:
        options["reasoning_effort"] = effort
    reasoning_format = _field(body, "reasoning_format", str, "a string")
    if reasoning_format is not None:
        options["reasoning_format"] = reasoning_format
    return ChatRequest(
        messages=list(messages),
        options=options,
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_tokens,
        stop=stops,
        sampling=sampling,
    )


def _param_of(message: str) -> str | None:
    """The request field a library error names (``tools[0].function.parameters: ...``)."""
    found = _FIELD_PREFIX.match(message)
    return found.group(1) if found else None


async def build_params(state: ServerState, req: ChatRequest) -> ChatParams:
    """``template.apply`` in a worker thread (rendering and grammar building take
    milliseconds that would otherwise stall every stream)."""
    apply = functools.partial(state.template.apply, req.messages, **req.options)
    try:
        params = await asyncio.get_running_loop().run_in_executor(None, apply)
    except RequestError as exc:
        raise InvalidRequest(str(exc), _param_of(str(exc))) from exc
    except TemplateError as exc:
        raise InvalidRequest(
            f"the chat template cannot render this request: {exc}", "messages"
        ) from exc
    if not isinstance(params, ChatParams):  # pragma: no cover - apply's contract
        raise TypeError(f"template.apply returned {type(params).__name__}")
    return params


def generation(params: ChatParams, req: ChatRequest) -> Generation:
    return Generation(
        prompt=params.prompt,
        max_tokens=req.max_tokens,
        stop=tuple(dict.fromkeys((*params.additional_stops, *req.stop))),
        sampling=req.sampling,
        grammar=params.grammar,
        grammar_lazy=params.grammar_lazy,
        grammar_triggers=tuple(params.grammar_triggers),
        preserved_tokens=tuple(params.preserved_tokens),
    )


def delta_stream(params: ChatParams, policy: str | None) -> StreamParser:
    """The library's stream parser under the server's tool-call delta policy."""
    return params.stream() if policy is None else params.stream(tool_call_deltas=policy)


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n\n"


def _error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    return web.json_response(oai.error_body(message, kind=kind, param=param), status=status)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    try:
        body = await request.json()
    except ValueError as exc:
        return _error(400, f"the request body is not valid JSON: {exc}", "invalid_request_error")
    try:
        req = parse_request(body)
        params = await build_params(state, req)
    except InvalidRequest as exc:
        return _error(400, str(exc), "invalid_request_error", exc.param)
    gen = generation(params, req)
    ident = oai.ResponseIdentity.new(state.model)
    if not req.stream:
        try:
            text, end = await state.backend.complete(gen)
        except BackendError as exc:
            return _error(502, str(exc), "backend_error")
        message = params.parse(text, finish_reason=end.reason)
        reason = oai.finish_reason(message, end.hit_limit)
        return web.json_response(oai.completion(ident, message, reason, end.usage))
    return await _stream(request, state, params, req, gen, ident)


async def _stream(
    request: web.Request,
    state: ServerState,
    params: ChatParams,
    req: ChatRequest,
    gen: Generation,
    ident: oai.ResponseIdentity,
) -> web.StreamResponse:
    """SSE: the role, the parser's deltas as the backend's pieces arrive, the finish reason
    (and usage when asked), ``[DONE]``. The backend is asked before the response starts, so
    a backend that is down is still a 502."""
    pieces = state.backend.stream(gen)
    async with contextlib.aclosing(pieces):
        try:
            first = await pieces.__anext__()
        except BackendError as exc:
            return _error(502, str(exc), "backend_error")
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        deltas = delta_stream(params, state.tool_call_deltas)
        out = [_sse(oai.chunk(ident, {"role": "assistant", "content": ""}))]
        end: Finished | None = None
        try:
            item: str | Finished = first
            while True:
                if isinstance(item, Finished):
                    end = item
                    break
                out.extend(_sse(oai.chunk(ident, d.to_openai())) for d in deltas.feed_deltas(item))
                if out:
                    await response.write(b"".join(out))
                    out.clear()
                item = await pieces.__anext__()
        except BackendError as exc:
            out.append(_sse(oai.error_body(str(exc), kind="backend_error")))
        except StopAsyncIteration:
            out.append(_sse(oai.error_body("the backend stream ended early", kind="backend_error")))
        if end is not None:
            out.extend(
                _sse(oai.chunk(ident, d.to_openai()))
                for d in deltas.finish_deltas(finish_reason=end.reason)
            )
            if deltas.dropped_calls:
                log.info("incremental stream dropped tool calls %s", deltas.dropped_calls)
            reason = oai.finish_reason(deltas.message, end.hit_limit)
            out.append(_sse(oai.chunk(ident, {}, reason)))
            if req.include_usage:
                out.append(_sse(oai.usage_chunk(ident, end.usage)))
        out.append(b"data: [DONE]\n\n")
        await response.write(b"".join(out))
        await response.write_eof()
        return response


async def models(request: web.Request) -> web.Response:
    return web.json_response(oai.model_list(request.app[STATE].model))


async def health(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return web.json_response({"status": "ok", "backend": state.backend.kind})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def openai_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure answers with an OpenAI error body; none takes the server down."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
        return _error(exc.status, f"{request.method} {request.path}: {exc.reason}", kind)
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except Exception as exc:
        log.exception("request failed")
        return _error(500, f"internal error: {exc!r}", "server_error")


async def load_state(config: ServeConfig, session: aiohttp.ClientSession) -> ServerState:
    """Probe the backend, load the template (from the path, or the backend's /props),
    pick the model name, and warm the template's analysis once."""
    info = await probe(config.backend_url, session)
    kind = config.backend_kind
    if kind == "auto":
        kind = info.kind if info is not None else "openai"
    template = config.template
    if template is None:
        if info is None or not info.chat_template:
            raise TemplateError(
                f"{config.backend_url}: the backend does not report a chat template "
                "(GET /props); pass --template"
            )
        template = ChatTemplate(
            info.chat_template, bos_token=info.bos_token, eos_token=info.eos_token, name="props"
        )
    elif not isinstance(template, ChatTemplate):
        template = ChatTemplate.from_file(template)
    model = config.model or (info.model if info is not None else "")
    if not model and kind == "openai":
        model = await first_model(config.backend_url, session)
    loaded = template
    await asyncio.get_running_loop().run_in_executor(None, loaded.analyze)
    backend = make_backend(kind, config.backend_url, session, model)
    return ServerState(loaded, backend, model or "autoparser", config.tool_call_deltas)


def create_app(config: ServeConfig) -> web.Application:
    """The aiohttp application; the backend is probed and the template loaded at startup."""
    app = web.Application(middlewares=[openai_errors], client_max_size=64 * 1024 * 1024)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            app[STATE] = await load_state(config, session)
            yield

    app.cleanup_ctx.append(lifecycle)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    return app
