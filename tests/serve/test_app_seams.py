"""The operator's seams of ``autoparser serve`` (issue 37 §3): a port clash ends the
process, a bad ``--backend`` is refused at start, a request the given template refuses is a
400 before the engine is known, and ``/health`` answers whatever the engine does."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("prometheus_client", reason="the serve extra is not installed")

from aiohttp import web
from helpers.generate_cases import CASE_BY_NAME, TEMPLATES
from helpers.processes import cli_env, free_port, serve_command
from helpers.serve_standin import LoopThread, StandIn

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig
from autoparser.serve.limits import Limits

HI = [{"role": "user", "content": "hi"}]
# Generous: only a server that never waits on a stalled engine answers within it (the
# engine's connect timeout below is far longer).
ANSWER_WITHIN = 10.0
SLOW_ENGINE = Limits(connect_timeout=300.0)


def _request(url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=ANSWER_WITHIN) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def silent_engine() -> Iterator[str]:
    """An engine that accepts connections and never answers (a listening socket nobody
    reads)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _stalled_engine(loop: LoopThread) -> str:
    """An engine whose every route hangs (a model still loading behind a stuck /props)."""

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(3600)
        return web.Response()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    return loop.serve(app)


def _dead_engine() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


# ------------------------------------------------------------------------- the process


@pytest.mark.parametrize("engine", ["down", "silent"])
def test_a_port_clash_ends_the_process(engine: str, silent_engine: str) -> None:
    """Whatever the background engine probe is doing, the bind failure ends serve with a
    non-zero status and one error line (it used to wait forever on the probe)."""
    backend = _dead_engine() if engine == "down" else silent_engine
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        cmd = serve_command(backend, "--port", str(port))
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=cli_env())
    assert result.returncode != 0
    assert "address already in use" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "backend", ["notaurl", "ftp://host:21", "http://", "127.0.0.1:8080", "http://h:port"]
)
def test_a_backend_that_is_no_url_is_refused_at_start(backend: str) -> None:
    with pytest.raises(ValueError, match="--backend"):
        ServeConfig(backend)
    cmd = serve_command(backend, "--port", str(free_port()))
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=cli_env())
    assert result.returncode == 2
    assert result.stderr.startswith("autoparser: error: --backend")
    assert "Traceback" not in result.stderr


def test_backend_urls_accepted() -> None:
    for url in ("http://127.0.0.1:8080", "https://engine.internal/v1", "http://[::1]:80"):
        assert ServeConfig(url).backend_url == url


# ------------------------------------------------------------------------- before the engine


def test_a_bad_request_is_a_400_before_the_engine_is_known(loop: LoopThread) -> None:
    """With --template the request can be checked at once: a client's mistake is a 400
    naming the field, not the 503 of an engine still unknown; a good request is the 503."""
    template = str(TEMPLATES / CASE_BY_NAME["hermes"].template)
    config = ServeConfig(_dead_engine(), "auto", template)  # auto: the engine must answer
    url = loop.serve(create_app(config)) + "/v1/chat/completions"
    for body, field in (
        ({"messages": HI, "temperature": 9}, "temperature"),
        ({"messages": [{"role": "user"}]}, "messages"),
        ({"messages": HI, "tools": [{"type": "function"}]}, "tools"),
    ):
        status, answer = _request(url, body)
        assert status == 400, (body, answer)
        assert (answer["error"]["param"] or "").startswith(field), answer
    status, answer = _request(url, {"messages": HI})
    assert status == 503 and answer["error"]["type"] == "server_unavailable"


# ------------------------------------------------------------------------- /health


def test_health_answers_while_the_engine_never_does(loop: LoopThread, silent_engine: str) -> None:
    url = loop.serve(create_app(ServeConfig(silent_engine, limits=SLOW_ENGINE)))
    for _ in range(3):  # the first probe still in flight: each answer is the last known
        status, answer = _request(url + "/health")
        assert status == 503 and answer["reason"]
        status, answer = _request(url + "/ready")
        assert status == 503


def test_health_answers_while_the_engine_stalls(loop: LoopThread) -> None:
    hermes = CASE_BY_NAME["hermes"].load()
    for template in (None, hermes):
        config = ServeConfig(_stalled_engine(loop), "llama.cpp", template, limits=SLOW_ENGINE)
        url = loop.serve(create_app(config))
        for _ in range(3):
            status, answer = _request(url + "/health")
            assert status == 503 and "not answered" in answer["reason"]


# ------------------------------------------------------------------------- client mistakes


def test_a_lone_surrogate_is_the_clients_400_not_the_engines_502(loop: LoopThread) -> None:
    standin = StandIn("llama.cpp")
    config = ServeConfig(loop.serve(standin.app()), "llama.cpp", CASE_BY_NAME["hermes"].load())
    url = loop.serve(create_app(config))
    raw = b'{"role": "user", "content": "bad \\ud800 text"}'
    for path, body in (
        ("/v1/chat/completions", b'{"messages": [' + raw + b"]}"),
        ("/v1/messages", b'{"model": "m", "max_tokens": 4, "messages": [' + raw + b"]}"),
    ):
        status, answer = _request(url + path, raw=body)
        assert status == 400, answer
        assert "messages[0].content" in answer["error"]["message"]
    assert not standin.received


def test_a_wrong_method_names_the_full_path(loop: LoopThread) -> None:
    url = loop.serve(create_app(ServeConfig(_dead_engine(), "llama.cpp", None)))
    status, answer = _request(url + "/v1/chat/completions")
    assert status == 405
    assert answer["error"]["message"].startswith("GET /v1/chat/completions: ")


def test_health_turns_503_when_a_known_engine_stops_answering(loop: LoopThread) -> None:
    """The engine answered, then hangs: the background look (bounded by the connect
    timeout) turns /health to 503 with the reason, no client request needed; each answer
    meanwhile is immediate."""
    hung = asyncio.Event()

    async def health(request: web.Request) -> web.Response:
        if hung.is_set():
            await asyncio.sleep(3600)
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get("/health", health)
    engine = loop.serve(app)
    config = ServeConfig(
        engine, "llama.cpp", CASE_BY_NAME["hermes"].load(), limits=Limits(connect_timeout=0.5)
    )
    url = loop.serve(create_app(config)) + "/health"
    _until(lambda: _request(url)[0] == 200)
    loop.call(_set_later(hung))
    _until(lambda: _request(url)[0] == 503)
    assert "did not answer" in _request(url)[1]["reason"]


def _set_later(event: asyncio.Event) -> Any:
    async def set_it() -> None:
        event.set()

    return set_it


def _until(condition: Any) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)
