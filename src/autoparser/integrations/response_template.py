"""A template analysis as a transformers response template (``transformers.utils.chat_parsing``).

transformers, vLLM and SGLang read one declarative description of a model's output: regions
opened and closed by literals or regular expressions, each parsed as text, JSON or shallow
XML-like tags. This module writes that description from the markers the analysis found.
Formats it cannot describe (calls written as Python expressions, a hand-written format such
as harmony's channels, calls without an opening marker...) raise :class:`ExportError` naming
why, rather than a template that would misread the output.
"""

from __future__ import annotations

import re
from typing import Any

from autoparser.analysis.model import (
    CallIdPosition,
    ContentMode,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
)
from autoparser.errors import ExportError

RESPONSE_TEMPLATE_VERSION = 1
# transformers' serving reads ``reasoning_content`` (and the older ``thinking``).
REASONING_FIELD = "reasoning_content"
_NAME = r"(?P<name>[\w.\-]+)"
_GAP = r"\s*"


def _lit(marker: str) -> str:
    """A marker as a pattern; surrounding whitespace becomes optional whitespace."""
    core = marker.strip()
    return _GAP + re.escape(core) + _GAP if core else _GAP


def _alternatives(markers: tuple[str, ...] | list[str]) -> str:
    cores = sorted({m.strip() for m in markers if m.strip()}, key=len, reverse=True)
    return "(?:" + "|".join(re.escape(c) for c in cores) + ")"


def response_template(
    analysis: TemplateAnalysis,
    *,
    generation_prompt: str = "",
    extract_reasoning: bool = True,
    thinking_forced_open: bool = False,
    pythonic_calls: bool = False,
) -> dict[str, Any]:
    """The response template (transformers' version 1) of an analysed template's output.

    ``generation_prompt`` is what the request's prompt ends with (the analysis' own when
    empty); ``pythonic_calls`` says the calls are Python expressions (not expressible).
    """
    if pythonic_calls:
        raise ExportError(
            "calls are Python expressions (f(a='v', n=1)), whose arguments a response "
            "template can parse neither as JSON nor as tags"
        )
    if analysis.handler:
        raise ExportError(
            f"the format is the hand-written {analysis.handler!r} one, whose structure "
            "(channels, nested sections or special value syntax) a response template cannot express"
        )
    fields: dict[str, Any] = {}
    reasoning = _reasoning_field(analysis, extract_reasoning, thinking_forced_open)
    if reasoning is not None:
        fields[REASONING_FIELD] = reasoning
    calls = _tool_calls_field(analysis)
    if calls is not None:
        fields["tool_calls"] = calls
    fields["content"] = _content_field(analysis)
    return {
        "version": RESPONSE_TEMPLATE_VERSION,
        "defaults": {"role": "assistant"},
        **_start_anchor(analysis, generation_prompt or analysis.generation_prompt),
        "fields": fields,
    }


def _start_anchor(analysis: TemplateAnalysis, generation_prompt: str) -> dict[str, str]:
    """Where the assistant message starts in the prompt: the generation prompt, without the
    reasoning opener it may end with.

    The parser reads the prompt from the last anchor on, so an opener the template wrote
    (forced-open reasoning) or a closed empty block (thinking off) is read as the output's.
    A template with a blank generation prompt writes nothing of the message in the prompt:
    the anchor is then the prompt's end.
    """
    anchor = generation_prompt
    start = analysis.reasoning.start.strip()
    if start and start in anchor:
        anchor = anchor[: anchor.index(start)]
    if not anchor.strip():
        return {"start_anchor_pattern": r"\Z"}
    return {"start_anchor": anchor}


def _reasoning_field(
    analysis: TemplateAnalysis, extract_reasoning: bool, forced_open: bool
) -> dict[str, Any] | None:
    r = analysis.reasoning
    if r.mode == ReasoningMode.NONE or not r.end.strip():
        return None
    if not extract_reasoning:
        raise ExportError(
            "reasoning is left in the content with its markers (reasoning_format none), "
            "which a response template cannot do"
        )
    if not r.start.strip() and forced_open:
        # Thinking on, no start marker: the output itself starts with the reasoning.
        return {"open_pattern": r"\A", "close": r.end.strip(), "content": "text"}
    if not r.start.strip():
        raise ExportError(
            f"reasoning has no start marker (it runs from the start of the output to {r.end!r}); "
            "a response template opens a region only on a marker"
        )
    return {"open": r.start.strip(), "close": r.end.strip(), "content": "text"}


def _content_field(analysis: TemplateAnalysis) -> dict[str, Any]:
    c = analysis.content
    if c.mode == ContentMode.WRAPPED_WITH_REASONING:
        raise ExportError(
            "the content is wrapped in markers only when reasoning is present, "
            "which a response template cannot make conditional"
        )
    if c.mode == ContentMode.ALWAYS_WRAPPED and c.start.strip() and c.end.strip():
        return {"open": c.start.strip(), "close": c.end.strip(), "content": "text"}
    field: dict[str, Any] = {"content": "text"}
    if c.mode == ContentMode.ALWAYS_WRAPPED and c.start.strip():
        # An opener and no closer of its own (a recipient header, "to=user<|message|>"):
        # the end of turn closes the content.
        field["open"] = c.start.strip()
    ends = [m for m in analysis.end_of_turn if m.strip()]
    if ends:
        # Leading whitespace joins the close so that it never opens an empty region whose
        # close would overwrite the real content.
        field["close_pattern"] = _GAP + _alternatives(ends)
    return field


def _tool_calls_field(analysis: TemplateAnalysis) -> dict[str, Any] | None:
    fmt = analysis.tools.format
    if fmt.mode == ToolFormat.NONE:
        return None
    if fmt.uses_python_dicts:
        raise ExportError("calls are written as Python dicts (single quotes), which is not JSON")
    if fmt.mode == ToolFormat.JSON_NATIVE:
        return _json_calls(analysis)
    return _tagged_calls(analysis)


def _json_calls(analysis: TemplateAnalysis) -> dict[str, Any]:
    fmt = analysis.tools.format
    if fmt.fun_name_is_key:
        raise ExportError('calls write the function name as a key ({"name": {args}}), not a value')
    if not fmt.name_field or not fmt.args_field:
        raise ExportError("the JSON call object's name and arguments keys are unknown")
    prefix = fmt.function_field + "." if fmt.function_field else ""
    transform = {
        "type": "function",
        "function": {
            "name": "{" + prefix + fmt.name_field + "}",
            "arguments": "{" + prefix + fmt.args_field + "}",
        },
    }
    if fmt.tools_array_wrapped:
        if fmt.section_start.strip():
            array_opener = _lit(fmt.section_start)
        else:
            # A bare array of calls opens where '[' starts an object on the call's first key.
            array_opener = _GAP + r"(?=\[\s*" + _first_key(analysis) + ")"
        field: dict[str, Any] = {
            "open_pattern": array_opener,
            "content": "json",
            "transform": transform,
            "transform_each": True,
        }
        if fmt.section_end.strip():
            field["close"] = fmt.section_end.strip()
        elif ends := [m for m in analysis.end_of_turn if m.strip()]:
            field["close_pattern"] = f"(?={_GAP}{_alternatives(ends)})|\\Z"
        return field
    if fmt.section_start.strip() or fmt.per_call_start.strip():
        opener = _opener(analysis, fmt.per_call_start)
    else:
        opener = _bare_json_opener(analysis)
    closer = _closer(analysis, fmt.per_call_end)
    field = {
        "open_pattern": opener,
        "repeats": True,
        "content": "json",
        "transform": _scoped(transform),
    }
    bare = not (fmt.section_start.strip() or fmt.per_call_start.strip())
    field["close_pattern"] = (closer + _GAP) if closer else _open_ended(analysis, opener, bare=bare)
    return field


def _open_ended(analysis: TemplateAnalysis, opener: str, *, bare: bool = False) -> str:
    """Close of a call nothing ends: before the next call, the end of turn, or the output's end.

    Zero-width, so the next call's opener is still there to open its own region. A bare
    JSON call's opener is zero-width too: the next one is looked for only after a ``}``.
    """
    ends = [m for m in analysis.end_of_turn if m.strip()]
    stops = [("(?<=\\})" if bare else "") + f"(?={opener})"] + (
        [f"(?={_GAP}{_alternatives(ends)})"] if ends else []
    )
    return "|".join([*stops, r"\Z"])


def _scoped(transform: dict[str, Any]) -> dict[str, Any]:
    """The transform reading the parsed object from ``content`` (a single, not each, call)."""
    function = transform["function"]
    return {
        "type": "function",
        "function": {key: "{content." + value[1:] for key, value in function.items()},
    }


def _first_key(analysis: TemplateAnalysis) -> str:
    """Pattern of a call object's start: '{' and its first key."""
    fmt = analysis.tools.format
    first = fmt.field_order[0] if fmt.field_order else fmt.function_field or fmt.name_field
    if not first:
        raise ExportError("calls have no opening marker and the call object's keys are unknown")
    return r'\{\s*"' + re.escape(first) + r'"\s*:'


def _bare_json_opener(analysis: TemplateAnalysis) -> str:
    """A call written as a bare JSON object starts where an object opens on its first key."""
    sep = analysis.tools.call_separator.strip()
    lead = _GAP + ("(?:" + re.escape(sep) + _GAP + ")?" if sep else "")
    return lead + "(?=" + _first_key(analysis) + ")"


def _opener(analysis: TemplateAnalysis, *call_start: str) -> str:
    """Pattern of what comes before one call: separator, section start, the call's opener."""
    fmt = analysis.tools.format
    per_call_start = "".join(m for m in call_start if m.strip())
    if not fmt.section_start.strip() and not per_call_start.strip():
        raise ExportError("calls have no opening marker, so a region cannot start on them")
    pieces = [_GAP]
    sep = analysis.tools.call_separator.strip()
    if sep:
        pieces.append("(?:" + re.escape(sep) + _GAP + ")?")
    if fmt.section_start.strip():
        section = re.escape(fmt.section_start.strip()) + _GAP
        pieces.append(f"(?:{section})?" if per_call_start.strip() else section)
    pieces.extend(re.escape(m.strip()) + _GAP for m in call_start if m.strip())
    return "".join(pieces)


def _closer(analysis: TemplateAnalysis, per_call_end: str, call_end: str = "") -> str:
    """Pattern of what ends one call; the section's end is optional after the call's own."""
    fmt = analysis.tools.format
    pieces: list[str] = [call_end] if call_end else []
    if per_call_end.strip():
        pieces.append(_GAP + re.escape(per_call_end.strip()))
    if fmt.section_end.strip():
        section = _GAP + re.escape(fmt.section_end.strip())
        pieces.append(f"(?:{section})?" if pieces else section)
    return "".join(pieces)


def _call_id(analysis: TemplateAnalysis, where: CallIdPosition) -> str:
    """Pattern of the call id when the format writes it at ``where`` (else nothing)."""
    cid = analysis.tools.call_id
    if cid.position != where:
        return ""
    return _GAP + re.escape(cid.prefix.strip()) + r".*?" + re.escape(cid.suffix.strip()) + _GAP


def _tagged_calls(analysis: TemplateAnalysis) -> dict[str, Any]:
    tools = analysis.tools
    fmt, fn, args = tools.format, tools.function, tools.arguments
    position = tools.call_id.position
    if not fn.name_suffix and not args.start and position != CallIdPosition.BETWEEN_FUNC_AND_ARGS:
        raise ExportError("nothing marks the end of the function name")
    opener = (
        _opener(analysis, fmt.per_call_start, fn.name_prefix)
        + _call_id(analysis, CallIdPosition.PRE_FUNC_NAME)
        + _NAME
        + _lit(fn.name_suffix)
        + (r"(?P=name)" + _lit(fn.name_suffix_after_name) if fn.name_suffix_after_name else "")
        + _call_id(analysis, CallIdPosition.BETWEEN_FUNC_AND_ARGS)
        + (re.escape(args.start.strip()) + _GAP if args.start.strip() else "")
    )
    call_end = (
        (_GAP + re.escape(args.end.strip()) if args.end.strip() else "")
        + _call_id(analysis, CallIdPosition.POST_ARGS)
        + (_GAP + re.escape(fn.close.strip()) if fn.close.strip() else "")
    )
    closer = _closer(analysis, fmt.per_call_end, call_end) or _open_ended(analysis, opener)
    # Whitespace after a call joins its close, so that it never opens an empty content
    # region whose close would overwrite the real content.
    closer += _GAP
    field: dict[str, Any] = {
        "open_pattern": opener,
        "close_pattern": closer,
        "repeats": True,
        "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
    }
    if fmt.mode == ToolFormat.TAG_WITH_JSON:
        field["content"] = "json"
        return field
    if not args.name_suffix.strip():
        raise ExportError("nothing marks the end of an argument's name")
    suffixes = [args.name_suffix, args.name_suffix_json, *(s for _, s in args.name_suffix_by_type)]
    value_end = re.escape(args.value_suffix.strip())
    if args.value_suffix_after_name:
        value_end += r"(?P=key)" + re.escape(args.value_suffix_after_name.strip())
    if not value_end:
        raise ExportError("nothing marks the end of an argument's value")
    tag = (
        re.escape(args.name_prefix.strip())
        + r"(?P<key>[^\s<>=\"']+?)"
        + _alternatives(suffixes)
        + _GAP
        + (re.escape(args.value_prefix.strip()) if args.value_prefix.strip() else "")
        + r"(?P<value>.*?)"
        + _GAP
        + value_end
    )
    field["content"] = "xml-inline"
    field["content_args"] = {"tag_pattern": tag}
    return field
