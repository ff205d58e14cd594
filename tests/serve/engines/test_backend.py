"""A backend (a dialect over the transport) and detection: the dialects walked in order, each
path asked once, an engine not there an error, the fallback matching any engine."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

import aiohttp
from helpers.serve_standin import LoopThread, StandIn

from autoparser.serve.engines.backend import detect, first_model, make_backend
from autoparser.serve.engines.base import BackendError, Generation


def detected(loop: LoopThread, standin: StandIn) -> tuple[str, str, str]:
    url = loop.serve(standin.app())

    async def go() -> tuple[str, str, str]:
        async with aiohttp.ClientSession() as session:
            info = await detect(url, session, 5)
            return info.kind, info.model, info.chat_template

    return loop.call(go)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("kind", "owner", "found"),
    [
        ("llama.cpp", "", ("llama.cpp", "", "")),
        ("openai", "vllm", ("vllm", "standin-model", "")),
        ("openai", "sglang", ("sglang", "standin-model", "")),
        ("openai", "", ("openai", "", "")),
        ("openai", "someone", ("openai", "", "")),
    ],
)
def test_detection_walks_the_dialects(
    loop: LoopThread, kind: str, owner: str, found: tuple[str, str, str]
) -> None:
    standin = StandIn(kind, props={"chat_template": ""} if kind == "llama.cpp" else None)
    standin.owner = owner
    assert detected(loop, standin) == found


def test_a_loading_llama_cpp_is_an_error(loop: LoopThread) -> None:
    standin = StandIn("llama.cpp")
    standin.mode = "down"
    with pytest.raises(BackendError, match="still loading"):
        detected(loop, standin)


def test_an_engine_not_there_is_an_error() -> None:
    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            await detect("http://127.0.0.1:9", session, 2)

    with pytest.raises(BackendError, match="unreachable"):
        asyncio.run(go())


def test_first_model_and_an_unknown_kind(loop: LoopThread) -> None:
    url = loop.serve(StandIn("openai").app())
    llama = loop.serve(StandIn("llama.cpp").app())

    async def go() -> tuple[str, str]:
        async with aiohttp.ClientSession() as session:
            try:
                await first_model(llama, session, 5)
            except BackendError as exc:
                failed = exc.public
            return await first_model(url, session, 5), failed

    assert loop.call(go) == ("standin-model", "the engine answered HTTP 404")

    async def unknown() -> None:
        async with aiohttp.ClientSession() as session:
            make_backend("tgi", url, session)

    with pytest.raises(ValueError, match="backend kind must be one of"):
        asyncio.run(unknown())


@pytest.mark.parametrize("kind", ["llama.cpp", "openai"])
def test_whole_and_streamed_answers(loop: LoopThread, kind: str) -> None:
    standin = StandIn(kind)
    key = standin.add("k", "Hello there, world.", stop_word="END")
    url = loop.serve(standin.app())

    async def go() -> tuple[object, object, list[object]]:
        async with aiohttp.ClientSession() as session:
            backend = make_backend(kind, url, session, "standin-model")
            gen = Generation(f"say {key}", caller_spans=None)
            whole = await backend.complete(gen)
            items = [item async for item in backend.stream(gen)]
            return whole, await backend.check(), items

    (text, end), health, items = loop.call(go)
    assert text == "Hello there, world." and end.stop_word == "END"
    assert end.prompt_form == "unchecked" and health is None
    assert "".join(i for i in items if isinstance(i, str)) == text
    assert items[-1] == end
