"""The one transport: a JSON POST whose every failure is a BackendError (not JSON, an HTTP
error with its status, an engine not there), server-sent events until ``[DONE]``, health
GETs, and detection's GETs, each path asked once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

import aiohttp
from aiohttp import web
from helpers.serve_standin import LoopThread

from autoparser.serve.engines.base import BackendError, Timeouts
from autoparser.serve.engines.transport import Looks, Transport


def engine() -> tuple[web.Application, list[str]]:
    gets: list[str] = []
    app = web.Application()

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"echo": await request.json()})

    async def teapot(request: web.Request) -> web.Response:
        return web.json_response({"error": "short and stout"}, status=418)

    async def html(request: web.Request) -> web.Response:
        return web.Response(text="<html>")

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b': a comment\n\ndata: {"n": 1}\n\nevent: x\ndata: {"n": 2}\n\n')
        await response.write(b'data: [DONE]\n\ndata: {"n": 3}\n\n')
        return response

    async def failing(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"error": "out of memory"}\n\n')
        return response

    async def props(request: web.Request) -> web.Response:
        gets.append(request.path)
        return web.json_response({"a": 1})

    app.router.add_post("/ok", ok)
    app.router.add_post("/teapot", teapot)
    app.router.add_post("/html", html)
    app.router.add_post("/events", events)
    app.router.add_post("/failing", failing)
    app.router.add_get("/props", props)
    app.router.add_get("/health", props)
    return app, gets


@pytest.fixture(scope="module")
def served(loop: LoopThread) -> tuple[str, list[str]]:
    app, gets = engine()
    return loop.serve(app), gets


def run(loop: LoopThread, work: Any) -> Any:
    async def go() -> Any:
        async with aiohttp.ClientSession() as session:
            return await work(session)

    return loop.call(go)


def test_posts_and_their_failures(loop: LoopThread, served: tuple[str, list[str]]) -> None:
    url, _ = served

    async def work(session: aiohttp.ClientSession) -> list[object]:
        t = Transport(url + "/", session, timeouts=Timeouts(1, 5, 5))
        out: list[object] = [await t.post_json({"x": 1}, "/ok")]
        for path in ("/teapot", "/html", "/missing"):
            try:
                await t.post_json({}, path)
            except BackendError as exc:
                out.append((exc.public, exc.kind, exc.http_status, url in exc.public))
        return out

    answers = run(loop, work)
    assert answers[0] == {"echo": {"x": 1}}
    assert answers[1] == ("the engine answered HTTP 418", "http", 418, False)
    assert answers[2][:2] == ("the engine answered something that is not JSON", "invalid")
    assert answers[3][1:3] == ("http", 404)


def test_events_until_done_and_reported_errors(
    loop: LoopThread, served: tuple[str, list[str]]
) -> None:
    url, _ = served

    async def work(session: aiohttp.ClientSession) -> tuple[list[object], str]:
        t = Transport(url, session)
        got = [e async for e in t.post_events({}, "/events")]
        try:
            [e async for e in t.post_events({}, "/failing")]
        except BackendError as exc:
            return got, exc.detail
        return got, ""

    got, failed = run(loop, work)
    assert got == [{"n": 1}, {"n": 2}]
    assert failed.endswith("/failing: out of memory")


def test_an_engine_not_there(loop: LoopThread) -> None:
    async def work(session: aiohttp.ClientSession) -> tuple[str, str | None]:
        t = Transport("http://127.0.0.1:9", session, timeouts=Timeouts(1, 2, 2))
        try:
            await t.post_json({}, "/x")
        except BackendError as exc:
            return exc.kind, await t.health("/health")
        return "", None

    assert run(loop, work) == ("unreachable", "the engine is unreachable")


def test_health_and_looks(loop: LoopThread, served: tuple[str, list[str]]) -> None:
    url, gets = served

    async def work(session: aiohttp.ClientSession) -> list[object]:
        t = Transport(url, session)
        look = Looks(url, session, 5)
        first = await look.get("/props")
        again = await look.get("/props")
        return [await t.health("/health"), await t.health("/nope"), first, again]

    before = len(gets)
    health, nope, first, again = run(loop, work)
    assert health is None and nope == "the engine's /nope answered HTTP 404"
    assert first == again == (200, {"a": 1})
    assert gets[before:] == ["/props", "/health"]  # the look asked /props once


def test_looks_at_an_engine_not_there() -> None:
    async def work() -> str:
        async with aiohttp.ClientSession() as session:
            try:
                await Looks("http://127.0.0.1:9", session, 2).get("/props")
            except BackendError as exc:
                return exc.kind
        return ""

    assert asyncio.run(work()) == "unreachable"
