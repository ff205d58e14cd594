"""``Backend.stream_batches``: the pieces of the events that arrived together as one batch
(never an empty batch or an empty piece), then one ``Finished``; a bad event in a block
still delivers the pieces before it, then its BackendError."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

import aiohttp
from aiohttp import web
from helpers.serve_standin import LoopThread

from autoparser.serve.engines.backend import make_backend
from autoparser.serve.engines.base import BackendError, Finished, Generation

GOOD = [{"content": "Hel"}, {"content": ""}, {"content": "lo"}]


def _engine(events: list[Any]) -> web.Application:
    async def completion(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events))
        return response

    app = web.Application()
    app.router.add_post("/completion", completion)
    return app


def _batches(loop: LoopThread, events: list[Any]) -> tuple[list[Any], str]:
    url = loop.serve(_engine(events))

    async def go() -> tuple[list[Any], str]:
        items: list[Any] = []
        async with aiohttp.ClientSession() as session:
            backend = make_backend("llama.cpp", url, session)
            try:
                async for item in backend.stream_batches(Generation("hi", caller_spans=None)):
                    items.append(item)
            except BackendError as exc:
                return items, exc.public
        return items, ""

    result: tuple[list[Any], str] = loop.call(go)
    return result


def test_batches_then_the_end(loop: LoopThread) -> None:
    last = {"content": "!", "stop": True, "stop_type": "limit", "tokens_predicted": 4}
    items, error = _batches(loop, [*GOOD, last])
    assert not error and isinstance(items[-1], Finished) and items[-1].hit_limit
    batches = items[:-1]
    assert all(batches) and all(all(batch) for batch in batches)
    assert [p for batch in batches for p in batch] == ["Hel", "lo", "!"]


def test_a_bad_event_still_delivers_the_pieces_before_it(loop: LoopThread) -> None:
    items, error = _batches(loop, [*GOOD, {"content": 7}, {"content": "after"}])
    assert [p for batch in items for p in batch] == ["Hel", "lo"]
    assert error == "the engine's stream events have no 'content' string"
