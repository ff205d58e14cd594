"""The OpenAI chat-completion objects serve writes, checked against the official client's types."""

from __future__ import annotations

import pytest

from autoparser import ChatMessage, ToolCall
from autoparser.serve.openai_format import (
    ResponseIdentity,
    Usage,
    chunk,
    completion,
    error_body,
    finish_reason,
    model_list,
    usage_chunk,
)

openai_types = pytest.importorskip("openai.types.chat")
IDENT = ResponseIdentity("chatcmpl-1", 1700000000, "m")
CALL = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')


def test_a_completion_validates_as_the_clients_type() -> None:
    message = ChatMessage(content="Hi", reasoning_content="think", tool_calls=[CALL])
    body = completion(IDENT, message, "tool_calls", Usage(3, 4))
    parsed = openai_types.ChatCompletion.model_validate(body)
    assert parsed.usage is not None and parsed.usage.total_tokens == 7
    assert parsed.choices[0].message.tool_calls is not None
    assert parsed.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert parsed.choices[0].finish_reason == "tool_calls"


def test_chunks_validate_as_the_clients_type() -> None:
    first = chunk(IDENT, {"role": "assistant", "content": "H"})
    last = chunk(IDENT, {}, "stop")
    for body in (first, last, usage_chunk(IDENT, Usage(1, 2))):
        openai_types.ChatCompletionChunk.model_validate(body)
    assert last["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]
    assert usage_chunk(IDENT, Usage(1, 2))["choices"] == []


@pytest.mark.parametrize(
    ("calls", "truncated", "hit_limit", "reason"),
    [
        ([CALL], False, False, "tool_calls"),
        ([CALL], False, True, "tool_calls"),  # the calls are whole: the limit did not cut them
        ([CALL], True, True, "length"),
        ([], False, True, "length"),
        ([], False, False, "stop"),
    ],
)
def test_finish_reasons(
    calls: list[ToolCall], truncated: bool, hit_limit: bool, reason: str
) -> None:
    message = ChatMessage(content="x", tool_calls=calls, truncated=truncated)
    assert finish_reason(message, hit_limit) == reason


def test_identities_are_fresh_and_errors_have_the_openai_shape() -> None:
    one, two = ResponseIdentity.new("m"), ResponseIdentity.new("m")
    assert one.id != two.id and one.id.startswith("chatcmpl-")
    assert error_body("bad", param="messages") == {
        "error": {
            "message": "bad",
            "type": "invalid_request_error",
            "param": "messages",
            "code": None,
        }
    }
    assert model_list("m")["data"] == [
        {"id": "m", "object": "model", "created": 0, "owned_by": "autoparser"}
    ]
