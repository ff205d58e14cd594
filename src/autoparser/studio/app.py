"""The studio's aiohttp application: the page, its static files and the JSON API.

Every handler reads one JSON body, runs the matching function of ``api.py`` in a worker
thread (analysis and parsing are CPU work that must not stall the event loop) and answers
its dict, or the error as ``{"error": {type, message, pane, field, line}}`` with a 4xx:
a client's mistake is never a 5xx, and no path or Python repr leaks into an answer.
"""

from __future__ import annotations

import asyncio
import json
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


def create_app(initial: TemplateSource | None = None) -> web.Application:
    """The application; the page starts from ``initial`` (else the bundled ChatML example)."""
    app = web.Application(client_max_size=MAX_BODY)
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
