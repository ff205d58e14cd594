"""serve closed to other origins (issue 37 §6): a page the user visits can neither reach the
server through DNS rebinding (a foreign ``Host``), nor drive it from its own origin, nor
post a body as a CORS "simple" request (text/plain, a form, no Content-Type); each refusal
in the route's own error shape, counted in the metrics."""

from __future__ import annotations

import http.client
import json
import urllib.parse
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("prometheus_client", reason="the serve extra is not installed")

from helpers.generate_cases import CASE_BY_NAME
from helpers.serve_standin import LoopThread, StandIn

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig
from autoparser.serve.observe import Security, host_name, json_media_type

HI = {"messages": [{"role": "user", "content": "[[k]]"}], "max_tokens": 8}
MESSAGES = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "[[k]]"}]}
JSON = {"Content-Type": "application/json"}


def _serve(loop: LoopThread, **kw: Any) -> str:
    standin = StandIn("llama.cpp")
    standin.add("k", "Hello.")
    config = ServeConfig(
        loop.serve(standin.app()), "llama.cpp", CASE_BY_NAME["hermes"].load(), **kw
    )
    return loop.serve(create_app(config))


@pytest.fixture(scope="module")
def url(loop: LoopThread) -> str:
    return _serve(loop)


def _send(
    url: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer, the request carrying exactly ``headers`` (plus Host
    unless given, and Content-Length): urllib would add a form Content-Type."""
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        names = {name.lower() for name in headers or {}}
        connection.putrequest("GET" if data is None else "POST", path, skip_host="host" in names)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if data is not None:
            connection.putheader("Content-Length", str(len(data)))
        connection.endheaders(data)
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def _metric(url: str, reason: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=60) as answer:
        text = answer.read().decode()
    prefix = f'autoparser_requests_rejected_total{{reason="{reason}"}} '
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1:8000", True),
        ("localhost:8000", True),
        ("LOCALHOST.", True),
        ("app.localhost:1", True),
        ("[::1]:8000", True),
        ("127.3.4.5", True),
        ("[::ffff:127.0.0.1]:8000", True),  # IPv4-mapped loopback (a dual-stack socket)
        ("[::ffff:10.0.0.5]:8000", False),
        ("evil.example.com", False),
        ("evil.example.com:8000", False),
        ("10.0.0.5:8000", False),
        ("localhost.evil.example", False),
    ],
)
def test_host_names_of_a_loopback_server(host: str, ok: bool) -> None:
    assert Security().host_ok(host) is ok


def test_host_names_of_other_bindings() -> None:
    everywhere = Security(bound_host="0.0.0.0")
    assert everywhere.host_ok("10.0.0.5:8000") and everywhere.host_ok("[fe80::1]:80")
    assert not everywhere.host_ok("evil.example.com")
    one = Security(bound_host="10.0.0.5")
    assert one.host_ok("10.0.0.5:8000") and not one.host_ok("10.0.0.6:8000")
    assert one.host_ok("[::ffff:10.0.0.5]:8000")  # the bound address, IPv4-mapped
    named = Security(allowed_hosts=("api.internal",))
    assert named.host_ok("api.internal:443") and not named.host_ok("api.internal.evil")
    assert Security(allowed_hosts=("*",)).host_ok("anything.example")
    assert Security().host_ok(None)  # HTTP/1.0: no browser sends no Host
    assert host_name("[::1]:80") == "::1" and host_name("Example.COM.:80") == "example.com"


@pytest.mark.parametrize(
    ("kind", "ok"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("Application/JSON", True),
        ("application/vnd.api+json", True),
        ("text/plain", False),
        ("text/plain; charset=utf-8", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("application/jsonx", False),
        ("", False),
        (None, False),
    ],
)
def test_json_media_types(kind: str | None, ok: bool) -> None:
    assert json_media_type(kind) is ok


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/chat/completions", HI), ("/v1/responses", {"input": "[[k]]"})],
)
def test_a_foreign_host_is_refused_in_openai_shape(url: str, path: str, body: Any) -> None:
    before = _metric(url, "host")
    status, answer = _send(url, path, body, {**JSON, "Host": "evil.example.com"})
    assert status == 421
    assert "Host" in answer["error"]["message"] and "evil.example.com" in answer["error"]["message"]
    assert answer["error"]["type"] == "invalid_request_error"
    assert _metric(url, "host") == before + 1
    status, _ = _send(url, "/v1/models", None, {"Host": "evil.example.com"})
    assert status == 421


def test_a_foreign_host_is_refused_in_anthropic_shape(url: str) -> None:
    status, answer = _send(url, "/v1/messages", MESSAGES, {**JSON, "Host": "evil.example.com"})
    assert status == 421 and answer["type"] == "error"
    assert "Host" in answer["error"]["message"]


def test_listed_hosts_are_served(loop: LoopThread) -> None:
    url = _serve(loop, allowed_hosts=("api.internal",))
    status, answer = _send(url, "/v1/chat/completions", HI, {**JSON, "Host": "api.internal"})
    assert status == 200 and answer["choices"][0]["message"]["content"] == "Hello."


@pytest.mark.parametrize(
    "kind", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_a_body_not_declared_json_is_refused_with_415(url: str, kind: str | None) -> None:
    headers = {} if kind is None else {"Content-Type": kind}
    status, answer = _send(url, "/v1/chat/completions", HI, headers)
    assert status == 415 and "Content-Type" in answer["error"]["message"]
    status, answer = _send(url, "/v1/messages", MESSAGES, headers)
    assert status == 415 and answer["type"] == "error"
    assert "Content-Type" in answer["error"]["message"]


def test_json_types_are_accepted(url: str) -> None:
    for kind in ("application/json; charset=utf-8", "application/vnd.example+json"):
        status, _ = _send(url, "/v1/chat/completions", HI, {"Content-Type": kind})
        assert status == 200


def test_a_foreign_origin_is_refused_and_the_own_or_listed_served(loop: LoopThread) -> None:
    url = _serve(loop, allowed_origins=("https://app.example",))
    port = url.rsplit(":", 1)[1]
    status, answer = _send(url, "/v1/chat/completions", HI, {**JSON, "Origin": "https://evil.io"})
    assert status == 403 and "Origin" in answer["error"]["message"]
    status, answer = _send(url, "/v1/messages", MESSAGES, {**JSON, "Origin": "null"})
    assert status == 403 and answer["type"] == "error"
    for origin in ("https://app.example", f"http://127.0.0.1:{port}"):
        status, _ = _send(url, "/v1/chat/completions", HI, {**JSON, "Origin": origin})
        assert status == 200, origin
    # a rebinding page's origin names the same host as its Host header, which is foreign
    evil = {**JSON, "Origin": f"http://evil.example.com:{port}", "Host": f"evil.example.com:{port}"}
    status, _ = _send(url, "/v1/chat/completions", HI, evil)
    assert status == 421


def test_any_origin_with_a_star(loop: LoopThread) -> None:
    url = _serve(loop, allowed_origins=("*",))
    status, _ = _send(url, "/v1/chat/completions", HI, {**JSON, "Origin": "https://any.where"})
    assert status == 200
