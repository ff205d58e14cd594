"""OpenAI chat-completion objects: responses, stream chunks, usage, finish reasons, errors.

Plain dict builders, so the server's wire format lives in one place and the tests can
check it against the OpenAI contract without a running server.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring

from autoparser import ChatMessage


@dataclasses.dataclass(frozen=True)
class Usage:
    """Token counts as the backend reported them (zero when it reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_openai(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclasses.dataclass(frozen=True)
class ResponseIdentity:
    """What every object of one response repeats: id, creation time, model name."""

    id: str
    created: int
    model: str

    @classmethod
    def new(cls, model: str) -> ResponseIdentity:
        return cls(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), model)


def finish_reason(message: ChatMessage, hit_limit: bool) -> str:
    """``tool_calls`` when complete calls were made, ``length`` when the backend stopped on
    its token limit, else ``stop``."""
    if message.tool_calls and not (hit_limit and message.truncated):
        return "tool_calls"
    return "length" if hit_limit else "stop"


def completion(
    ident: ResponseIdentity,
    message: ChatMessage,
    reason: str,
    usage: Usage,
    logprobs: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, object]:
    """A non-streaming ``chat.completion`` object (one choice; ``choice`` writes more)."""
    return {
        "id": ident.id,
        "object": "chat.completion",
        "created": ident.created,
        "model": ident.model,
        "choices": [choice(0, message, reason, logprobs)],
        "usage": usage.to_openai(),
    }


def choice(
    index: int,
    message: ChatMessage,
    reason: str,
    logprobs: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, object]:
    """One choice of a ``chat.completion``, its token logprobs when asked and given."""
    return {
        "index": index,
        "message": message.to_openai(),
        "logprobs": None if logprobs is None else logprobs_object(logprobs),
        "finish_reason": reason,
    }


def logprobs_object(tokens: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """A choice's (or chunk's) ``logprobs``: every generated token's under ``content``."""
    return {"content": list(tokens), "refusal": None}


def chunk(
    ident: ResponseIdentity,
    delta: dict[str, object],
    reason: str | None = None,
    *,
    index: int = 0,
    logprobs: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, object]:
    """One ``chat.completion.chunk`` carrying a delta (and the finish reason on the last);
    ``index``: its choice; ``logprobs``: the tokens it came with, when asked."""
    probs = None if logprobs is None else logprobs_object(logprobs)
    return {
        "id": ident.id,
        "object": "chat.completion.chunk",
        "created": ident.created,
        "model": ident.model,
        "choices": [{"index": index, "delta": delta, "logprobs": probs, "finish_reason": reason}],
    }


# ``json.dumps(obj, ensure_ascii=False)`` without building an encoder per call: the same
# text, as the chunks have always been written (``", "`` and ``": "`` separators).
to_json = json.JSONEncoder(ensure_ascii=False).encode
json_string = encode_basestring  # a str as JSON, non-ASCII kept (what to_json does to a str)


class ChunkEvents:
    """The SSE events of one response's ``chat.completion.chunk`` objects, written from
    parts prepared once per response: everything before a choice's index and delta is
    the same in every chunk, and so, in most chunks, is everything after it. Each event
    is the text ``json.dumps(chunk(...), ensure_ascii=False)`` gives, byte for byte; the
    caller hands the delta already as JSON (most deltas are one text field)."""

    _NO_EXTRAS = ', "logprobs": null, "finish_reason": null}]}\n\n'

    def __init__(self, ident: ResponseIdentity) -> None:
        whole = to_json(chunk(ident, {}))
        head = whole[: whole.rindex('"index": 0, "delta": {}') + len('"index": ')]
        self.head = "data: " + head
        self.first = self.head + '0, "delta": '

    def event(
        self,
        delta_json: str,
        index: int = 0,
        logprobs: object = None,
        finish_reason: str | None = None,
    ) -> str:
        """One chunk's event (``data: ...`` and its blank line) carrying ``delta_json``;
        ``logprobs``: the choice's logprobs object (None: null)."""
        start = self.first if index == 0 else f'{self.head}{index}, "delta": '
        if logprobs is None and finish_reason is None:
            return start + delta_json + self._NO_EXTRAS
        return (
            f"{start}{delta_json}, "
            f'"logprobs": {to_json(logprobs)}, "finish_reason": {to_json(finish_reason)}}}]}}\n\n'
        )


def usage_chunk(ident: ResponseIdentity, usage: Usage) -> dict[str, object]:
    """The extra chunk ``stream_options.include_usage`` asks for: no choices, the usage."""
    return {
        "id": ident.id,
        "object": "chat.completion.chunk",
        "created": ident.created,
        "model": ident.model,
        "choices": [],
        "usage": usage.to_openai(),
    }


def error_body(
    message: str,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, object]:
    """The OpenAI error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def model_list(model: str, created: int = 0) -> dict[str, object]:
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": created, "owned_by": "autoparser"}],
    }
