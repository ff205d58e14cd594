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
from collections.abc import Mapping
from typing import Any

from autoparser import ChatMessage
from autoparser.serve.limits import InvalidRequest
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
IGNORED = ("store", "metadata", "user", "safety_identifier", "prompt_cache_key", "service_tier")
SAMPLING = ("temperature", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty")
TEXT_PARTS = ("input_text", "output_text", "text")


@dataclasses.dataclass(frozen=True)
class ResponsesRequest:
    """A Responses request mapped onto chat completions: the chat body, and what the answer
    repeats of the request."""

    chat: dict[str, object]
    echo: dict[str, object]
    stream: bool


def _fail(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(f"{param}: {message}", param)


def _text_of(content: object, where: str) -> str | list[dict[str, object]]:
    """A message's content: a string, or its text parts (one part becomes a string)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _fail("must be a string or a list of content parts", where)
    texts: list[str] = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
            shown = kind if isinstance(kind, str) else type(part).__name__
            raise _fail(f"only text parts are supported, got {shown!r}", f"{where}[{i}]")
        texts.append(part["text"])
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": t} for t in texts]


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


def input_messages(items: object, instructions: object) -> list[dict[str, object]]:
    """``instructions`` + ``input`` as chat messages: function calls join the assistant turn
    they belong to, outputs become tool messages, a reasoning item starts an assistant turn."""
    messages: list[dict[str, object]] = []
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _fail("must be a string", "instructions")
        messages.append({"role": "system", "content": instructions})
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise _fail("must be a string or a non-empty list of items", "input")
    names: dict[str, str] = {}  # call_id -> function name, for the tool messages
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise _fail("must be an object", where)
        kind = item.get("type", "message")
        last = messages[-1] if messages else None
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise _fail("must be user, system, developer or assistant", f"{where}.role")
            message: dict[str, object] = {
                "role": "system" if role == "developer" else role,
                "content": _text_of(item.get("content"), f"{where}.content"),
            }
            # an assistant message after this turn's reasoning-only item is the same turn
            if (
                role == "assistant"
                and last is not None
                and last["role"] == "assistant"
                and not last.get("content")
                and not last.get("tool_calls")
            ):
                last["content"] = message["content"]
                continue
            messages.append(message)
        elif kind == "function_call":
            call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
            for field, value in (("call_id", call_id), ("name", name), ("arguments", arguments)):
                if not isinstance(value, str):
                    raise _fail("must be a string", f"{where}.{field}")
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            names[str(call_id)] = str(name)
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": None}
                messages.append(last)
            calls = last.setdefault("tool_calls", [])
            if isinstance(calls, list):  # always: this function writes every tool_calls
                calls.append(call)
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise _fail("must be a string", f"{where}.call_id")
            output = _text_of(item.get("output"), f"{where}.output")
            tool: dict[str, object] = {"role": "tool", "tool_call_id": call_id, "content": output}
            if call_id in names:
                tool["name"] = names[call_id]
            messages.append(tool)
        elif kind == "reasoning":
            reasoning = _reasoning_text(item, where)
            if reasoning:  # the start of an assistant turn
                messages.append(
                    {"role": "assistant", "content": None, "reasoning_content": reasoning}
                )
        else:
            raise _fail(
                f"unsupported item type {kind!r} (message, function_call, "
                "function_call_output and reasoning are)",
                f"{where}.type",
            )
    return messages


def _tools(tools: object) -> list[dict[str, object]] | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _fail("must be a list of function tools", "tools")
    out: list[dict[str, object]] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, Mapping) else None
            raise _fail(f"only function tools are supported, got {kind!r}", f"tools[{i}].type")
        if not isinstance(tool.get("name"), str):
            raise _fail("must be a string", f"tools[{i}].name")
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        if tool.get("description") is None:
            function.pop("description", None)
        if function.get("parameters") is None:
            function["parameters"] = {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: object) -> str | dict[str, object]:
    if choice is None or choice in ("auto", "none", "required"):
        return choice or "auto"
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        if not isinstance(choice.get("name"), str):
            raise _fail("must be a string", "tool_choice.name")
        return {"type": "function", "function": {"name": choice["name"]}}
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


def to_chat(body: object) -> ResponsesRequest:
    """Map a Responses request body onto a chat-completions body (a 400 names the
    Responses field)."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    for name, why in REFUSED.items():
        if body.get(name) not in (None, False, 0):
            raise _fail(why, name)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _fail("must be a boolean", "stream")
    chat: dict[str, object] = {
        "messages": input_messages(body.get("input"), body.get("instructions")),
        "tools": _tools(body.get("tools")),
        "tool_choice": _tool_choice(body.get("tool_choice")),
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
    return ResponsesRequest(chat, echo, stream)


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
) -> dict[str, object]:
    """The whole answer: reasoning, message, function calls (in that order)."""
    status = status_of(message, hit_limit)
    output: list[dict[str, object]] = []
    if message.reasoning_content:
        output.append(reasoning_item(_id("rs"), message.reasoning_content, status))
    if message.content:
        output.append(message_item(_id("msg"), message.content, status))
    for call in message.tool_calls:
        output.append(call_item(_id("fc"), call.id, call.name, call.arguments, "completed"))
    return envelope(ident, echo, status, output, counts)


class ResponseEvents:
    """The parser's chat deltas as Responses stream events.

    Text and reasoning items stay open until the end (their text may resume after a call);
    a function call is an item of its own, announced whole (the parser's "whole" policy:
    a call is announced only once it is complete and valid, so the final response never
    lacks one that was announced).
    """

    def __init__(self, ident: Identity, echo: Mapping[str, object]) -> None:
        self.ident = ident
        self.echo = echo
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

    def feed(self, deltas: list[dict[str, object]]) -> list[dict[str, object]]:
        events: list[dict[str, object]] = []
        for delta in deltas:
            for key, kind, name in (
                ("reasoning_content", "reasoning", "response.reasoning_text.delta"),
                ("content", "message", "response.output_text.delta"),
            ):
                piece = delta.get(key)
                if not piece:
                    continue
                opened, index = self._open_text(kind)
                events.extend(opened)
                item = self.items[index]
                item["content"][0]["text"] += piece
                extra: dict[str, object] = {"logprobs": []} if kind == "message" else {}
                events.append(
                    self._event(
                        name,
                        item_id=item["id"],
                        output_index=index,
                        content_index=0,
                        delta=piece,
                        **extra,
                    )
                )
            calls = delta.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                events.extend(self._call(call))
        return events

    def _call(self, call: Mapping[str, object]) -> list[dict[str, object]]:
        given = call.get("function")
        function: Mapping[str, object] = given if isinstance(given, Mapping) else {}
        if "id" not in call:  # "whole" policy: never an argument piece of an earlier call
            raise RuntimeError("a tool call delta without its announcement")
        index = len(self.items)
        arguments = str(function.get("arguments") or "")
        item = call_item(_id("fc"), str(call["id"]), str(function.get("name")), "", "in_progress")
        events = [self._event("response.output_item.added", output_index=index, item=dict(item))]
        if arguments:
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=arguments,
                )
            )
        item["arguments"] = arguments
        item["status"] = "completed"
        self.items.append(item)
        events.append(
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=arguments,
            )
        )
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    def finish(
        self, message: ChatMessage, hit_limit: bool, counts: Usage
    ) -> list[dict[str, object]]:
        """Close the open items, then ``response.completed`` (or ``response.incomplete``)."""
        status = status_of(message, hit_limit)
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
