"""A stand-in completion engine for the serve tests, and a thread that runs aiohttp apps.

The stand-in answers like llama.cpp's server (``GET /props``, ``POST /completion``) or an
OpenAI-style engine (``GET /v1/models``, ``POST /v1/completions``). It replays the output
registered under the key ``[[key]]`` found in the prompt, streamed as SSE in random-sized
chunks, and records every request body it was sent. Only 127.0.0.1, ephemeral ports.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import threading
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

KEY = re.compile(r"\[\[(\w+)\]\]")


@dataclasses.dataclass
class Reply:
    """What the stand-in generates for one key."""

    text: str
    hit_limit: bool = False
    stop_word: str = ""  # the stop string that ended it (reported as llama.cpp/vLLM do)


class StandIn:
    """A scripted engine. ``mode``: ok | garbage (non-JSON answers) | http500 |
    broken_stream (the stream stops after its first event without a final one)."""

    def __init__(self, kind: str = "llama.cpp", props: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.props = props or {}
        self.replies: dict[str, Reply] = {}
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.mode = "ok"
        self.max_chunk = 7
        self.tokenize = True  # False: POST /tokenize is a 404, as on an engine without it

    def add(self, key: str, text: str, hit_limit: bool = False, stop_word: str = "") -> str:
        self.replies[key] = Reply(text, hit_limit, stop_word)
        return f"[[{key}]]"

    def _reply(self, prompt: str) -> Reply:
        found = KEY.findall(prompt)
        if not found or found[-1] not in self.replies:
            return Reply("")
        return self.replies[found[-1]]

    def _chunks(self, text: str, key: str) -> list[str]:
        rng = random.Random(zlib.crc32(key.encode()))
        out, at = [], 0
        while at < len(text):
            size = rng.randint(1, self.max_chunk)
            out.append(text[at : at + size])
            at += size
        return out

    def app(self) -> web.Application:
        app = web.Application()
        if self.kind == "llama.cpp":
            app.router.add_get("/props", self._props)
            app.router.add_post("/completion", self._completion)
        else:
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/completions", self._completion)
        app.router.add_post("/tokenize", self._tokenize)
        return app

    async def _props(self, request: web.Request) -> web.Response:
        return web.json_response({"default_generation_settings": {}, **self.props})

    async def _tokenize(self, request: web.Request) -> web.Response:
        """Whitespace-separated words are the stand-in's tokens (as in its usage counts)."""
        body = await request.json()
        self.received.append((request.path, body))
        if not self.tokenize:
            raise web.HTTPNotFound()
        if self.kind == "llama.cpp":
            return web.json_response({"tokens": list(range(len(body["content"].split())))})
        return web.json_response({"count": len(body["prompt"].split())})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "standin-model"}]})

    def _event(self, piece: str, last: bool, reply: Reply, prompt: str, n: int) -> Any:
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n}
        if self.kind == "llama.cpp":
            event: dict[str, Any] = {"content": piece, "stop": last}
            if last:
                event["stop_type"] = "limit" if reply.hit_limit else "eos"
                if reply.stop_word:
                    event["stop_type"], event["stopping_word"] = "word", reply.stop_word
                event["tokens_evaluated"] = usage["prompt_tokens"]
                event["tokens_predicted"] = n
            return event
        reason = ("length" if reply.hit_limit else "stop") if last else None
        choice = {"index": 0, "text": piece, "finish_reason": reason}
        if last and reply.stop_word:
            choice["stop_reason"] = reply.stop_word
        return {"choices": [choice]}

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.received.append((request.path, body))
        if self.mode == "http500":
            return web.json_response({"error": "engine on fire"}, status=500)
        prompt = body["prompt"]
        found = KEY.findall(prompt)
        reply = self._reply(prompt)
        chunks = self._chunks(reply.text, found[-1] if found else "")
        if not body.get("stream"):
            if self.mode == "garbage":
                return web.Response(text="<html>not json</html>")
            event = self._event(reply.text, True, reply, prompt, len(chunks))
            if self.kind == "openai":
                event["usage"] = {
                    "prompt_tokens": len(prompt.split()),
                    "completion_tokens": len(chunks),
                }
            return web.json_response(event)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if self.mode == "garbage":
            await response.write(b"data: {not json\n\n")
            return response
        pieces = chunks or [""]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1 and self.mode != "broken_stream"
            data = json.dumps(self._event(piece, last, reply, prompt, len(chunks)))
            await response.write(f"data: {data}\n\n".encode())
            if self.mode == "broken_stream":
                return response
        if self.kind == "openai":
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(chunks)}
                data = json.dumps({"choices": [], "usage": usage})
                await response.write(f"data: {data}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
        return response


class LoopThread:
    """An asyncio loop in a daemon thread, serving aiohttp apps on 127.0.0.1 ports."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._runners: list[web.AppRunner] = []

    def call(self, make: Callable[[], Awaitable[Any]]) -> Any:
        return asyncio.run_coroutine_threadsafe(make(), self.loop).result(timeout=120)

    def serve(self, app: web.Application) -> str:
        """Start ``app`` on an ephemeral port; its base URL."""

        async def start() -> str:
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self._runners.append(runner)
            host, port = runner.addresses[0][:2]
            return f"http://{host}:{port}"

        return str(self.call(start))

    def close(self) -> None:
        async def stop() -> None:
            for runner in reversed(self._runners):
                await runner.cleanup()

        self.call(stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
