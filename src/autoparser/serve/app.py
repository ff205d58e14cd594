"""The application: routes, the shared middleware, health, readiness and metrics, startup
and shutdown.

Routes: ``POST /v1/chat/completions`` (``chat_completions``), ``POST /v1/responses``,
``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (``agent_apis``: mappings onto
the chat route's request path), ``GET /v1/models``,
``GET /health`` (the engine answers and recent requests to it succeeded: 200, else 503 with
why), ``GET /ready`` (can take traffic: engine known, not draining), ``GET /metrics``
(Prometheus). Everything a route shares (auth, request ids, limits, access log, metrics,
error bodies) is ``observe``'s middleware; the engine path is ``engine``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import urllib.parse
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

from autoparser import TOOL_CALL_DELTAS, ChatTemplate
from autoparser.serve import agent_apis, completions_api
from autoparser.serve import openai_format as oai
from autoparser.serve.chat_completions import REASONING_FIELDS, Chat, ChatSettings
from autoparser.serve.engine import HEALTH_INTERVAL, EngineLink
from autoparser.serve.engines import KIND_CHOICES
from autoparser.serve.engines.base import Hooks
from autoparser.serve.limits import Limits
from autoparser.serve.media import MEDIA_POLICIES
from autoparser.serve.observe import (
    ADMISSION,
    ERROR_SHAPES,
    METRICS,
    SECURITY,
    Admission,
    Metrics,
    Security,
    make_middleware,
    on_prepare,
)
from autoparser.serve.workers import METRICS_VARIABLE

log = logging.getLogger("autoparser.serve")


@dataclasses.dataclass(frozen=True)
class ServeConfig:
    """How to start the server. ``template`` is a path, a loaded template, or None (ask the
    llama.cpp engine's ``GET /props``, lazily)."""

    backend_url: str
    backend_kind: str = "auto"  # "auto" (detected: serve/engines/) or a kind of engines.KINDS
    template: str | ChatTemplate | None = None
    model: str | None = None
    tool_call_deltas: str | None = None  # None: the library's default ("whole")
    host: str = "127.0.0.1"
    port: int = 8000
    limits: Limits = dataclasses.field(default_factory=Limits)
    api_keys: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()  # Host names served besides host's and localhost's
    log_format: str = "text"
    reasoning_field: str = "reasoning"
    plain_user_text: bool = True
    strict_schemas: bool = False  # refuse what the grammar cannot express, not loosen it
    # images: sent to an engine that takes them, else (and documents) a text placeholder
    # (auto); always a placeholder (placeholder); or a 400 (reject)
    media: str = "auto"
    # 0: at most limits.max_concurrent requests at once. N > 0: as many as the engine runs
    # at once (llama.cpp's /props total_slots) shared over N workers, once it reports them
    # (until then, and for engines that do not, limits.max_concurrent).
    share_engine_slots: int = 0

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
        if self.log_format not in ("text", "json"):
            raise ValueError(f"log_format must be text or json: {self.log_format}")
        if self.reasoning_field not in REASONING_FIELDS:
            raise ValueError(
                f"reasoning_field must be one of {', '.join(REASONING_FIELDS)}: "
                f"{self.reasoning_field}"
            )
        if self.media not in MEDIA_POLICIES:
            raise ValueError(f"media must be one of {', '.join(MEDIA_POLICIES)}: {self.media}")
        parts = urllib.parse.urlsplit(self.backend_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"--backend must be the engine's http:// or https:// URL with a host "
                f"(such as http://127.0.0.1:8080), got {self.backend_url!r}"
            )
        try:
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError as exc:
            raise ValueError(f"--backend: {exc}, got {self.backend_url!r}") from exc
        if any(not key for key in self.api_keys):
            raise ValueError("an API key must not be empty")
        if self.share_engine_slots < 0:
            raise ValueError(f"share_engine_slots must be >= 0: {self.share_engine_slots}")


class MetricHooks(Hooks):
    """Backend events counted in the metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def retried(self) -> None:
        self.metrics.engine_retries.inc()

    def cache(self, name: str, hit: bool) -> None:
        self.metrics.cache.labels(name, "hit" if hit else "miss").inc()


LINK: web.AppKey[EngineLink] = web.AppKey("autoparser_link", EngineLink)


async def models(request: web.Request) -> web.Response:
    served = await request.app[LINK].resolve()
    return web.json_response(oai.model_list(served.model))


async def health(request: web.Request) -> web.Response:
    """200 when the engine answers and recent requests to it succeeded; 503 with why."""
    link = request.app[LINK]
    problem = await link.health()
    kind = link.served.backend.kind if link.served is not None else link.kind
    if problem is not None:
        return web.json_response(
            {"status": "unavailable", "backend": kind, "reason": problem}, status=503
        )
    return web.json_response({"status": "ok", "backend": kind})


async def ready(request: web.Request) -> web.Response:
    """200 when the server can take traffic now: the engine is known and healthy, the
    server is not draining, and it is below its concurrency limit."""
    link, admission = request.app[LINK], request.app[ADMISSION]
    problem = await link.health()
    if problem is None and admission.draining:
        problem = "shutting down"
    if problem is None and admission.full:
        problem = "at the concurrency limit, its queue full"
    if problem is not None:
        return web.json_response({"status": "not ready", "reason": problem}, status=503)
    return web.json_response({"status": "ready"})


async def metrics(request: web.Request) -> web.Response:
    """The metrics of this process, or under ``--workers`` the sums over every worker."""
    if os.environ.get(METRICS_VARIABLE):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        body = generate_latest(registry)
    else:
        body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def create_app(config: ServeConfig) -> web.Application:
    """The aiohttp application. Startup loads the template given (if any) and never waits
    on the engine: what the engine is, and its template, are found out lazily."""
    limits = config.limits
    app = web.Application(
        middlewares=[make_middleware(config.log_format)],
        client_max_size=limits.max_body_bytes + 1,
    )
    app[METRICS] = registry = Metrics()
    app[SECURITY] = Security(
        config.api_keys,
        config.allowed_origins,
        allowed_hosts=tuple(h.lower() for h in config.allowed_hosts),
        bound_host=config.host,
    )
    app[ADMISSION] = admission = Admission(
        limits.max_concurrent, limits.max_queued, limits.queue_timeout
    )
    registry.concurrency_limit.set(limits.max_concurrent)
    app.on_response_prepare.append(on_prepare)
    settings = ChatSettings(
        config.tool_call_deltas,
        config.reasoning_field,
        config.plain_user_text,
        config.strict_schemas,
        config.media,
    )

    # POST routes, by path: their handlers are bound to the engine link at startup.
    handlers: dict[str, agent_apis.Handler] = {}
    paths = ("/v1/chat/completions", completions_api.PATH, *agent_apis.PATHS)
    app[ERROR_SHAPES] = dict(agent_apis.ERROR_SHAPES)

    def route(path: str) -> agent_apis.Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await handlers[path](request)

        return handle

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=limits.connect_timeout)
        # Pooled connections are dropped before an engine would close them (llama.cpp's
        # server after 5 s idle); the single retry goes out on a connection of its own.
        pooled = aiohttp.TCPConnector(limit=0, keepalive_timeout=2.0)
        fresh_connector = aiohttp.TCPConnector(limit=0, force_close=True)
        async with (
            aiohttp.ClientSession(timeout=timeout, connector=pooled) as session,
            aiohttp.ClientSession(timeout=timeout, connector=fresh_connector) as fresh,
        ):
            link = EngineLink(
                config.backend_url, config.backend_kind, config.template, config.model,
                limits, session, fresh, MetricHooks(registry),
            )  # fmt: skip
            app[LINK] = link
            if config.share_engine_slots:
                link.on_slots = functools.partial(
                    follow_slots,
                    admission,
                    registry,
                    config.share_engine_slots,
                    limits.first_byte_timeout,
                )
            chat = Chat(link, limits, settings)
            handlers["/v1/chat/completions"] = chat.handle
            handlers.update(agent_apis.handlers(chat))
            handlers[completions_api.PATH] = completions_api.Completions(link, limits).handle
            loaded = await link.load_template()  # a bad --template fails startup, clearly
            shown = loaded.template.name.rsplit("/", 1)[-1] if loaded else "from the engine"
            log.info(
                "starting: engine=%s backend_kind=%s template=%s (the engine is asked in "
                "the background; a 'serving' line follows once it answers)",
                config.backend_url,
                config.backend_kind,
                shown,
            )
            stop = asyncio.Event()
            warm = asyncio.ensure_future(_warm(link, stop))
            try:
                yield
            finally:
                # Stopped by the event as well as cancelled: a cancellation that arrives as
                # a network call ends is lost in asyncio.wait_for (Python < 3.12).
                stop.set()
                warm.cancel()
                await asyncio.wait({warm}, timeout=1.0)
                link.close()

    async def drain(app: web.Application) -> None:
        admission.drain()

    app.cleanup_ctx.append(lifecycle)
    app.on_shutdown.append(drain)
    for path in paths:
        app.router.add_post(path, route(path))
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/ready", ready)
    app.router.add_get("/metrics", metrics)
    return app


def follow_slots(
    admission: Admission, metrics: Metrics, share: int, engine_wait: float, slots: int
) -> None:
    """The concurrency limit made the engine's capacity (``slots`` it runs at once, shared
    over ``share`` workers): requests beyond it wait in serve's queue, not the engine's, and
    as long as they would have waited in the engine's (``engine_wait``, the first-byte
    timeout, when longer than the queue's own): a load the engine would serve is served."""
    admission.wait = max(admission.wait, engine_wait)
    limit = max(1, -(-slots // share))
    if limit != admission.limit:
        log.info(
            "concurrency limit %d: the engine runs %d request(s) at once%s",
            limit,
            slots,
            f", shared over {share} workers" if share > 1 else "",
        )
        admission.resize(limit)
    metrics.concurrency_limit.set(limit)


async def _warm(link: EngineLink, stop: asyncio.Event) -> None:
    """Look at the engine in the background until ``stop``: find out what it is (retrying,
    backing off), so the first request does not wait for it, then check it every
    ``HEALTH_INTERVAL`` seconds, so /health answers at once with what was last seen."""
    delay = 0.5
    while not stop.is_set():
        await link.watch()
        if link.served is None:
            pause, delay = delay, min(delay * 2, 10.0)
        else:
            pause = HEALTH_INTERVAL
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), pause)
