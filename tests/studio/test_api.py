"""The studio's JSON API over HTTP (a real aiohttp server on an ephemeral port): every
endpoint, and bad input answered with a 4xx naming the field and the pane, never a 5xx."""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.paths import REPO_ROOT

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.serve_standin import LoopThread

from autoparser import ChatTemplate
from autoparser.studio import create_app
from autoparser.studio.api import MAX_OUTPUT

EXAMPLES = REPO_ROOT / "src/autoparser/examples"
TEMPLATE = (EXAMPLES / "chatml_tools.jinja").read_text(encoding="utf-8")
TOOLS = json.loads((EXAMPLES / "tools.json").read_text(encoding="utf-8"))
OUTPUT = (EXAMPLES / "model_output.txt").read_text(encoding="utf-8")
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
BASE = {"template": TEMPLATE, "messages": MESSAGES, "tools": TOOLS, "output": OUTPUT}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    loop = LoopThread()
    try:
        yield loop.serve(create_app(token=TOKEN))
    finally:
        loop.close()


TOKEN = "launch-token"
JSON_TOKEN = {"Content-Type": "application/json", "X-Studio-Token": TOKEN}


def _call(
    url: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """The status and answer, the request carrying the launch's token and a JSON
    Content-Type unless ``headers`` says otherwise."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path,
        data=data,
        method="GET" if data is None else "POST",
        headers=JSON_TOKEN if headers is None else headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    payload = json.loads(text) if text[:1] in (b"{", b"[") else text.decode()
    return status, payload


def _error(
    url: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    status, payload = _call(url, path, body, raw, headers)
    assert 400 <= status < 500, (status, payload)
    error: dict[str, Any] = payload["error"]
    text = json.dumps(payload)
    assert "Traceback" not in text and " object at 0x" not in text and "/work/" not in text
    return error


def _params() -> Any:
    return ChatTemplate(TEMPLATE).apply(MESSAGES, tools=TOOLS, call_id_seed=0)


# ------------------------------------------------------------------------- the page


def test_page_and_assets_are_offline(url: str) -> None:
    status, html = _call(url, "/")
    assert status == 200 and "/static/studio.js" in html
    for name in ("studio.js", "studio.css"):
        status, text = _call(url, f"/static/{name}")
        assert status == 200 and text
        assert not re.search(r"https?://", text), f"{name} refers to the network"
    assert not re.search(r"https?://", html)
    status, _ = _call(url, "/static/../app.py")
    assert status == 404
    status, _ = _call(url, "/static/nothing.js")
    assert status == 404


def test_initial_template_and_pasted_config(url: str) -> None:
    status, initial = _call(url, "/api/template")
    assert status == 200 and initial["variants"]["default"] == TEMPLATE
    assert initial["output"] == OUTPUT
    config = {
        "chat_template": [
            {"name": "tool_use", "template": "T{{ messages[0].content }}"},
            {"name": "default", "template": "D{{ messages[0].content }}"},
        ],
        "bos_token": "<s>",
        "eos_token": {"content": "</s>"},
    }
    status, loaded = _call(url, "/api/load", {"text": json.dumps(config), "name": "cfg.json"})
    assert status == 200 and list(loaded["variants"]) == ["default", "tool_use"]
    assert (loaded["bos_token"], loaded["eos_token"]) == ("<s>", "</s>")
    status, jinja = _call(url, "/api/load", {"text": "{{ 'x' }}", "name": "a/b/t.jinja"})
    assert jinja["variants"] == {"default": "{{ 'x' }}"} and jinja["name"] == "t.jinja"


# --------------------------------------------------------------------------- endpoints


def test_analyze(url: str) -> None:
    status, data = _call(url, "/api/analyze", {"template": TEMPLATE})
    assert status == 200
    expected = ChatTemplate(TEMPLATE).analyze().to_dict()
    assert data["analysis"] == expected
    assert data["caps"]["supports_tool_calls"] is True
    fields = {e["field"]: e for e in data["evidence"]}
    call = fields["tools.format.per_call_start"]
    assert call["found"] and call["marker"] in call["with"]
    markers = [m["marker"] for m in data["markers"]]
    assert "<|im_end|>" in markers and all(m.strip() for m in markers)
    assert [len(m) for m in markers] == sorted((len(m) for m in markers), reverse=True)


def test_render_matches_apply_and_transformers(url: str) -> None:
    status, data = _call(url, "/api/render", BASE)
    assert status == 200
    assert data["prompt"] == _params().prompt
    gp = data["generation_prompt"]
    assert gp and data["prompt"][data["generation_prompt_at"] :] == gp
    t = data["transformers"]
    if t["available"]:  # the oracle: transformers' own render of the same request
        assert t["prompt"] == data["without_polyfills"]


def test_parse_message_and_spans(url: str) -> None:
    status, data = _call(url, "/api/parse", BASE)
    assert status == 200
    assert data["message"] == _params().parse(OUTPUT).to_openai()
    assert data["finish_reason"] == "tool_calls" and data["truncated"] is False
    spans = data["spans"]
    assert spans[0]["start"] == 0 and spans[-1]["end"] == len(OUTPUT)
    names = [OUTPUT[s["start"] : s["end"]] for s in spans if s["kind"] == "tool-name"]
    assert names == ["get_weather"]
    cut = OUTPUT[: OUTPUT.index("celsius")]
    status, data = _call(url, "/api/parse", {**BASE, "output": cut, "finish_reason": "length"})
    assert data["truncated"] is True and data["finish_reason"] == "length"
    assert not data["message"].get("tool_calls")
    # The reason, next to the span it is about: the cut call's.
    [finding] = data["findings"]
    assert (finding["kind"], finding["outcome"], finding["detail"]) == ("truncated", "cut", "call")
    marked = [s for s in data["spans"] if s.get("findings")]
    assert marked and all(s["findings"] == [finding["text"]] for s in marked)
    assert marked[-1]["end"] == len(cut) and "truncated" in finding["text"]
    status, data = _call(url, "/api/parse", BASE)
    assert data["findings"] == [] and not any("findings" in s for s in data["spans"])


def test_stream_replay_adds_up_to_parse(url: str) -> None:
    status, data = _call(url, "/api/stream", {**BASE, "chunk_size": 7})
    assert status == 200
    chunks = data["chunks"]
    assert len(chunks) == math.ceil(len(OUTPUT) / 7) + 1 and chunks[-1]["final"]
    assert "".join(c["text"] for c in chunks) == OUTPUT
    deltas = [d for c in chunks for d in c["deltas"]]
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    expected = _params().parse(OUTPUT).to_openai()
    assert reasoning == expected["reasoning_content"]
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    assert data["message"] == expected


def test_grammar_and_llguidance_acceptance(url: str) -> None:
    status, data = _call(url, "/api/grammar", BASE)
    assert status == 200
    params = _params()
    assert data["grammar"] == params.grammar
    assert data["grammar_triggers"] == [t.to_dict() for t in params.grammar_triggers]
    pytest.importorskip("llguidance")
    assert data["accepts"]["checked"] and data["accepts"]["accepted"], data["accepts"]
    wrong = OUTPUT.replace("get_weather", "get_time")  # a tool the request does not have
    status, data = _call(url, "/api/grammar", {**BASE, "output": wrong})
    assert data["accepts"]["checked"] and not data["accepts"]["accepted"]
    assert data["accepts"]["rejected_at"] >= data["accepts"]["from"] >= 0


def test_export_pytest_case_runs(url: str) -> None:
    status, data = _call(url, "/api/export", BASE)
    assert status == 200
    assert data["response_template"]["version"] == 1
    assert "--tool-call-parser" in data["vllm_flags"]
    assert data["llamacpp_completion"]["prompt"] == _params().prompt
    assert data["llamacpp_completion"]["grammar"] == _params().grammar
    namespace: dict[str, Any] = {}
    exec(compile(data["pytest"], "studio_case.py", "exec"), namespace)
    namespace["test_studio_case"]()  # the exported case passes as generated
    assert namespace["EXPECTED"] == _params().parse(OUTPUT).to_openai()


# --------------------------------------------------------------------------- bad input


def test_non_utf8_and_non_json_bodies(url: str) -> None:
    error = _error(url, "/api/parse", raw=b'{"template": "\xff\xfe"}')
    assert error["field"] == "body" and "UTF-8" in error["message"]
    error = _error(url, "/api/render", raw=b"{not json")
    assert error["field"] == "body" and "not JSON" in error["message"]
    error = _error(url, "/api/render", [1, 2])
    assert error["field"] == "body"


def test_template_errors_point_at_the_line(url: str) -> None:
    broken = "{{ bos_token }}\n{% for m in messages %}\n{{ m.content }\n{% endfor %}"
    error = _error(url, "/api/analyze", {"template": broken})
    assert error["type"] == "TemplateError" and error["pane"] == "template"
    assert error["line"] == 3
    raising = "{% if messages %}\n{{ raise_exception('roles must alternate') }}\n{% endif %}"
    error = _error(url, "/api/render", {**BASE, "template": raising})
    assert error["type"] == "TemplateError" and "roles must alternate" in error["message"]
    assert error["line"] == 2
    error = _error(url, "/api/analyze", {"template": "  "})
    assert error["field"] == "template"


def test_five_megabyte_output_is_refused_by_name(url: str) -> None:
    big = "x" * (5 * 1024 * 1024)
    assert len(big) > MAX_OUTPUT
    for path in ("/api/parse", "/api/stream", "/api/grammar"):
        status, payload = _call(url, path, {**BASE, "output": big})
        assert status == 413 and payload["error"]["field"] == "output", payload
        assert payload["error"]["pane"] == "output"
    status, payload = _call(url, "/api/parse", raw=b'{"output": "' + b"x" * (9 << 20) + b'"}')
    assert status == 413 and payload["error"]["field"] == "body"


def test_request_mistakes_name_the_field(url: str) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"messages": "hi"}, "messages", "conversation"),
        ({"messages": []}, "messages", "conversation"),
        ({"tools": {"a": 1}}, "tools", "conversation"),
        ({"template_kwargs": {"not a name": 1}}, "template_kwargs", "conversation"),
        ({"chunk_size": 0}, "chunk_size", "output"),
        ({"chunk_size": "4"}, "chunk_size", "output"),
        ({"finish_reason": "tired"}, "finish_reason", "output"),
        ({"tool_call_deltas": "sometimes"}, "tool_call_deltas", "output"),
        ({"enable_thinking": "yes"}, "enable_thinking", "conversation"),
    ]
    for change, field, pane in cases:
        path = "/api/stream" if field in ("chunk_size", "tool_call_deltas") else "/api/parse"
        error = _error(url, path, {**BASE, **change})
        assert (error["field"], error["pane"]) == (field, pane), (change, error)
    error = _error(
        url,
        "/api/render",
        {**BASE, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
    )
    assert error["type"] == "RequestError" and error["pane"] == "conversation"
    assert "nope" in error["message"]
    odd_schema = [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "if": {}}}}
    ]
    error = _error(url, "/api/grammar", {**BASE, "tools": odd_schema})
    assert error["type"] == "RequestError" and "tools[0]" in error["message"]
    assert "remove or rewrite that keyword" in error["message"]
    assert "lenient" not in error["message"]


def test_runaway_template_stops_at_the_render_limit(url: str) -> None:
    runaway = "{% for i in range(10 ** 9) %}x{% endfor %}{{ messages[0].content }}"
    for path in ("/api/analyze", "/api/render"):
        error = _error(url, path, {**BASE, "template": runaway})
        assert error["type"] == "TemplateLimitError" and error["pane"] == "template"


# ------------------------------------------------------------------------- other origins


def test_the_api_needs_the_launch_token(url: str) -> None:
    for headers in ({"Content-Type": "application/json"}, {**JSON_TOKEN, "X-Studio-Token": "x"}):
        error = _error(url, "/api/render", BASE, headers=headers)
        assert error["field"] == "X-Studio-Token"
        status, payload = _call(url, "/api/template", headers=headers)
        assert status == 403 and payload["error"]["field"] == "X-Studio-Token"
    status, html = _call(url, "/", headers={})  # the page itself holds nothing of the user's
    assert status == 200 and "/static/studio.js" in html


@pytest.mark.parametrize("kind", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_not_declared_json_is_refused(url: str, kind: str | None) -> None:
    headers = {"X-Studio-Token": TOKEN} | ({} if kind is None else {"Content-Type": kind})
    request = urllib.request.Request(
        url + "/api/render", data=json.dumps(BASE).encode(), headers=headers
    )
    if kind is None:  # urllib would add a form type
        request.add_unredirected_header("Content-Type", "")
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=60)
    assert raised.value.code == 415
    assert json.loads(raised.value.read())["error"]["field"] == "Content-Type"


def test_a_foreign_host_or_origin_is_refused(url: str) -> None:
    error = _error(url, "/api/template", headers={"X-Studio-Token": TOKEN, "Host": "evil.io"})
    assert error["field"] == "Host"
    status, _ = _call(url, "/", headers={"Host": "evil.io:80"})
    assert status == 421
    port = url.rsplit(":", 1)[1]
    error = _error(url, "/api/render", BASE, headers={**JSON_TOKEN, "Origin": "http://evil.io"})
    assert error["field"] == "Origin"
    # The studio's own name and port under another scheme is another origin.
    for other in (f"https://127.0.0.1:{port}", "null", f"127.0.0.1:{port}"):
        error = _error(url, "/api/render", BASE, headers={**JSON_TOKEN, "Origin": other})
        assert error["field"] == "Origin", other
    own = {**JSON_TOKEN, "Origin": f"http://127.0.0.1:{port}"}
    status, _ = _call(url, "/api/render", BASE, headers=own)
    assert status == 200
