"""The typed streaming delta: ``feed_deltas`` is ``feed``, value for value, and
``to_openai()`` writes exactly the dicts ``feed`` hands out."""

from __future__ import annotations

import dataclasses
import json

import pytest

from autoparser import ChatTemplate, StreamDelta, ToolCallDelta
from autoparser.examples import example_path

OUTPUT = example_path("model_output.txt").read_text(encoding="utf-8")
TOOLS = json.loads(example_path("tools.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("policy", ["whole", "incremental"])
@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_typed_deltas_are_the_dicts(policy: str, size: int) -> None:
    params = ChatTemplate.from_file(example_path()).apply(
        [{"role": "user", "content": "Weather?"}], tools=TOOLS, call_id_seed=1
    )
    plain, typed = params.stream(policy), params.stream(policy)
    dicts: list[dict[str, object]] = []
    values: list[StreamDelta] = []
    for at in range(0, len(OUTPUT), size):
        dicts += plain.feed(OUTPUT[at : at + size])
        values += typed.feed_deltas(OUTPUT[at : at + size])
    dicts += plain.finish()
    values += typed.finish_deltas()
    assert [v.to_openai() for v in values] == dicts
    assert any(v.tool_calls and v.tool_calls[0].name == "get_weather" for v in values)
    assert any(v.content for v in values) and any(v.reasoning_content for v in values)


def test_an_announced_call_and_its_arguments() -> None:
    announce = ToolCallDelta(0, '{"a"', id="call_1", name="f")
    more = ToolCallDelta(0, ": 1}")
    assert StreamDelta(tool_calls=(announce,)).to_openai() == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": '{"a"'},
            }
        ]
    }
    assert StreamDelta(tool_calls=(more,)).to_openai() == {
        "tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]
    }
    assert StreamDelta(content="").to_openai() == {"content": ""}


@pytest.mark.parametrize(
    "fields",
    [("a", None, ()), (None, "r", ()), (None, None, (ToolCallDelta(1, "{}", "c", "f"),))],
)
def test_the_hot_path_constructor_builds_the_same_value(fields: tuple[object, ...]) -> None:
    """``StreamDelta.of`` and ``ToolCallDelta.of`` (what the mapper builds per feed) make
    the dataclass's own value: equal, hashed alike, frozen, and with every field set."""
    pairs = [(StreamDelta.of(*fields), StreamDelta(*fields))]  # type: ignore[arg-type]
    for call in pairs[0][1].tool_calls:
        pairs.append((ToolCallDelta.of(*dataclasses.astuple(call)), call))
    for fast, slow in pairs:
        assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
        assert set(vars(fast)) == {f.name for f in dataclasses.fields(slow)}
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.index = 3  # type: ignore[union-attr]
