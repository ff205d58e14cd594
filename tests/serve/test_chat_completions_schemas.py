"""What a chat request asks for that the grammar or the engine path cannot do: schema
keywords loosened (or refused with ``strict_schemas``, naming the JSON pointer intact), and
images and documents replaced by a placeholder (or refused with ``media="reject"``); each
with a log line and a metric."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.generate_cases import CASE_BY_NAME
from helpers.paths import TESTS_DIR
from helpers.serve_standin import LoopThread, StandIn, as_text

from autoparser import RequestOptions
from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig
from autoparser.serve.chat_completions import loosen_options, parse_request
from autoparser.serve.limits import InvalidRequest, Limits
from autoparser.serve.media import placeholder_text

CLAUDE = json.loads((TESTS_DIR / "data/agent_shapes/claude_code_messages.json").read_text())
# Claude Code's tools, as chat-completions tools.
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": t["name"],
            "description": t["description"],
            "parameters": t["input_schema"],
        },
    }
    for t in CLAUDE["tools"]
]
HI = [{"role": "user", "content": "[[k]] hi"}]
PNG = "data:image/png;base64,iVBORw0KGgo="


class Served:
    def __init__(self, loop: LoopThread, **config: Any) -> None:
        self.standin = StandIn()
        self.standin.add("k", "Hello.")
        backend = loop.serve(self.standin.app())
        template = CASE_BY_NAME["hermes"].load()
        self.url = loop.serve(create_app(ServeConfig(backend, template=template, **config)))

    def post(self, body: dict[str, Any], path: str = "/v1/chat/completions") -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as f:
                return f.status, json.loads(f.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as f:
            return str(f.read().decode())


def _sample(metrics: str, name: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


# ------------------------------------------------------------------------- units
def test_claude_code_tools_are_loosened_where_the_grammar_cannot_follow() -> None:
    options = RequestOptions((), tools=tuple(TOOLS))
    out, found = loosen_options(options, Limits(), strict=False)
    assert [(d.what, d.label, d.detail) for d in found] == [
        (
            "schema",
            "maxLength",
            "tools[5].function.parameters: #/properties/content/maxLength: "
            "maxLength 524288 is above the limit: left unbounded",
        ),
        (
            "schema",
            "propertyNames",
            "tools[8].function.parameters: #/properties/labels/propertyNames: "
            "propertyNames is always true: dropped",
        ),
        (
            "schema",
            "propertyNames",
            "tools[9].function.parameters: #/properties/env/propertyNames: "
            "propertyNames is always true: dropped",
        ),
    ]
    tools = out.tools
    assert tools is not None
    assert tools[5]["function"]["parameters"]["properties"]["content"] == {"type": "string"}
    assert tools[0] == TOOLS[0]  # untouched where nothing was loosened
    assert TOOLS[5]["function"]["parameters"]["properties"]["content"]["maxLength"] == 524288


def test_strict_schemas_refuse_naming_the_pointer() -> None:
    with pytest.raises(InvalidRequest) as info:
        loosen_options(RequestOptions((), tools=tuple(TOOLS)), Limits(), strict=True)
    assert info.value.param == "tools[5].function.parameters"
    assert str(info.value) == (
        "tools[5].function.parameters: maxLength 524288 is above the limit at "
        "#/properties/content/maxLength"
    )


def test_a_response_format_schema_is_loosened_too() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 10**7}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    out, found = loosen_options(RequestOptions((), response_format=fmt), Limits(), strict=False)
    assert [d.label for d in found] == ["maxLength"]
    loose = out.response_format
    assert isinstance(loose, dict)
    assert loose["json_schema"]["schema"]["properties"]["s"] == {"type": "string"}


@pytest.mark.parametrize("typed", [False, True])
def test_media_parts_become_placeholders(typed: bool) -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}},
    ]
    req = parse_request({"messages": [{"role": "user", "content": content}]}, typed)
    texts = ["What is this?", placeholder_text("image"), placeholder_text("document")]
    expected = [{"type": "text", "text": t} for t in texts] if typed else "\n".join(texts)
    assert req.messages[0]["content"] == expected
    assert [(d.what, d.detail) for d in req.degraded] == [
        ("media", "messages[0].content[1]: image replaced by a text placeholder"),
        ("media", "messages[0].content[2]: document replaced by a text placeholder"),
    ]
    with pytest.raises(InvalidRequest) as info:
        parse_request({"messages": [{"role": "user", "content": content}]}, typed, "reject")
    assert info.value.param == "messages[0].content[1]"


# ------------------------------------------------------------------------- the server
@pytest.fixture(scope="module")
def served(loop: LoopThread) -> Served:
    return Served(loop)


def test_claude_code_tools_are_served_with_a_log_line_and_a_metric(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    before = served.metrics()
    with caplog.at_level(logging.WARNING, logger="autoparser.serve"):
        status, answer = served.post({"messages": HI, "tools": TOOLS})
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"] == "Hello."
    grammar = served.standin.received[-1][1]["grammar"]
    assert "524288" not in grammar
    lines = [r.getMessage() for r in caplog.records if "#/properties/" in r.getMessage()]
    assert len(lines) == 3 and "left unbounded" in lines[0]
    after = served.metrics()
    for keyword, more in (("maxLength", 1), ("propertyNames", 2)):
        name = f'autoparser_schema_degraded_total{{keyword="{keyword}"}}'
        assert _sample(after, name) - _sample(before, name) == more


def test_strict_schemas_answer_400_with_the_pointer_intact(loop: LoopThread) -> None:
    served = Served(loop, strict_schemas=True)
    status, answer = served.post({"messages": HI, "tools": TOOLS})
    assert status == 400
    error = answer["error"]
    assert error["param"] == "tools[5].function.parameters"
    assert "#/properties/content/maxLength" in error["message"]
    assert not served.standin.received
    # A problem the library finds: its pointer kept, and no library-only advice.
    broken = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    tool = {"type": "function", "function": {"name": "f", "parameters": broken}}
    status, answer = served.post({"messages": HI, "tools": [tool]})
    assert status == 400
    assert "#/properties/a/$ref" in answer["error"]["message"]
    assert "lenient" not in answer["error"]["message"]


def test_an_image_reaches_the_model_as_a_placeholder(served: Served) -> None:
    before = served.metrics()
    content = [{"type": "text", "text": "[[k]] look"}, {"type": "image_url", "image_url": PNG}]
    status, answer = served.post({"messages": [{"role": "user", "content": content}]})
    assert status == 200, answer
    assert placeholder_text("image") in as_text(served.standin.received[-1][1]["prompt"])
    name = 'autoparser_degraded_total{what="media"}'
    assert _sample(served.metrics(), name) - _sample(before, name) == 1


def test_media_reject_is_a_400_naming_the_part(loop: LoopThread) -> None:
    served = Served(loop, media="reject")
    content = [{"type": "text", "text": "[[k]] look"}, {"type": "image_url", "image_url": PNG}]
    status, answer = served.post({"messages": [{"role": "user", "content": content}]})
    assert status == 400 and answer["error"]["param"] == "messages[0].content[1]"
