"""A stand-in completion engine for the serve tests, and a thread that runs aiohttp apps.

The stand-in answers like llama.cpp's server (``GET /props``, ``POST /completion``) or an
OpenAI-style engine (``GET /v1/models``, ``POST /v1/completions``). It replays the output
registered under the key ``[[key]]`` found in the prompt, streamed as SSE in random-sized
chunks, and records every request body it was sent. Only 127.0.0.1, ephemeral ports.

Its tokenizer: one id per code point, and every ``<|...|>`` run one control token, matched
wherever it occurs as a real vocabulary's added tokens are. llama.cpp's flavour gives all
control tokens the id -2 and skips them with ``parse_special: false``; the OpenAI-style
flavours always parse them, as vLLM and SGLang do, each with an id of its own
(``control_id``), and take prompts of ids. ``flavor`` picks what the OpenAI-style engine
offers: ``vllm`` (``/tokenize`` with ``return_token_strs``), ``sglang`` (no token strings;
``/detokenize`` of a list per id, ``skip_special_tokens``), ``tgi`` (``/tokenize`` takes
``inputs``; text prompts only). With ``spm`` the tokenizer is SentencePiece-like, as
llama.cpp's for Llama 2 and Mistral 7B (``add_space_prefix``) and Hugging Face's legacy
Llama tokenizer: a space token (``SPACE``) starts every plain stretch that starts a
tokenized text or follows a control token. ``evaluated`` records the tokens the model was
given for each completion (its prompt as the engine tokenizes it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import threading
import weakref
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

KEY = re.compile(r"\[\[(\w+)\]\]")
SPECIAL = re.compile(r"<\|[a-z_]+\|>")


CONTROL_BASE = 0x110000  # OpenAI-style control-token ids: past every code point
SPACE = ord("▁")  # the space a SentencePiece-like tokenizer puts before a plain stretch
_CONTROLS: dict[str, int] = {}  # control token -> its id, assigned on first sight
_BY_ID: dict[int, str] = {}


def control_id(token: str) -> int:
    """The OpenAI-style stand-in's id of a control token (the same for the whole run)."""
    if token not in _CONTROLS:
        _CONTROLS[token] = CONTROL_BASE + len(_CONTROLS)
        _BY_ID[_CONTROLS[token]] = token
    return _CONTROLS[token]


def is_control(token_id: int) -> bool:
    return token_id >= CONTROL_BASE


def _plain(text: str, spm: bool) -> list[tuple[int, str]]:
    """A plain stretch: one token per character, after a space token when SPM-like."""
    return ([(SPACE, "▁")] if spm and text else []) + [(ord(c), c) for c in text]


def standin_tokens(content: str | list[str | int], special: bool, spm: bool = False) -> list[int]:
    """The stand-in's tokenizer: one id per character (code point); with ``special`` a
    ``<|...|>`` run is one id (-2), as a real vocabulary's control tokens are. Each string
    of a mixed array is tokenized on its own (as llama.cpp does); ``spm``: see the module."""
    ids: list[int] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, int):
            ids.append(part)
            continue
        at = 0
        for m in SPECIAL.finditer(part) if special else ():
            ids.extend(i for i, _ in _plain(part[at : m.start()], spm))
            ids.append(-2)
            at = m.end()
        ids.extend(i for i, _ in _plain(part[at:], spm))
    return ids


def vocab_tokens(text: str, spm: bool = False) -> list[tuple[int, str]]:
    """The OpenAI-style stand-in's tokenizer, as vLLM's: control tokens always parsed, each
    with its own id; every token with its vocabulary string."""
    out: list[tuple[int, str]] = []
    at = 0
    for m in SPECIAL.finditer(text):
        out.extend(_plain(text[at : m.start()], spm))
        out.append((control_id(m.group()), m.group()))
        at = m.end()
    out.extend(_plain(text[at:], spm))
    return out


def as_text(prompt: Any) -> str:
    """A prompt as text: a mixed array's ids (the stand-in's one id per code point) back
    to characters, a llama.cpp control-token id (-2) as ``<ctl>``, an OpenAI-style one as
    its token."""
    if isinstance(prompt, str):
        return prompt
    return "".join(
        p if isinstance(p, str) else _BY_ID[p] if is_control(p) else chr(p) if p >= 0 else "<ctl>"
        for p in prompt
    )


@dataclasses.dataclass
class Reply:
    """What the stand-in generates for one key."""

    text: str
    hit_limit: bool = False
    stop_word: str = ""  # the stop string that ended it (reported as llama.cpp/vLLM do)


class StandIn:
    """A scripted engine. ``mode``: ok | garbage (non-JSON answers) | http500 |
    broken_stream (the stream stops after its first event without a final one) | hang
    (never answers) | stall (one piece, then silence) | down (every route 5xx, /props
    too) | drop_reused (a kept-alive connection's next request is dropped unanswered)."""

    def __init__(self, kind: str = "llama.cpp", props: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.props = props or {}
        self.replies: dict[str, Reply] = {}
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.mode = "ok"
        self.max_chunk = 7
        self.tokenize = True  # False: POST /tokenize is a 404, as on an engine without it
        self.flavor = "vllm"  # the OpenAI-style engine's tokenizer routes: vllm | sglang | tgi
        self.bos = ""  # a control token the OpenAI-style tokenizer adds before a text
        self.spm = False  # a SentencePiece-like tokenizer (a space token per plain stretch)
        self.owner = ""  # the OpenAI-style models' owned_by (vLLM: "vllm", SGLang: "sglang")
        self._prompts: list[Any] = []  # each completion's prompt, as sent
        self.delay = 0.0  # seconds before answering a completion
        self.cancelled = 0  # completions whose client (the server) went away mid-wait
        self.dropped = 0  # reused connections dropped (mode drop_reused)
        self._connections: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.logprobs = True  # False: an engine that ignores logprob requests
        self.running = 0  # completions being answered now
        self.most_running = 0  # the most at once so far
        self.top = 0  # alternatives per token the current completion asked for

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
        # A request of thousands of tools sends megabytes of prompt and grammar; engines
        # take them (aiohttp's default would refuse more than 1 MiB).
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/health", self._health)
        if self.kind == "llama.cpp":
            app.router.add_get("/props", self._props)
            app.router.add_post("/tokenize", self._tokenize)
            app.router.add_post("/completion", self._completion)
        else:
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/completions", self._completion)
            app.router.add_post("/detokenize", self._detokenize)
        app.router.add_post("/tokenize", self._tokenize)
        return app

    async def _health(self, request: web.Request) -> web.Response:
        if self.mode in ("http500", "down"):
            return web.json_response({"error": "engine on fire"}, status=503)
        return web.json_response({"status": "ok"})

    async def _tokenize(self, request: web.Request) -> web.Response:
        """llama.cpp's ``/tokenize`` (``content``: a string or a mixed array), vLLM's or
        SGLang's (``prompt``: a string -> ``tokens``, ``count``; vLLM's ``token_strs``
        with ``return_token_strs``), TGI's (``inputs``); 404 when ``tokenize`` is off."""
        body = await request.json()
        self.received.append((request.path, body))
        if self.mode == "drop_reused" and request.transport is not None:
            # a connection used here is kept alive: its next completion is "reused"
            seen = self._connections.get(request.transport, 0)
            self._connections[request.transport] = seen + 1
        if not self.tokenize:
            raise web.HTTPNotFound()
        if self.kind == "llama.cpp":
            special = body.get("parse_special", True)
            return web.json_response({"tokens": standin_tokens(body["content"], special, self.spm)})
        if self.flavor == "tgi":
            if not isinstance(body.get("inputs"), str):
                return web.json_response({"error": "missing field `inputs`"}, status=422)
            ids = [{"id": i, "text": t} for i, t in vocab_tokens(body["inputs"], self.spm)]
            return web.json_response(ids)
        if not isinstance(body.get("prompt"), str):
            return web.json_response({"error": "prompt must be a string"}, status=400)
        pairs = vocab_tokens(body["prompt"], self.spm)
        if body.get("add_special_tokens", True) and self.bos:
            pairs.insert(0, (control_id(self.bos), self.bos))
        answer: dict[str, Any] = {"count": len(pairs), "tokens": [i for i, _ in pairs]}
        if self.flavor == "vllm":
            strings = [t for _, t in pairs] if body.get("return_token_strs") else None
            answer["token_strs"] = strings
        return web.json_response(answer)

    async def _detokenize(self, request: web.Request) -> web.Response:
        """vLLM's ``/detokenize`` (``tokens``: ids -> ``prompt``) or SGLang's (also a list
        of id lists -> a list of texts; control tokens dropped unless
        ``skip_special_tokens`` is false)."""
        body = await request.json()
        self.received.append((request.path, body))
        tokens = body.get("tokens")
        if self.flavor == "tgi" or not isinstance(tokens, list):
            raise web.HTTPNotFound()

        def text(ids: Any, skip: bool) -> str | None:
            if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
                return None
            return "".join("" if skip and is_control(i) else as_text([i]) for i in ids)

        if self.flavor == "vllm":
            whole = text(tokens, False)
            if whole is None:
                return web.json_response({"error": "tokens must be ids"}, status=400)
            return web.json_response({"prompt": whole})
        skip = body.get("skip_special_tokens", True)
        if tokens and isinstance(tokens[0], list):
            texts = [text(t, skip) for t in tokens]
            if any(t is None for t in texts):
                return web.json_response({"error": "tokens must be ids"}, status=400)
            return web.json_response({"text": texts})
        return web.json_response({"text": text(tokens, skip)})

    @property
    def evaluated(self) -> list[list[int]]:
        """Each completion's prompt as the engine tokenized it (worked out when asked: a
        benchmark's prompts of a thousand tools would pay a per-character tokenizer)."""
        return [self._evaluated(prompt) for prompt in self._prompts]

    def _evaluated(self, prompt: Any) -> list[int]:
        """A completion's prompt as the engine tokenizes it: llama.cpp's text or mixed array
        (special tokens parsed in its strings); an OpenAI-style engine's text (its BOS added)
        or ids."""
        if self.kind == "llama.cpp":
            return standin_tokens(prompt, True, self.spm)
        if isinstance(prompt, list):
            return list(prompt)
        bos = [control_id(self.bos)] if self.bos else []
        return bos + [i for i, _ in vocab_tokens(prompt, self.spm)]

    async def _props(self, request: web.Request) -> web.Response:
        if self.mode == "down":
            return web.json_response({"error": "loading model"}, status=503)
        return web.json_response({"default_generation_settings": {}, **self.props})

    async def _models(self, request: web.Request) -> web.Response:
        card = {"id": "standin-model", **({"owned_by": self.owner} if self.owner else {})}
        return web.json_response({"object": "list", "data": [card]})

    def _event(
        self, piece: str, last: bool, reply: Reply, prompt: str, n: int, probs: Any = None
    ) -> Any:
        """One answer event; ``probs``: the pieces whose token logprobs it carries
        (a list of texts, each piece one token), when they were asked."""
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n}
        if self.kind == "llama.cpp":
            event: dict[str, Any] = {"content": piece, "stop": last}
            if probs:
                event["completion_probabilities"] = [llama_probs(p, self.top) for p in probs]
            if last:
                event["stop_type"] = "limit" if reply.hit_limit else "eos"
                if reply.stop_word:
                    event["stop_type"], event["stopping_word"] = "word", reply.stop_word
                event["tokens_evaluated"] = usage["prompt_tokens"]
                event["tokens_predicted"] = n
            return event
        reason = ("length" if reply.hit_limit else "stop") if last else None
        choice = {"index": 0, "text": piece, "finish_reason": reason}
        if probs is not None:
            choice["logprobs"] = completion_probs(probs, self.top)
        if last and reply.stop_word:  # SGLang names the stop string matched_stop
            choice["matched_stop" if self.owner == "sglang" else "stop_reason"] = reply.stop_word
        return {"choices": [choice]}

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        if self.mode == "drop_reused":
            # An engine that cannot honour keep-alive: a connection's second request is
            # dropped unanswered (what llama.cpp's server does to connections it closed).
            # Counted per connection object, weakly held: an id() of a closed connection
            # can come back for a new one, which would then be dropped as "reused".
            transport = request.transport
            seen = 0 if transport is None else self._connections.get(transport, 0)
            if transport is not None:
                self._connections[transport] = seen + 1
            if seen and transport is not None:
                self.dropped += 1
                transport.close()
                await asyncio.sleep(1)
                raise ConnectionResetError
        body = await request.json()
        self.received.append((request.path, body))
        if self.mode in ("http500", "down"):
            return web.json_response({"error": "engine on fire"}, status=500)
        if self.kind != "llama.cpp" and isinstance(body.get("prompt"), list):
            ids = body["prompt"]  # vLLM's and SGLang's prompt of ids: ids >= 0 only
            if self.flavor == "tgi" or not all(isinstance(i, int) and i >= 0 for i in ids):
                return web.json_response({"error": "prompt must be a string"}, status=400)
        if isinstance(body["prompt"], dict):  # llama.cpp's prompt with media
            media = body["prompt"].get("multimodal_data", [])
            marker = self.props.get("media_marker", "<__media__>")
            text = body["prompt"]["prompt_string"]
            if not self.props.get("modalities", {}).get("vision") or text.count(marker) != len(
                media
            ):
                return web.json_response({"error": "media markers do not match"}, status=400)
            body = {**body, "prompt": text}
        self._prompts.append(body["prompt"])
        if self.mode == "hang":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            return await self._answer(request, body)
        finally:
            self.running -= 1

    async def _answer(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        prompt = as_text(body["prompt"])
        found = KEY.findall(prompt)
        reply = self._reply(prompt)
        chunks = self._chunks(reply.text, found[-1] if found else "")
        asked = body.get("n_probs" if self.kind == "llama.cpp" else "logprobs")
        scored = self.logprobs and isinstance(asked, int) and not isinstance(asked, bool)
        self.top = asked if scored else 0
        if not body.get("stream"):
            if self.mode == "garbage":
                return web.Response(text="<html>not json</html>")
            probs = chunks if scored else None
            event = self._event(reply.text, True, reply, prompt, len(chunks), probs)
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
            probs = [piece] if scored and piece else None
            data = json.dumps(self._event(piece, last, reply, prompt, len(chunks), probs))
            await response.write(f"data: {data}\n\n".encode())
            if self.mode == "broken_stream":
                return response
            if self.mode == "stall":
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    self.cancelled += 1
                    raise
        if self.kind == "openai":
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(chunks)}
                data = json.dumps({"choices": [], "usage": usage})
                await response.write(f"data: {data}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
        return response


def piece_logprob(piece: str) -> float:
    """The stand-in's logprob of a piece (one token): computed from it, so a test can tell
    which piece a logprob came with."""
    return -len(piece) / 8


def alternatives(piece: str, top: int) -> list[tuple[str, float]]:
    """The stand-in's ``top`` most likely tokens where ``piece`` was generated: the piece
    itself, then made-up ones, less likely each."""
    lp = piece_logprob(piece)
    return [(piece, lp)] + [(f"<alt{j}>", lp - j) for j in range(1, top)]


def llama_probs(piece: str, top: int) -> dict[str, Any]:
    """One token's entry of llama.cpp's ``completion_probabilities``."""

    def entry(token: str, lp: float) -> dict[str, Any]:
        return {"id": 7, "token": token, "bytes": list(token.encode()), "logprob": lp}

    return {
        **entry(piece, piece_logprob(piece)),
        "top_logprobs": [entry(t, lp) for t, lp in alternatives(piece, top)],
    }


def completion_probs(pieces: list[str], top: int) -> dict[str, Any]:
    """The completions API's ``logprobs`` of ``pieces`` (vLLM's: the chosen token among
    the alternatives, ``top`` of them besides)."""
    offsets = [sum(len(p) for p in pieces[:i]) for i in range(len(pieces))]
    return {
        "tokens": pieces,
        "token_logprobs": [piece_logprob(p) for p in pieces],
        "top_logprobs": [dict(alternatives(p, top + 1)) for p in pieces],
        "text_offset": offsets,
    }


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
            # As ``autoparser serve`` runs: a client that leaves cancels its handler.
            runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
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


class Answers:
    """A ``Look`` (what engine detection asks) over fixed ``GET`` answers: path -> (status,
    JSON body); any other path is a 404. ``asked`` lists the paths asked, in order."""

    url = "http://engine"

    def __init__(self, answers: dict[str, tuple[int, Any]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def get(self, path: str) -> tuple[int, Any]:
        self.asked.append(path)
        return self.answers.get(path, (404, None))


class NoChannel:
    """A dialect's channel for checks that never reach the engine (bodies, readers)."""

    url = "http://127.0.0.1:1"

    async def post_json(self, body: Any, path: str) -> object:
        raise AssertionError(f"no request expected ({path})")


def serve_in_front(
    loop: LoopThread, standin: StandIn, **config: Any
) -> tuple[str, Callable[[str, Any], tuple[int, Any]]]:
    """``autoparser serve`` in front of ``standin``: its URL, and a JSON request function
    (path, body or None for a GET -> status, answer)."""
    import urllib.error
    import urllib.request

    from autoparser.serve import create_app
    from autoparser.serve.app import ServeConfig

    url = loop.serve(create_app(ServeConfig(loop.serve(standin.app()), **config)))

    def ask(path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as f:
                return f.status, json.loads(f.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    return url, ask
