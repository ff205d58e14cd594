"""A backend: one engine as serve uses it, its dialect over the transport. It turns one
``Generation`` (prompt, limits, sampling, grammar) into text, whole or as a stream of pieces,
and reports how it ended (token limit or not), its token counts and how its prompt went.
Every way it can fail (down, HTTP error, an answer that is not what its API promises) is a
``BackendError``, which the server answers with HTTP 502 (504 for a timeout).

``detect`` finds an engine's dialect by walking ``DIALECTS`` in order; ``make_backend``
builds the backend of a kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Mapping

import aiohttp

from autoparser.serve.engines import DIALECTS, dialect_of
from autoparser.serve.engines.base import (
    BackendError,
    EngineInfo,
    Finished,
    Generation,
    Hooks,
    MediaSupport,
    Outgoing,
    Scored,
    Timeouts,
    token_ids,
)
from autoparser.serve.engines.openai import model_cards
from autoparser.serve.engines.transport import Looks, Transport


class Backend:
    """One engine: its ``dialect`` (payload, readers, tokenizer, health) posting through one
    ``Transport`` (shared HTTP session, a fresh one for the single retry, every wait
    bounded)."""

    def __init__(
        self,
        kind: str,
        url: str,
        session: aiohttp.ClientSession,
        model: str = "",
        *,
        fresh: aiohttp.ClientSession | None = None,
        timeouts: Timeouts | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.transport = Transport(url, session, fresh=fresh, timeouts=timeouts, hooks=hooks)
        self.dialect = dialect_of(kind)(self.transport, model, hooks)

    @property
    def kind(self) -> str:
        return self.dialect.kind

    @property
    def url(self) -> str:
        return self.transport.url

    async def prepare(self, gen: Generation) -> Outgoing:
        """The prompt as sent: as text, or with the caller's text kept from becoming control
        tokens as far as the engine's tokenizer allows (``protection.py``)."""
        return await self.dialect.protection.prepare(gen)

    async def complete(self, gen: Generation) -> tuple[str, Finished]:
        """The whole generated text and how it ended."""
        out = await self.prepare(gen)
        dialect = self.dialect
        answer = await self.transport.post_json(
            dialect.payload(gen, out.prompt, False), dialect.path
        )
        text, end = dialect.read_whole(answer, f"{self.url}{dialect.path}")
        probs = None
        if gen.logprobs is not None:
            found = dialect.read_logprobs(answer, gen.logprobs)
            probs = None if found is None else tuple(found)
        return text, dataclasses.replace(end, prompt_form=out.form, logprobs=probs)

    async def stream(self, gen: Generation) -> AsyncGenerator[str | Scored | Finished, None]:
        """Pieces of generated text (with logprobs asked: ``Scored`` pieces, the tokens'
        logprobs with the text they came with), then one ``Finished`` (always last)."""
        top = gen.logprobs
        if top is None:
            async for item in self.stream_batches(gen):
                if isinstance(item, Finished):
                    yield item
                else:
                    for piece in item:
                        yield piece
            return
        out = await self.prepare(gen)
        dialect = self.dialect
        where = f"{self.url}{dialect.path}"
        state: dict[str, object] = {}
        body = dialect.payload(gen, out.prompt, True)
        scored = False
        async for event in self.transport.post_events(body, dialect.path):
            piece = dialect.read_event(event, state, where)
            probs = dialect.read_logprobs(event, top)
            if probs:
                scored = True
                yield Scored(piece, tuple(probs))
                continue
            if piece:
                yield piece
        end = dialect.read_end(state, where)
        yield dataclasses.replace(end, prompt_form=out.form, logprobs=() if scored else None)

    async def stream_batches(self, gen: Generation) -> AsyncGenerator[list[str] | Finished, None]:
        """``stream`` in batches, without logprobs: the pieces whose events arrived together
        (never an empty batch, no empty piece), then one ``Finished`` (always the last
        item). A server answers a batch with one write. With logprobs asked, read
        ``stream`` (scored pieces) instead."""
        out = await self.prepare(gen)
        dialect = self.dialect
        where = f"{self.url}{dialect.path}"
        state: dict[str, object] = {}
        body = dialect.payload(gen, out.prompt, True)
        read = dialect.read_event
        async for events in self.transport.post_event_batches(body, dialect.path):
            pieces: list[str] = []
            try:
                for event in events:
                    if piece := read(event, state, where):
                        pieces.append(piece)
            except BackendError:
                if pieces:  # what came before the bad event is still the model's output
                    yield pieces
                raise
            if pieces:
                yield pieces
        yield dataclasses.replace(dialect.read_end(state, where), prompt_form=out.form)

    async def count_tokens(self, gen: Generation) -> int | None:
        """The engine's count of the prompt's tokens, tokenized as ``gen`` would be sent: a
        prompt prepared as token ids is counted as it is, any other through
        ``POST /tokenize`` (which llama.cpp's server, vLLM and SGLang have); None when the
        engine has no such route."""
        prompt = (await self.prepare(gen)).prompt
        if isinstance(prompt, list) and all(isinstance(p, int) for p in prompt):
            return len(prompt)
        try:
            answer = await self.transport.post_json(self.dialect.tokenize_body(prompt), "/tokenize")
        except BackendError as exc:
            if exc.http_status in (404, 405):
                return None
            raise
        if isinstance(answer, Mapping) and isinstance(answer.get("count"), int):
            return int(answer["count"])
        return len(token_ids(answer, f"{self.url}/tokenize"))

    async def check(self) -> str | None:
        """None when the engine answers its health route, else why not (for /health)."""
        return await self.transport.health(self.dialect.health_path)


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
    """The backend of ``kind`` (a key of ``engines.KINDS``; a ValueError naming the kinds
    for any other)."""
    return Backend(kind, url, session, model, fresh=fresh, timeouts=timeouts, hooks=hooks)


async def detect(url: str, session: aiohttp.ClientSession, timeout: float = 10.0) -> EngineInfo:
    """What the engine at ``url`` is: the first of ``DIALECTS`` that recognises it (each
    path it asks is asked once). An engine that does not answer at all is a BackendError:
    its kind is not known yet."""
    look = Looks(url, session, timeout)
    for dialect in DIALECTS:
        info = await dialect.detect(look)
        if info is not None:
            return info
    raise BackendError("no engine dialect recognises the engine", url)  # pragma: no cover


async def media_of(
    kind: str, url: str, session: aiohttp.ClientSession, timeout: float = 10.0
) -> MediaSupport | None:
    """What the engine of ``kind`` says it takes besides text, asked of its own detection
    (when the kind and template were given, detection did not run); None when its dialect
    carries no media or the engine says nothing of it."""
    dialect = dialect_of(kind)
    if not dialect.carries_media:
        return None
    info = await dialect.detect(Looks(url, session, timeout))
    return None if info is None else info.media


async def first_model(url: str, session: aiohttp.ClientSession, timeout: float = 10.0) -> str:
    """The first model id of an OpenAI-style ``GET /v1/models`` (the name to send)."""
    look = Looks(url, session, timeout)
    status, body = await look.get("/v1/models")
    where = f"{look.url}/v1/models"
    if status != 200:
        raise BackendError(f"the engine answered HTTP {status}", where, "http")
    cards = model_cards(body)
    if not cards:
        raise BackendError("the engine lists no model; pass --model", where)
    return str(cards[0].get("id", ""))
