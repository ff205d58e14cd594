"""The engine's event stream read in blocks: however its bytes are cut (inside a line, inside
a UTF-8 character, ``\\r\\n`` line ends), the events, their order and the errors are those
of the stream read line by line; a batch holds the events that arrived together, and the
events before a reported error or ``[DONE]`` are all delivered."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

import aiohttp
from aiohttp import web
from helpers.serve_standin import LoopThread

from autoparser.serve.engines import transport
from autoparser.serve.engines.base import BackendError, Timeouts
from autoparser.serve.engines.transport import Transport

EVENTS = [{"content": c, "n": i} for i, c in enumerate(["Hé", "llo ", "東京", "😀", "", "\n"])]
BODY = (
    ": keep-alive\r\n\r\n"
    + "".join(f"data: {json.dumps(e, ensure_ascii=False)}\r\n\r\n" for e in EVENTS[:3])
    + "event: x\nid: 4\n"
    + "".join(f"data:{json.dumps(e, ensure_ascii=False)}\n\n" for e in EVENTS[3:])
).encode()


def _reference(body: bytes) -> list[Any]:
    """The data payloads of ``body``, read line by line (what the transport did before)."""
    out = []
    for raw in body.split(b"\n"):
        line = raw.decode().strip()
        if line.startswith("data:"):
            value = line[5:].strip()
            if value == "[DONE]":
                break
            out.append(json.loads(value))
    return out


def _engine(cuts: dict[str, list[bytes]]) -> web.Application:
    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in cuts[request.path]:
            await response.write(part)
            await asyncio.sleep(0.001)  # let some cuts arrive on their own
        return response

    app = web.Application()
    for path in cuts:
        app.router.add_post(path, events)
    return app


def _cut(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def _read(loop: LoopThread, url: str, path: str) -> tuple[list[list[Any]], str]:
    """The batches read from ``path``, and the detail of the error that ended them."""

    async def go() -> tuple[list[list[Any]], str]:
        batches: list[list[Any]] = []
        async with aiohttp.ClientSession() as session:
            t = Transport(url, session, timeouts=Timeouts(2, 5, 5))
            try:
                async for batch in t.post_event_batches({}, path):
                    batches.append(batch)
            except BackendError as exc:
                return batches, exc.detail
        return batches, ""

    result: tuple[list[list[Any]], str] = loop.call(go)
    return result


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(BODY)])
def test_events_whatever_the_cuts(loop: LoopThread, size: int) -> None:
    no_newline = BODY + b'data: {"last": true}'  # the body ends inside its last line
    url = loop.serve(_engine({"/e": _cut(BODY, size), "/tail": _cut(no_newline, size)}))
    batches, error = _read(loop, url, "/e")
    assert not error and all(batches)
    assert [e for b in batches for e in b] == _reference(BODY) == EVENTS
    batches, _ = _read(loop, url, "/tail")
    assert [e for b in batches for e in b] == [*EVENTS, {"last": True}]


def test_the_events_before_done_or_an_error_all_arrive(loop: LoopThread) -> None:
    good = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in EVENTS)
    url = loop.serve(
        _engine(
            {
                "/done": [good + b'data: [DONE]\n\ndata: {"after": 1}\n\n'],
                "/reported": [good + b'data: {"error": "out of memory"}\n\n' + good],
                "/field": [good + b"error: engine on fire\n\n" + good],
                "/broken": [good + b"data: {not json\n\n"],
            }
        )
    )
    for path, detail in (
        ("/done", ""),
        ("/reported", "out of memory"),
        ("/field", "engine on fire"),
        ("/broken", "/broken: Expecting property name"),
    ):
        batches, error = _read(loop, url, path)
        assert [e for b in batches for e in b] == EVENTS, path
        assert detail in error and bool(error) == bool(detail), (path, error)


def test_a_line_that_never_ends_is_an_error(
    loop: LoopThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "MAX_LINE", 1000)
    url = loop.serve(_engine({"/long": [b"data: " + b"x" * 200] * 10}))
    batches, error = _read(loop, url, "/long")
    assert batches == [] and "longer than 1000 bytes" in error
