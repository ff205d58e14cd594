"""OpenAI chat-completion objects: responses, stream chunks, usage, finish reasons, errors.

Plain dict builders, so the server's wire format lives in one place and the tests can
check it against the OpenAI contract without a running server.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Mapping, Sequence

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
