"""The studio's aiohttp application: the page, its static files and the JSON API.

Every handler reads one JSON body, runs the matching function of ``api.py`` in a worker
thread (analysis and parsing are CPU work that must not stall the event loop) and answers
its dict, or the error as ``{"error": {type, message, pane, field, line}}`` with a 4xx:
a client's mistake is never a 5xx, and no path or Python repr leaks into an answer.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources

from aiohttp import web

from autoparser import AutoparserError, TemplateSource, load_text
from autoparser.studio import api

MAX_BODY = 8 * 1024 * 1024  # bytes of one request body (outputs are limited by api.MAX_OUTPUT)
STATIC_FILES = {
    "studio.js": "text/javascript",
    "studio.css": "text/css",
}
_INITIAL = web.AppKey("initial", dict)
TOKEN = web.AppKey("token", str)  # the launch's token, which every /api call carries
TOKEN_HEADER = "X-Studio-Token"
_BOUND_HOST = web.AppKey("bound_host", str)
_JSON_TYPE = re.compile(r"^application/(?:[\w.\-]+\+)?json$")
Endpoint = Callable[[Mapping[str, object]], dict[str, object]]


def _static(name: str) -> bytes:
    return resources.files("autoparser.studio").joinpath("static").joinpath(name).read_bytes()


def _example() -> TemplateSource:
    text = resources.files("autoparser.examples").joinpath("chatml_tools.jinja").read_text("utf-8")
    return load_text(text, "chatml_tools.jinja")


def _error(status: int, message: str, field: str, pane: str) -> web.Response:
    error = {"type": "StudioError", "message": message, "pane": pane, "field": field}
    return web.json_response({"error": error}, status=status)


async def _body(request: web.Request) -> Mapping[str, object] | web.Response:
    """The request's JSON object, or the 4xx answer naming what is wrong with it."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _error(413, f"body: larger than {MAX_BODY} bytes", "body", "page")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(400, f"body: not UTF-8 text (byte {exc.start})", "body", "page")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        return _error(400, f"body: not JSON: {exc.msg} at line {exc.lineno}", "body", "page")
    if not isinstance(body, dict):
        return _error(400, "body: expected a JSON object", "body", "page")
    return body


def _handler(endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        body = await _body(request)
        if isinstance(body, web.Response):
            return body
        try:
            answer = await asyncio.to_thread(endpoint, body)
        except AutoparserError as exc:
            status, payload = api.error_body(exc)
            return web.json_response(payload, status=status)
        except RecursionError:
            return _error(422, "the request nests too deeply to process", "body", "page")
        return web.json_response(answer, dumps=_dumps)

    return handle


def _dumps(data: object) -> str:
    return json.dumps(data, ensure_ascii=False)


def _host_ok(header: str | None, bound: str) -> bool:
    """Whether ``Host`` names this server: localhost names, loopback IPs, the address
    listened on (any IP when on all interfaces). serve has the same rule (its observe.py,
    with --allowed-hosts): each face keeps its own, the library has no web layer."""
    if header is None:
        return True
    text = header.strip().lower()
    if text.startswith("["):
        name = text[1 : text.find("]")] if "]" in text else text
    else:
        head, colon, port = text.rpartition(":")
        name = (head if colon and port.isdigit() else text).rstrip(".")
    if name == "localhost" or name.endswith(".localhost") or name == bound.strip("[]").lower():
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    return ip.is_loopback or bound in ("", "0.0.0.0", "::")


@web.middleware
async def _guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Only this launch's page may use the API: the ``Host`` names this server (no DNS
    rebinding), an ``Origin`` is this server's (scheme, name and port), POST bodies are
    declared JSON (no CORS "simple" request), and /api calls carry the launch's token. The
    page and its static files load without the token (they hold nothing of the user's)."""
    host = request.headers.get("Host")
    if not _host_ok(host, request.app[_BOUND_HOST]):
        return _error(421, "Host: not a name of this server", "Host", "page")
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() != f"{request.scheme}://{host}".lower():
        return _error(403, "Origin: only the studio's own page may call its API", "Origin", "page")
    if request.method == "POST":
        kind = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if not _JSON_TYPE.match(kind):
            return _error(
                415, f"Content-Type: must be application/json, got {kind or 'missing'}",
                "Content-Type", "page",
            )  # fmt: skip
    if request.path.startswith("/api/"):
        given = request.headers.get(TOKEN_HEADER, "").encode("utf-8")
        if not hmac.compare_digest(given, request.app[TOKEN].encode("utf-8")):
            return _error(
                403, f"{TOKEN_HEADER}: missing or wrong; open the URL autoparser studio "
                "printed (it carries the token)", TOKEN_HEADER, "page",
            )  # fmt: skip
    return await handler(request)


async def _index(request: web.Request) -> web.Response:
    return web.Response(body=_static("index.html"), content_type="text/html", charset="utf-8")


async def _asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    kind = STATIC_FILES.get(name)
    if kind is None:
        raise web.HTTPNotFound(text="no such file")
    return web.Response(body=_static(name), content_type=kind, charset="utf-8")


async def _initial(request: web.Request) -> web.Response:
    return web.json_response(request.app[_INITIAL], dumps=_dumps)


def create_app(
    initial: TemplateSource | None = None, *, host: str = "127.0.0.1", token: str | None = None
) -> web.Application:
    """The application; the page starts from ``initial`` (else the bundled ChatML example).
    ``host`` is the address it listens on; ``token`` (default: a random one, in
    ``app[TOKEN]``) is what every /api call must carry in ``X-Studio-Token``."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_guard])
    app[TOKEN] = token or secrets.token_urlsafe(24)
    app[_BOUND_HOST] = host
    payload = api.source_payload(initial or _example())
    if initial is None:  # the example's own output: a reasoning block and a tool call
        payload["output"] = (
            resources.files("autoparser.examples").joinpath("model_output.txt").read_text("utf-8")
        )
    app[_INITIAL] = payload
    app.router.add_get("/", _index)
    app.router.add_get("/static/{name}", _asset)
    app.router.add_get("/api/template", _initial)
    app.router.add_post("/api/load", _handler(api.load_pasted))
    app.router.add_post("/api/analyze", _handler(api.analyze))
    app.router.add_post("/api/render", _handler(api.render))
    app.router.add_post("/api/parse", _handler(api.parse))
    app.router.add_post("/api/stream", _handler(api.stream))
    app.router.add_post("/api/grammar", _handler(api.grammar))
    app.router.add_post("/api/export", _handler(api.export))
    return app
