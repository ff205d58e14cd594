"""Images sent to an engine that takes them (``--media auto``), else placeholders: the rules
(``media.py``), llama.cpp's ``/props`` and ``/completion`` shapes, and serve in front of the
llama.cpp stand-in reporting ``modalities`` (chat completions, Anthropic Messages and
Responses, the captured Claude Code and Codex bodies with images).

No real llama-server test: sending an image needs a vision model and its multimodal
projector (mmproj GGUF), which cannot be downloaded or built here (no network but the
package registries). The wire shapes checked here are the pinned llama.cpp server's
(``tools/server/server-common.cpp``: ``prompt_string`` and ``multimodal_data``;
``server-context.cpp``: ``/props`` ``modalities`` and ``media_marker``)."""

from __future__ import annotations

import base64
import json
import logging
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.agent_clis import FIXTURES, ScriptedEngine, load_fixture, qwen3_template
from helpers.generate_cases import CASE_BY_NAME
from helpers.serve_standin import LoopThread, NoChannel, StandIn

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig
from autoparser.serve.chat_completions import parse_request
from autoparser.serve.engines.base import Generation, MediaSupport
from autoparser.serve.engines.llama_cpp import DEFAULT_MEDIA_MARKER, LlamaCpp, media_support
from autoparser.serve.limits import Degradation, InvalidRequest
from autoparser.serve.media import MediaRoute, base64_image, placeholder_text

MARKER = "<__media_t3st__>"
VISION = MediaSupport(MARKER, vision=True)
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n pixel").decode()
PNG = f"data:image/png;base64,{PIXEL}"
OTHER = base64.b64encode(b"\x89PNG\r\n\x1a\n other").decode()


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


# ------------------------------------------------------------------------- the rules
def test_a_base64_data_url_gives_its_data() -> None:
    assert base64_image(PNG) == (PIXEL, "")
    wrapped = f"data:image/png;base64,{PIXEL[:8]}\n{PIXEL[8:]}"
    assert base64_image(wrapped) == (PIXEL, "")  # the engine's decoder would stop at \n


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://example.com/cat.png", "cannot be fetched"),
        ("data:image/png,rawbytes", "not a base64 data: URL"),
        ("data:application/pdf;base64,JVBERi0=", "application/pdf data is not an image"),
        ("data:image/png;base64,@@@@", "not valid base64"),
        ("data:image/png;base64,", "not valid base64"),
    ],
)
def test_what_cannot_be_sent_says_why(url: str, why: str) -> None:
    data, reason = base64_image(url)
    assert data == ""
    assert why in reason


def test_an_http_url_is_named_in_the_reason() -> None:
    assert "https://example.com/cat.png" in base64_image("https://example.com/cat.png")[1]


def test_auto_with_vision_gives_the_marker_and_keeps_the_images_in_order() -> None:
    route = MediaRoute("auto", VISION)
    found: list[Degradation] = []
    assert route.text(image(PNG), "a", found) == MARKER
    assert route.text(image(f"data:image/jpeg;base64,{OTHER}"), "b", found) == MARKER
    assert route.images == [PIXEL, OTHER]
    assert found == []
    assert route.placed(f"x{MARKER}y{MARKER}z")
    assert not route.placed(f"x{MARKER}y")
    assert not route.placed(f"{MARKER}{MARKER}{MARKER}")


@pytest.mark.parametrize(
    ("policy", "engine", "part", "why"),
    [
        ("auto", None, image(PNG), "the engine takes no images"),
        ("auto", MediaSupport(MARKER), image(PNG), "the engine reports no vision"),
        ("auto", VISION, image("http://x/y.png"), "cannot be fetched"),
        ("auto", VISION, {"type": "file", "file": {}}, "documents are not sent"),
        ("auto", VISION, {"type": "input_audio", "input_audio": {}}, "audio is not sent"),
        ("placeholder", VISION, image(PNG), ""),
    ],
)
def test_otherwise_a_placeholder_and_a_degradation(
    policy: str, engine: MediaSupport | None, part: dict[str, Any], why: str
) -> None:
    route = MediaRoute(policy, engine)
    found: list[Degradation] = []
    text = route.text(part, "messages[0].content[1]", found)
    assert text.startswith("[") and "omitted" in text
    assert route.images == []
    assert [d.what for d in found] == ["media"]
    assert found[0].detail.startswith("messages[0].content[1]: ")
    if why:
        assert why in found[0].detail
    else:
        assert found[0].detail.endswith("replaced by a text placeholder")


def test_reject_is_a_400_naming_the_part() -> None:
    with pytest.raises(InvalidRequest) as info:
        MediaRoute("reject", VISION).text(image(PNG), "messages[0].content[1]", [])
    assert info.value.param == "messages[0].content[1]"


@pytest.mark.parametrize("typed", [False, True])
def test_a_chat_request_holds_the_marker_where_the_image_was(typed: bool) -> None:
    content = [{"type": "text", "text": "What is this?"}, image(PNG)]
    body = {"messages": [{"role": "user", "content": content}]}
    req = parse_request(body, typed, "auto", VISION)
    texts = ["What is this?", MARKER]
    expected = [{"type": "text", "text": t} for t in texts] if typed else "\n".join(texts)
    assert req.messages[0]["content"] == expected
    assert req.images == (PIXEL,)
    assert req.degraded == ()


# ------------------------------------------------------------------------- llama.cpp
def test_props_tell_the_marker_and_the_modalities() -> None:
    props = {"modalities": {"vision": True, "audio": False}, "media_marker": MARKER}
    assert media_support(props) == VISION
    older = media_support({"modalities": {"vision": True}})  # before /props named it
    assert older is not None and older.marker == DEFAULT_MEDIA_MARKER == "<__media__>"
    assert media_support({"modalities": {"vision": False}}) == MediaSupport(DEFAULT_MEDIA_MARKER)
    assert media_support({"chat_template": "x"}) is None  # no mtmd at all


def test_a_prompt_with_images_goes_as_prompt_string_and_multimodal_data() -> None:
    dialect = LlamaCpp(NoChannel())
    gen = Generation(prompt=f"look {MARKER}", media=(PIXEL,))
    body = dialect.payload(gen, gen.prompt, True)
    assert body["prompt"] == {"prompt_string": f"look {MARKER}", "multimodal_data": [PIXEL]}
    plain = Generation(prompt="hi")
    assert dialect.payload(plain, "hi", True)["prompt"] == "hi"


# ------------------------------------------------------------------------- serve
VISION_PROPS = {"modalities": {"vision": True, "audio": False}, "media_marker": MARKER}


class Served:
    """Serve (hermes template, given) in front of a stand-in (llama.cpp's by default) that
    reports ``props``."""

    def __init__(
        self, loop: LoopThread, props: dict[str, Any], kind: str = "llama.cpp", **config: Any
    ) -> None:
        self.standin = StandIn(kind, props=props)
        self.standin.add("k", "Hello.")
        template = CASE_BY_NAME["hermes"].load()
        backend = loop.serve(self.standin.app())
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

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as f:
            for line in f.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
        return 0.0

    def completions(self) -> list[dict[str, Any]]:
        return [body for path, body in self.standin.received if path == "/completion"]


MEDIA_METRIC = 'autoparser_degraded_total{what="media"}'
PLAIN_METRIC = 'autoparser_degraded_total{what="plain_text"}'


@pytest.fixture(scope="module")
def vision(loop: LoopThread) -> Served:
    return Served(loop, VISION_PROPS)


def test_chat_images_reach_a_vision_engine(
    vision: Served, caplog: pytest.LogCaptureFixture
) -> None:
    second = f"data:image/jpeg;base64,{OTHER}"
    content = [{"type": "text", "text": "[[k]] compare"}, image(PNG), image(second)]
    before = vision.metric(PLAIN_METRIC)
    with caplog.at_level(logging.WARNING, logger="autoparser.serve"):
        status, answer = vision.post({"messages": [{"role": "user", "content": content}]})
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"] == "Hello."
    prompt = vision.completions()[-1]["prompt"]
    assert prompt["multimodal_data"] == [PIXEL, OTHER]
    assert prompt["prompt_string"].count(MARKER) == 2
    assert prompt["prompt_string"].index("compare") < prompt["prompt_string"].index(MARKER)
    # The one loss, said: the caller's text goes unprotected in this request.
    assert vision.metric(PLAIN_METRIC) - before == 1
    assert any("not kept from becoming control tokens" in r.getMessage() for r in caplog.records)


def test_a_request_without_images_still_goes_as_before(vision: Served) -> None:
    status, _ = vision.post({"messages": [{"role": "user", "content": "[[k]] hi"}]})
    assert status == 200
    assert not isinstance(vision.completions()[-1]["prompt"], dict)


def test_an_image_by_url_is_a_placeholder_naming_it(
    vision: Served, caplog: pytest.LogCaptureFixture
) -> None:
    content = [{"type": "text", "text": "[[k]] look"}, image("https://example.com/cat.png")]
    before = vision.metric(MEDIA_METRIC)
    with caplog.at_level(logging.WARNING, logger="autoparser.serve"):
        status, _ = vision.post({"messages": [{"role": "user", "content": content}]})
    assert status == 200
    prompt = vision.completions()[-1]["prompt"]
    assert not isinstance(prompt, dict)  # nothing to send: protected text as ever
    assert vision.metric(MEDIA_METRIC) - before == 1
    assert any("https://example.com/cat.png" in r.getMessage() for r in caplog.records)


def test_text_spelling_the_marker_makes_the_images_placeholders(
    vision: Served, caplog: pytest.LogCaptureFixture
) -> None:
    content = [{"type": "text", "text": f"[[k]] {MARKER} look"}, image(PNG)]
    before = vision.metric(MEDIA_METRIC)
    with caplog.at_level(logging.WARNING, logger="autoparser.serve"):
        status, answer = vision.post({"messages": [{"role": "user", "content": content}]})
    lines = [r.getMessage() for r in caplog.records if "placeholder" in r.getMessage()]
    assert len(lines) == 1 and "does not hold one image marker per image" in lines[0]
    assert status == 200, answer
    prompt = vision.completions()[-1]["prompt"]
    assert not isinstance(prompt, dict)
    assert vision.metric(MEDIA_METRIC) - before == 1


def test_an_anthropic_user_image_reaches_the_engine(vision: Served) -> None:
    source = {"type": "base64", "media_type": "image/png", "data": PIXEL}
    content = [{"type": "image", "source": source}, {"type": "text", "text": "[[k]] what?"}]
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": content}]}
    status, answer = vision.post(body, "/v1/messages")
    assert status == 200, answer
    prompt = vision.completions()[-1]["prompt"]
    assert prompt["multimodal_data"] == [PIXEL]
    assert prompt["prompt_string"].index(MARKER) < prompt["prompt_string"].index("what?")


def test_a_responses_input_image_reaches_the_engine_and_a_file_id_does_not(
    vision: Served,
) -> None:
    content = [
        {"type": "input_text", "text": "[[k]] what?"},
        {"type": "input_image", "image_url": PNG},
        {"type": "input_image", "file_id": "file-123"},
    ]
    before = vision.metric(MEDIA_METRIC)
    body = {"model": "m", "input": [{"role": "user", "content": content}]}
    status, answer = vision.post(body, "/v1/responses")
    assert status == 200, answer
    prompt = vision.completions()[-1]["prompt"]
    assert prompt["multimodal_data"] == [PIXEL]
    assert placeholder_text("image") in prompt["prompt_string"]
    assert vision.metric(MEDIA_METRIC) - before == 1


def test_an_engine_without_vision_gets_placeholders(loop: LoopThread) -> None:
    served = Served(loop, {"modalities": {"vision": False}, "media_marker": MARKER})
    content = [{"type": "text", "text": "[[k]] look"}, image(PNG)]
    status, _ = served.post({"messages": [{"role": "user", "content": content}]})
    assert status == 200
    prompt = served.completions()[-1]["prompt"]
    assert not isinstance(prompt, dict)
    assert served.metric(MEDIA_METRIC) == 1


def test_a_given_kind_and_template_still_learn_the_modalities(loop: LoopThread) -> None:
    served = Served(loop, VISION_PROPS, backend_kind="llama.cpp")
    content = [{"type": "text", "text": "[[k]] look"}, image(PNG)]
    status, _ = served.post({"messages": [{"role": "user", "content": content}]})
    assert status == 200
    assert served.completions()[-1]["prompt"]["multimodal_data"] == [PIXEL]


def test_an_openai_style_engine_gets_placeholders(loop: LoopThread) -> None:
    served = Served(loop, {}, kind="openai", backend_kind="openai", model="m")
    content = [{"type": "text", "text": "[[k]] look"}, image(PNG)]
    status, _ = served.post({"messages": [{"role": "user", "content": content}]})
    assert status == 200
    sent = [b["prompt"] for p, b in served.standin.received if p == "/v1/completions"]
    assert sent and isinstance(sent[-1], (str, list))
    assert served.metric(MEDIA_METRIC) == 1


@pytest.mark.parametrize("policy", ["placeholder", "reject"])
def test_the_other_policies_hold_with_a_vision_engine(loop: LoopThread, policy: str) -> None:
    served = Served(loop, VISION_PROPS, media=policy)
    content = [{"type": "text", "text": "[[k]] look"}, image(PNG)]
    status, answer = served.post({"messages": [{"role": "user", "content": content}]})
    if policy == "reject":
        assert status == 400
        assert answer["error"]["param"] == "messages[0].content[1]"
        assert served.completions() == []
    else:
        assert status == 200
        assert not isinstance(served.completions()[-1]["prompt"], dict)


# ------------------------------------------------------------------------- captured bodies
@pytest.mark.parametrize(
    ("name", "images"),
    [
        ("messages_claude_code_tool_result_image", 1),
        ("messages_claude_code_user_image", 1),
        ("responses_codex_view_image", 1),
        ("responses_codex_user_image", 1),
    ],
)
def test_captured_agent_images_reach_a_vision_engine(
    loop: LoopThread, name: str, images: int
) -> None:
    standin = ScriptedEngine()
    standin.props = VISION_PROPS
    config = ServeConfig(loop.serve(standin.app()), template=qwen3_template(), model="qwen3")
    url = loop.serve(create_app(config))
    record = load_fixture(FIXTURES / f"{name}.json")
    request = urllib.request.Request(
        url + record["path"],
        data=json.dumps(record["body"]).encode(),
        headers={**record["headers"], "Content-Type": "application/json"},
        method=record["method"],
    )
    with urllib.request.urlopen(request, timeout=120) as f:
        assert f.status == 200
        f.read()
    sent = [body["prompt"] for path, body in standin.received if path == "/completion"]
    assert sent and isinstance(sent[-1], dict)
    assert len(sent[-1]["multimodal_data"]) == images
    assert sent[-1]["prompt_string"].count(MARKER) == images
    assert all(base64.b64decode(d, validate=True) for d in sent[-1]["multimodal_data"])
