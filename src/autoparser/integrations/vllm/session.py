"""vLLM's objects as the session API reads them: the tokenizer's template, the request.

Nothing here imports vLLM: requests are read through the attributes vLLM's
``ChatCompletionRequest`` has, and everything engine-neutral (caches, request -> params,
the reasoning split, deltas) is ``autoparser.Session`` and its companions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Protocol

from autoparser import AutoparserError, IntegrationError, Session

# A file holding the chat template, for servers started with --chat-template (vLLM does not
# tell its parsers which template it renders with): a .jinja file, a tokenizer_config.json,
# a model directory or a GGUF, as ChatTemplate.from_file reads them.
TEMPLATE_ENV = "AUTOPARSER_CHAT_TEMPLATE"


class TokenizerLike(Protocol):
    """The part of a Hugging Face / vLLM tokenizer the plugin reads."""

    chat_template: object
    bos_token: object
    eos_token: object

    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def _token_text(token: object) -> str:
    """A special token as text (tokenizers may hold AddedToken objects or None)."""
    if token is None:
        return ""
    return str(getattr(token, "content", token))


def resolve_template(tokenizer: TokenizerLike, request_template: str | None = None) -> Session:
    """The template vLLM renders with: the request's, else the file named by
    ``$AUTOPARSER_CHAT_TEMPLATE``, else the tokenizer's ``chat_template``."""
    bos, eos = _token_text(tokenizer.bos_token), _token_text(tokenizer.eos_token)
    if request_template:
        return Session.for_source(request_template, bos_token=bos, eos_token=eos, name="vllm")
    path = os.environ.get(TEMPLATE_ENV)
    if path:
        try:
            return Session.for_file(path)
        except (OSError, AutoparserError) as exc:
            raise IntegrationError(f"{TEMPLATE_ENV}={path}: {exc}") from exc
    source = tokenizer.chat_template
    if isinstance(source, Mapping):
        source = source.get("default") or next(iter(source.values()), None)
    if not isinstance(source, str) or not source.strip():
        raise IntegrationError(
            "autoparser's vLLM parsers need a chat template: the tokenizer has none; start "
            f"the server with --chat-template FILE and set {TEMPLATE_ENV}=FILE"
        )
    return Session.for_source(source, bos_token=bos, eos_token=eos, name="vllm")


def _plain(value: object) -> object:
    """Pydantic models (vLLM's request fields) as plain JSON data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


def request_options(
    request: object, template_kwargs: Mapping[str, object] | None
) -> dict[str, object]:
    """A vLLM chat request as the OpenAI request dict ``Session.params`` reads (the
    reasoning parser's own ``chat_template_kwargs`` added)."""
    kwargs = dict(getattr(request, "chat_template_kwargs", None) or {})
    kwargs.update(template_kwargs or {})
    return {
        "messages": _plain(getattr(request, "messages", None)),
        "tools": _plain(getattr(request, "tools", None)) or None,
        "tool_choice": _plain(getattr(request, "tool_choice", None)),
        "parallel_tool_calls": getattr(request, "parallel_tool_calls", None),
        "add_generation_prompt": bool(getattr(request, "add_generation_prompt", True)),
        "chat_template_kwargs": kwargs,
    }
