"""``POST /v1/chat/completions``: the OpenAI chat-completions mapping, and only it.

Limits, auth, ids, logs and metrics are the middleware's (``observe``); the sampling
options are ``options.SamplingOptions``; the engine path is ``engine``. The request's
template-facing fields are read by the library's one reader (``RequestOptions.
from_openai``) and turned into params by the served ``Session``, as every engine adapter
does; the output is read by a ``Reply`` (call ids, ``parallel_tool_calls=false``). Here:
the server's own fields (stream, ``n`` choices each generated and parsed on its own, token
logprobs passed through, refused features), its tolerances, applied to the read options
(content parts and media placeholders, loosened schemas, folded system messages), and
writing the answer as a ``chat.completion`` or as SSE chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Protocol, TypeVar, cast

from aiohttp import web

from autoparser import (
    ChatMessage,
    ChatParams,
    JsonMapping,
    Reply,
    RequestError,
    RequestOptions,
    SchemaError,
    Session,
    StreamDelta,
    TemplateError,
    loosen_schema,
)
from autoparser.serve import openai_format as oai
from autoparser.serve.engine import (
    EngineLink,
    EngineUnavailable,
    Served,
    generation,
    param_of,
    request_error_text,
)
from autoparser.serve.engines.base import (
    BackendError,
    Finished,
    Generation,
    MediaSupport,
    Scored,
    TokenLogprob,
)
from autoparser.serve.limits import (
    MAX_CHOICES,
    MAX_TOP_LOGPROBS,
    Degradation,
    InvalidRequest,
    Limits,
    SystemMessageRefused,
    read_body,
)
from autoparser.serve.media import MEDIA_PARTS, MediaRoute
from autoparser.serve.observe import error_body, error_reply, info, public_text
from autoparser.serve.options import SamplingOptions

log = logging.getLogger("autoparser.serve")

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
REASONING_FIELDS = ("reasoning", "reasoning_content", "both")
# OpenAI fields this server cannot honour: refused, not silently ignored.
REFUSED_FIELDS = {
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
    "functions": "the legacy 'functions' field is not supported; use 'tools'",
    "function_call": "the legacy 'function_call' field is not supported; use 'tool_choice'",
    "web_search_options": "web search is not supported",
}
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
HEADERS_AFTER = 1.0  # seconds of engine silence before SSE headers go out anyway

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class ChatSettings:
    """The server's chat-completions options (command-line flags)."""

    tool_call_deltas: str | None = None
    reasoning_field: str = "reasoning"
    plain_user_text: bool = True
    strict_schemas: bool = False  # refuse schema keywords the grammar cannot express
    # images: to the engine when it takes them (auto), else (and documents) a text
    # placeholder; or "reject" (400). See ``media.py``.
    media: str = "auto"


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """A validated chat-completion request: the library's options (read by its one
    reader, this server's tolerances applied) and the server's own fields."""

    options: RequestOptions
    stream: bool
    include_usage: bool
    sampling: SamplingOptions
    degraded: tuple[Degradation, ...] = ()
    logprobs: int | None = None  # alternatives per token (top_logprobs); None: not asked
    n: int = 1  # choices, each a generation of its own
    images: tuple[str, ...] = ()  # base64, one per engine marker in the prompt, in order

    @property
    def messages(self) -> tuple[Mapping[str, object], ...]:
        return self.options.messages


def _field(body: Mapping[str, object], name: str, kind: type[_T], what: str) -> _T | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) and kind is not bool:
        raise InvalidRequest(f"{name}: must be {what}", name)
    if not isinstance(value, kind):
        raise InvalidRequest(f"{name}: must be {what}, got {type(value).__name__}", name)
    return value


def _object_field(body: Mapping[str, object], name: str) -> Mapping[str, object] | None:
    """``_field`` for a JSON object (``Mapping`` is abstract: no ``type[T]`` for it)."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidRequest(f"{name}: must be an object", name)
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{name}: must be an object, got {type(value).__name__}", name)
    return value


def _content(
    content: object, where: str, typed: bool, media: MediaRoute, found: list[Degradation]
) -> str | list[dict[str, str]] | None:
    """A message's content: a string, null, or content parts. Text parts are joined with
    newlines for templates that take strings (as vLLM does), kept for templates that read
    parts; image, audio and file parts become the text ``media`` gives them (the engine's
    image marker, or a short placeholder; ``reject``: refused)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}: must be a string or a list of content parts", where)
    texts: list[str] = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidRequest(f"{at}: must be an object with a 'type'", at)
        kind = part["type"]
        if kind in MEDIA_PARTS:
            texts.append(media.text(part, at, found))
            continue
        if kind != "text":
            raise InvalidRequest(
                f"{at}: {kind} content parts are not supported by this server (text only)", at
            )
        if not isinstance(part.get("text"), str):
            raise InvalidRequest(f"{at}.text: must be a string", f"{at}.text")
        texts.append(part["text"])
    if typed:
        return [{"type": "text", "text": t} for t in texts]
    return "\n".join(texts)


def check_messages(
    messages: object,
    typed_content: bool,
    media: str | MediaRoute = "placeholder",
    found: list[Degradation] | None = None,
) -> list[dict[str, object]]:
    """Roles and contents checked; content parts made what the template takes (media
    parts: see ``_content``; what was replaced is appended to ``found``)."""
    found = [] if found is None else found
    media = MediaRoute(media) if isinstance(media, str) else media
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: must be a non-empty list of message objects", "messages")
    out: list[dict[str, object]] = []
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
        copy["content"] = _content(
            message.get("content"), f"{where}.content", typed_content, media, found
        )
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


def read_options(body: Mapping[str, object]) -> RequestOptions:
    """The request's template-facing fields, read by the library's one reader; its
    ``RequestError`` is a 400 naming the field."""
    try:
        return RequestOptions.from_openai(body)
    except RequestError as exc:
        text = request_error_text(exc)
        raise InvalidRequest(text, param_of(text)) from exc


def parse_request(
    body: Mapping[str, object],
    typed_content: bool,
    media: str | MediaRoute = "placeholder",
    engine: MediaSupport | None = None,
) -> ChatRequest:
    """Check the server's own fields (types, ranges, refused features), read the rest with
    the one reader and make the messages' content what the template takes (media parts:
    ``_content``, under the ``media`` policy, ``engine`` taking what it said it takes; or
    the given route); the template checks tools, tool_choice and response_format naming the
    field too."""
    for name, why in REFUSED_FIELDS.items():
        if body.get(name) not in (None, False):
            raise InvalidRequest(f"{name}: {why}", name)
    n = _field(body, "n", int, "an integer")
    if n is not None and not 1 <= n <= MAX_CHOICES:
        raise InvalidRequest(f"n: must be between 1 and {MAX_CHOICES}, got {n}", "n")
    logprobs = read_logprobs(body)
    modalities = _field(body, "modalities", list, "a list")
    if modalities is not None and modalities != ["text"]:
        raise InvalidRequest("modalities: only ['text'] is supported", "modalities")
    options = read_options(body)
    degraded: list[Degradation] = []
    route = MediaRoute(media, engine) if isinstance(media, str) else media
    messages = check_messages(list(options.messages), typed_content, route, degraded)
    options = dataclasses.replace(options, messages=tuple(cast("list[JsonMapping]", messages)))

    stream = _field(body, "stream", bool, "a boolean") or False
    stream_options = _object_field(body, "stream_options") or {}
    include_usage = stream_options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise InvalidRequest("stream_options.include_usage: must be a boolean", "stream_options")
    sampling = SamplingOptions.from_fields(body, ("max_completion_tokens", "max_tokens"))
    return ChatRequest(
        options,
        stream,
        include_usage,
        sampling,
        tuple(degraded),
        logprobs,
        n or 1,
        tuple(route.images),
    )


def read_logprobs(body: Mapping[str, object]) -> int | None:
    """``logprobs`` (a boolean) and ``top_logprobs`` (0 to ``MAX_TOP_LOGPROBS``, only with
    ``logprobs: true``, as OpenAI has it): how many alternatives per token, or None."""
    wanted = _field(body, "logprobs", bool, "a boolean") or False
    top = _field(body, "top_logprobs", int, "an integer")
    if top is not None and not 0 <= top <= MAX_TOP_LOGPROBS:
        raise InvalidRequest(
            f"top_logprobs: must be between 0 and {MAX_TOP_LOGPROBS}, got {top}", "top_logprobs"
        )
    if top is not None and not wanted:
        raise InvalidRequest("top_logprobs: requires logprobs to be true", "top_logprobs")
    return (top or 0) if wanted else None


def _loosened(
    schema: object, where: str, limits: Limits, strict: bool, found: list[Degradation]
) -> object:
    """``schema`` with what the grammar cannot express left out (``loosen_schema``), each
    finding appended to ``found``; with ``strict``, the first is a 400 naming its pointer."""
    try:
        loose, findings = loosen_schema(schema, max_count=limits.max_schema_count, strict=strict)
    except SchemaError as exc:
        raise InvalidRequest(f"{where}: {exc}", where) from exc
    for finding in findings:
        found.append(Degradation("schema", finding.keyword, f"{where}: {finding.describe()}"))
    return loose


def loosen_options(
    options: RequestOptions, limits: Limits, strict: bool
) -> tuple[RequestOptions, list[Degradation]]:
    """The tools' and the response format's schemas loosened where the grammar cannot
    follow them (``_loosened``); malformed tools are left for the template to name."""
    found: list[Degradation] = []
    tools = options.tools
    if tools:
        loose_tools: list[JsonMapping] = []
        for i, tool in enumerate(tools):
            function = tool.get("function")
            if isinstance(function, Mapping) and isinstance(function.get("parameters"), Mapping):
                where = f"tools[{i}].function.parameters"
                parameters = _loosened(function["parameters"], where, limits, strict, found)
                tool = cast(
                    "JsonMapping", {**tool, "function": {**function, "parameters": parameters}}
                )
            loose_tools.append(tool)
        tools = tuple(loose_tools)
    fmt = options.response_format
    spec = fmt.get("json_schema") if fmt is not None else None
    if fmt is not None and isinstance(spec, Mapping) and "schema" in spec:
        where = "response_format.json_schema.schema"
        schema = _loosened(spec["schema"], where, limits, strict, found)
        fmt = cast("JsonMapping", {**fmt, "json_schema": {**spec, "schema": schema}})
    return dataclasses.replace(options, tools=tools, response_format=fmt), found


def _with_text(content: object, text: str, before: bool) -> object:
    """``content`` (a string, text parts or None) with ``text`` added before or after."""
    if isinstance(content, list):
        part = {"type": "text", "text": text}
        return [part, *content] if before else [*content, part]
    if not content:
        return text
    return f"{text}\n\n{content}" if before else f"{content}\n\n{text}"


def _plain_text(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def fold_system_messages(
    messages: Sequence[Mapping[str, object]],
) -> tuple[list[dict[str, object]], int]:
    """The messages with every system (or developer) message after the first turn folded
    into the next user message (else the one before, else the leading system prompt), for
    templates that take a system message only first; and how many were folded."""
    out = [dict(m) for m in messages]
    start = next((i for i, m in enumerate(out) if m["role"] not in ("system", "developer")), 0)
    late = [i for i in range(start + 1, len(out)) if out[i]["role"] in ("system", "developer")]
    users = [i for i, m in enumerate(out) if m["role"] == "user"]
    for i in late:
        text = _plain_text(out[i]["content"])
        after = [u for u in users if u > i]
        before = [u for u in users if u < i]
        if after:
            out[after[0]]["content"] = _with_text(out[after[0]]["content"], text, True)
        elif before:
            out[before[-1]]["content"] = _with_text(out[before[-1]]["content"], text, False)
        elif start > 0:
            out[0]["content"] = _with_text(out[0]["content"], text, False)
        else:
            continue
        out[i] = {}
    return [m for m in out if m], sum(1 for m in out if not m)


def _reasoning_keys(obj: dict[str, object], field: str) -> dict[str, object]:
    """The message or delta with reasoning under the configured field name(s)."""
    if "reasoning_content" not in obj or field == "reasoning_content":
        return obj
    out = dict(obj)
    value = out.pop("reasoning_content") if field == "reasoning" else out["reasoning_content"]
    out["reasoning"] = value
    return out


@dataclasses.dataclass(frozen=True)
class Prepared:
    """One request on its way to the engine: what is served, the validated request, the
    library's params (prompt, grammar, parser) and the engine's generation."""

    served: Served
    req: ChatRequest
    params: ChatParams
    gen: Generation

    def choices(self) -> list[Prepared]:
        """One generation per choice (``n``): the same request, a seed given moved on by
        the choice's index (the same seed would make every choice the same)."""
        if self.req.n == 1:
            return [self]
        out = []
        seed = self.gen.sampling.get("seed")
        for index in range(self.req.n):
            gen = self.gen
            if isinstance(seed, int) and seed >= 0:
                sampling = {**gen.sampling, "seed": (seed + index) % 2**32}
                gen = dataclasses.replace(gen, sampling=sampling)
            out.append(dataclasses.replace(self, gen=gen))
        return out

    def reply(self, tool_call_deltas: str | None = None) -> Reply:
        """A reader of this request's output (call ids of its own, at most one call when
        ``parallel_tool_calls`` is false; ``tool_call_deltas`` None: the library's
        default)."""
        return Reply(
            self.params,
            parallel_tool_calls=self.req.options.parallel_tool_calls,
            tool_call_deltas=tool_call_deltas or "whole",
        )


class Sink(Protocol):
    """One API's stream, as SSE bytes: chat chunks here, Responses and Messages events in
    ``agent_apis``. ``finish`` also returns the finish reason the access log records."""

    def start(self) -> bytes: ...
    def feed(self, deltas: list[StreamDelta]) -> bytes: ...
    def finish(self, message: ChatMessage, end: Finished) -> tuple[bytes, str]: ...
    def fail(self, message: str, kind: str) -> bytes: ...
    def close(self) -> bytes: ...


class ChatSink:
    """Chat-completion chunks: the role, the deltas, the finish reason (and usage when
    asked), ``[DONE]``. ``index``: the choice they belong to (``n`` > 1). The deltas'
    chunks are written from prepared parts (``oai.ChunkEvents``), the same bytes
    ``json.dumps`` of each chunk object gives."""

    def __init__(
        self, ident: oai.ResponseIdentity, req: ChatRequest, field: str, index: int = 0
    ) -> None:
        self.ident = ident
        self.req = req
        self.field = field
        self.index = index
        self.events = oai.ChunkEvents(ident)

    def start(self) -> bytes:
        return _sse(oai.chunk(self.ident, {"role": "assistant", "content": ""}, index=self.index))

    def feed(self, deltas: list[StreamDelta]) -> bytes:
        if not deltas:
            return b""
        event, field, index = self.events.event, self.field, self.index
        if len(deltas) == 1:  # most feeds
            return event(delta_json(deltas[0], field), index).encode()
        return "".join([event(delta_json(d, field), index) for d in deltas]).encode()

    def feed_scored(self, deltas: list[StreamDelta], logprobs: list[TokenLogprob]) -> bytes:
        """``feed``, the first chunk carrying the logprobs of the tokens the deltas came
        from (a piece that made no delta passes its tokens on to the next that does)."""
        if not deltas:
            return b""
        event, field, index = self.events.event, self.field, self.index
        first = event(delta_json(deltas[0], field), index, oai.logprobs_object(logprobs))
        return "".join([first, *(event(delta_json(d, field), index) for d in deltas[1:])]).encode()

    def finish(
        self, message: ChatMessage, end: Finished, logprobs: list[TokenLogprob] | None = None
    ) -> tuple[bytes, str]:
        """The closing chunk (with the logprobs of tokens that made no delta, if any)."""
        reason = oai.finish_reason(message, end.hit_limit)
        out = _sse(oai.chunk(self.ident, {}, reason, index=self.index, logprobs=logprobs or None))
        if self.req.include_usage:
            out += _sse(oai.usage_chunk(self.ident, end.usage))
        return out, reason

    def fail(self, message: str, kind: str) -> bytes:
        return _sse(error_body(message, kind))

    def close(self) -> bytes:
        return b"data: [DONE]\n\n"


def delta_json(delta: StreamDelta, field: str) -> str:
    """A delta's OpenAI ``delta`` object as JSON text, reasoning under ``field``
    (``_reasoning_keys``): a delta of one text field (most are) written directly, any
    other through its dict; the same text ``json.dumps`` gives either way."""
    content, reasoning = delta.content, delta.reasoning_content
    if not delta.tool_calls:
        if reasoning is None:
            return "{}" if content is None else '{"content": ' + oai.json_string(content) + "}"
        if content is None and field != "both":
            return f'{{"{field}": {oai.json_string(reasoning)}}}'
    return oai.to_json(_reasoning_keys(delta.to_openai(), field))


class Chat:
    """The route, bound to the engine link, the limits and the chat settings. Its steps
    (``prepare``, ``generate``, ``relay``) are the request path every route shares: the
    Responses and Messages routes map their bodies onto a chat body and call them."""

    def __init__(self, link: EngineLink, limits: Limits, settings: ChatSettings) -> None:
        self.link = link
        self.limits = limits
        self.settings = settings

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = read_body(await request.read(), self.limits)
        prepared = await self.prepare(request, body)
        ident = oai.ResponseIdentity.new(prepared.served.model)
        req = prepared.req
        if req.stream:
            if req.n > 1:
                return await self.relay_choices(request, prepared, ident)
            sink = ChatSink(ident, req, self.settings.reasoning_field)
            return await self.relay(request, prepared, sink, self.settings.tool_call_deltas)
        runs = [self.generate(request, one) for one in prepared.choices()]
        answers = await asyncio.gather(*runs) if len(runs) > 1 else [await runs[0]]
        for done in answers:
            if isinstance(done, web.Response):
                return done
        finished = cast("list[tuple[ChatMessage, Finished]]", answers)
        field = self.settings.reasoning_field
        choices: list[dict[str, object]] = []
        for index, (message, end) in enumerate(finished):
            reason = oai.finish_reason(message, end.hit_limit)
            probs = self.logprobs_given(request, req, end)
            choice = oai.choice(index, message, reason, probs)
            choice["message"] = _reasoning_keys(cast("dict[str, object]", choice["message"]), field)
            choices.append(choice)
        first_message, first_end = finished[0]
        usage = summed_usage([end for _, end in finished])
        self.account(
            request,
            first_message,
            dataclasses.replace(first_end, usage=usage),
            str(choices[0]["finish_reason"]),
        )
        answer = oai.completion(ident, first_message, str(choices[0]["finish_reason"]), usage)
        answer["choices"] = choices
        return web.json_response(answer)

    def logprobs_given(
        self, request: web.Request, req: ChatRequest, end: Finished
    ) -> tuple[TokenLogprob, ...] | None:
        """A generation's token logprobs when they were asked; an engine that gave none is
        a degradation (a log line, the metric) and ``logprobs: null``, not an error."""
        if req.logprobs is None:
            return None
        if end.logprobs is None:
            state = info(request)
            if not any(what == "logprobs" for what, _ in state.degraded):  # once a request
                state.degrade(
                    "logprobs", "logprobs", "logprobs: the engine returned none (logprobs: null)"
                )
        return end.logprobs

    async def prepare(self, request: web.Request, body: Mapping[str, object]) -> Prepared:
        """A chat body (already through ``read_body``) validated, rendered and turned into
        the engine's generation; a client's mistake is an InvalidRequest naming the field,
        even before the engine is known when the template was given (``--template``)."""
        try:
            served = await self.link.resolve()
        except EngineUnavailable:
            given = self.link.given_session
            if given is not None:
                await self._render(request, given, body, None)  # a 400 if the request is wrong
            raise
        req, params = await self._render(request, served.session, body, served.media)
        plain = self.settings.plain_user_text
        if req.images and plain:
            info(request).degrade(
                "plain_text",
                "plain_text",
                f"messages: the prompt goes as text with {len(req.images)} image(s): the "
                "caller's text is not kept from becoming control tokens in this request",
            )
        gen = generation(params, req.sampling, plain, req.logprobs, req.images)
        return Prepared(served, req, params, gen)

    async def _render(
        self,
        request: web.Request,
        session: Session,
        body: Mapping[str, object],
        engine: MediaSupport | None,
    ) -> tuple[ChatRequest, ChatParams]:
        """The body read (the one reader, then this server's tolerances, each logged as a
        degradation) and turned into params by ``session``; images go to an ``engine`` that
        takes them as its marker in the prompt (``media.MediaRoute``), unless the rendered
        prompt does not hold one marker per image: then they are placeholders too."""
        typed = session.template.caps.requires_typed_content
        settings = self.settings
        req = parse_request(body, typed, settings.media, engine)
        state = info(request)
        state.stream = req.stream
        options, loosened = loosen_options(req.options, self.limits, settings.strict_schemas)
        params, options, folded = await self._params(session, options)
        if req.images and engine is not None:
            route = MediaRoute(settings.media, engine)
            route.images.extend(req.images)
            if not route.placed(params.prompt):
                why = (
                    "the rendered prompt does not hold one image marker per image: the "
                    "template left a turn out, or text spells the marker"
                )
                req = parse_request(body, typed, MediaRoute(settings.media, engine, why))
                options = loosen_options(req.options, self.limits, settings.strict_schemas)[0]
                params, options, folded = await self._params(session, options)
        for found in (*req.degraded, *loosened):
            state.degrade(found.what, found.label, found.detail)
        if folded:
            state.degrade("system_message", "system_message", folded)
        return dataclasses.replace(req, options=options), params

    async def _params(
        self, session: Session, options: RequestOptions
    ) -> tuple[ChatParams, RequestOptions, str]:
        """``options`` rendered by ``session``; a template that takes a system message only
        first gets the later ones folded into the user turn (the options as rendered, and
        the degradation's text when they were folded, else "")."""
        provenance = self.settings.plain_user_text
        try:
            return await self.link.prepare(session, options, provenance), options, ""
        except InvalidRequest as exc:
            messages, count = fold_system_messages(options.messages)
            if not count or not isinstance(exc.__cause__, TemplateError):
                raise
            folded = dataclasses.replace(
                options, messages=tuple(cast("list[JsonMapping]", messages))
            )
            try:
                params = await self.link.prepare(session, folded, provenance)
            except InvalidRequest as again:
                if not isinstance(again.__cause__, TemplateError):
                    raise
                raise SystemMessageRefused(str(exc), exc.param, exc.status) from exc
            text = (
                f"messages: the template takes a system message only first ({exc}): "
                f"{count} later one(s) folded into the user turn"
            )
            return params, folded, text

    async def generate(
        self, request: web.Request, prepared: Prepared
    ) -> tuple[ChatMessage, Finished] | web.Response:
        """The whole output, parsed (``parallel_tool_calls=false`` held); an engine failure
        is its 502/504 response."""
        try:
            text, end = await prepared.served.backend.complete(prepared.gen)
        except BackendError as exc:
            return self.engine_failed(request, exc)
        self.link.record(None)
        reply = prepared.reply()
        message = reply.parse(text, finish_reason=end.reason)
        info(request).rejected_calls += reply.rejected_calls
        return message, end

    def engine_failed(self, request: web.Request, exc: BackendError) -> web.Response:
        state = info(request)
        self.link.record(exc)
        state.engine_error = exc.kind
        state.error = exc.detail
        log.warning("request %s: engine failed: %s", state.id, exc.detail)
        kind = "timeout_error" if exc.status == 504 else "backend_error"
        return error_reply(request, exc.status, exc.public, kind)

    @staticmethod
    def account(request: web.Request, message: ChatMessage, end: Finished, reason: str) -> None:
        """What the access log and the metrics record of a finished generation."""
        state = info(request)
        state.prompt_tokens = end.usage.prompt_tokens
        state.completion_tokens = end.usage.completion_tokens
        state.tool_calls = len(message.tool_calls)
        state.findings = message.findings
        state.finish_reason = reason
        state.truncated = end.hit_limit
        state.prompt_form = end.prompt_form

    async def relay(
        self, request: web.Request, prepared: Prepared, sink: Sink, policy: str | None
    ) -> web.StreamResponse:
        """SSE: the engine's pieces through the library's stream parser (tool-call delta
        ``policy``; None: the library's default) into ``sink``. An engine that fails at once
        is still a 502/504; one that is slow gets the headers after ``HEADERS_AFTER``
        seconds and keep-alive comments until its first piece (then an error is an event)."""
        state = info(request)
        backend = prepared.served.backend
        # no logprobs asked: the pieces in batches (one write each); asked: scored pieces
        pieces: AsyncGenerator[list[str] | str | Scored | Finished, None] = (
            backend.stream_batches(prepared.gen)
            if prepared.gen.logprobs is None
            else backend.stream(prepared.gen)
        )
        async with contextlib.aclosing(pieces):
            first = asyncio.ensure_future(pieces.__anext__())
            first.add_done_callback(lambda _: setattr(state, "first_token", time.perf_counter()))
            try:
                done, _ = await asyncio.wait({first}, timeout=HEADERS_AFTER)
                if done and first.exception() is not None:
                    exc = first.exception()
                    if isinstance(exc, BackendError):
                        return self.engine_failed(request, exc)
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
            return await self._relay_body(request, response, prepared, sink, policy, pieces, first)

    async def _relay_body(
        self,
        request: web.Request,
        response: web.StreamResponse,
        prepared: Prepared,
        sink: Sink,
        policy: str | None,
        pieces: AsyncGenerator[list[str] | str | Scored | Finished, None],
        first: asyncio.Future[list[str] | str | Scored | Finished],
    ) -> web.StreamResponse:
        """The stream's body: each batch of pieces that arrived together fed to the parser
        piece by piece (the chunks are the same however the engine's pieces are batched)
        and answered with one write; a scored piece (logprobs asked) answered alone, its
        tokens' logprobs in the first chunk its text makes (``Scores``)."""
        state = info(request)
        reply = prepared.reply(policy)
        feed, write = reply.feed, sink.feed
        out = [sink.start()]
        end: Finished | None = None
        scores = Scores(sink)
        try:
            item = first.result()
            while True:
                if isinstance(item, Finished):
                    end = item
                    break
                if isinstance(item, list):
                    out.extend([write(feed(piece)) for piece in item])
                elif isinstance(item, str):
                    out.append(write(feed(item)))
                else:
                    out.append(scores.feed(feed(item.text), item.logprobs))
                chunk = b"".join(out)
                out.clear()
                if chunk:
                    await response.write(chunk)
                item = await pieces.__anext__()
        except BackendError as exc:
            self.link.record(exc)
            state.engine_error, state.error = exc.kind, exc.detail
            kind = "timeout_error" if exc.status == 504 else "backend_error"
            out.append(sink.fail(public_text(exc.public), kind))
        except StopAsyncIteration:
            out.append(sink.fail("the engine's stream ended early", "backend_error"))
        if end is not None:
            self.link.record(None)
            out.append(scores.feed(reply.finish(finish_reason=end.reason), ()))
            if reply.dropped_calls:
                log.info("request %s: stream dropped tool calls %s", state.id, reply.dropped_calls)
                state.rejected_calls += len(reply.dropped_calls)
            state.rejected_calls += reply.rejected_calls
            message = reply.message
            self.logprobs_given(request, prepared.req, end)
            if scores.pending and isinstance(sink, ChatSink):
                closing, reason = sink.finish(message, end, scores.pending)
            else:
                closing, reason = sink.finish(message, end)
            out.append(closing)
            self.account(request, message, end, reason)
        out.append(sink.close())
        await response.write(b"".join(out))
        await response.write_eof()
        return response

    async def relay_choices(
        self, request: web.Request, prepared: Prepared, ident: oai.ResponseIdentity
    ) -> web.StreamResponse:
        """SSE of ``n`` > 1 choices: one engine stream each, parsed by its own reader into
        chunks of its ``index``, interleaved as their pieces arrive; the usage (asked for)
        once, summed, after every choice has finished. An engine that fails before any
        piece is a 502/504; later, an error event ends the stream."""
        state = info(request)
        field, policy = self.settings.reasoning_field, self.settings.tool_call_deltas
        one = dataclasses.replace(prepared.req, include_usage=False)
        runs = prepared.choices()
        sinks = [ChatSink(ident, one, field, index) for index in range(len(runs))]
        replies = [run.reply(policy) for run in runs]
        scores = [Scores(sink) for sink in sinks]
        merged: asyncio.Queue[tuple[int, str | Scored | Finished | BackendError]] = asyncio.Queue()

        async def pump(index: int, run: Prepared) -> None:
            try:
                async for item in run.served.backend.stream(run.gen):
                    merged.put_nowait((index, item))
            except BackendError as exc:
                merged.put_nowait((index, exc))

        tasks = [asyncio.ensure_future(pump(i, run)) for i, run in enumerate(runs)]
        ends: list[Finished | None] = [None] * len(runs)
        try:
            index, item = await merged.get()
            state.first_token = time.perf_counter()
            if isinstance(item, BackendError):
                return self.engine_failed(request, item)
            response = web.StreamResponse(headers=SSE_HEADERS)
            await response.prepare(request)
            out = [sink.start() for sink in sinks]
            while True:
                if isinstance(item, BackendError):
                    self.link.record(item)
                    state.engine_error, state.error = item.kind, item.detail
                    kind = "timeout_error" if item.status == 504 else "backend_error"
                    out.append(sinks[index].fail(public_text(item.public), kind))
                    break
                reply = replies[index]
                if isinstance(item, Finished):
                    ends[index] = item
                    out.append(scores[index].feed(reply.finish(finish_reason=item.reason), ()))
                    state.rejected_calls += reply.rejected_calls + len(reply.dropped_calls)
                    self.logprobs_given(request, prepared.req, item)
                    closing, _ = sinks[index].finish(reply.message, item, scores[index].pending)
                    out.append(closing)
                elif isinstance(item, str):
                    out.append(sinks[index].feed(reply.feed(item)))
                else:
                    out.append(scores[index].feed(reply.feed(item.text), item.logprobs))
                if all(end is not None for end in ends):
                    break
                if merged.empty():
                    await response.write(b"".join(out))
                    out.clear()
                index, item = await merged.get()
            done = [end for end in ends if end is not None]
            if len(done) == len(ends):
                self.link.record(None)
                usage = summed_usage(done)
                if prepared.req.include_usage:
                    out.append(_sse(oai.usage_chunk(ident, usage)))
                message = replies[0].message
                reason = oai.finish_reason(message, done[0].hit_limit)
                self.account(request, message, dataclasses.replace(done[0], usage=usage), reason)
            out.append(sinks[0].close())
            await response.write(b"".join(out))
            await response.write_eof()
            return response
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


class Scores:
    """The token logprobs of a stream on their way to its chunks: each piece's go with the
    first chunk its deltas make; a piece that makes none passes them on (to the closing
    chunk at the end: none is lost)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.pending: list[TokenLogprob] = []

    def feed(self, deltas: list[StreamDelta], logprobs: Sequence[TokenLogprob]) -> bytes:
        self.pending.extend(logprobs)
        sink = self.sink
        if not deltas:
            return b""
        if not self.pending or not isinstance(sink, ChatSink):
            return sink.feed(deltas)
        out = sink.feed_scored(deltas, self.pending)
        self.pending = []
        return out


def summed_usage(ends: Sequence[Finished]) -> oai.Usage:
    """The usage of a request's choices: the prompt once (as OpenAI counts it), every
    choice's completion tokens."""
    return oai.Usage(
        ends[0].usage.prompt_tokens if ends else 0,
        sum(end.usage.completion_tokens for end in ends),
    )


def _sse(obj: object) -> bytes:
    return b"data: " + oai.to_json(obj).encode("utf-8") + b"\n\n"
