"""Adapting OpenAI-shaped messages to what a particular template needs.

Two layers. ``template.messages.transformers_messages`` (below the renderer) does exactly
what transformers does to messages before rendering; ``apply_polyfills`` (here, above the
caps it reads) runs first, only where the probed caps say the template needs it: fold the
system turn into the first user turn, reshape tool call IDs, (de)serialise arguments,
describe ignored tools in the system turn, give content the shape the template reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from autoparser.errors import AutoparserError, TemplateError
from autoparser.message import REASONING_KEYS
from autoparser.schema.argument_types import value_types
from autoparser.schema.refs import resolve_ref
from autoparser.template.messages import (
    named_call_id,
    parameter_definitions_tool,
    with_call_turn_text,
)
from autoparser.template.renderer import Renderer

if TYPE_CHECKING:
    from autoparser.template.caps import TemplateCaps, TemplateQuirks

_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
ALNUM9 = re.compile(r"[0-9A-Za-z]{9}")


# ------------------------------------------------------------------ tool call ids


def alnum9_id(original: str) -> str:
    """A 9-alphanumeric ID derived deterministically from ``original`` (Mistral's shape)."""
    if ALNUM9.fullmatch(original):
        return original
    number = int.from_bytes(hashlib.sha256(original.encode("utf-8")).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, len(_ALNUM))
        chars.append(_ALNUM[digit])
    return "".join(chars)


def _reshape_ids(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """Give calls and their results 9-alphanumeric IDs; a result keeps its call's ID."""
    pending: list[str] = []
    result: list[dict[str, object]] = []
    for index, message in enumerate(messages):
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list) and calls:
            new_calls = []
            pending = []
            for position, call in enumerate(calls):
                if not isinstance(call, Mapping):
                    new_calls.append(call)
                    continue
                original = call.get("id") or f"call-{index}-{position}"
                new_id = alnum9_id(str(original))
                pending.append(new_id)
                new_calls.append({**call, "id": new_id})
            message = {**message, "tool_calls": new_calls}
        elif message.get("role") == "tool":
            original = message.get("tool_call_id")
            if original:
                new_id = alnum9_id(str(original))
            else:
                new_id = pending[0] if pending else alnum9_id(f"tool-{index}")
            if new_id in pending:
                pending.remove(new_id)
            message = {**message, "tool_call_id": new_id}
        result.append(message)
    return result


NAMED_ID = re.compile(r"functions\.[^:]+:\d+")


def _named_ids(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """Give calls ids naming them (``functions.NAME:IDX``, IDX the call's position in its
    turn), for templates that write the id where the name goes; ids of that shape are
    kept, and a result gets its call's new id."""
    renamed: dict[str, str] = {}
    pending: list[str] = []
    result: list[dict[str, object]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list) and calls:
            new_calls = []
            pending = []
            for position, call in enumerate(calls):
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(call, Mapping) or not isinstance(function, Mapping):
                    new_calls.append(call)
                    continue
                original = str(call.get("id") or "")
                new_id = original
                if not NAMED_ID.fullmatch(original):
                    new_id = named_call_id(str(function.get("name", "")), position)
                if original:
                    renamed[original] = new_id
                pending.append(new_id)
                new_calls.append({**call, "id": new_id})
            message = {**message, "tool_calls": new_calls}
        elif message.get("role") == "tool":
            original = str(message.get("tool_call_id") or "")
            new_id = renamed.get(original) or (pending[0] if pending else original)
            if new_id in pending:
                pending.remove(new_id)
            message = {**message, "tool_call_id": new_id}
        result.append(message)
    return result


# ------------------------------------------------------------------- arguments


def _map_arguments(messages: list[dict[str, object]], to_object: bool) -> list[dict[str, object]]:
    """Parse JSON-string arguments to objects (``to_object``) or serialise objects to JSON."""
    result = []
    for message in messages:
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            new_calls = []
            for call in calls:
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(function, Mapping):
                    new_calls.append(call)
                    continue
                args = function.get("arguments")
                if to_object and isinstance(args, str):
                    try:
                        parsed = json.loads(args)
                    except json.JSONDecodeError:
                        parsed = args
                    args = parsed if isinstance(parsed, dict) else args
                elif not to_object and isinstance(args, Mapping):
                    args = json.dumps(args, ensure_ascii=False)
                new_calls.append({**call, "function": {**function, "arguments": args}})
            message = {**message, "tool_calls": new_calls}
        result.append(message)
    return result


# ------------------------------------------------------------- system and tools


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def describe_tools(tools: list[dict[str, object]]) -> str:
    """Plain-text description of tools for templates that ignore the ``tools`` variable."""
    lines = [json.dumps(tool, ensure_ascii=False) for tool in tools]
    return "You can call the following tools. Each is described by a JSON schema:\n" + "\n".join(
        lines
    )


_SYSTEM_ROLES = ("system", "developer")


def _leading_role(messages: list[dict[str, object]]) -> object:
    return messages[0].get("role") if messages else None


def _add_to_system(messages: list[dict[str, object]], text: str) -> list[dict[str, object]]:
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        existing = _text_of(first.get("content"))
        joined = f"{existing}\n\n{text}" if existing else text
        return [{**first, "content": joined}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _fold_system(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """Move system messages into the first user turn (for templates without a system role)."""
    system_texts = [_text_of(m.get("content")) for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    if not system_texts:
        return messages
    prefix = "\n\n".join(t for t in system_texts if t)
    for index, message in enumerate(rest):
        if message.get("role") == "user":
            user_text = _text_of(message.get("content"))
            joined = f"{prefix}\n\n{user_text}" if user_text else prefix
            return [*rest[:index], {**message, "content": joined}, *rest[index + 1 :]]
    return [{"role": "user", "content": prefix}, *rest]


def _typed_content(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    return [
        {**m, "content": [{"type": "text", "text": m["content"]}]}
        if isinstance(m.get("content"), str)
        else m
        for m in messages
    ]


def _non_null_content(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    return [
        {**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None else m
        for m in messages
    ]


def _with_reasoning_key(message: dict[str, object]) -> dict[str, object]:
    """Also pass reasoning as ``reasoning`` for templates that read only that name."""
    for key in ("reasoning_content", "thinking"):
        if message.get(key) is not None and message.get("reasoning") is None:
            return {**message, "reasoning": message[key]}
    return message


def _reasoning_blocks(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """Put assistant reasoning first in content as a typed ``thinking`` part (Mistral style)."""
    result = []
    for message in messages:
        reasoning = next((message[k] for k in REASONING_KEYS if message.get(k) is not None), None)
        if message.get("role") == "assistant" and isinstance(reasoning, str) and reasoning:
            content = message.get("content")
            parts: list[object] = [{"type": "thinking", "thinking": reasoning}]
            if isinstance(content, list):
                parts += content
            elif content:
                parts.append({"type": "text", "text": str(content)})
            message = {k: v for k, v in message.items() if k not in REASONING_KEYS}
            message["content"] = parts
        result.append(message)
    return result


def _bare_function(tool: dict[str, object]) -> dict[str, object]:
    """An OpenAI tool as the bare function object some templates read."""
    function = tool.get("function")
    if tool.get("type") == "function" and isinstance(function, dict):
        return dict(function)
    return tool


def _is_null(schema: object) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "null"


def _complete_property(
    schema: object, document: object, seen: frozenset[str] = frozenset(), fill: bool = True
) -> object:
    """A parameter schema as templates that read fields unconditionally need it.

    Fills what OpenAI lets callers leave out (a description, empty) and spells out what
    Pydantic writes indirectly: a ``$ref`` is replaced by its target (once per path, so
    recursive schemas stay finite), ``Optional[X]`` (``anyOf: [X, null]``) becomes X with
    ``nullable``, and a missing ``type`` is the type the schema implies, if there is one.
    The request's own schema (grammar, parser) is not changed: only what is rendered.
    """
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    ref = out.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        try:
            target = resolve_ref(ref, document)[1]
        except AutoparserError:
            target = None
        if isinstance(target, Mapping):
            del out["$ref"]
            return _complete_property({**target, **out}, document, seen | {ref}, fill)
    for key in ("anyOf", "oneOf"):
        branches = out.get(key)
        if "type" in out or not isinstance(branches, list):
            continue
        kept = [b for b in branches if not _is_null(b)]
        if len(kept) == 1 and isinstance(kept[0], Mapping):
            del out[key]
            merged = {**kept[0], **out}
            if len(kept) < len(branches):
                merged["nullable"] = True
            return _complete_property(merged, document, seen, fill)
    if fill:
        out.setdefault("description", "")
    if "type" not in out:
        kinds = value_types(out, document)
        if kinds:
            kinds.discard("null")
            if kinds:
                out["type"] = kinds.pop() if len(kinds) == 1 else sorted(kinds)
    properties = out.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {
            k: _complete_property(v, document, seen, fill) for k, v in properties.items()
        }
    if isinstance(out.get("items"), Mapping):
        out["items"] = _complete_property(out["items"], document, seen, fill)
    return out


def complete_tools(tools: list[dict[str, object]], fill: bool = True) -> list[dict[str, object]]:
    """Tools with the optional OpenAI fields filled in, for templates that read them
    unconditionally: an empty description, an empty parameters object, and each
    parameter's description (empty) and type (where the schema implies one); a
    parameters object that is a ``$ref`` (a recursive Pydantic model) is spelled out.

    With ``fill=False`` only what Pydantic writes indirectly is spelled out (``$ref``,
    ``Optional``, an implied type): the renderer first tries the tools so, and fills the
    missing descriptions only if the template then fails (a render stays the template's
    own wherever the caller's tools suffice)."""
    result = []
    for tool in tools:
        function = tool.get("function")
        if not isinstance(function, Mapping):
            result.append(tool)
            continue
        function = dict(function)
        parameters = function.get("parameters")
        if fill:
            function.setdefault("description", "")
            if not isinstance(parameters, Mapping):
                parameters = {"type": "object", "properties": {}}
        if not isinstance(parameters, Mapping):
            result.append({**tool, "function": function})
            continue
        document = parameters
        parameters = dict(parameters)
        ref = parameters.pop("$ref", None)
        if isinstance(ref, str):
            try:
                target = resolve_ref(ref, document)[1]
            except AutoparserError:
                target = None
            if isinstance(target, Mapping):
                parameters = {**target, **parameters}
        properties = parameters.get("properties")
        if isinstance(properties, Mapping):
            parameters["properties"] = {
                k: _complete_property(v, document, frozenset([ref] if ref else []), fill)
                for k, v in properties.items()
            }
        elif fill:
            parameters["properties"] = {}
        function["parameters"] = parameters
        result.append({**tool, "function": function})
    return result


def apply_polyfills(
    caps: TemplateCaps,
    quirks: TemplateQuirks,
    messages: list[dict[str, object]],
    tools: list[dict[str, object]] | None,
    fill_tool_fields: bool = True,
) -> tuple[list[dict[str, object]], list[dict[str, object]] | None]:
    """Adapt messages (and tools) to a template's probed needs; never mutates the inputs.

    ``fill_tool_fields=False``: for a template that needs tool fields OpenAI lets callers
    leave out, spell out Pydantic's indirections but leave missing descriptions missing
    (see ``complete_tools``)."""
    if tools and not caps.supports_tools:
        messages = _add_to_system(messages, describe_tools(tools))
    elif tools and quirks.tools_as_functions:
        tools = [_bare_function(tool) for tool in tools]
    elif tools and quirks.tools_as_parameter_definitions:
        tools = [parameter_definitions_tool(tool) for tool in tools]
    elif tools and quirks.requires_tool_fields:
        tools = complete_tools(tools, fill=fill_tool_fields)
    if tools is None and quirks.requires_tools_list:
        tools = []
    if tools and quirks.tools_in_system_turn and _leading_role(messages) not in _SYSTEM_ROLES:
        messages = [{"role": "system", "content": ""}, *messages]
    if not caps.supports_system_role:
        messages = _fold_system(messages)
    if quirks.tool_call_id_alnum9:
        messages = _reshape_ids(messages)
    elif quirks.tool_call_id_names_call:
        messages = _named_ids(messages)
    if caps.requires_object_arguments:
        messages = _map_arguments(messages, to_object=True)
    elif quirks.arguments_as_json_string:
        messages = _map_arguments(messages, to_object=False)
    if caps.requires_non_null_content:
        messages = _non_null_content(messages)
    if quirks.call_turn_text:
        messages = [with_call_turn_text(m) for m in messages]
    if caps.requires_typed_content:
        messages = _typed_content(messages)
    if quirks.reasoning_as_thinking_block:
        messages = _reasoning_blocks(messages)
    if quirks.reads_reasoning_key:
        messages = [_with_reasoning_key(m) for m in messages]
    return messages, tools


def render_as_apply(
    renderer: Renderer,
    caps: TemplateCaps,
    quirks: TemplateQuirks,
    messages: Sequence[Mapping[str, object]],
    tools: Sequence[Mapping[str, object]] | None,
    add_generation_prompt: bool,
    *,
    now: datetime | None = None,
    **variables: object,
) -> str:
    """Render as ``ChatTemplate.apply`` does: the polyfills the probed caps call for and, for
    a template that needs tool fields OpenAI lets callers leave out, the caller's tools as
    they are first (the filled-in descriptions only where the template fails without them).

    The one rendering rule the facade and the analysis' self-check (``verify``) share, so
    the self-check reads back exactly the prompts ``apply`` writes.
    """
    prepared = [dict(m) for m in messages]
    tool_list = None if tools is None else [dict(t) for t in tools]
    if tool_list and quirks.requires_tool_fields:
        sparse, sparse_tools = apply_polyfills(caps, quirks, prepared, tool_list, False)
        try:
            return renderer.render(
                sparse, sparse_tools, add_generation_prompt, now=now, **variables
            )
        except TemplateError:
            pass
    prepared, tool_list = apply_polyfills(caps, quirks, prepared, tool_list)
    return renderer.render(prepared, tool_list, add_generation_prompt, now=now, **variables)
