"""The end of output: which tree the message is read from (``output_tree``), decided once
for a stream's ``finish`` and a one-shot ``parse``, and what that makes of a call the output
ended inside."""

from __future__ import annotations

import json

import pytest

from autoparser import ChatParams, ChatTemplate, RequestError
from autoparser.examples import example_path
from autoparser.peg import Node, ParseStatus
from autoparser.stream.ending import finish_reason_hit_limit, output_tree
from autoparser.stream.mapper import CallIdPolicy, Mapper

TOOLS = json.loads(example_path("tools.json").read_text(encoding="utf-8"))
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
WHOLE = "Let me check.\n" + CALL + "\n</tool_call>"


@pytest.fixture(scope="module")
def params() -> ChatParams:
    return ChatTemplate.from_file(example_path()).apply(
        [{"role": "user", "content": "Weather?"}], tools=TOOLS, call_id_seed=1
    )


def _trees(params: ChatParams, text: str) -> tuple[Node | None, Node | None]:
    """The partial-mode and full-mode trees a stream holds once ``text`` ended."""
    inc = params.definition.parser.incremental()
    inc.feed(text)
    partial = inc.result.tree if inc.result.status != ParseStatus.FAIL else None
    final = inc.finish()
    return partial, final.tree if final.status == ParseStatus.SUCCESS else None


def _mapper(params: ChatParams) -> Mapper:
    definition = params.definition
    return Mapper(CallIdPolicy(), definition.value_converters, openers=definition.call_openers)


@pytest.mark.parametrize(
    ("text", "hit_limit", "partial_wins"),
    [
        (WHOLE, False, False),  # a whole call: the full parse reads it
        (CALL, False, False),  # only the close tag missing: a model may stop there
        (CALL, True, True),  # ... unless the token limit cut it
        (CALL[:-3], False, True),  # its arguments cut off
        ("Let me check.\n<tool_call>", False, True),  # stopped on the opener
        ("Just text.", False, False),
    ],
)
def test_which_tree_the_output_is_read_from(
    params: ChatParams, text: str, hit_limit: bool, partial_wins: bool
) -> None:
    partial, final = _trees(params, text)
    assert partial is not None and final is not None
    chosen = output_tree(_mapper(params), text, partial, final, hit_limit)
    assert chosen is (partial if partial_wins else final)


@pytest.mark.parametrize("cut", [len(CALL) - 3, len(CALL)])
@pytest.mark.parametrize("reason", [None, "length"])
def test_stream_and_parse_end_alike(params: ChatParams, cut: int, reason: str | None) -> None:
    """The one decision: a stream fed the text in pieces ends as ``parse`` does, and a call
    the output ended inside is never lost (it is the message's ``truncated_call``)."""
    text = "Let me check.\n" + CALL[:cut]
    stream = params.stream()
    for at in range(0, len(text), 5):
        stream.feed_deltas(text[at : at + 5])
    stream.finish_deltas(finish_reason=reason)
    parsed = params.parse(text, finish_reason=reason)
    assert stream.message == parsed
    if parsed.tool_calls:
        assert reason is None and cut == len(CALL)
    else:
        assert parsed.truncated and parsed.truncated_call is not None
        assert parsed.truncated_call.startswith("<tool_call>")


def test_the_finish_reason_is_checked() -> None:
    assert finish_reason_hit_limit("length") and not finish_reason_hit_limit("stop")
    assert not finish_reason_hit_limit(None)
    with pytest.raises(RequestError, match="finish_reason must be a str"):
        finish_reason_hit_limit(3)
