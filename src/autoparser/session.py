"""The engine-neutral session API: what an inference engine's adapter needs, in one place.

An engine (vLLM, SGLang, a local runtime) renders prompts, samples tokens and hands text
back; autoparser supplies the rest. An adapter only translates between the engine's objects
and these:

- :class:`Session`: one chat template, cached by content in ``autoparser.cache`` (the
  analysis with it); ``session.params(request)`` turns an OpenAI chat-completion request
  (a dict) into :class:`ChatParams` (prompt, stops, grammar, parser), cached per request
  content, as an engine builds its parser objects several times per request.
- :class:`Reply`: one response's output read whole (``parse``) or streamed (``feed`` /
  ``finish``, typed :class:`StreamDelta` values with ``to_openai()``), with call ids fresh
  for this response and one call only when ``parallel_tool_calls`` is false.
- :class:`ReasoningSplit` (``session.reasoning_split``: the library's own parse of the
  response, split into reasoning and the raw text after it) and the session's reasoning
  rules (``opens_reasoning``, ``reasoning_closed``), for engines that separate reasoning
  from the rest of the raw text themselves (vLLM's and SGLang's reasoning parsers).

tests/test_session_adapter.py adapts a toy engine with this API alone; the vLLM plug-in
(``autoparser.integrations.vllm``) is the real one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import pickle
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from autoparser.analysis.model import ReasoningMode, TemplateAnalysis
from autoparser.cache import CACHES, Store
from autoparser.chat import ChatTemplate, ToolChoice
from autoparser.errors import AutoparserError, RequestError
from autoparser.jsontypes import JsonMapping as JsonObject
from autoparser.message import ChatMessage, ToolCall
from autoparser.params import ChatParams, build_params
from autoparser.stream import StreamDelta, StreamParser, ToolCallDelta

# A conversation the template refuses stands in as this turn when only the parser is
# needed (the output format does not depend on the history).
_PROBE: tuple[JsonObject, ...] = ({"role": "user", "content": "Hi"},)

_TEMPLATES: Store[Session] = CACHES.store("session_templates", 16)
_PARAMS: Store[ChatParams] = CACHES.store("session_params", 256)


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _chat_tool(tool: object) -> object:
    """A tool in the chat-completions shape (the Responses API writes function tools flat)."""
    if isinstance(tool, Mapping) and "function" not in tool and "name" in tool:
        fields = ("name", "description", "parameters")
        return {"type": "function", "function": {k: tool[k] for k in fields if k in tool}}
    return tool


def _objects(value: object, field: str) -> list[JsonObject] | None:
    """A request field that holds a list of JSON objects (None when absent)."""
    if value is None:
        return None
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise RequestError(f"{field}: must be a list of objects, got {_kind(value)}")
    items = [_chat_tool(v) if field == "tools" else v for v in value]
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise RequestError(f"{field}[{i}]: must be an object, got {_kind(item)}")
    return cast("list[JsonObject]", items)


def _kind(value: object) -> str:
    """A JSON value's kind as an error names it (never its Python repr)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    return "a list" if isinstance(value, Sequence) else type(value).__name__


def _typed(request: Mapping[str, object], field: str, kind: type, what: str) -> object:
    """A field's value when it is absent (None) or of ``kind``; else a RequestError
    naming it (a boolean is not a number)."""
    value = request.get(field)
    if value is None or (
        isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
    ):
        return value
    raise RequestError(f"{field}: must be {what}, got {_kind(value)}")


# Names ``ChatTemplate.apply`` binds itself: request fields, never template variables.
RESERVED_TEMPLATE_KWARGS = frozenset(
    {"messages", "tools", "tool_choice", "parallel_tool_calls", "response_format"}
    | {"reasoning_format", "add_generation_prompt", "polyfills", "provenance"}
    | {"reasoning_budget", "call_id_seed", "now"}
    | {"calls_in_reasoning"}
)


def default_tool_choice(tools: object) -> ToolChoice:
    """OpenAI's default ``tool_choice``: ``auto`` with tools, ``none`` without (the one
    rule every face follows)."""
    return "auto" if tools else "none"


def max_calls(parallel_tool_calls: bool | None) -> int | None:
    """How many calls a response keeps: one when the request said
    ``parallel_tool_calls=false``, whatever the engine did; else all (None). The one rule,
    applied by ``Reply`` to whole and streamed output alike."""
    return 1 if parallel_tool_calls is False else None


@dataclasses.dataclass(frozen=True)
class RequestOptions:
    """The parts of an OpenAI chat-completion request that decide prompt and output format.

    ``template_kwargs`` are the template's own variables (vLLM's ``chat_template_kwargs``),
    ``enable_thinking`` among them. ``reasoning_format`` (llama.cpp's field: ``none`` leaves
    reasoning in the content), ``reasoning_effort`` (a template variable) and
    ``reasoning_budget`` (characters of reasoning the grammar allows) as the request names
    them. A face's tolerances (media placeholders, loosened schemas, folded system
    messages) are applied to these options with ``dataclasses.replace``, never by reading
    the request a second time.
    """

    messages: tuple[JsonObject, ...]
    tools: tuple[JsonObject, ...] | None = None
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool | None = None
    response_format: JsonObject | None = None
    add_generation_prompt: bool = True
    template_kwargs: Mapping[str, object] = dataclasses.field(default_factory=dict)
    reasoning_format: str | None = None
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None

    @classmethod
    def from_openai(cls, request: Mapping[str, object]) -> RequestOptions:
        """Read the fields of an OpenAI request dict: the one reader every face uses (a
        ``RequestError`` whose text starts with the field it names, ``tools[2]: ...``).

        ``tool_choice`` defaults as OpenAI's does (``default_tool_choice``): ``auto`` with
        tools, ``none`` without; one the client gave is kept (the template names a choice
        it cannot honour). ``chat_template_kwargs`` may not set what the request has
        fields for (``RESERVED_TEMPLATE_KWARGS``).
        """
        messages = _objects(request.get("messages"), "messages") or []
        tools = _objects(request.get("tools"), "tools") or None
        choice = request.get("tool_choice")
        if choice is None:
            choice = default_tool_choice(tools)
        if not isinstance(choice, (str, Mapping)):
            raise RequestError(f"tool_choice: must be a string or an object, got {_kind(choice)}")
        parallel = _typed(request, "parallel_tool_calls", bool, "a boolean")
        fmt = _typed(request, "response_format", Mapping, "an object")
        agp = request.get("add_generation_prompt")
        if agp is not None and not isinstance(agp, bool):
            raise RequestError(f"add_generation_prompt: must be a boolean, got {_kind(agp)}")
        kwargs = _typed(request, "chat_template_kwargs", Mapping, "an object") or {}
        clash = sorted(RESERVED_TEMPLATE_KWARGS & set(cast("Mapping[str, object]", kwargs)))
        if clash:
            raise RequestError(
                f"chat_template_kwargs: {', '.join(clash)} must be given as request fields"
            )
        budget = _typed(request, "reasoning_budget", int, "a non-negative integer")
        return cls(
            tuple(messages),
            tuple(tools) if tools else None,
            cast("ToolChoice", choice),
            cast("bool | None", parallel),
            cast("JsonObject | None", fmt),
            agp is not False,
            dict(cast("Mapping[str, object]", kwargs)),
            cast("str | None", _typed(request, "reasoning_format", str, "a string")),
            cast("str | None", _typed(request, "reasoning_effort", str, "a string")),
            cast("int | None", budget),
        )

    @property
    def enable_thinking(self) -> bool | None:
        """The request's reasoning switch (``chat_template_kwargs.enable_thinking``)."""
        value = self.template_kwargs.get("enable_thinking")
        return value if isinstance(value, bool) else None

    def key(self) -> str:
        """A digest of the options' content (what the params cache is keyed by).

        The content is serialised in one pass, as given: pickle writes a thousand tools
        five times faster than ``json.dumps`` (2 ms against 10, on every request a server
        prepares), and equal bytes are equal content, so a key never matches other options;
        the same content in another key order only misses. What pickle refuses (an object
        no request holds) is written as JSON text instead."""
        fields = tuple(getattr(self, f.name) for f in dataclasses.fields(self))
        buffer = io.BytesIO()
        writer = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        writer.fast = True  # no memo: shared and merely equal objects write the same bytes
        try:
            writer.dump(fields)
            data = buffer.getvalue()
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError, ValueError):
            try:
                data = json.dumps(fields, default=repr, ensure_ascii=False).encode("utf-8")
            except ValueError as exc:  # a value that holds itself: no request does
                raise RequestError(f"request: {exc}") from None
        return hashlib.sha256(data).hexdigest()


class Session:
    """One chat template as an engine serves it; make one with :meth:`for_source` or
    :meth:`for_file` (cached, so every parser object an engine builds shares it)."""

    def __init__(self, key: str, template: ChatTemplate) -> None:
        self.key = key
        self.template = template

    def __repr__(self) -> str:
        return f"Session({self.template!r})"

    @classmethod
    def for_source(
        cls, source: str, *, bos_token: str = "", eos_token: str = "", name: str = "session"
    ) -> Session:
        """The session of a template's text and special tokens (one per content)."""
        key = _hash("source", source, bos_token, eos_token)
        return _TEMPLATES.get_or_build(
            key,
            lambda: cls(
                key, ChatTemplate(source, bos_token=bos_token, eos_token=eos_token, name=name)
            ),
        )

    @classmethod
    def for_file(cls, path: str | Path, *, analysis_cache: str | Path | None = None) -> Session:
        """The session of a template file, as ``ChatTemplate.from_file`` reads it (a
        .jinja, a tokenizer_config.json, a model directory, a GGUF); a changed file is
        read again. ``analysis_cache``: a directory the analysis is saved in."""
        path = Path(path)
        stat = path.stat()  # OSError for a missing file: the caller names the setting
        key = _hash("file", str(path.resolve()), str(stat.st_mtime_ns), str(stat.st_size))
        return _TEMPLATES.get_or_build(
            key, lambda: cls(key, ChatTemplate.from_file(path, analysis_cache=analysis_cache))
        )

    @classmethod
    def for_pretrained(cls, repo_id: str, *, analysis_cache: str | Path | None = None) -> Session:
        """The session of a Hugging Face Hub model's template (``ChatTemplate.
        from_pretrained``; needs the hub extra)."""
        key = _hash("hub", repo_id)
        return _TEMPLATES.get_or_build(
            key,
            lambda: cls(key, ChatTemplate.from_pretrained(repo_id, analysis_cache=analysis_cache)),
        )

    @classmethod
    def for_template(cls, template: ChatTemplate) -> Session:
        """The session of a template the caller built (its own, never shared: the key is
        fresh, so params cached for another template object are never returned)."""
        return cls(_hash("object", uuid.uuid4().hex), template)

    @property
    def analysis(self) -> TemplateAnalysis:
        """The template's analysis (cached with the template)."""
        return self.template.analyze()

    # -- request -> params ---------------------------------------------------------------

    def params(
        self,
        request: Mapping[str, object] | RequestOptions,
        *,
        reasoning: bool = True,
        any_history: bool = False,
        provenance: bool = False,
        call_id_seed: int | None = None,
        calls_in_reasoning: bool = False,
    ) -> ChatParams:
        """Prompt, stops, grammar and parser of an OpenAI request (cached by content).

        ``reasoning=False`` reads the output with ``reasoning_format="none"`` (for a parser
        that gets the text after the reasoning, or reasoning left in the content).
        ``any_history``: the engine renders the prompt itself and needs only the parser, so
        a conversation the template refuses is replaced by a probe turn. ``provenance``:
        the params say where the caller's text is in the prompt (``caller_spans``).
        ``call_id_seed``: the params' own call ids repeat (a workbench's; a ``Reply``
        gives each response fresh ones anyway). ``calls_in_reasoning``: as for
        ``ChatTemplate.apply``.
        """
        if not isinstance(request, RequestOptions):
            request = RequestOptions.from_openai(request)
        options = request
        flags = f"{reasoning}/{any_history}/{provenance}/{call_id_seed}/{calls_in_reasoning}"
        key = _hash(self.key, options.key(), flags)
        found = _PARAMS.get(key)
        if found is not None:
            return found
        # The template's own variables (the names ``apply`` binds itself are refused by
        # the reader; ``enable_thinking`` and ``reasoning_effort`` are read from them).
        kwargs: dict[str, Any] = dict(options.template_kwargs)
        kwargs.pop("enable_thinking", None)
        if options.reasoning_effort is not None:
            kwargs["reasoning_effort"] = options.reasoning_effort
        reasoning_format = (options.reasoning_format or "auto") if reasoning else "none"

        def apply(messages: Sequence[JsonObject]) -> ChatParams:
            return self.template.apply(
                messages,
                list(options.tools) if options.tools else None,
                options.tool_choice,
                options.parallel_tool_calls,
                options.response_format,
                options.enable_thinking,
                reasoning_format,
                options.add_generation_prompt,
                reasoning_budget=options.reasoning_budget,
                provenance=provenance,
                call_id_seed=call_id_seed,
                calls_in_reasoning=calls_in_reasoning,
                **kwargs,
            )

        try:
            params = apply(options.messages)
        except AutoparserError:
            if not any_history:
                raise
            params = apply(_PROBE)
        return _PARAMS.put(key, params)

    # -- the reasoning rules -------------------------------------------------------------

    @property
    def reasoning_markers(self) -> tuple[str, str]:
        """The reasoning block's start and end markers, without the template's whitespace."""
        r = self.analysis.reasoning
        if r.mode == ReasoningMode.NONE:
            return "", ""
        return r.start.strip(), r.end.strip()

    def opens_reasoning(self, prompt: str, enable_thinking: bool | None) -> bool:
        """Does the output of ``prompt`` start inside a reasoning block? (the library's one
        rule, ``TemplateAnalysis.prompt_opens_reasoning``)."""
        return self.analysis.prompt_opens_reasoning(prompt, enable_thinking)

    def reasoning_closed(self, text: str) -> bool:
        """Is reasoning over at the end of ``text`` (an end marker after the last start)?

        For a prompt, only the part after the last generation prompt counts: a history
        turn's closed block does not close the turn being generated.
        """
        start, end = self.reasoning_markers
        if not end:
            return True
        opener = self.analysis.generation_prompt.strip()
        if opener:
            at = text.rfind(opener)
            if at >= 0:
                text = text[at + len(opener) :]
        last_end = text.rfind(end)
        if last_end < 0:
            return False
        return not start or text.rfind(start) < last_end

    def reasoning_split(self, prompt: str, enable_thinking: bool | None) -> ReasoningSplit:
        """A split of the raw output of ``prompt`` (its end is enough: whether it opens the
        reasoning block) into reasoning and the text after it, by the library's parse."""
        params = build_params(self.analysis, prompt=prompt, enable_thinking=enable_thinking)
        return ReasoningSplit(params)


class Reply:
    """One response's output, read whole or streamed, as the client should see it.

    ``ChatParams`` are cached and shared by every request with the same content, so the
    call ids they generate would repeat between responses: a reply gives each call the
    model's own id (when the output holds it) or a fresh one: the reply is the one owner of
    the ids a client sees. ``parallel_tool_calls=False`` keeps the first call only
    (``max_calls``); ``rejected_calls`` counts the calls it held back.
    """

    def __init__(
        self,
        params: ChatParams,
        *,
        parallel_tool_calls: bool | None = None,
        tool_call_deltas: str = "whole",
    ) -> None:
        self.params = params
        self.limit = max_calls(parallel_tool_calls)
        self.single = self.limit == 1
        self._deltas = tool_call_deltas
        self._stream: StreamParser | None = None
        self._chunks: list[str] = []  # the output so far, joined only when an id is asked
        self._ids: dict[str, str] = {}
        self._held: set[int] = set()  # indices of the calls held back while streaming
        self._parsed_rejects = 0

    @property
    def rejected_calls(self) -> int:
        """How many calls ``parallel_tool_calls=false`` held back."""
        return self._parsed_rejects + len(self._held)

    @property
    def message(self) -> ChatMessage:
        """The streamed output as a message (after ``finish``), as the deltas built it."""
        if self._stream is None:
            self._stream = self.params.stream(self._deltas)
        return self._owned(self._stream.message, count=False)

    @property
    def dropped_calls(self) -> tuple[int, ...]:
        """Calls streamed in part and then found broken (``StreamParser.dropped_calls``)."""
        return () if self._stream is None else self._stream.dropped_calls

    def call_id(self, given: str) -> str:
        """The model's own call id, else a fresh one for this response."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        if self._chunks and given in self._chunks[0]:
            return given
        return self._ids.setdefault(given, "call_" + uuid.uuid4().hex[:24])

    def parse(self, text: str, *, finish_reason: str | None = None) -> ChatMessage:
        """The whole output as a message."""
        self._chunks = [text]
        return self._owned(self.params.parse(text, finish_reason=finish_reason), count=True)

    def _owned(self, message: ChatMessage, *, count: bool) -> ChatMessage:
        """``message`` with this reply's call ids, its calls held to one when asked."""
        kept = message.tool_calls[: self.limit]
        if count:
            self._parsed_rejects += len(message.tool_calls) - len(kept)
        calls = [ToolCall(self.call_id(c.id), c.name, c.arguments) for c in kept]
        return dataclasses.replace(message, tool_calls=calls)

    def feed(self, chunk: str) -> list[StreamDelta]:
        """The deltas that became certain with ``chunk``."""
        if self._stream is None:
            self._stream = self.params.stream(self._deltas)
        self._chunks.append(chunk)
        return self._own(self._stream.feed_deltas(chunk))

    def finish(self, *, finish_reason: str | None = None) -> list[StreamDelta]:
        """The deltas held back until the output ended."""
        if self._stream is None:
            self._stream = self.params.stream(self._deltas)
        return self._own(self._stream.finish_deltas(finish_reason=finish_reason))

    def _own(self, deltas: Iterable[StreamDelta]) -> list[StreamDelta]:
        out = []
        for d in deltas:
            if not d.tool_calls:  # most deltas: text, kept as they are
                if d.content or d.reasoning_content:
                    out.append(d)
                continue
            calls = []
            for tc in d.tool_calls:
                if self.limit is not None and tc.index >= self.limit:
                    self._held.add(tc.index)
                elif tc.id:
                    calls.append(dataclasses.replace(tc, id=self.call_id(tc.id)))
                else:
                    calls.append(tc)
            if d.content or d.reasoning_content or calls:
                out.append(dataclasses.replace(d, tool_calls=tuple(calls)))
        return out


def merge_deltas(deltas: Iterable[StreamDelta]) -> StreamDelta | None:
    """Deltas of one engine step as one (None when they hold nothing): the texts joined,
    the call pieces in order."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCallDelta] = []
    for d in deltas:
        content.append(d.content or "")
        reasoning.append(d.reasoning_content or "")
        calls.extend(d.tool_calls)
    text, thought = "".join(content), "".join(reasoning)
    if not (text or thought or calls):
        return None
    return StreamDelta(text or None, thought or None, tuple(calls))


class ReasoningSplit:
    """Splits raw model output into its reasoning and the raw text after it, chunk by chunk.

    For engines that hand the text after the reasoning to a parser of their own (vLLM's and
    SGLang's reasoning parsers). The split is the library's own parse of the response
    (``params``, from ``Session.reasoning_split``): the reasoning is what
    ``ChatParams.parse`` reads as reasoning, whatever the format writes around it (a
    block's markers, a left-out opener, harmony's channels), and the text after it is the
    raw output from where the parse says reasoning ended. Text the parse has not decided
    is held back.
    """

    def __init__(self, params: ChatParams) -> None:
        self._stream = params.stream()
        self._after: int | None = None  # where the text after the reasoning starts

    @property
    def done(self) -> bool:
        """Is the reasoning over (everything from now on is the text after it)?"""
        return self._after is not None

    def split(self, text: str) -> tuple[str, str]:
        """A whole output's (reasoning, text after it)."""
        reasoning, rest = self.feed(text)
        last_reasoning, last_rest = self.finish()
        return reasoning + last_reasoning, rest + last_rest

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, text after the reasoning) that became certain with ``text``."""
        if self._after is not None:
            return "", text
        stream = self._stream
        reasoning = _reasoning_of(stream.feed_deltas(text))
        return reasoning, self._rest(stream.reasoning_end())

    def finish(self) -> tuple[str, str]:
        """What is still held back when the output ends (a reasoning block never closed)."""
        if self._after is not None:
            return "", ""
        stream = self._stream
        reasoning = _reasoning_of(stream.finish_deltas())
        return reasoning, self._rest(stream.reasoning_end())

    def _rest(self, end: int | None) -> str:
        if end is None:
            return ""
        self._after = end
        return self._stream.text[end:]


def _reasoning_of(deltas: Sequence[StreamDelta]) -> str:
    return "".join(d.reasoning_content for d in deltas if d.reasoning_content)
