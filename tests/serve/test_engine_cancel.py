"""A request's CPU work stops when its client leaves (issue 22 §2), against the stand-in:
building the parser and grammar for many tools runs in a worker thread, and the client's
disconnect sets the request's cancellation token, so the build stops at its next tool.
Shown by counting the tools the build reached (a hook), never by timing."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("prometheus_client", reason="the serve extra is not installed")

from helpers.generate_cases import CASE_BY_NAME
from helpers.many_tools import many_tools
from helpers.serve_standin import LoopThread, StandIn

from autoparser import Cancelled, params
from autoparser.cancel import current
from autoparser.generate import families
from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig
from autoparser.serve.limits import Limits

TOOLS = 500  # within the default limit
STOP_AT = 10  # the tool whose turn in the build waits for the client to leave
_FRESH = itertools.count()  # tool names never built before in this process (no cache hit)


def test_client_leaving_stops_the_grammar_build(
    loop: LoopThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin = StandIn("llama.cpp")
    standin.add("k", "Hello.")
    config = ServeConfig(
        loop.serve(standin.app()), backend_kind="llama.cpp", template=CASE_BY_NAME["hermes"].load()
    )
    url = urlsplit(loop.serve(create_app(config)))

    built: list[str] = []
    waiting = threading.Event()  # the build has reached tool STOP_AT
    finished = threading.Event()  # the build has returned or raised
    outcome: list[BaseException | None] = []
    real_call, real_build = families.call_member, params._build

    def counting_call(ctx: Any, context: Any, tool: Any, build: Any) -> Any:
        built.append(tool.name)  # the grammar's call of each tool in turn
        token = current()
        if len(built) == STOP_AT and token is not None:
            waiting.set()
            token.wait(60)  # until serve cancels the request (bounded, never reached)
        elif len(built) == STOP_AT:
            waiting.set()
        return real_call(ctx, context, tool, build)

    def watched_build(*args: Any, **kwargs: Any) -> Any:
        try:
            result = real_build(*args, **kwargs)
        except BaseException as exc:
            outcome.append(exc)
            raise
        else:
            outcome.append(None)
            return result
        finally:
            finished.set()

    monkeypatch.setattr(families, "call_member", counting_call)
    monkeypatch.setattr(params, "_build", watched_build)

    tools = many_tools(TOOLS, f"leave{next(_FRESH)}")
    body = json.dumps({"messages": [{"role": "user", "content": "[[k]]"}], "tools": tools}).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((url.hostname, url.port)) as client:
        client.sendall(head + body)
        assert waiting.wait(60), "the build never started"
    # The client has gone: the server cancels the request, and the build stops.
    assert finished.wait(60), "the build never ended"
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)
    assert len(built) == STOP_AT  # not one tool more (it would reach all TOOLS otherwise)
    assert standin.received == []  # nothing reached the engine


def test_a_build_past_its_cpu_budget_is_a_413_naming_tools(loop: LoopThread) -> None:
    """``--prepare-timeout`` bounds the CPU time of the build (issue 35), not wall time: past
    it the request is refused as too large, and the engine is never asked."""
    standin = StandIn("llama.cpp")
    standin.add("k", "Hello.")
    config = ServeConfig(
        loop.serve(standin.app()),
        backend_kind="llama.cpp",
        template=CASE_BY_NAME["hermes"].load(),
        limits=Limits(prepare_timeout=0.001),
    )
    url = loop.serve(create_app(config))
    tools = many_tools(TOOLS, f"budget{next(_FRESH)}")
    body = json.dumps({"messages": [{"role": "user", "content": "[[k]]"}], "tools": tools})
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        body.encode(),
        {"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=120)
    assert info.value.code == 413
    error = json.loads(info.value.read())["error"]
    assert error["param"] == "tools"
    assert "0.001 s of CPU time" in error["message"]
    assert standin.received == []
