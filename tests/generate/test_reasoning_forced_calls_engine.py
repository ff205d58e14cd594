"""Forced calls are forced, end to end (issue 34 §5): a real llama-server running a tiny
random-weight model, given our prompt and grammar for ``tool_choice="required"`` from a
template with a ``<think>`` block, ends every request in a valid call: thinking off (no
block in the grammar) and thinking on with a ``reasoning_budget`` (a bounded block). A
random model never closes an unbounded block by itself, so without these every request
would run to its token limit with no call.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import llama_server
from helpers.formats import ENUM_WEATHER, THINK_CHATML

from autoparser import ChatTemplate

jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.skipif(not llama_server.available(), reason=llama_server.MISSING)

_PARTIAL = re.compile(r"<{1,8}(?:/(?:t(?:h(?:i(?:n(?:k)?)?)?)?)?)?.?", re.S)
USER = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from helpers.tiny_gguf import write_tiny_model

    tmp: Path = tmp_path_factory.mktemp("forced")
    model = write_tiny_model(llama_server.VOCAB, tmp / "tiny.gguf", THINK_CHATML)
    with llama_server.llama_server(model, tmp / "llama.log", context=2048, slots=1) as (url, _):
        yield url


def _complete(url: str, prompt: str, grammar: str, seed: int) -> dict[str, Any]:
    body = {"prompt": prompt, "grammar": grammar, "n_predict": 500, "temperature": 1.0}
    body["seed"] = seed
    request = urllib.request.Request(
        url + "/completion",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as f:
        answer: dict[str, Any] = json.loads(f.read().decode())
    return answer


@pytest.mark.parametrize(
    ("thinking", "budget"), [(False, None), (True, 40), (None, 0)], ids=["off", "budget", "zero"]
)
def test_every_forced_request_ends_in_a_valid_call(
    llama: str, thinking: bool | None, budget: int | None
) -> None:
    template = ChatTemplate(THINK_CHATML)
    params = template.apply(
        USER,
        tools=[ENUM_WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        enable_thinking=thinking,
        reasoning_budget=budget,
    )
    assert params.grammar is not None
    schema = ENUM_WEATHER["function"]["parameters"]
    for seed in range(3):
        answer = _complete(llama, params.prompt, params.grammar, seed)
        assert answer.get("stop_type") != "limit", answer.get("content")
        message = params.parse(answer["content"])
        assert [c.name for c in message.tool_calls] == ["get_weather"], answer["content"]
        jsonschema.validate(json.loads(message.tool_calls[0].arguments), schema)
        if budget is not None and message.reasoning_content:
            # A partial end marker and the character after it count as one piece.
            pieces = _PARTIAL.sub("x", message.reasoning_content)
            assert len(pieces) <= budget + 1, message.reasoning_content
