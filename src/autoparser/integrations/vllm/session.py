"""What the vLLM parsers share, without vLLM: the template, cached params, the reasoning split.

vLLM builds its parser objects several times per request (to adjust the request, to parse,
once per choice), so the template (and with it the analysis, cached per source) is kept per
template hash and the ChatParams per request content. Nothing here imports vLLM: requests
are read through the attributes vLLM's ``ChatCompletionRequest`` has.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from autoparser import (
    AutoparserError,
    ChatParams,
    ChatTemplate,
    IntegrationError,
    TemplateAnalysis,
)

# A file holding the chat template, for servers started with --chat-template (vLLM does not
# tell its parsers which template it renders with): a .jinja file, a tokenizer_config.json,
# a model directory or a GGUF, as ChatTemplate.from_file reads them.
TEMPLATE_ENV = "AUTOPARSER_CHAT_TEMPLATE"

_TEMPLATE_CACHE_SIZE = 16
_PARAMS_CACHE_SIZE = 256
_PROBE = [{"role": "user", "content": "Hi"}]


class TokenizerLike(Protocol):
    """The part of a Hugging Face / vLLM tokenizer the plugin reads."""

    chat_template: Any
    bos_token: Any
    eos_token: Any

    def decode(self, ids: Any, skip_special_tokens: bool = ...) -> str: ...


class _Lru:
    """A small least-recently-used map (the caches must not grow with the traffic)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[str, Any] = OrderedDict()

    def get(self, key: str) -> Any:
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


_TEMPLATES = _Lru(_TEMPLATE_CACHE_SIZE)
_PARAMS = _Lru(_PARAMS_CACHE_SIZE)


@dataclasses.dataclass(frozen=True)
class Template:
    """A chat template and the hash it is cached under."""

    key: str
    template: ChatTemplate

    @property
    def analysis(self) -> TemplateAnalysis:
        return self.template.analyze()


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _token_text(token: Any) -> str:
    """A special token as text (tokenizers may hold AddedToken objects or None)."""
    if token is None:
        return ""
    return str(getattr(token, "content", token))


def resolve_template(tokenizer: TokenizerLike, request_template: str | None = None) -> Template:
    """The template vLLM renders with: the request's, else the file named by
    ``$AUTOPARSER_CHAT_TEMPLATE``, else the tokenizer's ``chat_template``."""
    bos, eos = _token_text(tokenizer.bos_token), _token_text(tokenizer.eos_token)
    if request_template:
        return _cached_source(request_template, bos, eos)
    path = os.environ.get(TEMPLATE_ENV)
    if path:
        return _cached_file(Path(path))
    source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, Mapping):
        source = source.get("default") or next(iter(source.values()), None)
    if not isinstance(source, str) or not source.strip():
        raise IntegrationError(
            "autoparser's vLLM parsers need a chat template: the tokenizer has none; start "
            f"the server with --chat-template FILE and set {TEMPLATE_ENV}=FILE"
        )
    return _cached_source(source, bos, eos)


def _cached_source(source: str, bos: str, eos: str) -> Template:
    key = _hash("source", source, bos, eos)
    found = _TEMPLATES.get(key)
    if found is None:
        found = Template(key, ChatTemplate(source, bos_token=bos, eos_token=eos, name="vllm"))
        _TEMPLATES.put(key, found)
    return found  # type: ignore[no-any-return]


def _cached_file(path: Path) -> Template:
    try:
        stat = path.stat()
    except OSError as exc:
        raise IntegrationError(f"{TEMPLATE_ENV}={path}: cannot read the file: {exc}") from exc
    key = _hash("file", str(path.resolve()), str(stat.st_mtime_ns), str(stat.st_size))
    found = _TEMPLATES.get(key)
    if found is None:
        try:
            template = ChatTemplate.from_file(path)
        except AutoparserError as exc:
            raise IntegrationError(f"{TEMPLATE_ENV}={path}: {exc}") from exc
        found = Template(key, template)
        _TEMPLATES.put(key, found)
    return found  # type: ignore[no-any-return]


# ------------------------------------------------------------------ request -> ChatParams


def _plain(value: Any) -> Any:
    """Pydantic models (vLLM's request fields) as plain JSON data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _chat_tool(tool: Any) -> Any:
    """A tool in the chat-completions shape (the Responses API writes function tools flat)."""
    if isinstance(tool, Mapping) and "function" not in tool and "name" in tool:
        fields = ("name", "description", "parameters")
        return {"type": "function", "function": {k: tool[k] for k in fields if k in tool}}
    return tool


def request_options(request: Any, template_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parts of a vLLM chat request that decide the output format, as plain data."""
    kwargs = dict(getattr(request, "chat_template_kwargs", None) or {})
    kwargs.update(template_kwargs or {})
    tools = [_chat_tool(t) for t in _plain(getattr(request, "tools", None)) or ()] or None
    choice = _plain(getattr(request, "tool_choice", None))
    if tools is None or choice is None:
        choice = "auto" if tools else "none"
    return {
        "messages": _plain(getattr(request, "messages", None)) or _PROBE,
        "tools": tools,
        "tool_choice": choice,
        "parallel_tool_calls": getattr(request, "parallel_tool_calls", None),
        "add_generation_prompt": getattr(request, "add_generation_prompt", True),
        "template_kwargs": kwargs,
    }


def params_for(template: Template, options: Mapping[str, Any], *, reasoning: bool) -> ChatParams:
    """ChatParams of a request (cached by template hash and request content).

    ``reasoning=False`` builds the parser with ``reasoning_format="none"``: what the tool
    parser reads is the output after the reasoning (or, with no reasoning parser, the whole
    output, whose reasoning vLLM then leaves in the content).
    """
    blob = json.dumps(options, sort_keys=True, default=str, ensure_ascii=False)
    key = _hash(template.key, blob, str(reasoning))
    found = _PARAMS.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    kwargs = dict(options["template_kwargs"])
    thinking = kwargs.pop("enable_thinking", None)
    common: dict[str, Any] = {
        "tools": options["tools"],
        "tool_choice": options["tool_choice"],
        "parallel_tool_calls": options["parallel_tool_calls"],
        "enable_thinking": thinking if isinstance(thinking, bool) else None,
        "reasoning_format": "auto" if reasoning else "none",
        "add_generation_prompt": bool(options["add_generation_prompt"]),
    }
    try:
        params = template.template.apply(options["messages"], **common, **kwargs)
    except AutoparserError:
        # A conversation the template refuses (content parts, roles it does not know...):
        # the output format does not depend on the history, so a probe turn stands in.
        params = template.template.apply(_PROBE, **common, **kwargs)
    _PARAMS.put(key, params)
    return params


# ------------------------------------------------------------------ the reasoning split


@dataclasses.dataclass
class ReasoningSplit:
    """Splits model output into reasoning and the text after it, chunk by chunk.

    vLLM hands the text after the reasoning to the tool parser, so the split is on the raw
    text: the reasoning block's markers from the analysis, the block open from the start when
    the prompt opened it. Reasoning is emitted without the whitespace around it (as
    ``ChatParams.parse`` returns it); text that may still become a marker is held back.

    ``opener_optional`` (reasoning turned on, the prompt did not open the block): as the
    library's lenient parser does, text that does not start with the opener is reasoning if
    the end marker follows, before any of ``stops`` (a call opener, the end of the turn).
    It is held back until one of them comes, or the output ends (then it is content).
    """

    start: str
    end: str
    forced_open: bool
    opener_optional: bool = False
    stops: tuple[str, ...] = ()
    state: str = "undecided"  # undecided -> (opening | unopened) -> reasoning -> done
    pending: str = ""
    emitted: bool = False
    scanned: int = 0  # how much of ``pending`` the wait for an end marker has searched

    def __post_init__(self) -> None:
        if not self.end:
            self.state = "done"
        elif self.forced_open:
            self.state = "opening"

    @property
    def done(self) -> bool:
        return self.state == "done"

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, text after the reasoning) that became certain with ``text``."""
        if self.state == "done":
            return "", text
        self.pending += text
        if self.state in ("undecided", "opening"):
            head = self.pending.lstrip()
            if self.start and head.startswith(self.start):
                self.pending = head[len(self.start) :]
                self.state = "reasoning"
            elif self.state == "undecided" and head.startswith(self.end):
                # Only the end marker: an empty block whose opener the model left out
                # (trained with the opener in the prompt).
                self.pending, self.state = "", "done"
                return "", head[len(self.end) :]
            elif (self.start and self.start.startswith(head)) or (
                self.state == "undecided" and self.end.startswith(head)
            ):
                return "", ""  # may still be a marker
            elif self.state == "opening":
                self.state = "reasoning"
            elif self.opener_optional and self.start:
                self.state = "unopened"
            else:
                self.state = "done"
                rest, self.pending = self.pending, ""
                return "", rest
        if self.state == "unopened":
            return self._unopened()
        return self._reasoning()

    def _unopened(self) -> tuple[str, str]:
        """Text with no opener: reasoning once the end marker comes, content once a stop
        comes first; held back until then (each piece is searched once)."""
        longest = max((len(m) for m in (self.end, *self.stops)), default=1)
        since = max(0, self.scanned - longest + 1)
        self.scanned = len(self.pending)
        at = self.pending.find(self.end, since)
        limit = at if at >= 0 else len(self.pending)
        if any(self.pending.find(stop, since, limit) >= 0 for stop in self.stops):
            self.state = "done"
            rest, self.pending = self.pending, ""
            return "", rest
        if at < 0:
            return "", ""
        return self._reasoning()

    def _reasoning(self) -> tuple[str, str]:
        at = self.pending.find(self.end)
        if at >= 0:
            reasoning, rest = self.pending[:at], self.pending[at + len(self.end) :]
            self.pending = ""
            self.state = "done"
            return self._trim(reasoning, last=True), rest
        keep = _marker_prefix_len(self.pending, self.end)
        body = self.pending[: len(self.pending) - keep]
        sure = body.rstrip()
        self.pending = self.pending[len(sure) :]
        return self._trim(sure, last=False), ""

    def _trim(self, text: str, *, last: bool) -> str:
        if not self.emitted:
            text = text.lstrip()
        if last:
            text = text.rstrip()
        if text:
            self.emitted = True
        return text

    def finish(self) -> tuple[str, str]:
        """What is still held back when the output ends (a reasoning block never closed)."""
        if self.state == "reasoning":
            self.state = "done"
            text, self.pending = self.pending, ""
            return self._trim(text, last=True), ""
        if self.state in ("undecided", "opening", "unopened"):
            self.state = "done"
            text, self.pending = self.pending, ""
            return "", text
        return "", ""


def _marker_prefix_len(text: str, marker: str) -> int:
    """Length of the longest end of ``text`` that starts ``marker`` (may become it)."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def reasoning_markers(analysis: TemplateAnalysis) -> tuple[str, str]:
    """The reasoning block's start and end markers, without the template's whitespace."""
    r = analysis.reasoning
    if r.mode.value == "none":
        return "", ""
    return r.start.strip(), r.end.strip()


def prompt_opens_reasoning(
    analysis: TemplateAnalysis, prompt: str, enable_thinking: bool | None
) -> bool:
    """Does the output start inside a reasoning block (the prompt opened it)?"""
    start, end = reasoning_markers(analysis)
    if not end:
        return False
    if start:
        return prompt.rstrip().endswith(start)
    return analysis.reasoning.mode.value == "delimiter" and enable_thinking is True


def text_after_reasoning(
    output: str, reasoning: str | None, analysis: TemplateAnalysis, forced_open: bool
) -> str:
    """The raw output after its reasoning block (what the tool parser reads).

    ``reasoning`` is what ``ChatParams.parse`` found: the text after it, less the end
    marker. Without it, the split by markers decides (an empty block still goes).
    """
    start, end = reasoning_markers(analysis)
    if reasoning:
        at = output.find(reasoning)
        if at >= 0:
            rest = output[at + len(reasoning) :]
            head = rest.lstrip()
            return head[len(end) :] if end and head.startswith(end) else rest
    split = ReasoningSplit(start, end, forced_open)
    _, rest = split.feed(output)
    _, tail = split.finish()
    return rest + tail


def opener_optional(analysis: TemplateAnalysis, enable_thinking: bool | None) -> bool:
    """Is text before the end marker reasoning even without the opener (the library's
    lenient rule: reasoning turned on, a start marker to leave out, no hand-written format)?"""
    start, end = reasoning_markers(analysis)
    return enable_thinking is True and bool(start and end) and not analysis.handler


def wait_stops(analysis: TemplateAnalysis) -> tuple[str, ...]:
    """What ends the wait for an end marker after text with no opener: the end of the turn
    and the markers that open tool calls."""
    fmt, function = analysis.tools.format, analysis.tools.function
    calls: tuple[str, ...] = ()
    if fmt.mode.value != "none":
        calls = (fmt.call_prefix_token, fmt.section_start, fmt.per_call_start, function.name_prefix)
    markers = (*analysis.end_of_turn, *calls)
    return tuple(dict.fromkeys(m.strip() for m in markers if m.strip()))


def reasoning_closed(text: str, analysis: TemplateAnalysis) -> bool:
    """Is reasoning over at the end of ``text`` (an end marker after the last start)?

    For a prompt, only the part after the last generation prompt counts: a history turn's
    closed block does not close the turn being generated.
    """
    start, end = reasoning_markers(analysis)
    if not end:
        return True
    opener = analysis.generation_prompt.strip()
    if opener:
        at = text.rfind(opener)
        if at >= 0:
            text = text[at + len(opener) :]
    last_end = text.rfind(end)
    if last_end < 0:
        return False
    return not start or text.rfind(start) < last_end
