"""The engine-neutral half of an in-process engine plug-in (vLLM's, SGLang's).

An engine hands its parser objects a tokenizer, a request object of its own and text; the
plug-ins translate those objects and nothing else. What both need on top of
:class:`autoparser.Session` lives here, read through attributes only (no engine is
imported): the template the engine renders with, its request as the OpenAI dict the session
reads, the tested version range, and two readers, one per parser role an engine has:

- :class:`ToolReader`: the text after the reasoning into content and calls (whole or
  streamed), read with ``reasoning_format="none"`` so it reads the same text whether a
  reasoning parser ran before it or not;
- :class:`ReasoningReader`: the raw output into reasoning and the text after it, by the
  session's reasoning rules (:class:`autoparser.ReasoningSplit`), and whether the engine
  may stop waiting for the end of the reasoning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Protocol

from autoparser import (
    AutoparserError,
    ChatMessage,
    ChatParams,
    IntegrationError,
    ReasoningSplit,
    Reply,
    Session,
    StreamDelta,
    merge_deltas,
)

# A file holding the chat template, for servers started with --chat-template (engines do
# not tell their parsers which template they render with): a .jinja file, a
# tokenizer_config.json, a model directory or a GGUF, as ChatTemplate.from_file reads them.
TEMPLATE_ENV = "AUTOPARSER_CHAT_TEMPLATE"


class TokenizerLike(Protocol):
    """The part of a Hugging Face tokenizer (as vLLM and SGLang hold it) the plug-ins read."""

    chat_template: object
    bos_token: object
    eos_token: object

    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def _token_text(token: object) -> str:
    """A special token as text (tokenizers may hold AddedToken objects or None)."""
    if token is None:
        return ""
    return str(getattr(token, "content", token))


def resolve_template(
    tokenizer: TokenizerLike | None, request_template: str | None = None, *, engine: str = "engine"
) -> Session:
    """The template the engine renders with: the request's, else the file named by
    ``$AUTOPARSER_CHAT_TEMPLATE``, else the tokenizer's ``chat_template``."""
    bos = _token_text(getattr(tokenizer, "bos_token", None))
    eos = _token_text(getattr(tokenizer, "eos_token", None))
    if request_template:
        return Session.for_source(request_template, bos_token=bos, eos_token=eos, name=engine)
    path = os.environ.get(TEMPLATE_ENV)
    if path:
        try:
            return Session.for_file(path)
        except (OSError, AutoparserError) as exc:
            raise IntegrationError(f"{TEMPLATE_ENV}={path}: {exc}") from exc
    source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, Mapping):
        source = source.get("default") or next(iter(source.values()), None)
    if not isinstance(source, str) or not source.strip():
        raise IntegrationError(
            f"autoparser's {engine} parsers need a chat template: the tokenizer has none; "
            f"start the server with --chat-template FILE and set {TEMPLATE_ENV}=FILE"
        )
    return Session.for_source(source, bos_token=bos, eos_token=eos, name=engine)


def plain(value: object) -> object:
    """Pydantic models (an engine's request fields) as plain JSON data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [plain(v) for v in value]
    return value


def request_options(
    request: object, template_kwargs: Mapping[str, object] | None = None
) -> dict[str, object]:
    """An engine's chat request as the OpenAI request dict ``Session.params`` reads (the
    reasoning parser's own ``chat_template_kwargs`` added)."""
    kwargs = dict(getattr(request, "chat_template_kwargs", None) or {})
    kwargs.update(template_kwargs or {})
    return {
        "messages": plain(getattr(request, "messages", None)) or [],
        "tools": plain(getattr(request, "tools", None)) or None,
        "tool_choice": plain(getattr(request, "tool_choice", None)),
        "parallel_tool_calls": getattr(request, "parallel_tool_calls", None),
        "add_generation_prompt": bool(getattr(request, "add_generation_prompt", True)),
        "chat_template_kwargs": kwargs,
    }


def session_for(tokenizer: TokenizerLike | None, request: object, engine: str) -> Session:
    """The session of the template a request renders with (its own ``chat_template``, else
    the server's)."""
    return resolve_template(tokenizer, getattr(request, "chat_template", None), engine=engine)


def _options(request: object) -> Mapping[str, object]:
    return request if isinstance(request, Mapping) else request_options(request)


def named_or_required(choice: object) -> bool:
    """Does a ``tool_choice`` (a string, a dict or an engine's model) force a call?"""
    if choice == "required":
        return True
    return getattr(choice, "type", None) == "function" or (
        isinstance(choice, Mapping) and choice.get("type") == "function"
    )


def _release(version: str) -> tuple[int, ...]:
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else ()


def check_version(
    dist: str, tested_min: tuple[int, int], tested_below: tuple[int, int], env: str
) -> str:
    """The engine's version, or IntegrationError when it is missing or outside the tested
    range (engines move their parser classes between releases: fail at load, not in a
    request). ``$env=1`` lets an untested version through."""
    tested = f">={tested_min[0]}.{tested_min[1]},<{tested_below[0]}.{tested_below[1]}"
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError as exc:
        raise IntegrationError(
            f"autoparser's {dist} plugin needs {dist} {tested}: {dist} is not installed"
        ) from exc
    inside = tested_min <= _release(version)[:2] < tested_below
    if not inside and os.environ.get(env) != "1":
        raise IntegrationError(
            f"autoparser's {dist} plugin is tested with {dist} {tested}, found {version}; "
            f"set {env}=1 to try it anyway"
        )
    return version


class ToolReader:
    """An engine's tool parser: one response's text after the reasoning, read whole or
    streamed into content and calls (fresh call ids, one call without parallel calls)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.reply: Reply | None = None

    def params(self, request: object, *, reasoning: bool = False) -> ChatParams:
        """The params of a request (an OpenAI dict or an engine's request object); a
        conversation the template refuses reads as a probe turn (the engine renders the
        prompt itself)."""
        return self.session.params(_options(request), reasoning=reasoning, any_history=True)

    def start(self, request: object) -> Reply:
        """A new response to ``request``."""
        parallel = _options(request).get("parallel_tool_calls")
        self.reply = Reply(
            self.params(request), parallel_tool_calls=parallel if parallel is False else None
        )
        return self.reply

    def may_hold_calls(self) -> bool:
        """Could an output hold a call? (the template has a call format). Only a parse tells
        whether one does: some formats open a call with no marker (a bare JSON object)."""
        return self.session.analysis.tools.format.mode.value != "none"

    def forced_grammar(self, request: object) -> str | None:
        """The whole output's grammar (reasoning included) when the request forces a call
        and the grammar applies from the first token, else None."""
        request = _options(request)
        if not request.get("tools") or not named_or_required(request.get("tool_choice")):
            return None
        params = self.params(request, reasoning=True)
        return params.grammar if params.grammar and not params.grammar_lazy else None

    def parse(self, request: object, text: str) -> ChatMessage:
        return self.start(request).parse(text)

    def feed(self, request: object, text: str) -> StreamDelta | None:
        """One engine step's text as one delta (None when nothing became certain)."""
        reply = self.reply or self.start(request)
        return merge_deltas(reply.feed(text)) if text else None

    def finish(self) -> StreamDelta | None:
        """What the stream held back until the output ended."""
        return None if self.reply is None else merge_deltas(self.reply.finish())


class ReasoningReader:
    """An engine's reasoning parser: the raw output into (reasoning, text after it), by the
    library's own parse of the response (:class:`autoparser.ReasoningSplit`).

    Where the output starts (inside a reasoning block or not) follows the prompt the engine
    rendered (:attr:`prompt`, its end is enough, when the engine tells it), else the
    template's own generation prompt for the request's switch.
    """

    def __init__(self, session: Session, template_kwargs: Mapping[str, object] | None = None):
        self.session = session
        self.template_kwargs = dict(template_kwargs or {})
        self.prompt = ""
        # The engine's request, when it gives it to the reasoning parser (``finish_read``).
        self.request: object = None
        self._split: ReasoningSplit | None = None

    @property
    def thinking(self) -> bool | None:
        """The request's reasoning switch (``chat_template_kwargs.enable_thinking``)."""
        value = self.template_kwargs.get("enable_thinking")
        return value if isinstance(value, bool) else None

    def new_split(self) -> ReasoningSplit:
        """A split of this response by the library's parse of it."""
        if self.prompt:
            return self.session.reasoning_split(self.prompt, self.thinking)
        params = self.session.params(
            {"messages": [], "chat_template_kwargs": self.template_kwargs}, any_history=True
        )
        return ReasoningSplit(params)

    def split(self, output: str, request: object = None) -> tuple[str | None, str | None]:
        """A whole output's (reasoning, text after it): the library's parse of it, for the
        request when the engine gives it and its prompt opens reasoning as ``apply``
        would, else by :meth:`new_split`."""
        split = None
        if request is not None:
            request = _options(request)
            options = {**request, "chat_template_kwargs": self._kwargs(request)}
            params = self.session.params(options, reasoning=True, any_history=True)
            if not self.prompt or params.thinking_forced_open == self.session.opens_reasoning(
                self.prompt, self.thinking
            ):
                split = ReasoningSplit(params)
        reasoning, rest = (split or self.new_split()).split(output)
        return reasoning or None, rest or None

    def _kwargs(self, request: Mapping[str, object]) -> dict[str, object]:
        given = request.get("chat_template_kwargs")
        return {**(given if isinstance(given, Mapping) else {}), **self.template_kwargs}

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, text after it) that became certain with ``text``."""
        if self._split is None:
            self._split = self.new_split()
        return self._split.feed(text)

    def finish(self) -> tuple[str, str]:
        """What the split held back when the output ended (an unclosed block)."""
        return ("", "") if self._split is None else self._split.finish()

    def finish_read(self) -> StreamDelta | None:
        """:meth:`finish` as one delta, for an engine that gives its tool parser no text
        once the output ended (vLLM flushes the reasoning parser's held text as content):
        text only the end decided is not reasoning (the parse allows reasoning with its
        opener left out, so it waits for an end marker) is read as the tool parser reads
        it for :attr:`request` (content and calls); without a request it is content."""
        reasoning, rest = self.finish()
        delta: StreamDelta | None = StreamDelta(rest or None)
        if rest and self.request is not None:
            tools = ToolReader(self.session)
            request = self.request
            delta = merge_deltas(d for d in (tools.feed(request, rest), tools.finish()) if d)
        return merge_deltas(d for d in (StreamDelta(None, reasoning or None), delta) if d)

    @property
    def done(self) -> bool:
        """Has the stream passed the end of the reasoning?"""
        return self._split is not None and self._split.done

    def ended(self, text: str) -> bool:
        """Is reasoning over at the end of ``text`` (a prompt, or a prompt and output)?"""
        if self.session.reasoning_closed(text):
            return True
        # Thinking switched off and no block opened: nothing to wait for.
        thinking = self.thinking
        return thinking is False and not self.session.opens_reasoning(text, thinking)

    def content_ids(self, ids: list[int], vocab: Mapping[str, int]) -> list[int]:
        """The token ids after the last end marker (all of them without one)."""
        end = self.session.reasoning_markers[1]
        end_id = vocab.get(end) if end else None
        if end_id is None or end_id not in ids:
            return ids
        return ids[len(ids) - ids[::-1].index(end_id) :]

    def ended_in(self, recent: str) -> bool:
        """Did the end marker come in ``recent``, the tail of the output just decoded?"""
        end = self.session.reasoning_markers[1]
        return bool(end) and end in recent and self.session.reasoning_closed(recent)
