"""Anthropic's Messages API (``POST /v1/messages``) as a thin mapping over chat completions.

``to_chat`` turns a Messages request into a chat-completions body, which takes the same
path as ``/v1/chat/completions`` (validation, ``template.apply``, the engine, the library's
parser); ``message`` builds the whole answer from the parsed message and ``MessageEvents``
turns the stream parser's deltas into Anthropic's stream events. Errors have Anthropic's
shape: ``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping

from autoparser import ChatMessage, StreamDelta
from autoparser.serve.limits import Degradation, InvalidRequest
from autoparser.serve.media import forwards, image_part, media_placeholder, placeholder_text
from autoparser.serve.openai_format import Usage

# Anthropic's error type for an HTTP status.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    501: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}


@dataclasses.dataclass(frozen=True)
class MessagesRequest:
    """A Messages request mapped onto chat completions, and the user's stop sequences."""

    chat: dict[str, object]
    stop_sequences: tuple[str, ...]
    stream: bool
    degraded: tuple[Degradation, ...] = ()


def error_body(status: int, message: str) -> dict[str, object]:
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_shape(
    status: int, message: str, kind: str, param: str | None, code: str | None
) -> dict[str, object]:
    """Every error of the Messages routes (the server's ``ERROR_SHAPES`` entry): Anthropic's
    shape, its type from the status (Anthropic's clients pick the exception by status)."""
    return error_body(status, message)


def _fail(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(f"{param}: {message}", param)


def _blocks(content: object, where: str) -> list[Mapping[str, object]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _fail("must be a string or a list of content blocks", where)
    for i, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise _fail("must be an object with a 'type'", f"{where}[{i}]")
    return content


def _text(block: Mapping[str, object], where: str) -> str:
    if not isinstance(block.get("text"), str):
        raise _fail("must be a string", f"{where}.text")
    return str(block["text"])


# Content blocks a model cannot see through a text-only engine path, by what they are.
MEDIA_BLOCKS = {"image": "image", "document": "document"}


class _Mapping:
    """One request's mapping state: the media policy and what was served in a lesser form."""

    def __init__(self, media: str) -> None:
        self.media = media
        self.degraded: list[Degradation] = []
        self.referenced: set[str] = set()  # tools a tool_reference block loaded

    def media_text(self, block: Mapping[str, object], where: str) -> str | dict[str, object]:
        """An image or document block: an image the engine may take (base64 or URL source,
        ``--media auto``) as a chat ``image_url`` part (the chat path decides, ``media.py``);
        else its placeholder (a 400 under ``--media reject``)."""
        kind = MEDIA_BLOCKS[str(block["type"])]
        source = block.get("source")
        why = ""
        if isinstance(source, Mapping) and forwards(self.media) and kind == "image":
            media_type, data, url = source.get("media_type"), source.get("data"), source.get("url")
            if source.get("type") == "base64" and isinstance(data, str):
                return image_part(f"data:{media_type};base64,{data}", media_type)
            if source.get("type") == "url" and isinstance(url, str):
                return image_part(url, media_type)
            why = f"an image from a {source.get('type')!s} source cannot be sent"
        elif forwards(self.media) and kind == "document":
            why = "documents are not sent to engines"
        if isinstance(source, Mapping) and isinstance(source.get("media_type"), str):
            kind = f"{kind} ({source['media_type']})"
        self.degraded.append(media_placeholder(kind, where, self.media, why))
        return placeholder_text(kind)


def _joined(texts: list[str | dict[str, object]]) -> str | list[dict[str, object]]:
    """A turn's texts and forwarded images: one text as a string, else content parts."""
    if len(texts) == 1 and isinstance(texts[0], str):
        return texts[0]
    return [{"type": "text", "text": t} if isinstance(t, str) else t for t in texts]


def _tool_result(
    block: Mapping[str, object], where: str, names: Mapping[str, str], state: _Mapping
) -> dict[str, object]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise _fail("must be a string", f"{where}.tool_use_id")
    content: object = block.get("content", "")
    if isinstance(content, list):
        parts: list[str | dict[str, object]] = []
        for j, part in enumerate(content):
            at = f"{where}.content[{j}]"
            kind = part.get("type") if isinstance(part, Mapping) else None
            if isinstance(part, Mapping) and kind in MEDIA_BLOCKS:
                parts.append(state.media_text(part, at))
            elif isinstance(part, Mapping) and kind == "tool_reference":
                name = part.get("tool_name")
                if not isinstance(name, str):
                    raise _fail("must be a string", f"{at}.tool_name")
                state.referenced.add(name)  # its deferred definition joins the tools
                parts.append(f"Tool {name} loaded.")
            elif isinstance(part, Mapping) and kind == "text":
                parts.append(_text(part, at))
            else:
                raise _fail(
                    "only text, image, document and tool_reference blocks are supported", at
                )
        if all(isinstance(p, str) for p in parts):
            content = "\n".join(str(p) for p in parts)
        else:  # with an image: content parts (text parts join with newlines as before)
            content = _joined(parts)
    elif not isinstance(content, str):
        raise _fail("must be a string or a list of text blocks", f"{where}.content")
    if block.get("is_error"):
        if isinstance(content, list):
            content = [{"type": "text", "text": "Error: "}, *content]
        else:
            content = f"Error: {content}"
    tool: dict[str, object] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if call_id in names:
        tool["name"] = names[call_id]
    return tool


def _system_text(content: object, where: str) -> str:
    """A system prompt: a string, or text blocks (``cache_control`` and the like ignored)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _fail("must be a string or a list of text blocks", where)
    texts: list[str] = []
    for i, block in enumerate(_blocks(content, where)):
        if block.get("type") != "text":
            raise _fail("only text blocks are supported", f"{where}[{i}]")
        texts.append(_text(block, f"{where}[{i}]"))
    return "\n".join(texts)


def chat_messages(
    system: object, messages: object, state: _Mapping | None = None
) -> list[dict[str, object]]:
    """``system`` + ``messages`` as chat messages: ``tool_result`` blocks become tool
    messages (before the user's text), ``thinking`` the assistant's reasoning, ``tool_use``
    its tool calls (``is_error`` results are prefixed "Error: "), images and documents a
    text placeholder. A ``system`` message in ``messages`` (Claude Code's reminders) stays
    a system message where it is; before the first turn, it joins the system prompt (a
    template that refuses one later in the conversation gets it folded into a user turn:
    ``Chat.prepare``)."""
    state = _Mapping("placeholder") if state is None else state
    out: list[dict[str, object]] = []
    if system is not None:
        out.append({"role": "system", "content": _system_text(system, "system")})
    if not isinstance(messages, list) or not messages:
        raise _fail("must be a non-empty list of messages", "messages")
    names: dict[str, str] = {}
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise _fail("must be an object", where)
        role = message.get("role")
        if role == "system":
            text = _system_text(message.get("content"), f"{where}.content")
            if all(m["role"] == "system" for m in out) and out:
                out[-1]["content"] = f"{out[-1]['content']}\n\n{text}"
            else:
                out.append({"role": "system", "content": text})
            continue
        if role not in ("user", "assistant"):
            raise _fail(
                f"unexpected role {role!r}: must be user, assistant or system", f"{where}.role"
            )
        blocks = _blocks(message.get("content"), f"{where}.content")
        texts: list[str | dict[str, object]] = []
        if role == "user":
            for j, block in enumerate(blocks):
                at = f"{where}.content[{j}]"
                if block["type"] == "tool_result":
                    out.append(_tool_result(block, at, names, state))
                elif block["type"] == "text":
                    texts.append(_text(block, at))
                elif block["type"] in MEDIA_BLOCKS:
                    texts.append(state.media_text(block, at))
                else:
                    raise _fail(f"unsupported block type {block['type']!r}", f"{at}.type")
            if texts:
                out.append({"role": "user", "content": _joined(texts)})
            continue
        reasoning: list[str] = []
        calls: list[dict[str, object]] = []
        for j, block in enumerate(blocks):
            at = f"{where}.content[{j}]"
            kind = block["type"]
            if kind == "text":
                texts.append(_text(block, at))
            elif kind == "thinking":
                thought = block.get("thinking")
                if not isinstance(thought, str):
                    raise _fail("must be a string", f"{at}.thinking")
                reasoning.append(thought)
            elif kind == "redacted_thinking":
                continue  # opaque to any model but the one that wrote it
            elif kind == "tool_use":
                call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    raise _fail("must have a string id and name", at)
                if not isinstance(arguments, Mapping):
                    raise _fail("must be an object", f"{at}.input")
                names[call_id] = name
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                )
            else:
                raise _fail(f"unsupported block type {kind!r}", f"{at}.type")
        turn: dict[str, object] = {
            "role": "assistant",
            "content": _joined(texts) if texts else None,
        }
        if reasoning:
            turn["reasoning_content"] = "\n".join(reasoning)
        if calls:
            turn["tool_calls"] = calls
        out.append(turn)
    return out


def _tools(tools: object, state: _Mapping) -> list[dict[str, object]] | None:
    """Client tools as chat tools. A ``defer_loading`` tool joins them only once a
    ``tool_reference`` block in the conversation loaded it (Anthropic's tool search; Claude
    Code's ``DeferredToolPlaceholder`` never is). Anthropic's own tools
    (``web_search_20250305``, ``code_execution_...``, ``bash_...``, ``text_editor_...``:
    a versioned ``type``) are run by Anthropic or defined by it; they are left out, with a
    warning."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _fail("must be a list of tools", "tools")
    out: list[dict[str, object]] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise _fail("must be an object", f"tools[{i}]")
        if tool.get("type") not in (None, "custom"):
            state.degraded.append(
                Degradation(
                    "hosted_tool",
                    "hosted_tool",
                    f"tools[{i}]: {tool.get('type')!r} is a tool only Anthropic can run or "
                    "define: left out of the prompt",
                )
            )
            continue
        if not isinstance(tool.get("name"), str):
            raise _fail("must be a string", f"tools[{i}].name")
        if not isinstance(tool.get("input_schema"), Mapping):
            raise _fail("must be an object", f"tools[{i}].input_schema")
        if tool.get("defer_loading") is True and tool["name"] not in state.referenced:
            continue
        function: dict[str, object] = {"name": tool["name"]}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        function["parameters"] = tool["input_schema"]
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: object, chat: dict[str, object]) -> None:
    if choice is None:
        return
    if not isinstance(choice, Mapping):
        raise _fail("must be an object", "tool_choice")
    kind = choice.get("type")
    if kind == "auto":
        chat["tool_choice"] = "auto"
    elif kind == "any":
        chat["tool_choice"] = "required"
    elif kind == "none":
        chat["tool_choice"] = "none"
    elif kind == "tool":
        if not isinstance(choice.get("name"), str):
            raise _fail("must be a string", "tool_choice.name")
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise _fail("must be auto, any, tool or none", "tool_choice.type")
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None:
        if not isinstance(disable, bool):
            raise _fail("must be a boolean", "tool_choice.disable_parallel_tool_use")
        chat["parallel_tool_calls"] = not disable


def _thinking(thinking: object, chat: dict[str, object]) -> None:
    """``thinking`` turns the template's reasoning switch on (enabled, adaptive) or off
    (disabled); unset: the template's default. ``budget_tokens`` is checked but not
    enforced: the engine cannot end a reasoning block at a budget."""
    if thinking is None:
        return
    if not isinstance(thinking, Mapping):
        raise _fail("must be an object", "thinking")
    kind = thinking.get("type")
    if kind not in ("enabled", "disabled", "adaptive"):
        raise _fail("must be enabled, disabled or adaptive", "thinking.type")
    budget = thinking.get("budget_tokens")
    if kind == "enabled" and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
    ):
        raise _fail("must be a positive integer", "thinking.budget_tokens")
    chat["chat_template_kwargs"] = {"enable_thinking": kind != "disabled"}


def _effort(config: object, chat: dict[str, object]) -> None:
    """``output_config.effort`` reaches the template as ``reasoning_effort`` (what
    templates with effort levels read), unless thinking is off."""
    effort = config.get("effort") if isinstance(config, Mapping) else None
    kwargs = chat.get("chat_template_kwargs")
    off = isinstance(kwargs, Mapping) and kwargs.get("enable_thinking") is False
    if isinstance(effort, str) and not off:
        chat["reasoning_effort"] = effort


def to_chat(body: object, media: str = "placeholder") -> MessagesRequest:
    """Map a Messages request body onto a chat-completions body (a 400 names the field).

    Fields Claude Code sends that change nothing here are accepted and ignored:
    ``metadata``, ``cache_control`` on any block, ``context_management``, ``service_tier``,
    ``container``, ``mcp_servers``, and the ``anthropic-beta`` headers; ``thinking``
    blocks come back with any signature (an empty one included)."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    limit = body.get("max_tokens")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise _fail("required, an integer of at least 1", "max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _fail("must be a boolean", "stream")
    stops = body.get("stop_sequences") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _fail("must be a list of non-empty strings", "stop_sequences")
    state = _Mapping(media)
    chat: dict[str, object] = {
        "messages": chat_messages(body.get("system"), body.get("messages"), state),
        "tools": _tools(body.get("tools"), state),
        "max_tokens": limit,
    }
    if stops:
        chat["stop"] = list(stops)
    _tool_choice(body.get("tool_choice"), chat)
    _thinking(body.get("thinking"), chat)
    _effort(body.get("output_config"), chat)
    for name in ("temperature", "top_p", "top_k"):
        if body.get(name) is not None:
            chat[name] = body[name]
    return MessagesRequest(chat, tuple(stops), stream, tuple(state.degraded))


def param_name(chat_param: str | None) -> str | None:
    """A chat-completions field named in an error, as the Messages field it came from."""
    if chat_param is None:
        return None
    if chat_param.startswith("tools[") and ".function.parameters" in chat_param:
        return chat_param.replace(".function.parameters", ".input_schema", 1)
    if chat_param.startswith("tools[") and ".function." in chat_param:
        return chat_param.replace(".function.", ".", 1)
    renames = {
        "tool_choice.function.name": "tool_choice.name",
        "stop": "stop_sequences",
        "chat_template_kwargs": "thinking",
        "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
    }
    return renames.get(chat_param, chat_param)


# --------------------------------------------------------------------------- output
def new_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def stop_reason(
    message: ChatMessage, hit_limit: bool, stop_word: str, stops: tuple[str, ...]
) -> tuple[str, str | None]:
    """``tool_use`` when complete calls were made, ``max_tokens`` on the token limit,
    ``stop_sequence`` on one of the request's stop sequences, else ``end_turn``."""
    if message.tool_calls and not (hit_limit and message.truncated):
        return "tool_use", None
    if hit_limit:
        return "max_tokens", None
    if stop_word and stop_word in stops:
        return "stop_sequence", stop_word
    return "end_turn", None


def _input(arguments: str) -> object:
    return json.loads(arguments) if arguments else {}


def usage(counts: Usage) -> dict[str, object]:
    return {
        "input_tokens": counts.prompt_tokens,
        "output_tokens": counts.completion_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message(
    ident: str,
    model: str,
    parsed: ChatMessage,
    reason: tuple[str, str | None],
    counts: Usage,
) -> dict[str, object]:
    """The whole answer: thinking, text, tool_use blocks (in that order)."""
    content: list[dict[str, object]] = []
    if parsed.reasoning_content:
        content.append({"type": "thinking", "thinking": parsed.reasoning_content, "signature": ""})
    if parsed.content:
        content.append({"type": "text", "text": parsed.content})
    for call in parsed.tool_calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
        )
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason[0],
        "stop_sequence": reason[1],
        "usage": usage(counts),
    }


class MessageEvents:
    """The parser's chat deltas as Anthropic stream events: one block open at a time,
    each tool_use block whole (the parser's "whole" policy: a call is announced only once
    it is complete and valid, so the final message never lacks one announced)."""

    def __init__(self, ident: str, model: str) -> None:
        self.ident = ident
        self.model = model
        self.index = -1
        self.open: str | None = None  # "text" / "thinking" while a block is open

    def start(self) -> list[tuple[str, dict[str, object]]]:
        shell: dict[str, object] = {
            "id": self.ident,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage(Usage()),
        }
        return [("message_start", {"type": "message_start", "message": shell}), ping()]

    def _close(self) -> list[tuple[str, dict[str, object]]]:
        if self.open is None:
            return []
        self.open = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self.index})]

    def _begin(self, block: dict[str, object]) -> list[tuple[str, dict[str, object]]]:
        events = self._close()
        self.index += 1
        self.open = str(block["type"])
        start = {"type": "content_block_start", "index": self.index, "content_block": block}
        return [*events, ("content_block_start", start)]

    def _delta(self, delta: dict[str, object]) -> tuple[str, dict[str, object]]:
        event = {"type": "content_block_delta", "index": self.index, "delta": delta}
        return ("content_block_delta", event)

    def feed(self, deltas: Iterable[StreamDelta]) -> list[tuple[str, dict[str, object]]]:
        events: list[tuple[str, dict[str, object]]] = []
        for delta in deltas:
            thinking = delta.reasoning_content
            if thinking:
                if self.open != "thinking":
                    events += self._begin({"type": "thinking", "thinking": "", "signature": ""})
                events.append(self._delta({"type": "thinking_delta", "thinking": thinking}))
            text = delta.content
            if text:
                if self.open != "text":
                    events += self._begin({"type": "text", "text": ""})
                events.append(self._delta({"type": "text_delta", "text": text}))
            for call in delta.tool_calls:
                if call.name is None:  # "whole" policy: never a piece of an earlier call
                    raise RuntimeError("a tool call delta without its announcement")
                block: dict[str, object] = {
                    "type": "tool_use",
                    "id": str(call.id),
                    "name": call.name,
                    "input": {},
                }
                events += self._begin(block)
                if call.arguments:
                    events.append(
                        self._delta({"type": "input_json_delta", "partial_json": call.arguments})
                    )
                events += self._close()
        return events

    def finish(
        self, reason: tuple[str, str | None], counts: Usage
    ) -> list[tuple[str, dict[str, object]]]:
        delta: dict[str, object] = {
            "type": "message_delta",
            "delta": {"stop_reason": reason[0], "stop_sequence": reason[1]},
            "usage": {
                "input_tokens": counts.prompt_tokens,
                "output_tokens": counts.completion_tokens,
            },
        }
        return [
            *self._close(),
            ("message_delta", delta),
            ("message_stop", {"type": "message_stop"}),
        ]


def ping() -> tuple[str, dict[str, object]]:
    return ("ping", {"type": "ping"})


def sse(name: str, data: Mapping[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
