"""The studio's JSON API as plain functions: a request body (a dict) in, a JSON-ready dict out.

No web framework here: ``app.py`` only reads bodies, calls these and writes the answers, so
the API is testable without a server and the same code answers every client. A mistake in
a body is a :class:`StudioError` naming the field and the pane of the page it concerns; a
library error keeps its own type and message and is mapped to its pane by :func:`error_body`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, overload

from autoparser import (
    DEFAULT_VARIANT,
    AutoparserError,
    ChatMessage,
    ChatParams,
    ChatTemplate,
    ExportError,
    GrammarError,
    RequestError,
    SchemaError,
    Session,
    TemplateError,
    TemplateLimitError,
    TemplateSource,
    load_text,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T")
_U = TypeVar("_U")
_D = TypeVar("_D")

MAX_TEMPLATE = 1_000_000  # characters of template source
MAX_OUTPUT = 1_000_000  # characters of model output parsed or replayed
MAX_CHUNKS = 20_000  # chunks of one replay (output length / chunk size)


class StudioError(AutoparserError):
    """A studio request the API cannot answer: ``field`` names the part of the body at
    fault, ``pane`` the pane of the page that shows the error, ``status`` the HTTP status."""

    def __init__(self, message: str, *, field: str, pane: str, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.pane = pane
        self.status = status


# ------------------------------------------------------------------------- reading bodies


@overload
def _get(body: Mapping[str, object], key: str, kind: type[_T], default: _D) -> _T | _D: ...
@overload
def _get(
    body: Mapping[str, object], key: str, kind: tuple[type[_T], type[_U]], default: _D
) -> _T | _U | _D: ...
def _get(
    body: Mapping[str, object], key: str, kind: type | tuple[type, ...], default: object
) -> object:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = {str: "a string", list: "a list", dict: "an object", bool: "true or false"}
        name = want.get(kind, "an integer") if isinstance(kind, type) else "a string or object"
        raise StudioError(
            f"{key}: expected {name}, got {type(value).__name__}",
            field=key,
            pane=_PANE_OF_FIELD.get(key, "conversation"),
        )
    return value


_PANE_OF_FIELD = {
    "template": "template",
    "bos_token": "template",
    "eos_token": "template",
    "output": "output",
    "finish_reason": "output",
    "chunk_size": "output",
    "tool_call_deltas": "output",
}


def session_of(body: Mapping[str, object]) -> Session:
    """The session of the body's ``template`` (Jinja text) with its ``bos_token`` /
    ``eos_token``: the library's one store keeps it for the page's next requests."""
    source = _get(body, "template", str, "")
    if not source.strip():
        raise StudioError(
            "template: empty; paste or drop a template", field="template", pane="template"
        )
    if len(source) > MAX_TEMPLATE:
        raise StudioError(
            f"template: {len(source)} characters, the studio takes at most {MAX_TEMPLATE}",
            field="template",
            pane="template",
            status=413,
        )
    bos = _get(body, "bos_token", str, "")
    eos = _get(body, "eos_token", str, "")
    return Session.for_source(source, bos_token=bos, eos_token=eos, name="template")


def template_of(body: Mapping[str, object]) -> ChatTemplate:
    """The body's template (``session_of``)."""
    return session_of(body).template


def source_payload(loaded: TemplateSource) -> dict[str, object]:
    """What the page starts from: the variants' texts (default first) and the tokens."""
    variants = dict(loaded.variants)
    ordered = {k: variants.pop(k) for k in (DEFAULT_VARIANT,) if k in variants}
    ordered.update(sorted(variants.items()))
    return {
        "name": loaded.name.replace("\\", "/").rsplit("/", 1)[-1],  # the file, not its folders
        "variants": ordered,
        "bos_token": loaded.bos_token,
        "eos_token": loaded.eos_token,
    }


def load_pasted(body: Mapping[str, object]) -> dict[str, object]:
    """A pasted or dropped file's text (a .jinja or a tokenizer_config.json) as variants."""
    text = _get(body, "text", str, "")
    if not text.strip():
        raise StudioError("text: empty", field="text", pane="template")
    name = _get(body, "name", str, "pasted")
    return source_payload(load_text(text, name))


# ---------------------------------------------------------------------------- the request


class _Request(TypedDict, total=False):
    """A body's conversation and options, as ``ChatTemplate.apply`` takes them."""

    messages: list[Mapping[str, object]]
    tools: list[dict[str, object]]
    tool_choice: str | dict[str, object]  # absent: OpenAI's default
    enable_thinking: bool | None
    # template variables, passed on as keywords of apply/render (each any JSON value)
    kwargs: dict[str, Any]
    add_generation_prompt: bool


def _request(body: Mapping[str, object]) -> _Request:
    """The conversation and options of the body, as ``ChatTemplate.apply`` takes them."""
    messages = _get(body, "messages", list, None)
    if not messages:
        raise StudioError(
            "messages: expected a non-empty list of messages", field="messages", pane="conversation"
        )
    options: _Request = {"messages": messages}
    tools = _get(body, "tools", list, None)
    if tools:
        options["tools"] = tools
    choice = _get(body, "tool_choice", (str, dict), None)
    if choice is not None:  # else the one reader's default (OpenAI's)
        options["tool_choice"] = choice
    thinking = body.get("enable_thinking")
    if thinking is not None:
        options["enable_thinking"] = _get(body, "enable_thinking", bool, None)
    kwargs = _get(body, "template_kwargs", dict, {})
    for key in kwargs:
        if not key.isidentifier():
            raise StudioError(
                f"template_kwargs: {key!r} is not a variable name",
                field="template_kwargs",
                pane="conversation",
            )
    options["kwargs"] = kwargs
    options["add_generation_prompt"] = _get(body, "add_generation_prompt", bool, True)
    return options


def params_of(session: Session, body: Mapping[str, object]) -> ChatParams:
    """The body's request through the session, as an OpenAI request (call ids seeded, so
    the page's results repeat)."""
    options = _request(body)
    kwargs = dict(options["kwargs"])
    if options.get("enable_thinking") is not None:
        kwargs["enable_thinking"] = options.get("enable_thinking")
    request = {
        "messages": options["messages"],
        "tools": options.get("tools"),
        "tool_choice": options.get("tool_choice"),
        "add_generation_prompt": options["add_generation_prompt"],
        "chat_template_kwargs": kwargs,
    }
    return session.params(request, call_id_seed=0)


def _output(body: Mapping[str, object]) -> str:
    text: str = _get(body, "output", str, "")
    if len(text) > MAX_OUTPUT:
        raise StudioError(
            f"output: {len(text)} characters, the studio parses at most {MAX_OUTPUT}",
            field="output",
            pane="output",
            status=413,
        )
    return text


def _finish_reason(body: Mapping[str, object]) -> str | None:
    reason: str | None = _get(body, "finish_reason", str, None)
    if reason not in (None, "stop", "length"):
        raise StudioError(
            f"finish_reason: expected 'stop' or 'length', got {reason!r}",
            field="finish_reason",
            pane="output",
        )
    return reason


# ------------------------------------------------------------------------------ endpoints


def analyze(body: Mapping[str, object]) -> dict[str, object]:
    """Caps, quirks, the analysis (with its verification) and each marker's evidence."""
    template = template_of(body)
    analysis = template.analyze()
    evidence = template.marker_evidence()
    return {
        "caps": _plain(template.caps),
        "quirks": _plain(template.quirks),
        "analysis": analysis.to_dict(),
        "evidence": [e.to_dict() for e in evidence],
        "markers": _markers(evidence),
    }


def _plain(value: DataclassInstance) -> dict[str, object]:
    data: dict[str, object] = json.loads(json.dumps(dataclasses.asdict(value), default=str))
    return data


class _Marked(Protocol):
    """What the page highlights of a marker's evidence."""

    @property
    def marker(self) -> str: ...
    @property
    def field(self) -> str: ...


def _markers(evidence: Iterable[_Marked]) -> list[dict[str, str]]:
    """Markers worth highlighting in a prompt: not whitespace alone, longest first (so that
    ``<tool_call>\\n`` wins over a shorter marker inside it), one entry per text."""
    seen: dict[str, str] = {}
    for item in evidence:
        if item.marker.strip() and item.marker not in seen:
            seen[item.marker] = item.field
    ordered = sorted(seen.items(), key=lambda kv: -len(kv[0]))
    return [{"marker": m, "field": f} for m, f in ordered]


def render(body: Mapping[str, object]) -> dict[str, object]:
    """The prompt of the request (polyfills on, as ``apply`` renders), the render without
    polyfills, the generation prompt, and transformers' render when it is installed."""
    session = session_of(body)
    template = session.template
    params = params_of(session, body)
    options = _request(body)
    kwargs = dict(options["kwargs"])
    if "enable_thinking" in options:
        kwargs.setdefault("enable_thinking", options["enable_thinking"])
    try:
        raw: str | None = template.render(
            options["messages"],
            options.get("tools"),
            options["add_generation_prompt"],
            polyfills=False,
            **kwargs,
        )
        raw_error, limited = "", False
    except TemplateError as exc:
        raw, raw_error, limited = None, str(exc), isinstance(exc, TemplateLimitError)
    # transformers renders without limits: a template that went past ours is not given to it.
    compared = (
        {"available": True, "prompt": None, "error": "not rendered: past a render limit"}
        if limited
        else _transformers_render(template, options, kwargs)
    )
    gp = params.generation_prompt
    at = params.prompt.rfind(gp) if gp and params.prompt.endswith(gp) else -1
    return {
        "prompt": params.prompt,
        "generation_prompt": gp,
        "generation_prompt_at": at,
        "without_polyfills": raw,
        "without_polyfills_error": raw_error,
        "transformers": compared,
    }


def _transformers_render(
    template: ChatTemplate, options: _Request, kwargs: Mapping[str, Any]
) -> dict[str, object]:
    """transformers' own render of the same request (no polyfills), or why there is none."""
    try:
        from transformers.utils import chat_template_utils
    except ImportError:
        return {"available": False, "reason": "transformers is not installed"}
    messages = [{k: v for k, v in m.items() if v is not None} for m in options["messages"]]
    tools = options.get("tools")
    try:
        rendered = chat_template_utils.render_jinja_template(
            conversations=[messages],
            tools=None if tools is None else list(tools),
            chat_template=template.source,
            add_generation_prompt=options["add_generation_prompt"],
            bos_token=template.bos_token,
            eos_token=template.eos_token,
            **kwargs,
        )
    except Exception as exc:  # transformers raises whatever the template raises
        return {"available": True, "prompt": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"available": True, "prompt": str(rendered[0][0]), "error": ""}


def parse(body: Mapping[str, object]) -> dict[str, object]:
    """The output parsed into a message, and what each span of it was parsed as."""
    session = session_of(body)
    params = params_of(session, body)
    text = _output(body)
    reason = _finish_reason(body)
    message = params.parse(text, finish_reason=reason)
    spans = params.labelled_spans(text)
    finish = "length" if message.truncated or reason == "length" else None
    return {
        "message": message.to_openai(),
        "truncated": message.truncated,
        "finish_reason": finish or ("tool_calls" if message.tool_calls else "stop"),
        "spans": [
            {"kind": s.kind, "start": s.start, "end": s.end, **_reasons(message, s.start, s.end)}
            for s in spans
        ],
        "findings": _findings(message),
    }


def _findings(message: ChatMessage) -> list[dict[str, object]]:
    """What the parse tolerated or refused, each with its sentence (``Finding.describe``)."""
    return [{**f.to_dict(), "text": f.describe()} for f in message.findings]


def _reasons(message: ChatMessage, start: int, end: int) -> dict[str, object]:
    """``{"findings": [sentence, ...]}`` for a span that findings are about, else {}: the
    reason shown next to the span."""
    found = [f.describe() for f in message.findings if f.start < end and start < f.end]
    return {"findings": found} if found else {}


def stream(body: Mapping[str, object]) -> dict[str, object]:
    """The output replayed in chunks of ``chunk_size`` characters: each chunk and its deltas."""
    session = session_of(body)
    params = params_of(session, body)
    text = _output(body)
    size = _get(body, "chunk_size", int, 4)
    if size < 1:
        raise StudioError("chunk_size: expected at least 1", field="chunk_size", pane="output")
    if len(text) > size * MAX_CHUNKS:
        raise StudioError(
            f"chunk_size: {size} makes more than {MAX_CHUNKS} chunks of this output; "
            "choose a larger chunk",
            field="chunk_size",
            pane="output",
            status=413,
        )
    mode = _get(body, "tool_call_deltas", str, "whole")
    try:
        parser = params.stream(tool_call_deltas=mode)
    except RequestError as exc:
        raise StudioError(str(exc), field="tool_call_deltas", pane="output") from exc
    chunks: list[dict[str, object]] = []
    for start in range(0, len(text), size):
        piece = text[start : start + size]
        chunks.append({"text": piece, "deltas": parser.feed(piece)})
    chunks.append({"text": "", "deltas": parser.finish(), "final": True})
    message = parser.message
    return {
        "chunks": chunks,
        "message": message.to_openai(),
        "truncated": message.truncated,
        "dropped_calls": list(parser.dropped_calls),
        "findings": _findings(message),
    }


def grammar(body: Mapping[str, object]) -> dict[str, object]:
    """The grammar of the request, its triggers and preserved tokens, and whether it
    accepts the body's ``output`` (checked by llguidance when it is installed)."""
    session = session_of(body)
    params = params_of(session, body)
    text = _output(body)
    return {
        **params.grammar_fields(),
        "accepts": _acceptance(params, text) if text else None,
    }


def _acceptance(params: ChatParams, text: str) -> dict[str, object]:
    if params.grammar is None:
        return {"checked": False, "reason": "no grammar for this request"}
    try:
        import llguidance
    except ImportError:
        return {"checked": False, "reason": "llguidance is not installed"}
    start = params.trigger_start(text) if params.grammar_lazy else 0
    if start < 0:
        return {
            "checked": True,
            "accepted": True,
            "from": -1,
            "reason": "no trigger fires: the lazy grammar never switches on",
        }
    tokenizer = llguidance.LLTokenizer("byte")
    try:
        grm = llguidance.grammar_from("gbnf", params.grammar)
        matcher = llguidance.LLMatcher(tokenizer, grm)
    except Exception as exc:  # llguidance raises bare exceptions on grammars it refuses
        return {"checked": True, "accepted": False, "from": start, "reason": f"llguidance: {exc}"}
    data = text[start:].encode("utf-8")
    tokens = tokenizer.tokenize_bytes(data)
    consumed = matcher.try_consume_tokens(tokens)
    if consumed != len(tokens) or matcher.is_error():
        at = len(data[:consumed].decode("utf-8", errors="ignore")) + start
        return {
            "checked": True,
            "accepted": False,
            "from": start,
            "rejected_at": at,
            "reason": f"refused at character {at}",
        }
    accepting = bool(matcher.is_accepting())
    return {
        "checked": True,
        "accepted": accepting,
        "from": start,
        "reason": "" if accepting else "the output ends before the grammar does",
    }


def export(body: Mapping[str, object]) -> dict[str, object]:
    """What to take elsewhere: the transformers response template, vLLM flags, a llama.cpp
    ``/completion`` body, and a pytest case reproducing the page."""
    session = session_of(body)
    params = params_of(session, body)
    options = _request(body)
    try:
        response_template: dict[str, object] | None = params.to_response_template()
        response_error = ""
    except ExportError as exc:
        response_template, response_error = None, str(exc)
    completion: dict[str, object] = {
        "prompt": params.prompt,
        "n_predict": 1024,
        "stop": params.additional_stops,
    }
    if params.grammar is not None:
        completion["grammar"] = params.grammar
        completion["grammar_lazy"] = params.grammar_lazy
        completion["grammar_triggers"] = [t.to_dict() for t in params.grammar_triggers]
        completion["preserved_tokens"] = params.preserved_tokens
    return {
        "response_template": response_template,
        "response_template_error": response_error,
        "vllm_flags": [
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "autoparser",
            "--reasoning-parser",
            "autoparser",
        ],
        "llamacpp_completion": completion,
        "pytest": _pytest_case(session, options, body),
    }


def _pytest_case(session: Session, options: _Request, body: Mapping[str, object]) -> str:
    """A test file reproducing the page: the template, the request and the parsed message."""
    template = session.template
    output = _output(body)
    reason = _finish_reason(body)
    params = params_of(session, body)
    expected = params.parse(output, finish_reason=reason).to_openai()
    apply_args: dict[str, object] = {
        k: v for k, v in options.items() if k not in ("messages", "kwargs")
    }
    apply_args.update(options["kwargs"])
    lines = [
        '"""Reproduces an autoparser studio session: the template, the request, the output."""',
        "",
        "from autoparser import ChatTemplate",
        "",
        f"TEMPLATE = {template.source!r}",
        f"MESSAGES = {json.dumps(options['messages'], ensure_ascii=False)!s}",
        f"OPTIONS = {apply_args!r}",
        f"OUTPUT = {output!r}",
        f"EXPECTED = {expected!r}",
        "",
        "",
        "def test_studio_case() -> None:",
        "    template = ChatTemplate(",
        f"        TEMPLATE, bos_token={template.bos_token!r}, eos_token={template.eos_token!r}",
        "    )",
        "    params = template.apply(MESSAGES, call_id_seed=0, **OPTIONS)",
        f"    message = params.parse(OUTPUT, finish_reason={reason!r})",
        "    assert message.to_openai() == EXPECTED",
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ errors

_PANE_OF_ERROR: tuple[tuple[type[BaseException], str], ...] = (
    (TemplateError, "template"),
    (SchemaError, "conversation"),
    (RequestError, "conversation"),
    (GrammarError, "grammar"),
    (ExportError, "export"),
)
_LINE = re.compile(r" at line (\d+)")
_SCHEMA_HINT = " (the grammar cannot enforce it: remove or rewrite that keyword in the schema)"


def error_body(exc: AutoparserError) -> tuple[int, dict[str, object]]:
    """The HTTP status and JSON body of an error: its type, message, the pane it concerns,
    the field at fault (studio errors) and the template line (template errors)."""
    if isinstance(exc, StudioError):
        status, pane, field = exc.status, exc.pane, exc.field
    else:
        status, field = 422, ""
        pane = next((p for kind, p in _PANE_OF_ERROR if isinstance(exc, kind)), "template")
    # The studio, like apply(), converts schemas strictly: lenient=True is not on offer.
    message = SchemaError.message_with_hint(exc, _SCHEMA_HINT)
    line = None
    if isinstance(exc, TemplateError):
        found = _LINE.search(message)
        line = int(found.group(1)) if found else None
    error: dict[str, object] = {
        "type": type(exc).__name__,
        "message": message,
        "pane": pane,
        "field": field,
    }
    if line is not None:
        error["line"] = line
    return status, {"error": error}
