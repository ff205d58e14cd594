"""Completion engines the server talks to: llama.cpp's ``/completion`` and any OpenAI-style
``/v1/completions``, with SSE reading and backend-kind detection (``GET /props``).

A backend turns one ``Generation`` (prompt, limits, sampling, grammar) into text, whole or
as a stream of pieces, and reports how it ended (token limit or not) and its token counts.
Every way a backend can fail (down, HTTP error, an answer that is not what its API
promises) becomes a ``BackendError``, which the server answers with HTTP 502.

Each backend also sends the caller's text so that it never becomes control tokens, as far
as its engine allows (``prepare``). The prompt goes as text, exactly as the engine
tokenizes it by itself, when the engine's tokenizer says no caller text would become one
(``exact_text``: every caller span, and every edge where it meets other text); else the
caller's text goes as token ids: llama.cpp tokenizes it with ``parse_special: false`` and
takes a mixed prompt; an OpenAI-style engine with a ``/tokenize`` gets the whole prompt as
token ids, the caller's text cut where it spells a control token (``plain_text``). Any
other engine gets the text, and a log line says so once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from collections import Counter, OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence

import aiohttp

from autoparser import GrammarTrigger, caller_pieces
from autoparser.serve.exact_text import (
    Edge,
    Plan,
    Window,
    accounted,
    expected,
    plan,
    read_edge,
    scan_texts,
)
from autoparser.serve.kinds import BACKEND_KINDS, BACKENDS
from autoparser.serve.openai_format import Usage
from autoparser.serve.plain_text import (
    Checked,
    ControlTokensRemain,
    TokenCache,
    Tokens,
    check_plain,
    spelled_controls,
)

log = logging.getLogger("autoparser.serve")


def described(exc: BaseException) -> str:
    """An exception for the log: its class and message, never its repr (aiohttp's reprs
    spell out connection keys and nested constructors)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# llama.cpp's integer trigger kinds (common_grammar_trigger_type): token, word, pattern,
# pattern_full. A "token" trigger needs the token id, which only the engine knows; sent as
# a word, llama.cpp tokenizes it and turns a single preserved token into a token trigger.
LLAMA_TRIGGER_TYPES = {"token": 1, "word": 1, "pattern": 2, "pattern_full": 3}


class BackendError(Exception):
    """The engine failed. ``public`` is what a client is told (no URL, no exception repr);
    ``kind`` says how (unreachable | timeout | http | invalid), ``timeout`` makes it a 504."""

    def __init__(
        self, public: str, detail: str = "", kind: str = "invalid", http_status: int = 0
    ) -> None:
        super().__init__(public)
        self.public = public
        self.detail = detail or public
        self.kind = kind
        self.http_status = http_status  # the engine's error status (kind "http"), else 0

    @property
    def status(self) -> int:
        return 504 if self.kind == "timeout" else 502

    def __str__(self) -> str:
        return self.public


Prompt = str | list[str | int]
# How a prompt went to the engine: as text, the caller's text checked (none of it would
# become a control token); with the caller's text as token ids (some would have); as text,
# unchecked (no caller spans given: --plain-user-text off; or an engine that cannot tokenize).
PROMPT_FORMS = ("text", "protected", "unchecked")


@dataclasses.dataclass(frozen=True)
class Outgoing:
    """A prompt as it goes to the engine, and its form (one of ``PROMPT_FORMS``)."""

    prompt: Prompt
    form: str


@dataclasses.dataclass(frozen=True)
class Generation:
    """One completion request, engine-neutral. ``caller_spans``: where the caller's text is
    in ``prompt`` (kept from becoming control tokens when the engine can be told so); None:
    not asked for (the prompt goes as it is)."""

    prompt: str
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    sampling: Mapping[str, object] = dataclasses.field(default_factory=dict)
    grammar: str | None = None
    grammar_lazy: bool = False
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    caller_spans: tuple[tuple[int, int], ...] | None = None


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a generation ended: on the token limit or not, the backend's token counts, and
    how its prompt went (``PROMPT_FORMS``)."""

    hit_limit: bool
    usage: Usage
    stop_word: str = ""  # the stop string that ended it, when the engine says (else "")
    prompt_form: str = ""

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


@dataclasses.dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect, to the answer's first byte (headers), between two pieces."""

    connect: float = 10.0
    first_byte: float = 300.0
    idle: float = 60.0


class Hooks:
    """What a backend reports as it goes (the server counts it); no-ops by default."""

    def retried(self) -> None:
        """A request was sent again on a fresh connection."""

    def cache(self, name: str, hit: bool) -> None:
        """A cache lookup."""


def _json(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BackendError(
            "the engine answered something that is not JSON", f"{where}: {exc}"
        ) from exc


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _token_ids(answer: object, where: str) -> list[int]:
    """The ``tokens`` of a ``/tokenize`` answer (llama.cpp's, vLLM's, SGLang's)."""
    ids = answer.get("tokens") if isinstance(answer, Mapping) else None
    if not isinstance(ids, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in ids
    ):
        raise BackendError("the engine's tokenizer answered no token list", where)
    return ids


# Failures of a pooled connection before any response byte: nothing was generated, so the
# request is sent again once, on a fresh connection. A connection the engine closed shows up
# as a disconnect, an OS error, or a reset while the request is written
# (ClientConnectionResetError, which is neither of the others): every connection-level
# error counts, not one subclass.
_STALE = (
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
)


async def _lines(response: aiohttp.ClientResponse, idle: float) -> AsyncIterator[bytes]:
    """The body's lines, each within ``idle`` seconds of the previous one. One timer per
    stream, moved on at every line (a task per read would cost more than the parse)."""
    loop = asyncio.get_running_loop()
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        response.close()

    timer = loop.call_later(idle, expire)
    try:
        async for raw in response.content:
            timer.cancel()
            timer = loop.call_later(idle, expire)
            yield raw
    except aiohttp.ClientError:
        if not expired:
            raise
    finally:
        timer.cancel()
    if expired:
        raise asyncio.TimeoutError


async def _sse_events(
    response: aiohttp.ClientResponse, where: str, idle: float
) -> AsyncIterator[object]:
    """The JSON payloads of a ``text/event-stream`` body, until ``[DONE]`` or its end."""
    try:
        async for raw in _lines(response, idle):
            line = raw.decode("utf-8", errors="replace").strip()
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value.strip()
            if field == "error":
                raise BackendError("the engine reported an error", f"{where}: {value}", "http")
            if field != "data":
                continue
            if value == "[DONE]":
                return
            event = _json(value, where)
            if isinstance(event, Mapping) and "error" in event:
                raise BackendError(
                    "the engine reported an error", f"{where}: {event['error']}", "http"
                )
            yield event
    except asyncio.TimeoutError as exc:
        raise BackendError(
            f"the engine sent nothing for {idle:g} s", f"{where}: idle timeout", "timeout"
        ) from exc
    except (aiohttp.ClientError, ValueError) as exc:
        if isinstance(exc, BackendError):
            raise
        raise BackendError(
            "the engine's stream broke off", f"{where}: {described(exc)}", "unreachable"
        ) from exc


class Backend:
    """Base: one shared HTTP session (and a fresh-connection one for the single retry),
    JSON POSTs with every failure mapped to BackendError, every wait bounded."""

    kind = ""
    path = ""

    def __init__(
        self,
        url: str,
        session: aiohttp.ClientSession,
        model: str = "",
        *,
        fresh: aiohttp.ClientSession | None = None,
        timeouts: Timeouts | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.session = session
        self.fresh = fresh or session
        self.model = model
        self.timeouts = timeouts or Timeouts()
        self.hooks = hooks or Hooks()
        self._init_state()

    def _init_state(self) -> None:
        """What an engine kind keeps between requests (caches of tokenized text), made
        once the hooks that count its hits are in place."""

    def _counted(self, hit: bool) -> None:
        """A lookup in the tokenized-text cache, for the metrics."""
        self.hooks.cache("tokenize", hit)

    def _counter(self, name: str) -> Callable[[bool], None]:
        """The metrics hook of the cache ``name``."""
        return functools.partial(self.hooks.cache, name)

    def payload(self, gen: Generation, stream: bool) -> dict[str, object]:
        raise NotImplementedError

    async def prepare(self, gen: Generation) -> Outgoing:
        """The prompt as sent: the text (backends whose engine can tokenize the caller's
        text as plain text check it, and send ids where they must)."""
        return Outgoing(gen.prompt, "text" if gen.caller_spans == () else "unchecked")

    async def _send(
        self, session: aiohttp.ClientSession, where: str, body: Mapping[str, object]
    ) -> aiohttp.ClientResponse:
        t = self.timeouts
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=t.connect, connect=t.connect)
        return await asyncio.wait_for(session.post(where, json=body, timeout=timeout), t.first_byte)

    async def _post(
        self, body: Mapping[str, object], path: str | None = None
    ) -> aiohttp.ClientResponse:
        where = f"{self.url}{path or self.path}"
        try:
            try:
                response = await self._send(self.session, where, body)
            except _STALE:
                # A kept-alive connection the engine had closed (llama.cpp's server closes
                # them after a few requests): nothing was generated, send it again fresh.
                self.hooks.retried()
                response = await self._send(self.fresh, where, body)
        except asyncio.TimeoutError as exc:
            raise BackendError(
                f"the engine did not answer within {self.timeouts.first_byte:g} s",
                f"{where}: first-byte timeout",
                "timeout",
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise BackendError(
                "the engine is unreachable", f"{where}: {described(exc)}", "unreachable"
            ) from exc
        if response.status != 200:
            try:
                detail = (await asyncio.wait_for(response.text(), self.timeouts.idle))[:500]
            except (aiohttp.ClientError, asyncio.TimeoutError):
                detail = ""
            finally:
                response.release()
            raise BackendError(
                f"the engine answered HTTP {response.status}",
                f"{where}: HTTP {response.status}: {detail}",
                "http",
                response.status,
            )
        return response

    async def _post_json(self, body: Mapping[str, object], path: str | None = None) -> object:
        """POST ``body`` and the engine's JSON answer, read within the idle timeout: the one
        reader of whole answers (completions, ``/tokenize``, ``/detokenize``)."""
        response = await self._post(body, path)
        where = f"{self.url}{path or self.path}"
        try:
            text = await asyncio.wait_for(response.text(), self.timeouts.idle)
        except asyncio.TimeoutError as exc:
            raise BackendError(
                f"the engine sent nothing for {self.timeouts.idle:g} s", where, "timeout"
            ) from exc
        except (aiohttp.ClientError, ValueError) as exc:
            raise BackendError(
                "reading the engine's answer failed", f"{where}: {described(exc)}", "unreachable"
            ) from exc
        finally:
            response.release()
        return _json(text, where)

    async def complete(self, gen: Generation) -> tuple[str, Finished]:
        """The whole generated text and how it ended."""
        out = await self.prepare(gen)
        answer = await self._post_json(self.payload_for(gen, out.prompt, stream=False))
        text, end = self.read_whole(answer, f"{self.url}{self.path}")
        return text, dataclasses.replace(end, prompt_form=out.form)

    async def stream(self, gen: Generation) -> AsyncGenerator[str | Finished, None]:
        """Pieces of generated text, then one ``Finished`` (always the last item)."""
        out = await self.prepare(gen)
        response = await self._post(self.payload_for(gen, out.prompt, stream=True))
        where = f"{self.url}{self.path}"
        state: dict[str, object] = {}
        try:
            async for event in _sse_events(response, where, self.timeouts.idle):
                piece = self.read_event(event, state, where)
                if piece:
                    yield piece
        finally:
            response.release()
        yield dataclasses.replace(self.read_end(state, where), prompt_form=out.form)

    def payload_for(self, gen: Generation, prompt: Prompt, stream: bool) -> dict[str, object]:
        body = self.payload(gen, stream)
        body["prompt"] = prompt
        return body

    def tokenize_body(self, prompt: Prompt) -> dict[str, object]:
        """The ``POST /tokenize`` body that counts ``prompt`` as a generation would."""
        raise NotImplementedError

    async def count_tokens(self, gen: Generation) -> int | None:
        """The engine's count of the prompt's tokens, tokenized as ``gen`` would be sent: a
        prompt prepared as token ids is counted as it is, any other through
        ``POST /tokenize`` (which llama.cpp's server and vLLM have); None when the engine
        has no such route."""
        prompt = (await self.prepare(gen)).prompt
        if isinstance(prompt, list) and all(isinstance(p, int) for p in prompt):
            return len(prompt)
        where = f"{self.url}/tokenize"
        try:
            answer = await self._post_json(self.tokenize_body(prompt), "/tokenize")
        except BackendError as exc:
            if exc.http_status in (404, 405):
                return None
            raise
        if isinstance(answer, Mapping) and isinstance(answer.get("count"), int):
            return int(answer["count"])
        return len(_token_ids(answer, where))

    async def check(self) -> str | None:
        """None when the engine answers its health route, else why not (for /health)."""
        raise NotImplementedError

    async def _check_get(self, path: str) -> str | None:
        try:
            status = await asyncio.wait_for(self._get_status(path), self.timeouts.connect)
        except asyncio.TimeoutError:
            return f"the engine's {path} did not answer within {self.timeouts.connect:g} s"
        except (aiohttp.ClientError, OSError):
            return "the engine is unreachable"
        return None if status == 200 else f"the engine's {path} answered HTTP {status}"

    async def _get_status(self, path: str) -> int:
        async with self.session.get(f"{self.url}{path}") as response:
            await response.read()
            return response.status

    def read_whole(self, body: object, where: str) -> tuple[str, Finished]:
        raise NotImplementedError

    def read_event(self, event: object, state: dict[str, object], where: str) -> str:
        raise NotImplementedError

    def read_end(self, state: dict[str, object], where: str) -> Finished:
        raise NotImplementedError


class LlamaCppBackend(Backend):
    """llama.cpp server's native ``POST /completion``: the one engine API that takes a lazy
    grammar with triggers and preserved tokens, so tool_choice auto is constrained too.

    Its ``/tokenize`` parses special tokens or not (``parse_special``), which tells exactly
    where a text holds a control token: where the two tokenizations differ."""

    kind = "llama.cpp"
    path = "/completion"
    cache_size = 4096  # caller spans and windows kept checked (earlier turns repeat)
    edge_cache_size = 512  # template texts next to caller text, kept cut (a few per template)

    def _init_state(self) -> None:
        self._spans: TokenCache[str, Checked] = TokenCache(self.cache_size, self._counted)
        self._windows: TokenCache[Window, bool] = TokenCache(
            self.cache_size, self._counter("boundary")
        )
        self._edges: TokenCache[str, Edge] = TokenCache(
            self.edge_cache_size, self._counter("template_edge")
        )

    async def prepare(self, gen: Generation) -> Outgoing:
        """The prompt as text when no caller text would become a control token (checked
        with ``/tokenize``, ``exact_text``); else with the caller's spans as token ids,
        tokenized without special-token parsing (so a user's ``<|im_start|>`` stays text),
        the template's text as strings (which llama.cpp tokenizes with special tokens, as
        always)."""
        if not gen.caller_spans:
            return await super().prepare(gen)
        parts = caller_pieces(gen.prompt, gen.caller_spans)
        spans, windows = await self._check(plan(parts))
        if all(c.clean for c in spans.values()) and all(windows.values()):
            return Outgoing(gen.prompt, "text")
        out: list[str | int] = [] if not parts or not parts[0][1] else [""]  # "" keeps BOS
        for text, caller in parts:
            if not caller:
                out.append(text)
            elif text:  # an empty span is nothing (and was not asked about)
                out.extend(spans[text].ids)
        return Outgoing(out, "protected")

    async def _check(self, todo: Plan) -> tuple[dict[str, Checked], dict[Window, bool]]:
        """Each span's tokens without special tokens, and whether they are its tokens with
        them too (then it spells no control token); whether each window tokenizes as its
        template texts' own tokens with the text between them plain (``expected``). What
        is not cached is asked in one pair of ``/tokenize`` calls, with and without special
        tokens (after one pair reading template texts not seen before, ``Edge``)."""
        spans, new_spans = self._spans.split(todo.spans)
        windows, new_windows = self._windows.split(todo.windows)
        if not new_spans and not new_windows:
            return spans, windows
        templates = dict.fromkeys(t for w in new_windows for t in w.templates)
        edges = await self._edges.lookup(templates, self._read_edges)
        plans = [expected(w, edges) for w in new_windows]
        judged = [w.text for w, e in zip(new_windows, plans, strict=True) if e is not None]
        runs = [p for e in plans if e for p in e if isinstance(p, str)]
        plain_texts = list(dict.fromkeys([*new_spans, *runs]))
        special, plain = await asyncio.gather(
            self._tokenize([*new_spans, *judged], special=True),
            self._tokenize(plain_texts, special=False),
        )
        tokens = dict(zip(plain_texts, plain, strict=True))
        checked = {
            t: Checked(tokens[t], s == tokens[t])
            for t, s in zip(new_spans, special[: len(new_spans)], strict=True)
        }
        got = iter(special[len(new_spans) :])
        verdicts = {}
        for window, e in zip(new_windows, plans, strict=True):
            if e is None:  # an opaque template text in it: never sent as text
                verdicts[window] = False
                continue
            want = [i for p in e for i in (tokens[p] if isinstance(p, str) else p)]
            verdicts[window] = next(got) == want
        self._spans.keep(checked)
        self._windows.keep(verdicts)
        return {**spans, **checked}, {**windows, **verdicts}

    async def _read_edges(self, texts: list[str]) -> list[Edge]:
        """Each template text's Edge, from the tokens of all its prefixes and suffixes
        (``exact_text.read_edge``), with and without special tokens."""
        scans = [scan_texts(t) for t in texts]
        flat = [s for scan in scans for s in scan]
        special, plain = await asyncio.gather(
            self._tokenize(flat, special=True), self._tokenize(flat, special=False)
        )
        pairs = iter(zip(special, plain, strict=True))
        out = []
        for text in texts:
            scan = [next(pairs) for _ in range(2 * len(text))]
            out.append(read_edge(text, scan[: len(text)], scan[len(text) :]))
        return out

    async def _tokenize(self, texts: list[str], special: bool) -> list[list[int]]:
        """Each text tokenized, special tokens parsed or not, all in one call: separated by
        a token id (-1) no tokenization yields."""
        if not texts:
            return []
        content: list[str | int] = []
        for text in texts:
            content.extend((text, -1))
        body = {"content": content, "add_special": False, "parse_special": special}
        where = f"{self.url}/tokenize"
        out: list[list[int]] = [[]]
        for token in _token_ids(await self._post_json(body, "/tokenize"), where):
            if token == -1:
                out.append([])
            else:
                out[-1].append(token)
        if len(out) != len(texts) + 1:
            raise BackendError("the engine's tokenizer answered an unexpected token list", where)
        return out[:-1]

    async def check(self) -> str | None:
        return await self._check_get("/health")

    def tokenize_body(self, prompt: Prompt) -> dict[str, object]:
        # as /completion takes a prompt: special tokens added and parsed in template text
        return {"content": prompt, "add_special": True, "parse_special": True}

    def payload(self, gen: Generation, stream: bool) -> dict[str, object]:
        body: dict[str, object] = {**gen.sampling, "prompt": gen.prompt, "stream": stream}
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
    def _finished(body: Mapping[str, object]) -> Finished:
        usage = Usage(_int(body.get("tokens_evaluated")), _int(body.get("tokens_predicted")))
        word = body.get("stopping_word") if body.get("stop_type") == "word" else ""
        return Finished(
            body.get("stop_type") == "limit", usage, word if isinstance(word, str) else ""
        )

    def read_whole(self, body: object, where: str) -> tuple[str, Finished]:
        if not isinstance(body, Mapping) or not isinstance(body.get("content"), str):
            raise BackendError("the engine's answer has no 'content' string", where)
        return body["content"], self._finished(body)

    def read_event(self, event: object, state: dict[str, object], where: str) -> str:
        if not isinstance(event, Mapping) or not isinstance(event.get("content", ""), str):
            raise BackendError("the engine's stream events have no 'content' string", where)
        if event.get("stop"):
            state["end"] = self._finished(event)
        return str(event.get("content", ""))

    def read_end(self, state: dict[str, object], where: str) -> Finished:
        end = state.get("end")
        if not isinstance(end, Finished):
            raise BackendError("the engine's stream ended without its final event", where)
        return end


@dataclasses.dataclass(frozen=True)
class PlainText:
    """How an OpenAI-style engine's tokenizer is used to keep the caller's text plain:
    ``how`` it tells control tokens (``"strings"``: vLLM's ``/tokenize`` returns each
    token's vocabulary string; ``"detokenize"``: SGLang's ``/detokenize`` drops special
    tokens with ``skip_special_tokens``), and the ids it adds around a text prompt (BOS),
    which a prompt of ids must carry itself."""

    how: str
    prefix: tuple[int, ...] = ()
    suffix: tuple[int, ...] = ()


class OpenAIBackend(Backend):
    """Any OpenAI-compatible ``POST /v1/completions`` (vLLM, SGLang, TGI...).

    These engines take no lazy grammar, so a grammar is sent only when it applies from the
    first token (tool_choice required or named, response_format), as vLLM takes it:
    ``structured_outputs: {"grammar": ...}``. With tool_choice auto the output is parsed
    unconstrained.

    With caller spans, an engine whose ``/tokenize`` answers token ids (vLLM, SGLang) has
    them checked: the prompt goes as text when none would become a control token
    (``exact_text``), else as ids: the template's text tokenized as usual, the caller's
    text with no control token in it (``plain_text``). Others (TGI, an engine without
    ``/tokenize``) get the text; a log line says so once.
    """

    kind = "openai"
    path = "/v1/completions"
    cache_size = 4096  # texts kept tokenized: template pieces and caller spans
    parallel = 8  # /tokenize calls in flight at once (vLLM's takes one text per call)
    known_ids = 65536  # token ids whose control-ness /detokenize told (SGLang)

    def _init_state(self) -> None:
        self._tokens: TokenCache[tuple[str, bool], Checked] = TokenCache(
            self.cache_size, self._counted
        )
        self._windows: TokenCache[Window, bool] = TokenCache(
            self.cache_size, self._counter("boundary")
        )
        self._plain: PlainText | None = None
        self._plain_known = False
        self._probing = asyncio.Lock()
        self._in_flight = asyncio.Semaphore(self.parallel)
        self._controls: OrderedDict[int, str] = OrderedDict()  # id -> its string, "" if plain

    async def prepare(self, gen: Generation) -> Outgoing:
        """The prompt as text when no caller text would become a control token (every span
        and the windows around their edges tokenized, ``exact_text``); else as token ids
        when the engine can tokenize the caller's text as plain text (``plain_text``): the
        template's pieces tokenized too. Every text not cached is tokenized, the calls in
        parallel."""
        if not gen.caller_spans:
            return await super().prepare(gen)
        plain = await self.plain_text()
        if plain is None:
            return Outgoing(gen.prompt, "unchecked")
        parts = caller_pieces(gen.prompt, gen.caller_spans)
        todo = plan(parts)
        spans, windows = await asyncio.gather(
            self._tokens.lookup(((t, True) for t in todo.spans), self._tokenize_parts),
            self._windows.lookup(todo.windows, self._check_windows),
        )
        if all(c.clean for c in spans.values()) and all(windows.values()):
            return Outgoing(gen.prompt, "text")
        found = await self._tokens.lookup(
            ((t, False) for t, caller in parts if not caller), self._tokenize_parts
        )
        found.update(spans)
        out: list[str | int] = [*plain.prefix]
        for part in parts:
            if part[0]:  # an empty span is nothing (and was not asked about)
                out.extend(found[part].ids)
        out.extend(plain.suffix)
        return Outgoing(out, "protected")

    async def plain_text(self) -> PlainText | None:
        """What the engine offers to keep the caller's text plain, found out once (None:
        nothing, the prompt goes as text). An engine that does not answer raises
        BackendError and is asked again next time."""
        if not self._plain_known:
            async with self._probing:
                if not self._plain_known:
                    self._plain, why = await self._probe_plain_text()
                    self._plain_known = True
                    if self._plain is None:
                        log.warning(
                            "plain user text: unavailable with this engine (%s): the prompt "
                            "is sent as text, and control-token strings in user text become "
                            "control tokens",
                            why,
                        )
                    else:
                        log.info(
                            "plain user text: prompts go as token ids, user text cut where "
                            "it spells a control token (told by %s)",
                            "/tokenize token strings"
                            if self._plain.how == "strings"
                            else "/detokenize skip_special_tokens",
                        )
        return self._plain

    async def _probe_plain_text(self) -> tuple[PlainText | None, str]:
        """Tokenize one character with and without the tokenizer's added tokens: the
        answer's shape says whether and how the engine can serve, the difference is the
        ids a prompt of ids must carry itself."""
        try:
            framed = await self._tokenize_text("a", add_special=True)
            bare = await self._tokenize_text("a")
        except BackendError as exc:
            if exc.kind == "invalid" or 400 <= exc.http_status < 500:
                return None, f"no /tokenize answering token ids: {exc.public}"
            raise
        n = len(bare.ids)
        at = next(
            (i for i in range(len(framed.ids) - n + 1) if framed.ids[i : i + n] == bare.ids),
            None,
        )
        if not n or at is None:
            return None, "its /tokenize answers inconsistent token ids"
        prefix, suffix = tuple(framed.ids[:at]), tuple(framed.ids[at + n :])
        if bare.strings is not None:
            return PlainText("strings", prefix, suffix), ""
        try:
            await self._detokenize(bare.ids, skip_special=True)
        except BackendError as exc:
            if exc.kind == "invalid" or 400 <= exc.http_status < 500:
                return None, "its /tokenize returns no token strings and it has no batch "
                "/detokenize"
            raise
        return PlainText("detokenize", prefix, suffix), ""

    async def _tokenize_text(self, text: str, add_special: bool = False) -> Tokens:
        """One text through ``POST /tokenize`` (vLLM's and SGLang's body), special tokens
        parsed as the engine always does; the token strings when it returns them."""
        body = {
            "model": self.model,
            "prompt": text,
            "add_special_tokens": add_special,
            "return_token_strs": True,
        }
        async with self._in_flight:
            answer = await self._post_json(body, "/tokenize")
        ids = _token_ids(answer, f"{self.url}/tokenize")
        strings = answer.get("token_strs") if isinstance(answer, Mapping) else None
        if not isinstance(strings, list) or len(strings) != len(ids):
            return Tokens(ids)
        return Tokens(ids, [s if isinstance(s, str) else "" for s in strings])

    async def _detokenize(self, ids: Sequence[int], skip_special: bool) -> list[str]:
        """Each id's text, one ``POST /detokenize`` (SGLang's batch form: a list per id)."""
        body = {
            "model": self.model,
            "tokens": [[i] for i in ids],
            "skip_special_tokens": skip_special,
        }
        async with self._in_flight:
            answer = await self._post_json(body, "/detokenize")
        texts = answer.get("text") if isinstance(answer, Mapping) else None
        if not isinstance(texts, list) or len(texts) != len(ids):
            raise BackendError(
                "the engine's detokenizer answered no text list", f"{self.url}/detokenize"
            )
        return [t if isinstance(t, str) else "" for t in texts]

    async def _tokenize_parts(self, parts: list[tuple[str, bool]]) -> list[Checked]:
        """Template text tokenized as usual; the caller's text with no control token, and
        whether the engine's own tokenization of it had none."""

        async def one(text: str, caller: bool) -> Checked:
            if not caller:
                return Checked((await self._tokenize_text(text)).ids, True)
            try:
                return await check_plain(text, self._tokenize_text, self._control_strings)
            except ControlTokensRemain as exc:
                raise BackendError(
                    "the engine's tokenizer makes control tokens of the user's text",
                    f"{self.url}/tokenize: {exc}",
                ) from exc

        return list(await asyncio.gather(*(one(text, caller) for text, caller in parts)))

    async def _check_windows(self, windows: list[Window]) -> list[bool]:
        """Whether every control token the engine makes of each window is spelled inside
        the window's template text (``exact_text.accounted``)."""

        async def one(window: Window) -> bool:
            text = window.text
            counts = await self._control_counts(text, await self._tokenize_text(text))
            return accounted(window, counts)

        return list(await asyncio.gather(*(one(w) for w in windows)))

    async def _control_strings(self, text: str, tokens: Tokens) -> list[str]:
        """The strings of the control tokens in ``tokens`` (``_control_counts``)."""
        return list(await self._control_counts(text, tokens))

    async def _control_counts(self, text: str, tokens: Tokens) -> Counter[str]:
        """The strings of the control tokens in ``tokens``, each with how many there are: by
        their spelling (vLLM), or asked of ``/detokenize`` (SGLang: a special token's text
        is empty with ``skip_special_tokens``, its own string without), remembered per
        id."""
        if self._plain is None or self._plain.how == "strings":
            written = set(spelled_controls(text, tokens))
            return Counter(s for s in tokens.strings or () if s in written)
        known = {i: self._controls[i] for i in tokens.ids if i in self._controls}
        unknown = [i for i in dict.fromkeys(tokens.ids) if i not in known]
        if unknown:
            skipped = await self._detokenize(unknown, skip_special=True)
            dropped = [i for i, t in zip(unknown, skipped, strict=True) if not t]
            kept = await self._detokenize(dropped, skip_special=False) if dropped else []
            spelled = dict(zip(dropped, kept, strict=True))
            for i in unknown:
                known[i] = self._controls[i] = spelled.get(i, "")
            while len(self._controls) > self.known_ids:
                self._controls.popitem(last=False)
        return Counter(known[i] for i in tokens.ids if known[i])

    def payload(self, gen: Generation, stream: bool) -> dict[str, object]:
        body: dict[str, object] = {
            **gen.sampling,
            "model": self.model,
            "prompt": gen.prompt,
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        # The parser needs the markers (``[TOOL_CALLS]``, ``<|channel|>``...), which are
        # special tokens these engines drop from the text by default, and exactly as
        # written (no spaces added around them).
        body["skip_special_tokens"] = False
        body["spaces_between_special_tokens"] = False
        if gen.max_tokens is not None:
            body["max_tokens"] = gen.max_tokens
        if gen.stop:
            body["stop"] = list(gen.stop)
        if gen.grammar and not gen.grammar_lazy:
            body["structured_outputs"] = {"grammar": gen.grammar}
        return body

    @staticmethod
    def _usage(body: object) -> Usage:
        usage = body.get("usage") if isinstance(body, Mapping) else None
        if not isinstance(usage, Mapping):
            return Usage()
        return Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))

    @staticmethod
    def _choice(body: object, where: str) -> Mapping[str, object] | None:
        if not isinstance(body, Mapping) or not isinstance(body.get("choices"), list):
            raise BackendError("the engine's answer has no 'choices' list", where)
        choices = body["choices"]
        if not choices:
            return None
        choice = choices[0]
        if not isinstance(choice, Mapping) or not isinstance(choice.get("text", ""), str):
            raise BackendError("the engine's choices have no 'text' string", where)
        return choice

    def read_whole(self, body: object, where: str) -> tuple[str, Finished]:
        choice = self._choice(body, where)
        if choice is None:
            raise BackendError("the engine's answer has no choices", where)
        word = choice.get("stop_reason")  # vLLM: the stop string (or token id) that ended it
        finished = Finished(
            choice.get("finish_reason") == "length",
            self._usage(body),
            word if isinstance(word, str) else "",
        )
        return str(choice.get("text", "")), finished

    def read_event(self, event: object, state: dict[str, object], where: str) -> str:
        choice = self._choice(event, where)
        if isinstance(event, Mapping) and isinstance(event.get("usage"), Mapping):
            state["usage"] = self._usage(event)
        if choice is None:
            return ""
        if choice.get("finish_reason"):
            state["reason"] = choice["finish_reason"]
            if isinstance(choice.get("stop_reason"), str):
                state["stop_word"] = choice["stop_reason"]
        return str(choice.get("text", ""))

    async def check(self) -> str | None:
        return await self._check_get("/v1/models")

    def tokenize_body(self, prompt: Prompt) -> dict[str, object]:
        return {"model": self.model, "prompt": prompt}  # vLLM's /tokenize

    def read_end(self, state: dict[str, object], where: str) -> Finished:
        usage = state.get("usage")
        return Finished(
            state.get("reason") == "length",
            usage if isinstance(usage, Usage) else Usage(),
            str(state.get("stop_word", "")),
        )


async def _get_json(session: aiohttp.ClientSession, where: str) -> tuple[int, object]:
    async with session.get(where) as response:
        if response.status != 200:
            return response.status, None
        try:
            return 200, await response.json(content_type=None)
        except ValueError:
            return 200, None


async def probe(
    url: str, session: aiohttp.ClientSession, timeout: float = 10.0
) -> BackendInfo | None:
    """``GET /props``: llama.cpp's server answers with its chat template and special tokens;
    any other answer (404, not JSON, not an object) means "not llama.cpp" (None). An engine
    that does not answer at all is a BackendError: the kind is not known yet."""
    where = f"{url.rstrip('/')}/props"
    try:
        status, body = await asyncio.wait_for(_get_json(session, where), timeout)
    except asyncio.TimeoutError as exc:
        raise BackendError("the engine did not answer", f"{where}: timeout", "timeout") from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise BackendError(
            "the engine is unreachable", f"{where}: {described(exc)}", "unreachable"
        ) from exc
    if status == 503:
        raise BackendError("the engine is still loading", f"{where}: HTTP 503", "http")
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


async def first_model(url: str, session: aiohttp.ClientSession, timeout: float = 10.0) -> str:
    """The first model id of an OpenAI-style ``GET /v1/models`` (the name to send)."""
    where = f"{url.rstrip('/')}/v1/models"
    try:
        status, body = await asyncio.wait_for(_get_json(session, where), timeout)
    except asyncio.TimeoutError as exc:
        raise BackendError("the engine did not answer", f"{where}: timeout", "timeout") from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise BackendError(
            "the engine is unreachable", f"{where}: {described(exc)}", "unreachable"
        ) from exc
    if status != 200:
        raise BackendError(f"the engine answered HTTP {status}", where, "http")
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], Mapping):
        raise BackendError("the engine lists no model; pass --model", where)
    return str(data[0].get("id", ""))


def make_backend(
    kind: str,
    url: str,
    session: aiohttp.ClientSession,
    model: str = "",
    *,
    fresh: aiohttp.ClientSession | None = None,
    timeouts: Timeouts | None = None,
    hooks: Hooks | None = None,
) -> Backend:
    """The backend of ``kind``, as the registry in ``serve/kinds.py`` names it; ``kw``:
    ``fresh``, ``timeouts``, ``hooks`` (see Backend)."""
    name = BACKENDS.get(kind)
    if name is None:
        raise ValueError(f"backend kind must be one of {', '.join(BACKEND_KINDS)}, got {kind!r}")
    backend: type[Backend] = globals()[name]
    return backend(url, session, model, fresh=fresh, timeouts=timeouts, hooks=hooks)
