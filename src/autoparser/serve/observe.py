"""What every route shares on the way in and out: request ids, API-key auth, CORS, the
concurrency limit, error bodies (OpenAI's, or a route's own shape: ``ERROR_SHAPES``), one
access-log line and the Prometheus metrics.

Routes do not log or count themselves: they fill ``RequestInfo`` (``info(request)``) with
what they learnt (tokens, tool calls, finish reason) and the middleware writes the line and
the metrics once the response is done, whatever its status.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hmac
import ipaddress
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from autoparser.serve.limits import InvalidRequest, Unavailable
from autoparser.serve.workers import SOCKET_VARIABLE

log = logging.getLogger("autoparser.serve")
access_log = logging.getLogger("autoparser.serve.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
if TYPE_CHECKING:
    from aiohttp.typedefs import Middleware

    from autoparser import Finding
REQUEST_ID = "x-request-id"
_ID_OK = re.compile(r"^[\w.:\-]{1,128}$")
# Absolute paths and URLs never reach a client (they are in the log, under the request id).
_URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s'\"<>]+", re.IGNORECASE)
# A JSON pointer (``#/properties/x``) names a place in the request, not on the server.
_PATH = re.compile(r"(?<![\w.#])(?:/[\w.\-~$]+){2,}")

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def public_text(message: str, limit: int = 1000) -> str:
    """An error message fit for a client: no URLs, no absolute paths, bounded length."""
    text = _URL.sub("<url>", message)
    text = _PATH.sub(lambda m: m.group(0).rsplit("/", 1)[-1], text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_body(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, object]:
    """The OpenAI error object."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


ErrorShape = Callable[[int, str, str, str | None, str | None], dict[str, object]]


def openai_shape(
    status: int, message: str, kind: str, param: str | None, code: str | None
) -> dict[str, object]:
    """The default error shape (every route but Anthropic's)."""
    return error_body(message, kind, param, code)


# Route (its canonical path) -> the error body's shape, for routes of APIs whose clients
# expect another shape than OpenAI's (Anthropic's /v1/messages).
ERROR_SHAPES: web.AppKey[dict[str, ErrorShape]] = web.AppKey("autoparser_error_shapes")


def error_reply(
    request: web.Request,
    status: int,
    message: str,
    kind: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
    code: str | None = None,
    echo: str = "",
) -> web.Response:
    """An error response in the shape the request's route speaks (OpenAI's by default),
    its message made fit for a client (``public_text``) after ``echo``, what the client
    itself sent (its own path: kept whole)."""
    shape = request.app.get(ERROR_SHAPES, {}).get(_route(request), openai_shape)
    body = shape(status, echo[:1000] + public_text(message), kind, param, code)
    return web.json_response(body, status=status, headers=headers)


@dataclasses.dataclass
class RequestInfo:
    """What one request learnt, for its access-log line and the metrics (mutable: a route
    fills it as the response goes)."""

    id: str
    route: str
    started: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    rejected_calls: int = 0
    finish_reason: str = ""
    stream: bool = False
    truncated: bool = False
    first_token: float | None = None
    prompt_form: str = ""  # how the prompt went: text | protected | unchecked (engines)
    engine_error: str = ""
    error: str = ""  # what went wrong, in full (the log only)
    # The finished message's findings (what the parse tolerated or refused, and why).
    findings: tuple[Finding, ...] = ()
    # (what, label) of each thing served in a lesser form than asked (``degrade``)
    degraded: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def degrade(self, what: str, label: str, detail: str) -> None:
        """Something the client sent was served in a lesser form (a schema keyword left
        out of the grammar, an image replaced by a placeholder, a hosted tool left out):
        one warning line now, counted in the metrics when the request ends."""
        log.warning("request %s: %s", self.id, detail)
        self.degraded.append((what, label))


INFO: web.RequestKey[RequestInfo] = web.RequestKey("autoparser_info", RequestInfo)


def info(request: web.Request) -> RequestInfo:
    return request[INFO]


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (one per application)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "autoparser_requests", "Requests answered, by route and HTTP status.",
            ["route", "status"], registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "autoparser_request_duration_seconds", "Time from request to the response's end.",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.ttft = Histogram(
            "autoparser_time_to_first_token_seconds",
            "Time from request to the engine's first generated piece.",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.prompt_tokens = Counter(
            "autoparser_prompt_tokens", "Prompt tokens, as the engine counted them.", registry=r
        )
        self.completion_tokens = Counter(
            "autoparser_completion_tokens", "Generated tokens, as the engine counted them.",
            registry=r,
        )  # fmt: skip
        self.tool_calls = Counter(
            "autoparser_tool_calls",
            "Tool calls in model output: parsed (returned) or rejected (malformed, cut off, "
            "or beyond parallel_tool_calls=false).",
            ["outcome"], registry=r,
        )  # fmt: skip
        self.calls = Counter(
            "autoparser_calls",
            "What the parse made of the calls in model output, by outcome (kept, refused, "
            "cut, dropped) and reason (clean: read as the schema says; else the finding's "
            "kind: undeclared_argument, type_mismatch, missing_required, invalid_arguments, "
            "call_in_reasoning, truncated, wrapper_token).",
            ["outcome", "reason"], registry=r,
        )  # fmt: skip
        self.truncated = Counter(
            "autoparser_truncated_outputs", "Outputs the token limit cut off.", registry=r
        )
        self.engine_errors = Counter(
            "autoparser_engine_errors",
            "Engine failures: unreachable, timeout, http (an error status), invalid (an answer "
            "not as its API promises).",
            ["kind"], registry=r,
        )  # fmt: skip
        self.engine_retries = Counter(
            "autoparser_engine_retries",
            "Engine requests sent again on a fresh connection after the first failed before "
            "any response byte.",
            registry=r,
        )
        self.in_flight = Gauge(
            "autoparser_requests_in_flight", "Requests being answered now.", registry=r,
            multiprocess_mode="livesum",  # under --workers: summed over the live workers
        )  # fmt: skip
        self.queued = Gauge(
            "autoparser_requests_queued",
            "Requests waiting for a turn under --max-concurrent (at most --max-queued).",
            registry=r, multiprocess_mode="livesum",
        )  # fmt: skip
        self.concurrency_limit = Gauge(
            "autoparser_concurrency_limit",
            "Requests answered at once: --max-concurrent, or the engine's slots when followed.",
            registry=r, multiprocess_mode="livesum",
        )  # fmt: skip
        self.rejected = Counter(
            "autoparser_requests_rejected",
            "Requests refused before any work: saturated (concurrency limit), auth, host "
            "(a foreign Host), origin (a foreign Origin), content_type (not JSON).",
            ["reason"], registry=r,
        )  # fmt: skip
        self.cache = Counter(
            "autoparser_cache_lookups",
            "Cache lookups by cache and result (tokenize: caller spans checked and tokenized "
            "as plain text; boundary: the text around their edges checked; template_edge: "
            "template text next to caller text, cut at its control tokens).",
            ["cache", "result"], registry=r,
        )  # fmt: skip
        self.schema_degraded = Counter(
            "autoparser_schema_degraded",
            "Tool and response schema keywords the grammar could not express, left out of it "
            "(the grammar is looser at that node), by keyword; --strict-schemas refuses them.",
            ["keyword"], registry=r,
        )  # fmt: skip
        self.degraded = Counter(
            "autoparser_degraded",
            "Parts of requests served in a lesser form instead of refused, by what: media "
            "(an image or document replaced by a text placeholder), plain_text (a prompt sent "
            "with images, its caller text unprotected), hosted_tool (a tool only "
            "the provider can run, left out), tool_grammar (a custom tool's grammar not "
            "enforced), system_message (a system message moved or merged to fit the template), "
            "logprobs (logprobs the engine did not give), echo (a prompt of token ids not "
            "echoed).",
            ["what"], registry=r,
        )  # fmt: skip
        self.prompts = Counter(
            "autoparser_prompts",
            "Prompts of finished generations, by form: text (the caller's text checked, none "
            "of it a control token: sent as text), protected (some would have been: the "
            "caller's text sent as token ids), unchecked (sent as text without a check: "
            "--plain-user-text off, or an engine that cannot tokenize).",
            ["form"], registry=r,
        )  # fmt: skip


METRICS: web.AppKey[Metrics] = web.AppKey("autoparser_metrics", Metrics)


ANY_INTERFACE = ("", "0.0.0.0", "::")
JSON_TYPE = re.compile(r"^application/(?:[\w.\-]+\+)?json$")


def host_name(header: str) -> str:
    """The name of a ``Host`` header, lower-cased, without its port, brackets or final dot."""
    text = header.strip().lower()
    if text.startswith("["):  # an IPv6 literal: [::1]:8000
        return text[1 : text.find("]")] if "]" in text else text
    name, colon, port = text.rpartition(":")
    return (name if colon and port.isdigit() else text).rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host name spells, an IPv4-mapped IPv6 one (``::ffff:127.0.0.1``, what a
    dual-stack socket reports) read as its IPv4 address, whose loopback it is."""
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return None
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return mapped if mapped is not None else ip


def json_media_type(header: str | None) -> bool:
    """``application/json`` or a ``+json`` type: never one a page may send cross-origin
    without a preflight (text/plain, form types, or none)."""
    return bool(header) and bool(JSON_TYPE.match(str(header).split(";", 1)[0].strip().lower()))


@dataclasses.dataclass(frozen=True)
class Security:
    """API keys (any of them is accepted), the origins CORS answers (none by default) and
    the ``Host`` names served: the address listened on (``bound_host``), localhost names,
    loopback IPs and ``allowed_hosts`` (``*``: any), so a page the user visits cannot
    reach the server through DNS rebinding."""

    api_keys: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    open_paths: tuple[str, ...] = ("/health", "/ready", "/metrics")
    allowed_hosts: tuple[str, ...] = ()
    bound_host: str = "127.0.0.1"

    def key_ok(self, header: str | None, api_key: str | None = None) -> bool:
        """``Authorization: Bearer <key>``, or ``x-api-key: <key>`` (what Anthropic's
        clients send)."""
        if not self.api_keys:
            return True
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() == "bearer":
            given = token.strip().encode("utf-8")
        elif api_key is not None:
            given = api_key.strip().encode("utf-8")
        else:
            return False
        ok = False
        for key in self.api_keys:  # every key compared, in constant time each
            ok |= hmac.compare_digest(given, key.encode("utf-8"))
        return ok

    def host_ok(self, header: str | None) -> bool:
        """Whether the ``Host`` header names this server (no header: HTTP/1.0, no browser)."""
        if header is None or "*" in self.allowed_hosts:
            return True
        name = host_name(header)
        if name in self.allowed_hosts or name == "localhost" or name.endswith(".localhost"):
            return True
        ip = _ip(name)
        if ip is not None and (ip.is_loopback or self.bound_host in ANY_INTERFACE):
            return True
        bound = self.bound_host.strip("[]").lower()
        return name == bound or (ip is not None and ip == _ip(bound))

    def origin_ok(self, origin: str | None, host: str | None) -> bool:
        """A request from a browser page: the page's origin is listed, or it is this server
        itself (same scheme-less host and port as the ``Host`` header)."""
        if origin is None or "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        scheme, _, rest = origin.partition("://")
        return scheme in ("http", "https") and host is not None and rest.lower() == host.lower()

    def origin(self, request: web.Request) -> str | None:
        origin = request.headers.get("Origin")
        if origin is None or not self.allowed_origins:
            return None
        if "*" in self.allowed_origins:
            return "*"
        return origin if origin in self.allowed_origins else None


SECURITY: web.AppKey[Security] = web.AppKey("autoparser_security", Security)


class Admission:
    """The concurrency limit, with a queue: at most ``limit`` requests at once; up to
    ``queued`` more wait for a turn in arrival order, each at most ``wait`` seconds.

    ``enter`` gives a turn (None) or the reason there is none; every turn given is handed
    back with ``leave``, which passes it straight to the first request waiting (so a new
    arrival never overtakes the queue).
    """

    def __init__(self, limit: int, queued: int = 0, wait: float = 60.0) -> None:
        self.limit, self.queued, self.wait = limit, queued, wait
        self.active = 0
        self.draining = False
        self._turns: collections.deque[asyncio.Future[bool]] = collections.deque()

    @property
    def waiting(self) -> int:
        return sum(1 for turn in self._turns if not turn.done())

    @property
    def full(self) -> bool:
        """No turn free and no room to wait for one."""
        return self.active >= self.limit and self.waiting >= self.queued

    def enter_now(self) -> bool:
        """A turn at once, when one is free and nobody waits for it."""
        if self.draining or self.active >= self.limit or self.waiting:
            return False
        self.active += 1
        return True

    async def enter(self) -> str | None:
        if self.enter_now():
            return None
        if self.draining:
            return "shutting down"
        if self.waiting >= self.queued:
            return "at its concurrency limit" + (" and its queue is full" if self.queued else "")
        turn: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._turns.append(turn)
        try:
            given = await asyncio.wait_for(asyncio.shield(turn), self.wait)
        except asyncio.TimeoutError:
            if turn.done() and not turn.cancelled() and turn.result():
                return None  # handed over as the wait ended: the turn is this request's
            turn.cancel()
            return f"at its concurrency limit (waited {self.wait:g} s for a turn)"
        except asyncio.CancelledError:  # the client left while waiting
            if turn.done() and not turn.cancelled() and turn.result():
                self.leave()
            turn.cancel()
            raise
        return None if given else "shutting down"

    def leave(self) -> None:
        """A turn handed back: to the first request still waiting, else free (and gone,
        while more are active than a lowered limit allows)."""
        while self._turns and self.active <= self.limit:
            turn = self._turns.popleft()
            if not turn.done():
                turn.set_result(True)  # ``active`` stays: the turn changes hands
                return
        self.active -= 1

    def resize(self, limit: int) -> None:
        """A new limit (the engine's capacity, learnt once it answers): the turns a raised
        one frees go at once to the requests waiting, in order; a lowered one takes effect
        as turns are handed back."""
        self.limit = limit
        while self._turns and self.active < self.limit:
            turn = self._turns.popleft()
            if not turn.done():
                self.active += 1
                turn.set_result(True)

    def drain(self) -> None:
        """Shutting down: no new turns, and every request waiting is told so."""
        self.draining = True
        while self._turns:
            turn = self._turns.popleft()
            if not turn.done():
                turn.set_result(False)


ADMISSION: web.AppKey[Admission] = web.AppKey("autoparser_admission", Admission)
LIMITED_PATHS = ("/v1/",)


def _request_id(request: web.Request) -> str:
    given = request.headers.get(REQUEST_ID, "")
    return given if _ID_OK.match(given) else uuid.uuid4().hex


def _route(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """Headers of every response, streamed or not, set before they are sent: the request
    id, CORS when the origin is allowed, and a Server header that names no versions."""
    response.headers["Server"] = "autoparser"
    state = request.get(INFO)
    if state is not None:
        response.headers[REQUEST_ID] = state.id
    origin = request.app[SECURITY].origin(request)
    if origin is not None:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Headers"] = (
            "Authorization, Content-Type, x-api-key, anthropic-version"
        )
        response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"


def write_access_line(record: dict[str, object], fmt: str) -> None:
    """One access line: its fields ride along (``access``) for ``JsonLines``."""
    if fmt == "json":
        text = json.dumps(record, ensure_ascii=False)
    else:
        text = " ".join(f"{k}={v}" for k, v in record.items())
    access_log.info(text, extra={"access": record})


class JsonLines(logging.Formatter):
    """Every log record as one JSON object (``--log-format json``): time, level, logger and
    the message, or an access line's own fields; a traceback as one string field. Whatever
    logs (aiohttp's banner and errors, warnings), the line is JSON."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "access", None)
        if isinstance(fields, dict):
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def make_middleware(log_format: str) -> Middleware:
    """The one middleware: id, CORS, auth, admission, errors, access log, metrics."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        app = request.app
        metrics, security, admission = app[METRICS], app[SECURITY], app[ADMISSION]
        ident = _request_id(request)
        route = _route(request)
        state = RequestInfo(ident, route, time.perf_counter())
        request[INFO] = state
        origin = security.origin(request)
        counted = request.path.startswith(LIMITED_PATHS)
        admitted = False
        response: web.StreamResponse
        try:
            refused = _refusal(request, security)
            if refused is not None:
                metrics.rejected.labels(refused[0]).inc()
                response = error_reply(request, *refused[1:])
            elif request.method == "OPTIONS" and origin is not None:
                response = web.Response(status=204)
            elif counted and not security.key_ok(
                request.headers.get("Authorization"), request.headers.get("x-api-key")
            ):
                metrics.rejected.labels("auth").inc()
                response = error_reply(
                    request, 401, "invalid or missing API key (Authorization: Bearer <key>)",
                    "invalid_request_error", code="invalid_api_key",
                )  # fmt: skip
            elif counted and (why := await _admit(admission, metrics, state, request, log_format)):
                metrics.rejected.labels("saturated").inc()
                response = error_reply(
                    request, 503, f"the server is {why}; retry later", "server_overloaded",
                    headers={"Retry-After": "1"},
                )  # fmt: skip
            else:
                if counted:
                    admitted = True
                    metrics.in_flight.inc()
                try:
                    response = await _answer(request, handler, state)
                except asyncio.CancelledError:
                    # The client left (aiohttp cancels the handler): logged as 499.
                    _finish(metrics, state, 499, log_format, request)
                    raise
        finally:
            if admitted:
                admission.leave()
                metrics.in_flight.dec()
        _finish(metrics, state, response.status, log_format, request)
        return response

    return middleware


async def _admit(
    admission: Admission, metrics: Metrics, state: RequestInfo, request: web.Request, fmt: str
) -> str | None:
    """A turn for the request (None), waiting in the queue if need be; else why not."""
    if admission.enter_now():
        return None
    metrics.queued.inc()
    try:
        return await admission.enter()
    except asyncio.CancelledError:
        _finish(metrics, state, 499, fmt, request)  # the client left while waiting
        raise
    finally:
        metrics.queued.dec()


def _refusal(request: web.Request, security: Security) -> tuple[str, int, str, str] | None:
    """(metric reason, status, message, error type) of a request a browser page could have
    sent behind the user's back: a foreign ``Host`` (DNS rebinding), a foreign ``Origin``,
    or a POST whose body is not declared JSON (a CORS "simple" request needs no preflight)."""
    host = request.headers.get("Host")
    if not security.host_ok(host):
        return (
            "host", 421, f"Host: {host_name(host or '')!r} is not a name of this server "
            "(--allowed-hosts adds names)", "invalid_request_error",
        )  # fmt: skip
    if not security.origin_ok(request.headers.get("Origin"), host):
        return (
            "origin", 403, "Origin: this origin is not allowed (--allowed-origins adds "
            "origins)", "permission_error",
        )  # fmt: skip
    kind = request.headers.get("Content-Type")
    if request.method == "POST" and not json_media_type(kind):
        given = kind.split(";", 1)[0].strip() if kind else "missing"
        return (
            "content_type", 415, f"Content-Type: must be application/json, got {given}",
            "invalid_request_error",
        )  # fmt: skip
    return None


async def _answer(request: web.Request, handler: Handler, state: RequestInfo) -> web.StreamResponse:
    """The route's response; every failure becomes an OpenAI error body."""
    try:
        return await handler(request)
    except InvalidRequest as exc:
        return error_reply(request, exc.status, str(exc), "invalid_request_error", exc.param)
    except Unavailable as exc:
        state.error = str(exc)
        return error_reply(
            request, 503, str(exc), "server_unavailable", headers={"Retry-After": "2"}
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
        return error_reply(
            request, exc.status, str(exc.reason), kind, echo=f"{request.method} {request.path}: "
        )
    except (ConnectionResetError, asyncio.CancelledError):
        state.error = "client disconnected"
        raise
    except Exception as exc:
        state.error = f"{type(exc).__name__}: {exc}"
        log.exception("request %s failed", state.id)
        return error_reply(request, 500, f"internal error (request id {state.id})", "server_error")


# Under ``--workers``, access lines name the process that answered.
_WORKER = os.getpid() if os.environ.get(SOCKET_VARIABLE) else None


def _finish(
    metrics: Metrics, state: RequestInfo, status: int, fmt: str, request: web.Request
) -> None:
    elapsed = time.perf_counter() - state.started
    metrics.requests.labels(state.route, str(status)).inc()
    metrics.latency.labels(state.route).observe(elapsed)
    if state.first_token is not None:
        metrics.ttft.labels(state.route).observe(state.first_token - state.started)
    metrics.prompt_tokens.inc(state.prompt_tokens)
    metrics.completion_tokens.inc(state.completion_tokens)
    if state.tool_calls:
        metrics.tool_calls.labels("parsed").inc(state.tool_calls)
    if state.rejected_calls:
        metrics.tool_calls.labels("rejected").inc(state.rejected_calls)
    if state.truncated:
        metrics.truncated.inc()
    _count_calls(metrics, state)
    if state.engine_error:
        metrics.engine_errors.labels(state.engine_error).inc()
    if state.prompt_form:
        metrics.prompts.labels(state.prompt_form).inc()
    for what, label in state.degraded:
        if what == "schema":
            metrics.schema_degraded.labels(label).inc()
        else:
            metrics.degraded.labels(what).inc()
    if request.path in ("/health", "/ready", "/metrics") and status == 200:
        return  # probes every few seconds would drown the log; failures are logged
    record: dict[str, object] = {
        "request_id": state.id,
        "method": request.method,
        "path": request.path,
        "status": status,
        "latency_ms": round(elapsed * 1000, 1),
        "stream": state.stream,
        "prompt_tokens": state.prompt_tokens,
        "completion_tokens": state.completion_tokens,
        "tool_calls": state.tool_calls,
        "finish_reason": state.finish_reason or None,
    }
    if state.prompt_form:
        record["prompt_form"] = state.prompt_form
    if _WORKER is not None:
        record["worker"] = _WORKER
    if state.degraded:
        record["degraded"] = len(state.degraded)
    if state.first_token is not None:
        record["ttft_ms"] = round((state.first_token - state.started) * 1000, 1)
    if state.error:
        record["error"] = state.error
    if state.findings:
        record["findings"] = [f"{f.kind}:{f.outcome}" for f in state.findings]
    write_access_line(record, fmt)


def _count_calls(metrics: Metrics, state: RequestInfo) -> None:
    """``autoparser_calls_total``: each finding by its outcome and kind, each call kept
    without one as clean; each finding logged under the request id."""
    flagged = set()
    for finding in state.findings:
        metrics.calls.labels(finding.outcome, finding.kind).inc()
        log.info("request %s: parse %s", state.id, finding.describe())
        if finding.call is not None:
            flagged.add(finding.call)
    clean = state.tool_calls - len(flagged)
    if clean > 0:
        metrics.calls.labels("kept", "clean").inc(clean)
