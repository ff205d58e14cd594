"""The one path from a validated request to the engine, shared by every route.

``EngineLink`` finds out lazily what it serves (the engine's kind, the template from its
``/props`` when none was given, the model name): startup never waits on the engine, and a
request before the engine has answered gets a clear 503. ``prepare`` renders the prompt and
builds the grammar off the event loop, bounded by the CPU time of the thread doing it (never by
wall time: a busy server must not refuse what a quiet one serves) and stopped
(``autoparser.cancel``) when the request is cancelled; ``Generation`` goes to the backend,
whose calls are retried once on a fresh connection and bounded by the timeouts.
``health`` says whether the engine answers and whether recent requests to it succeeded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import aiohttp

from autoparser import (
    CancelToken,
    ChatParams,
    ChatTemplate,
    RequestError,
    RequestOptions,
    SchemaError,
    Session,
    TemplateError,
    WorkLimitError,
    default_analysis_cache,
)
from autoparser.serve.engines import dialect_of
from autoparser.serve.engines.backend import Backend, detect, first_model, make_backend, media_of
from autoparser.serve.engines.base import (
    BackendError,
    EngineInfo,
    Generation,
    Hooks,
    MediaSupport,
    Timeouts,
)
from autoparser.serve.engines.transport import Looks
from autoparser.serve.limits import InvalidRequest, Limits, Unavailable
from autoparser.serve.options import SamplingOptions

log = logging.getLogger("autoparser.serve")
_FIELD_PREFIX = re.compile(r"^([A-Za-z_][\w.\[\]]*):")
_BARE_POINTER = re.compile(r"(?<= at )/")
FAILING_AFTER = 3  # consecutive engine failures that make /health say "failing"
# Seconds /health waits for a fresh look at the engine before it answers the last one seen:
# a balancer's check must get an answer, whatever the engine does.
HEALTH_WAIT = 0.5
HEALTH_INTERVAL = 2.0  # seconds between background looks at a known engine


class EngineUnavailable(Unavailable):
    """The engine has not answered yet (kind or template unknown): HTTP 503."""


@dataclasses.dataclass(frozen=True)
class Served:
    """What the server serves once the engine is known: its template as a ``Session``
    (the one road to prompts, grammars and parsers), and what the engine takes besides
    text (``media``: None when it takes nothing or its dialect cannot carry it)."""

    session: Session
    backend: Backend
    model: str
    verified: bool | None
    media: MediaSupport | None = None

    @property
    def template(self) -> ChatTemplate:
        return self.session.template


class EngineLink:
    """The engine, found out lazily, and its health."""

    def __init__(
        self,
        url: str,
        kind: str,
        template: str | ChatTemplate | None,
        model: str | None,
        limits: Limits,
        session: aiohttp.ClientSession,
        fresh: aiohttp.ClientSession,
        hooks: Hooks,
    ) -> None:
        self.url = url
        self.kind = kind
        self.given_template = template
        # The session of the given template once loaded (``load_template``).
        self.given_session: Session | None = None
        self.given_model = model
        self.limits = limits
        self.session = session
        self.fresh = fresh
        self.hooks = hooks
        self.served: Served | None = None
        self.last_problem: str | None = "the engine has not answered yet"
        self._last_logged = ""  # the last "engine not ready" detail logged
        self.failures = 0
        self._lock = asyncio.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=4, thread_name_prefix="autoparser-prepare"
        )
        # The engine's state as last seen by a health probe (None: it answered), and the
        # probe in flight: one at a time, whoever asks.
        self.engine_state: str | None = "the engine has not answered yet"
        self._probe: asyncio.Future[str | None] | None = None
        # Told the engine's capacity (requests it runs at once) when it reports it; None:
        # nobody asks (the concurrency limit is the operator's).
        self.on_slots: Callable[[int], None] | None = None

    def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def timeouts(self) -> Timeouts:
        lim = self.limits
        return Timeouts(lim.connect_timeout, lim.first_byte_timeout, lim.idle_timeout)

    async def in_thread(
        self, fn: Callable[[], Any], cancellable: bool = False, cpu_seconds: float | None = None
    ) -> Any:
        """Run CPU work in the server's bounded pool.

        ``cancellable`` work (one request's: its grammar and parser) runs under a
        ``CancelToken`` set when the request is cancelled (its client left, its time is
        up), and bounded by ``cpu_seconds`` of the worker thread's CPU time: the builders
        stop at their next checkpoint (per tool, per schema node) instead of running to the
        end in a thread nobody waits for. Shared work (loading and analysing the template)
        is never cut short by one request leaving."""
        loop = asyncio.get_running_loop()
        if not cancellable:
            return await loop.run_in_executor(self._pool, fn)
        token = CancelToken(cpu_seconds)
        try:
            return await loop.run_in_executor(self._pool, token.run, fn)
        except asyncio.CancelledError:
            token.cancel("the request was cancelled")
            raise

    async def load_template(self) -> Session | None:
        """The session of the template given on the command line, loaded and analysed
        (at startup)."""
        given = self.given_template
        if given is None:
            return None
        if self.given_session is None:
            if isinstance(given, ChatTemplate):
                self.given_session = Session.for_template(given)
            else:
                name = given
                load = Session.for_pretrained if is_hub_id(name) else Session.for_file
                cache = (
                    default_analysis_cache()
                )  # the analysis is saved: a restart does not redo it
                self.given_session = await self.in_thread(lambda: load(name, analysis_cache=cache))
        session: Session = self.given_session
        await self.in_thread(lambda: session.analysis)
        return session

    async def resolve(self) -> Served:
        """What is served; EngineUnavailable until the engine has answered once."""
        if self.served is not None:
            return self.served
        async with self._lock:
            if self.served is None:
                try:
                    self.served = await self._resolve()
                except BackendError as exc:
                    if exc.detail != self._last_logged:  # once per problem, not per request
                        log.warning("engine not ready: %s", exc.detail)
                        self._last_logged = exc.detail
                    self.last_problem = exc.public
                    raise EngineUnavailable(
                        f"the engine is not available yet: {exc.public}"
                    ) from exc
                self.last_problem = None
                log.info(
                    "serving template=%s backend=%s model=%s analysis_verified=%s",
                    self.served.template.name.rsplit("/", 1)[-1],
                    self.served.backend.kind,
                    self.served.model,
                    self.served.verified,
                )
        return self.served

    async def _resolve(self) -> Served:
        timeout = self.limits.connect_timeout
        kind, info = self.kind, None
        if kind == "auto" or self.given_template is None:
            info = await detect(self.url, self.session, timeout)  # the dialects, in order
        if kind == "auto" and info is not None:
            kind = info.kind
        if info is None and kind == "llama.cpp" and self.on_slots is not None:
            info = await self._capacity_look(kind, timeout)
        session = await self.load_template()
        if session is None:
            if info is None or not info.chat_template:
                raise BackendError(
                    "the engine reports no chat template (GET /props); start serve with --template",
                    self.url,
                    "invalid",
                )
            source = info
            session = Session.for_source(
                source.chat_template,
                bos_token=source.bos_token,
                eos_token=source.eos_token,
                name="props",
            )
            await self.in_thread(lambda: session.analysis)
        template = session.template
        model = self.given_model or (info.model if info is not None else "")
        if not model and dialect_of(kind).names_model:
            model = await first_model(self.url, self.session, timeout)
        backend = make_backend(
            kind, self.url, self.session, model, fresh=self.fresh, timeouts=self.timeouts,
            hooks=self.hooks,
        )  # fmt: skip
        await self.in_thread(lambda: template.caps)  # probed once, off the event loop
        check = template.analyze().verification
        verified = None if check is None else check.verified
        if info is not None and info.slots > 0 and self.on_slots is not None:
            self.on_slots(info.slots)
        media = info.media if info is not None else None
        if info is None or info.kind != kind:
            try:
                media = await media_of(kind, self.url, self.session, timeout)
            except BackendError as exc:  # served as text; images become placeholders
                log.warning("the engine did not say what media it takes: %s", exc.detail)
        return Served(session, backend, model or "autoparser", verified, media)

    async def _capacity_look(self, kind: str, timeout: float) -> EngineInfo | None:
        """What the engine of a given kind reports of itself (its slots), when asked only
        for that: an answer without it is no error."""
        with contextlib.suppress(BackendError):
            return await dialect_of(kind).detect(Looks(self.url, self.session, timeout))
        return None

    def record(self, error: BackendError | None) -> None:
        """A request's outcome with the engine (for /health)."""
        if error is None:
            self.failures = 0
            self.last_problem = None
        else:
            self.failures += 1
            self.last_problem = error.public

    async def health(self) -> str | None:
        """None when the engine answers and recent requests succeeded, else why not.

        Answers within ``HEALTH_WAIT`` seconds whatever the engine does: a probe of the
        engine starts (unless one is in flight) and is waited for that long; past it, the
        state the last finished probe saw is the answer (the background task looks every
        ``HEALTH_INTERVAL`` seconds), and the probe goes on, bounded by the connect timeout,
        to update it."""
        await asyncio.wait({self._start_probe()}, timeout=HEALTH_WAIT)  # never cancels it
        if self.engine_state is not None:
            return self.engine_state
        if self.failures >= FAILING_AFTER:
            return f"the last {self.failures} engine requests failed: {self.last_problem}"
        return None

    async def watch(self) -> None:
        """One look at the engine (finding out what it is, first), shared with any
        /health asking meanwhile; the background task runs it every ``HEALTH_INTERVAL``."""
        await asyncio.wait({self._start_probe()})

    def _start_probe(self) -> asyncio.Future[str | None]:
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._check())
            self._probe.add_done_callback(self._probed)
        return self._probe

    async def _check(self) -> str | None:
        if self.served is None:
            try:
                await self.resolve()
            except EngineUnavailable as exc:
                return str(exc)
        assert self.served is not None
        return await self.served.backend.check()

    def _probed(self, probe: asyncio.Future[str | None]) -> None:
        if probe.cancelled():
            return
        error = probe.exception()
        if error is not None:
            log.warning("engine health probe failed: %s", type(error).__name__)
            self.engine_state = "the engine's health could not be checked"
        else:
            self.engine_state = probe.result()

    async def prepare(
        self, session: Session, options: RequestOptions, provenance: bool
    ) -> ChatParams:
        """``session.params`` off the event loop within ``prepare_timeout`` seconds of the
        worker's CPU time (a 413 past it; a 400 naming the field for a request the template
        refuses). Time spent waiting for a worker or for the CPU is not counted."""
        apply = functools.partial(session.params, options, provenance=provenance)
        try:
            params = await self.in_thread(
                apply, cancellable=True, cpu_seconds=self.limits.prepare_timeout
            )
        except WorkLimitError as exc:
            raise InvalidRequest(
                f"the request takes more than {self.limits.prepare_timeout:g} s of CPU time to "
                "prepare (too many or too large tools?)",
                "tools",
                413,
            ) from exc
        except RequestError as exc:
            text = request_error_text(exc)
            raise InvalidRequest(text, param_of(text)) from exc
        except TemplateError as exc:
            raise InvalidRequest(
                f"the chat template cannot render this request: {exc}", "messages"
            ) from exc
        if not isinstance(params, ChatParams):  # pragma: no cover - apply's contract
            raise TypeError(f"template.apply returned {type(params).__name__}")
        return params


_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


def is_hub_id(name: str) -> bool:
    """A ``--template`` naming a Hugging Face Hub model (``org/name``, the hub extra): that
    shape, no such path, and no template file's ending (the CLI's rule, ``cli.is_hub_id``;
    a face cannot import the CLI)."""
    return (
        _HUB_ID.fullmatch(name) is not None
        and not name.lower().endswith((".jinja", ".j2", ".json", ".gguf", ".txt"))
        and not os.path.exists(name)
    )


def request_error_text(exc: RequestError) -> str:
    """A library error as a client reads it: no advice only a library caller can follow
    (``lenient=True``), and schema pointers written ``#/...`` so that they read as places
    in the request (the error scrubber keeps those, and strips paths)."""
    text = SchemaError.message_with_hint(exc, "")
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, SchemaError):
        cause = cause.__cause__
    return text if cause is None else _BARE_POINTER.sub("#/", text)


def param_of(message: str) -> str | None:
    """The request field a library error names (``tools[0].function.parameters: ...``)."""
    found = _FIELD_PREFIX.match(message)
    return found.group(1) if found else None


def generation(
    params: ChatParams,
    sampling: SamplingOptions,
    plain_text: bool,
    logprobs: int | None = None,
    media: tuple[str, ...] = (),
) -> Generation:
    """The engine-neutral generation of one request (``logprobs``: alternatives per token
    asked of the engine; None: none; ``media``: its images, base64, one per marker in the
    prompt; the prompt then goes as text, its caller text unprotected)."""
    return Generation(
        prompt=params.prompt,
        max_tokens=sampling.max_tokens,
        stop=tuple(dict.fromkeys((*params.additional_stops, *sampling.stop))),
        sampling=sampling.engine_fields(),
        grammar=params.grammar,
        grammar_lazy=params.grammar_lazy,
        grammar_triggers=tuple(params.grammar_triggers),
        preserved_tokens=tuple(params.preserved_tokens),
        caller_spans=tuple(params.caller_spans or ()) if plain_text and not media else None,
        logprobs=logprobs,
        media=media,
    )
