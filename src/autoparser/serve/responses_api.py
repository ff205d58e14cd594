"""OpenAI's Responses API (``POST /v1/responses``) as a thin mapping over chat completions.

``to_chat`` turns a Responses request into a chat-completions body, which then takes the
same path as ``/v1/chat/completions`` (validation, ``template.apply``, the engine, the
library's parser): no second parser. ``response`` builds the whole answer from the parsed
message; ``ResponseEvents`` turns the stream parser's deltas into the Responses event
sequence, so the accumulated stream equals the whole answer.

The server is stateless: ``previous_response_id`` and ``conversation`` are refused with a
400 (the client sends the whole conversation as ``input``), and ``store`` is accepted but
nothing is stored (the response says ``store: false``). A store would tie a conversation to
one process, lose it on restart, and need eviction limits a client cannot see.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from autoparser import ChatMessage, LarkGrammarError, StreamDelta, ToolCallDelta, lark_to_regex
from autoparser.serve.limits import Degradation, InvalidRequest
from autoparser.serve.media import (
    MEDIA_PARTS,
    forwards,
    image_part,
    media_placeholder,
    placeholder_text,
)
from autoparser.serve.openai_format import Usage

# Fields refused with a 400 naming them (a non-null value), and why.
REFUSED = {
    "previous_response_id": "this server stores no responses; send the whole conversation "
    "as input (previous_response_id is not supported)",
    "conversation": "this server stores no conversations; send the whole conversation as input",
    "background": "background responses are not supported",
    "prompt": "stored prompt templates are not supported",
    "top_logprobs": "log probabilities are not supported",
    "max_tool_calls": "max_tool_calls is not supported",
}
# Fields accepted and not acted on: bookkeeping a stateless local server has no use for.
IGNORED = (
    "store", "metadata", "user", "safety_identifier", "prompt_cache_key", "service_tier",
    "include", "client_metadata", "stream_options", "truncation",
)  # fmt: skip
SAMPLING = ("temperature", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty")
TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
# Items of tools only the provider runs (their tools are left out of the prompt): skipped.
HOSTED_ITEMS = (
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
    "computer_call", "computer_call_output", "local_shell_call", "local_shell_call_output",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response",
    "tool_search_call", "tool_search_output", "compaction", "compaction_summary",
)  # fmt: skip
# The one argument of a custom (freeform) tool served as a function.
CUSTOM_INPUT = "input"


@dataclasses.dataclass(frozen=True)
class ResponsesRequest:
    """A Responses request mapped onto chat completions: the chat body, and what the answer
    repeats of the request."""

    chat: dict[str, object]
    echo: dict[str, object]
    stream: bool
    tools: Mapping[str, ServedTool] = dataclasses.field(default_factory=dict)
    degraded: tuple[Degradation, ...] = ()


@dataclasses.dataclass(frozen=True)
class ServedTool:
    """How a client's tool is served, to give its calls back in the client's shape: a
    function of a ``namespace`` under a flat name (``namespace`` + ``name``), or a
    ``custom`` tool whose one string input is the function's ``input`` argument."""

    name: str
    namespace: str | None = None
    custom: bool = False


class _State:
    """One request's mapping: the media policy, strictness, the served tools (by the name
    the model sees) and what was served in a lesser form."""

    def __init__(self, media: str, strict: bool) -> None:
        self.media = media
        self.strict = strict
        self.tools: dict[str, ServedTool] = {}
        self.degraded: list[Degradation] = []

    def media_text(self, kind: str, where: str, why: str = "") -> str:
        self.degraded.append(media_placeholder(kind, where, self.media, why))
        return placeholder_text(kind)

    def media_part(self, part: Mapping[str, object], where: str) -> str | dict[str, object]:
        """An ``input_image`` with an ``image_url`` (``--media auto``) as a chat image part
        (the chat path decides, ``media.py``); any other media part, its placeholder."""
        kind = MEDIA_PARTS[str(part["type"])]
        why = ""
        if forwards(self.media):
            url = part.get("image_url")
            if kind == "image" and isinstance(url, str) and url:
                return image_part(url)
            why = {
                "image": "an image by file id cannot be sent",
                "document": "documents are not sent to engines",
            }.get(kind, f"{kind} is not sent to engines")
        return self.media_text(kind, where, why)

    def flat_name(self, name: str, namespace: object) -> str:
        """The name the model sees for a tool (``namespace`` given: a namespace's)."""
        if not isinstance(namespace, str) or not namespace:
            return name
        return namespace + name if namespace.endswith("_") else f"{namespace}__{name}"


def _fail(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(f"{param}: {message}", param)


def _text_of(content: object, where: str, state: _State) -> str | list[dict[str, object]]:
    """A message's content: a string, or its text parts (one part becomes a string);
    images and files become a text placeholder."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _fail("must be a string or a list of content parts", where)
    texts: list[str | dict[str, object]] = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(part, Mapping) and isinstance(kind, str) and kind in MEDIA_PARTS:
            texts.append(state.media_part(part, f"{where}[{i}]"))
            continue
        if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
            shown = kind if isinstance(kind, str) else type(part).__name__
            raise _fail(f"only text parts are supported, got {shown!r}", f"{where}[{i}]")
        texts.append(part["text"])
    if len(texts) == 1 and isinstance(texts[0], str):
        return texts[0]
    return [{"type": "text", "text": t} if isinstance(t, str) else t for t in texts]


def _reasoning_text(item: Mapping[str, object], where: str) -> str:
    """An earlier turn's reasoning: its ``reasoning_text`` parts, else its summary."""
    for key in ("content", "summary"):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise _fail("must be a list of text parts", f"{where}.{key}")
        texts = [p.get("text") for p in parts if isinstance(p, Mapping)]
        if any(not isinstance(t, str) for t in texts) or len(texts) != len(parts):
            raise _fail("must be a list of text parts", f"{where}.{key}")
        if texts:
            return "\n".join(str(t) for t in texts)
    return ""


class _Turns:
    """Chat messages built from input items, each assistant-side item (reasoning, an
    assistant message, a call) joined to the turn it belongs to, whatever order the client
    sends them back in: the open assistant turn when nothing came after it, or when what
    came after are outputs of its calls and some of its calls are still unanswered (Codex
    stores a reasoning item after the call it preceded)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, object]] = []
        self.turn: dict[str, object] | None = None
        self.unanswered: set[str] = set()  # call ids of ``turn`` without an output yet
        self.names: dict[str, str] = {}  # call_id -> the name the model sees

    def assistant(self) -> dict[str, object]:
        last = self.messages[-1] if self.messages else None
        if self.turn is not None and (last is self.turn or self.unanswered):
            return self.turn
        self.turn = {"role": "assistant", "content": None}
        self.unanswered = set()
        self.messages.append(self.turn)
        return self.turn

    def call(self, call_id: str, name: str, arguments: str) -> None:
        turn = self.assistant()
        calls = turn.setdefault("tool_calls", [])
        if isinstance(calls, list):  # always: only this class writes tool_calls
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
        self.names[call_id] = name
        self.unanswered.add(call_id)

    def output(self, call_id: str, content: object) -> None:
        tool: dict[str, object] = {"role": "tool", "tool_call_id": call_id, "content": content}
        if call_id in self.names:
            tool["name"] = self.names[call_id]
        self.unanswered.discard(call_id)
        self.messages.append(tool)

    def text(self, content: str | list[dict[str, object]]) -> None:
        turn = self.assistant()
        old = turn.get("content")
        if not old:
            turn["content"] = content
        elif isinstance(old, str) and isinstance(content, str):
            turn["content"] = f"{old}\n{content}"
        else:
            parts: list[object] = [{"type": "text", "text": old}] if isinstance(old, str) else []
            if isinstance(old, list):
                parts = list(old)
            more = [{"type": "text", "text": content}] if isinstance(content, str) else content
            turn["content"] = [*parts, *more]

    def reasoning(self, text: str) -> None:
        turn = self.assistant()
        old = turn.get("reasoning_content")
        turn["reasoning_content"] = f"{old}\n{text}" if old else text

    def other(self, message: dict[str, object]) -> None:
        self.turn = None
        self.unanswered = set()
        self.messages.append(message)

    def done(self) -> list[dict[str, object]]:
        """The messages; a turn holding only reasoning (nothing the model said or called)
        is left out: a template would render it as an empty turn."""
        return [
            m
            for m in self.messages
            if not (m["role"] == "assistant" and not m.get("content") and not m.get("tool_calls"))
        ]


def input_messages(
    items: object, instructions: object, state: _State | None = None
) -> list[dict[str, object]]:
    """``instructions`` + ``input`` as chat messages: calls (function, namespaced, custom)
    join the assistant turn they belong to (``_Turns``), outputs become tool messages,
    developer messages system ones; items of provider-run tools are skipped."""
    state = _State("placeholder", False) if state is None else state
    turns = _Turns()
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _fail("must be a string", "instructions")
        turns.other({"role": "system", "content": instructions})
    if isinstance(items, str):
        return [*turns.done(), {"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise _fail("must be a string or a non-empty list of items", "input")
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise _fail("must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise _fail("must be user, system, developer or assistant", f"{where}.role")
            content = _text_of(item.get("content"), f"{where}.content", state)
            if role == "assistant":
                turns.text(content)
            else:
                turns.other({"role": "system" if role == "developer" else role, "content": content})
        elif kind in ("function_call", "custom_tool_call"):
            value = "arguments" if kind == "function_call" else "input"
            call_id, name, given = item.get("call_id"), item.get("name"), item.get(value)
            for field, found in (("call_id", call_id), ("name", name), (value, given)):
                if not isinstance(found, str):
                    raise _fail("must be a string", f"{where}.{field}")
            flat = state.flat_name(str(name), item.get("namespace"))
            arguments = str(given) if kind == "function_call" else json.dumps({CUSTOM_INPUT: given})
            turns.call(str(call_id), flat, arguments)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise _fail("must be a string", f"{where}.call_id")
            turns.output(call_id, _text_of(item.get("output"), f"{where}.output", state))
        elif kind == "reasoning":
            reasoning = _reasoning_text(item, where)
            if reasoning:
                turns.reasoning(reasoning)
        elif kind in HOSTED_ITEMS:
            state.degraded.append(
                Degradation(
                    "hosted_tool",
                    "hosted_tool",
                    f"{where}: a {kind} item (a provider-run tool) skipped",
                )
            )
        else:
            raise _fail(
                f"unsupported item type {kind!r} (message, function_call, "
                "function_call_output, custom_tool_call, custom_tool_call_output and "
                "reasoning are)",
                f"{where}.type",
            )
    return turns.done()


def _function(tool: Mapping[str, object], where: str, name: str) -> dict[str, object]:
    if not isinstance(tool.get("name"), str):
        raise _fail("must be a string", f"{where}.name")
    function = {"name": name, **{k: tool[k] for k in ("description", "parameters") if k in tool}}
    if tool.get("description") is None:
        function.pop("description", None)
    if function.get("parameters") is None:
        function["parameters"] = {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def _custom(tool: Mapping[str, object], where: str, state: _State) -> dict[str, object]:
    """A custom (freeform) tool as a function of one string argument, ``input``, constrained
    by its grammar: a regex (a full match), or a Lark grammar translated to one
    (``schema/lark_grammar.py``). A grammar that is not valid Lark is a 400; one that uses a
    construct a regex cannot express leaves the string free, a 400 with
    ``--strict-schemas``."""
    name = tool.get("name")
    if not isinstance(name, str):
        raise _fail("must be a string", f"{where}.name")
    value: dict[str, object] = {"type": "string"}
    fmt = tool.get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar":
        syntax, definition = fmt.get("syntax"), fmt.get("definition")
        if not isinstance(definition, str):
            raise _fail("must be a string", f"{where}.format.definition")
        if syntax == "regex":
            value["pattern"] = f"^(?:{definition})$"
        elif syntax == "lark":
            try:
                value["pattern"] = f"^(?:{lark_to_regex(definition)})$"
            except LarkGrammarError as exc:
                if not exc.unsupported:
                    raise _fail(
                        f"the lark grammar of {name} is not valid: {exc.detail}",
                        f"{where}.format.definition",
                    ) from None
                _grammar_left_free(f"the lark grammar of {name}: {exc.detail}", where, state)
        else:
            _grammar_left_free(
                f"a {syntax} grammar ({name}) cannot be expressed in the grammar (only lark "
                "and regex grammars can)",
                where,
                state,
            )
    parameters = {
        "type": "object",
        "properties": {CUSTOM_INPUT: value},
        "required": [CUSTOM_INPUT],
        "additionalProperties": False,
    }
    function: dict[str, object] = {"name": name, "parameters": parameters}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    state.tools[name] = ServedTool(name, custom=True)
    return {"type": "function", "function": function}


def _grammar_left_free(why: str, where: str, state: _State) -> None:
    """A custom tool's grammar the emitted grammar cannot hold: its input is any string
    (a 400 naming the format under ``--strict-schemas``)."""
    if state.strict:
        raise _fail(why, f"{where}.format")
    detail = f"{where}: {why}: its input is left free"
    state.degraded.append(Degradation("tool_grammar", "tool_grammar", detail))


def _tools(tools: object, state: _State) -> list[dict[str, object]] | None:
    """Function tools; the functions of ``namespace`` tools under flat names; ``custom``
    tools as functions of one string. Tools only the provider runs (``web_search``,
    ``file_search``, ``code_interpreter``, ``local_shell``, ``computer_use_preview``,
    ``image_generation``, ``mcp``...) are left out, with a warning."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _fail("must be a list of tools", "tools")
    out: list[dict[str, object]] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise _fail("must be an object", where)
        kind = tool.get("type")
        if kind == "function":
            out.append(_function(tool, where, str(tool.get("name"))))
            if isinstance(tool.get("name"), str):
                state.tools[str(tool["name"])] = ServedTool(str(tool["name"]))
        elif kind == "custom":
            out.append(_custom(tool, where, state))
        elif kind == "namespace":
            namespace, members = tool.get("name"), tool.get("tools")
            if not isinstance(namespace, str) or not isinstance(members, list):
                raise _fail("a namespace has a string name and a list of tools", where)
            for j, member in enumerate(members):
                at = f"{where}.tools[{j}]"
                if not isinstance(member, Mapping) or member.get("type", "function") != "function":
                    raise _fail("a namespace holds function tools", at)
                flat = state.flat_name(str(member.get("name")), namespace)
                out.append(_function(member, at, flat))
                state.tools[flat] = ServedTool(str(member["name"]), namespace)
        elif isinstance(kind, str):
            state.degraded.append(
                Degradation(
                    "hosted_tool",
                    "hosted_tool",
                    f"{where}: {kind!r} is a tool only the provider can run: left out of "
                    "the prompt",
                )
            )
        else:
            raise _fail("must be a string", f"{where}.type")
    return out or None


def _tool_choice(choice: object, state: _State) -> str | dict[str, object] | None:
    """The chat ``tool_choice`` (None when absent: the one reader's default, OpenAI's)."""
    if choice is None:
        return None
    if choice in ("auto", "none", "required"):
        return str(choice)
    if isinstance(choice, Mapping) and choice.get("type") in ("function", "custom"):
        if not isinstance(choice.get("name"), str):
            raise _fail("must be a string", "tool_choice.name")
        name = state.flat_name(str(choice["name"]), choice.get("namespace"))
        return {"type": "function", "function": {"name": name}}
    raise _fail("must be auto, none, required or {type: function, name}", "tool_choice")


def _text_format(text: object) -> dict[str, object] | None:
    if text is None:
        return None
    if not isinstance(text, Mapping):
        raise _fail("must be an object", "text")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping):
        raise _fail("must be an object", "text.format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        if not isinstance(fmt.get("schema"), Mapping):
            raise _fail("must be an object", "text.format.schema")
        spec = {"name": fmt.get("name") or "response", "schema": fmt["schema"]}
        return {"type": "json_schema", "json_schema": spec}
    raise _fail("must be text, json_object or json_schema", "text.format.type")


def _reasoning(reasoning: object, chat: dict[str, object]) -> None:
    """``reasoning.effort``: "none" turns the template's thinking switch off, any other
    effort on (and reaches the template as ``reasoning_effort``, as in chat completions)."""
    if reasoning is None:
        return
    if not isinstance(reasoning, Mapping):
        raise _fail("must be an object", "reasoning")
    effort = reasoning.get("effort")
    if effort is None:
        return
    if effort not in ("none", "minimal", "low", "medium", "high", "xhigh"):
        raise _fail("must be none, minimal, low, medium, high or xhigh", "reasoning.effort")
    chat["chat_template_kwargs"] = {"enable_thinking": effort != "none"}
    if effort != "none":
        chat["reasoning_effort"] = effort


def to_chat(body: object, media: str = "placeholder", strict: bool = False) -> ResponsesRequest:
    """Map a Responses request body onto a chat-completions body (a 400 names the
    Responses field). ``IGNORED`` fields (Codex's ``store: false``, ``include``,
    ``prompt_cache_key``, ``client_metadata``...) are accepted and change nothing."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    for name, why in REFUSED.items():
        if body.get(name) not in (None, False, 0):
            raise _fail(why, name)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _fail("must be a boolean", "stream")
    state = _State(media, strict)
    chat: dict[str, object] = {
        "tools": _tools(body.get("tools"), state),
        "messages": input_messages(body.get("input"), body.get("instructions"), state),
        "tool_choice": _tool_choice(body.get("tool_choice"), state),
    }
    if body.get("parallel_tool_calls") is not None:
        if not isinstance(body["parallel_tool_calls"], bool):
            raise _fail("must be a boolean", "parallel_tool_calls")
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    fmt = _text_format(body.get("text"))
    if fmt is not None:
        chat["response_format"] = fmt
    _reasoning(body.get("reasoning"), chat)
    limit = body.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise _fail("must be an integer of at least 1", "max_output_tokens")
        chat["max_tokens"] = limit
    for name in SAMPLING:
        if body.get(name) is not None:
            chat[name] = body[name]
    echo = {
        "instructions": body.get("instructions"),
        "max_output_tokens": limit,
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "reasoning": {"effort": (body.get("reasoning") or {}).get("effort"), "summary": None},
        "temperature": body.get("temperature"),
        "text": {"format": (body.get("text") or {}).get("format") or {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p"),
    }
    return ResponsesRequest(chat, echo, stream, state.tools, tuple(state.degraded))


def param_name(chat_param: str | None) -> str | None:
    """A chat-completions field named in an error, as the Responses field it came from."""
    if chat_param is None:
        return None
    for chat_name, name in (
        ("messages", "input"),
        ("max_tokens", "max_output_tokens"),
        ("response_format", "text.format"),
        ("chat_template_kwargs", "reasoning"),
        ("reasoning_effort", "reasoning.effort"),
    ):
        if chat_param == chat_name or chat_param.startswith(chat_name + "."):
            return name + chat_param[len(chat_name) :]
    if chat_param.startswith("tools[") and ".function." in chat_param:
        return chat_param.replace(".function.", ".", 1)
    if chat_param == "tool_choice.function.name":
        return "tool_choice.name"
    return chat_param


# --------------------------------------------------------------------------- output
def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def usage(counts: Usage) -> dict[str, object]:
    return {
        "input_tokens": counts.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": counts.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": counts.prompt_tokens + counts.completion_tokens,
    }


def reasoning_item(item_id: str, text: str, status: str) -> dict[str, object]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "encrypted_content": None,
        "status": status,
    }


def text_part(text: str) -> dict[str, object]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str | None, status: str) -> dict[str, object]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [] if text is None else [text_part(text)],
    }


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str
) -> dict[str, object]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def output_call(
    item_id: str,
    call_id: str,
    name: str,
    arguments: str,
    status: str,
    tools: Mapping[str, ServedTool],
) -> dict[str, object]:
    """A call as the client's tool expects it back: a ``function_call`` (with its
    ``namespace`` and the function's own name for a namespaced tool, as Codex routes it),
    or a ``custom_tool_call`` whose ``input`` is the string the model wrote."""
    served = tools.get(name)
    if served is not None and served.custom:
        try:
            value = json.loads(arguments).get(CUSTOM_INPUT, "") if arguments else ""
        except (ValueError, AttributeError):
            value = arguments  # the grammar makes this unreachable; never lose the text
        return {
            "id": item_id,
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": served.name,
            "input": value if isinstance(value, str) else json.dumps(value),
            "status": status,
        }
    item = call_item(item_id, call_id, name, arguments, status)
    if served is not None and served.namespace is not None:
        item["name"] = served.name
        item["namespace"] = served.namespace
    return item


def status_of(message: ChatMessage, hit_limit: bool) -> str:
    """``incomplete`` when the engine stopped on the token limit, else ``completed``."""
    return "incomplete" if hit_limit else "completed"


@dataclasses.dataclass(frozen=True)
class Identity:
    """What every event of one response repeats."""

    id: str
    created_at: int
    model: str

    @classmethod
    def new(cls, model: str) -> Identity:
        return cls(_id("resp"), int(time.time()), model)


def envelope(
    ident: Identity,
    echo: Mapping[str, object],
    status: str,
    output: list[dict[str, object]],
    counts: Usage | None,
) -> dict[str, object]:
    """The ``response`` object, in any state."""
    return {
        "id": ident.id,
        "object": "response",
        "created_at": ident.created_at,
        "status": status,
        "error": None,
        "incomplete_details": ({"reason": "max_output_tokens"} if status == "incomplete" else None),
        "model": ident.model,
        "output": output,
        "previous_response_id": None,
        "store": False,
        "truncation": "disabled",
        "usage": usage(counts) if counts is not None else None,
        **echo,
    }


def response(
    ident: Identity,
    echo: Mapping[str, object],
    message: ChatMessage,
    hit_limit: bool,
    counts: Usage,
    tools: Mapping[str, ServedTool] | None = None,
) -> dict[str, object]:
    """The whole answer: reasoning, message, function calls (in that order)."""
    status = status_of(message, hit_limit)
    output: list[dict[str, object]] = []
    if message.reasoning_content:
        output.append(reasoning_item(_id("rs"), message.reasoning_content, status))
    if message.content:
        output.append(message_item(_id("msg"), message.content, status))
    for call in message.tool_calls:
        output.append(
            output_call(_id("fc"), call.id, call.name, call.arguments, "completed", tools or {})
        )
    return envelope(ident, echo, status, output, counts)


class ResponseEvents:
    """The parser's chat deltas as Responses stream events.

    One item is open at a time: a reasoning or message item is done before the next item
    starts, a call's included (as OpenAI streams them: a client such as Codex stores items
    in the order they are done); text after a call opens a new item. A call is an item of its own,
    announced whole (the parser's "whole" policy: a call is announced only once it is
    complete and valid, so the final response never lacks one that was announced).
    """

    def __init__(
        self,
        ident: Identity,
        echo: Mapping[str, object],
        tools: Mapping[str, ServedTool] | None = None,
    ) -> None:
        self.ident = ident
        self.echo = echo
        self.tools: Mapping[str, ServedTool] = tools or {}
        self.sequence = 0
        # by output_index; built here and grown in place (text appended to content[0])
        self.items: list[dict[str, Any]] = []
        self.open: dict[str, int] = {}  # "reasoning" / "message" -> output_index

    def _event(self, kind: str, **fields: object) -> dict[str, object]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def start(self) -> list[dict[str, object]]:
        snapshot = envelope(self.ident, self.echo, "in_progress", [], None)
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=snapshot),
        ]

    def _open_text(self, kind: str) -> tuple[list[dict[str, object]], int]:
        if kind in self.open:
            return [], self.open[kind]
        closed = self._close_open("completed")  # one item open at a time
        index = len(self.items)
        if kind == "reasoning":
            item = reasoning_item(_id("rs"), "", "in_progress")
            added = {**item, "content": []}
            part: dict[str, object] = {"type": "reasoning_text", "text": ""}
        else:
            item = message_item(_id("msg"), "", "in_progress")
            added = {**item, "content": []}
            part = text_part("")
        self.items.append(item)
        self.open[kind] = index
        events = [
            *closed,
            self._event("response.output_item.added", output_index=index, item=added),
            self._event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            ),
        ]
        return events, index

    def feed(self, deltas: Iterable[StreamDelta]) -> list[dict[str, object]]:
        events: list[dict[str, object]] = []
        for delta in deltas:
            if delta.reasoning_content:
                events += self._text("reasoning", delta.reasoning_content)
            if delta.content:
                events += self._text("message", delta.content)
            for call in delta.tool_calls:
                events.extend(self._call(call))
        return events

    def _text(self, kind: str, piece: str) -> list[dict[str, object]]:
        """More text of the open ``kind`` item ("reasoning" or "message"), opened if need be."""
        events, index = self._open_text(kind)
        item = self.items[index]
        item["content"][0]["text"] += piece
        extra: dict[str, object] = {"logprobs": []} if kind == "message" else {}
        name = (
            "response.output_text.delta" if kind == "message" else "response.reasoning_text.delta"
        )
        events.append(
            self._event(
                name, item_id=item["id"], output_index=index, content_index=0, delta=piece, **extra
            )
        )
        return events

    def _call(self, call: ToolCallDelta) -> list[dict[str, object]]:
        if call.name is None:  # "whole" policy: never an argument piece of an earlier call
            raise RuntimeError("a tool call delta without its announcement")
        events = self._close_open("completed")
        index = len(self.items)
        name, call_id = call.name, str(call.id)
        item = output_call(_id("fc"), call_id, name, call.arguments, "completed", self.tools)
        custom = item["type"] == "custom_tool_call"
        key = "input" if custom else "arguments"
        text = str(item[key])
        added = {**item, key: "", "status": "in_progress"}
        events.append(self._event("response.output_item.added", output_index=index, item=added))
        kind = "response.custom_tool_call_input" if custom else "response.function_call_arguments"
        if text:
            events.append(
                self._event(f"{kind}.delta", item_id=item["id"], output_index=index, delta=text)
            )
        self.items.append(item)
        done: dict[str, object] = {key: text} if custom else {"name": name, key: text}
        events.append(self._event(f"{kind}.done", item_id=item["id"], output_index=index, **done))
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    def _close_open(self, status: str) -> list[dict[str, object]]:
        """Done events for the open reasoning and message items, in output order."""
        events: list[dict[str, object]] = []
        for kind, index in sorted(self.open.items(), key=lambda kv: kv[1]):
            item = self.items[index]
            item["status"] = status
            text = item["content"][0]["text"]
            done = (
                "response.reasoning_text.done"
                if kind == "reasoning"
                else ("response.output_text.done")
            )
            extra: dict[str, object] = {"logprobs": []} if kind == "message" else {}
            events.append(
                self._event(
                    done,
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=text,
                    **extra,
                )
            )
            events.append(
                self._event(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=item["content"][0],
                )
            )
            events.append(self._event("response.output_item.done", output_index=index, item=item))
        self.open.clear()
        return events

    def finish(
        self, message: ChatMessage, hit_limit: bool, counts: Usage
    ) -> list[dict[str, object]]:
        """Close the open items, then ``response.completed`` (or ``response.incomplete``)."""
        status = status_of(message, hit_limit)
        events = self._close_open(status)
        final = envelope(self.ident, self.echo, status, self.items, counts)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        events.append(self._event(kind, response=final))
        return events

    def failed(self, message: str) -> list[dict[str, object]]:
        """The engine broke off: an ``error`` event, then ``response.failed``."""
        final = envelope(self.ident, self.echo, "failed", self.items, None)
        final["error"] = {"code": "server_error", "message": message}
        return [
            self._event("error", code="server_error", message=message, param=None),
            self._event("response.failed", response=final),
        ]


def sse(event: Mapping[str, object]) -> bytes:
    """One event as SSE, named by its type (as OpenAI sends them)."""
    data = json.dumps(event, ensure_ascii=False)
    return f"event: {event['type']}\ndata: {data}\n\n".encode()
