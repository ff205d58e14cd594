"""A template analysis as a transformers response template (``transformers.utils.chat_parsing``).

transformers, vLLM and SGLang read one declarative description of a model's output: regions
opened and closed by literals or regular expressions, each parsed as text, JSON or shallow
XML-like tags. This module writes that description from the markers the analysis found.
Formats it cannot describe (calls written as Python expressions, a hand-written format such
as harmony's channels...) and tools whose arguments it cannot read back (object values a
template prints as Python literals, tag parameters without a type) raise
:class:`ExportError` naming why, rather than a template that would misread the output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from autoparser.analysis.model import (
    CallIdPosition,
    ContentMode,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
)
from autoparser.errors import ExportError

if TYPE_CHECKING:
    from autoparser.generate.request import Request

RESPONSE_TEMPLATE_VERSION = 1
# transformers' serving reads ``reasoning_content`` (and the older ``thinking``).
REASONING_FIELD = "reasoning_content"
_NAME = r"(?P<name>[\w.\-]+)"
_GAP = r"\s*"
# The body of a JSON region, from where it starts to its close, stepping over JSON strings
# whole: a closing marker written inside an argument string does not close the region.
# ``\G`` anchors at the region's start and ``\K`` keeps the body out of the close's match
# (transformers compiles the patterns with the ``regex`` module, which has both).
_JSON_BODY = r'\G(?:[^"]|"(?:[^"\\]++|\\.)*+")*?\K'


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
    request: Request | None = None,
    format_refusal: str | None = None,
) -> dict[str, object]:
    """The response template (transformers' version 1) of an analysed template's output.

    ``generation_prompt`` is what the request's prompt ends with (the analysis' own when
    empty); ``pythonic_calls`` says the calls are Python expressions (not expressible).
    ``request`` (when known) gives the tools: a call's name is read as one of theirs, no
    ``tool_calls`` field is written when the request allows no calls, and a tool whose
    arguments the export cannot read back raises ExportError.
    """
    if pythonic_calls:
        raise ExportError(
            "calls are Python expressions (f(a='v', n=1)), whose arguments a response "
            "template can parse neither as JSON nor as tags"
        )
    if format_refusal is not None:
        raise ExportError(format_refusal)
    fields: dict[str, object] = {}
    reasoning = _reasoning_field(analysis, extract_reasoning, thinking_forced_open, request)
    if reasoning is not None:
        fields[REASONING_FIELD] = reasoning
    calls = _tool_calls_field(analysis, request) if _calls_enabled(request) else None
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
    reasoning opener or the call opener it may end with.

    The parser reads the prompt from the last anchor on, so an opener the template wrote
    (forced-open reasoning, a call the prompt opened) or a closed empty block (thinking off)
    is read as the output's. A template with a blank generation prompt writes nothing of the
    message in the prompt: the anchor is then the prompt's end (before such an opener).
    """
    anchor = generation_prompt
    start = analysis.reasoning.start.strip()
    if start and start in anchor:
        anchor = anchor[: anchor.index(start)]
    fmt, fn = analysis.tools.format, analysis.tools.function
    for opener in (fmt.section_start.strip(), fmt.per_call_start.strip(), fn.name_prefix.strip()):
        if opener and anchor.rstrip().endswith(opener):
            anchor = anchor.rstrip()[: -len(opener)]
            break
    if not anchor.strip():
        tail = generation_prompt[len(anchor) :].strip()
        return {"start_anchor_pattern": f"(?={re.escape(tail)}\\s*\\Z)" if tail else r"\Z"}
    return {"start_anchor": anchor}


def _reasoning_field(
    analysis: TemplateAnalysis, extract_reasoning: bool, forced_open: bool, request: Request | None
) -> dict[str, object] | None:
    """The reasoning region, opened as autoparser's parser opens it (generate/reasoning.py)."""
    r = analysis.reasoning
    start, end = r.start.strip(), r.end.strip()
    if r.mode == ReasoningMode.NONE or not end:
        return None
    if not extract_reasoning:
        raise ExportError(
            "reasoning is left in the content with its markers (reasoning_format none), "
            "which a response template cannot do"
        )
    if not start and forced_open:
        # Thinking on, no start marker: the output itself starts with the reasoning.
        return {"open_pattern": r"\A", "close": end, "content": "text"}
    if not start:
        # No start marker, thinking not on: the output's start is reasoning only if the
        # end delimiter comes before the turn ends.
        return {"open_pattern": _ahead_of(analysis, end), "close": end, "content": "text"}
    opener = re.escape(start)
    if forced_open:
        # The prompt opened the block (the anchor leaves its opener to the output); some
        # models write the opener again.
        return {"open_pattern": f"{opener}(?:{_GAP}{opener})?", "close": end, "content": "text"}
    # A model trained with the opener in the prompt may write only the end marker: a bare
    # end marker at the start is an empty block; with thinking asked for, the text before
    # it is reasoning (once the end marker comes, before a call or the end of the turn).
    if request is not None and request.enable_thinking is True:
        left_out = _ahead_of(analysis, end, calls=True)
    else:
        left_out = r"\A\s*(?=" + re.escape(end) + ")"
    return {"open_pattern": f"{opener}|{left_out}", "close": end, "content": "text"}


def _ahead_of(analysis: TemplateAnalysis, end: str, *, calls: bool = False) -> str:
    """Zero-width at the output's start when ``end`` comes before the turn ends (or, with
    ``calls``, before a call opens)."""
    fmt, fn = analysis.tools.format, analysis.tools.function
    stops = [m for m in analysis.end_of_turn if m.strip()]
    if calls:
        # Left out: the opener, when written, opens the block itself.
        openers = (analysis.reasoning.start, fmt.section_start, fmt.per_call_start, fn.name_prefix)
        stops += [m for m in openers if m.strip()]
    guard = f"(?!{_alternatives(stops)})" if stops else ""
    return r"\A(?=(?:" + guard + r"[\s\S])*?" + re.escape(end) + ")"


def _content_field(analysis: TemplateAnalysis) -> dict[str, object]:
    c = analysis.content
    if c.mode == ContentMode.WRAPPED_WITH_REASONING:
        raise ExportError(
            "the content is wrapped in markers only when reasoning is present, "
            "which a response template cannot make conditional"
        )
    if c.mode == ContentMode.ALWAYS_WRAPPED and c.start.strip() and c.end.strip():
        return {"open": c.start.strip(), "close": c.end.strip(), "content": "text"}
    field: dict[str, object] = {"content": "text"}
    fmt = analysis.tools.format
    wrap_start, wrap_end = fmt.content_wrap_start.strip(), fmt.content_wrap_end.strip()
    if c.mode == ContentMode.PLAIN and wrap_start and wrap_end:
        # A call turn's content wrapper (Llama 4's <|python_start|>..<|python_end|>): the
        # content is in it where the model writes it, else from the output's start.
        field["open_pattern"] = f"{re.escape(wrap_start)}|\\A"
        ends = [m for m in analysis.end_of_turn if m.strip()]
        closers = [wrap_end, *ends]
        field["close_pattern"] = _GAP + _alternatives(closers)
        return field
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


def _calls_enabled(request: Request | None) -> bool:
    return request is None or request.calls_enabled


def _name_pattern(request: Request | None, follows: str) -> str:
    """The call's name: one of the request's tools (longest first), else any identifier.

    ``follows`` is the marker written right after the name: a known name needs none to end,
    only not to run on into more name characters.
    """
    names = sorted({t.name for t in request.tools}, key=len, reverse=True) if request else []
    if not names:
        return _NAME
    end = "" if re.match(r"[\w.\-]", follows) else r"(?![\w.\-])"
    return "(?P<name>" + "|".join(re.escape(n) for n in names) + ")" + end


def _tool_calls_field(
    analysis: TemplateAnalysis, request: Request | None
) -> dict[str, object] | None:
    fmt = analysis.tools.format
    if fmt.mode == ToolFormat.NONE:
        return None
    if fmt.uses_python_dicts:
        raise ExportError("calls are written as Python dicts (single quotes), which is not JSON")
    if fmt.mode == ToolFormat.JSON_NATIVE:
        return _json_calls(analysis)
    return _tagged_calls(analysis, request)


def _json_calls(analysis: TemplateAnalysis) -> dict[str, object]:
    fmt = analysis.tools.format
    if fmt.fun_name_is_key:
        raise ExportError('calls write the function name as a key ({"name": {args}}), not a value')
    if not fmt.name_field or not fmt.args_field:
        raise ExportError("the JSON call object's name and arguments keys are unknown")
    prefix = fmt.function_field + "." if fmt.function_field else ""
    function = {
        "name": "{" + prefix + fmt.name_field + "}",
        "arguments": "{" + prefix + fmt.args_field + "}",
    }
    transform = {"type": "function", "function": function}
    if fmt.tools_array_wrapped:
        if fmt.section_start.strip():
            array_opener = _lit(fmt.section_start)
        else:
            # A bare array of calls opens where '[' starts an object on the call's first key.
            array_opener = _GAP + r"(?=\[\s*" + _first_key(analysis) + ")"
        field: dict[str, object] = {
            "open_pattern": array_opener,
            "content": "json",
            "transform": transform,
            "transform_each": True,
        }
        if fmt.section_end.strip():
            field["close_pattern"] = _after_json(_lit(fmt.section_end))
        elif ends := [m for m in analysis.end_of_turn if m.strip()]:
            field["close_pattern"] = _after_json(f"(?={_GAP}{_alternatives(ends)})|\\Z")
        return field
    field = {"repeats": True, "content": "json", "transform": _scoped(function)}
    if fmt.per_call_start.strip():
        opener = _opener(analysis, fmt.per_call_start)
        closer = _closer(analysis, fmt.per_call_end)
        close = (closer + _GAP) if closer else _open_ended(analysis, opener)
    else:
        # Bare call objects (in a section or not), one after the other: see _object_calls.
        return _object_calls(analysis)
    field["open_pattern"] = opener
    field["close_pattern"] = _after_json(close)
    return field


def _after_json(close: str) -> str:
    """``close`` only where it follows the region's JSON body (not inside one of its strings)."""
    return f"{_JSON_BODY}(?:{close})"


def _open_ended(analysis: TemplateAnalysis, opener: str) -> str:
    """Close of a call nothing ends: before the next call, the end of turn, or the output's end.

    Zero-width, so the next call's opener is still there to open its own region.
    """
    ends = [m for m in analysis.end_of_turn if m.strip()]
    stops = [f"(?={opener})"] + ([f"(?={_GAP}{_alternatives(ends)})"] if ends else [])
    return "|".join([*stops, r"\Z"])


def _json_value(group: str) -> str:
    """Pattern of one whole JSON value (objects and arrays nested through the recursive
    group ``group``), for the ``regex`` module transformers compiles with."""
    string = r'"(?:[^"\\]|\\.)*"'
    member = f"{string}\\s*:\\s*(?&{group})"
    return (
        f"(?P<{group}>{string}"
        f"|\\{{\\s*(?:{member}\\s*(?:,\\s*{member}\\s*)*)?\\}}"
        f"|\\[\\s*(?:(?&{group})\\s*(?:,\\s*(?&{group})\\s*)*)?\\]"
        f'|[^\\s,\\[\\]{{}}"]+)'
    )


def _object_calls(analysis: TemplateAnalysis) -> dict[str, object]:
    """Calls written as bare JSON objects one after the other (``{...}{...}``, in a section
    or not): one region per call, holding the call's arguments value only.

    A region whose close is zero-width right after one object's ``}`` (where the next
    object's region opens) cannot be told from the next region closing where it started
    once transformers (5.24) re-matches a close at its own start to decide that it is final
    (``\\G`` is then that start). So the open consumes the object's head up to the
    arguments (capturing the name), and the close consumes the keys after the arguments and
    the object's ``}`` where a whole JSON value follows the head (a look-behind; a name
    written after the arguments is captured there, which transformers >= 5.24 joins to the
    transform's scope).
    """
    fmt = analysis.tools.format
    if fmt.function_field:
        raise ExportError(
            "calls are bare JSON objects nesting the function in a key, whose arguments a "
            "response template cannot delimit"
        )
    order = list(fmt.field_order) or [fmt.name_field, fmt.args_field]
    if fmt.args_field not in order or fmt.name_field not in order:
        raise ExportError("the JSON call object's name and arguments keys are unknown")
    split = order.index(fmt.args_field)
    before, after = order[:split], order[split + 1 :]
    name = '"(?P<name>[^"\\\\]+)"'

    def members(keys: list[str], group: str, *, capture: bool) -> list[str]:
        value, out = _json_value(group), []
        for key in keys:
            if key == fmt.name_field:
                out.append(f'"{re.escape(key)}"\\s*:\\s*' + (name if capture else '"[^"]*"'))
            else:
                out.append(f'"{re.escape(key)}"\\s*:\\s*' + value)
                value = f"(?&{group})"
        return out

    head_keys = [*members(before, "v", capture=True), f'"{re.escape(fmt.args_field)}"\\s*:']
    head = r"\{\s*" + r"\s*,\s*".join(head_keys) + _GAP
    sep = analysis.tools.call_separator.strip()
    lead = _GAP + (f"(?:{re.escape(sep)}{_GAP})?" if sep else "")
    if fmt.section_start.strip():
        # The first call opens on the section's start, the next right after a call's '}'
        # (and the whitespace the call's close took).
        opener = f"(?:{_opener(analysis)}|(?<=\\}}\\s*){lead}){head}"
    else:
        opener = lead + head
    behind_keys = [*members(before, "b", capture=False), f'"{re.escape(fmt.args_field)}"\\s*:']
    behind = r"\{\s*" + r"\s*,\s*".join(behind_keys) + r"\s*" + _json_value("a")
    if fmt.name_field in after:
        tail = "".join(r"\s*,\s*" + m for m in members(after, "t", capture=True))
    else:
        # Keys after the arguments (an id...) are read whatever they are, or left out.
        any_member = r'\s*,\s*"(?:[^"\\]|\\.)*"\s*:\s*' + _json_value("t")
        tail = f"(?:{any_member})*"
    close = f"(?<={behind}){tail}{_GAP}\\}}"
    if fmt.section_end.strip():
        close += f"(?:{_lit(fmt.section_end)})?"
    # Whitespace after a call joins its close, so that it never opens an empty content
    # region whose close would overwrite the real content.
    close += _GAP
    return {
        "open_pattern": opener,
        "close_pattern": close,
        "repeats": True,
        "content": "json",
        "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
    }


def _scoped(function: Mapping[str, str]) -> dict[str, object]:
    """The transform reading the parsed object from ``content`` (a single, not each, call):
    ``function`` is the each-call transform's, its paths moved under ``content``."""
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


def _tagged_calls(analysis: TemplateAnalysis, request: Request | None) -> dict[str, object]:
    tools = analysis.tools
    fmt, fn, args = tools.format, tools.function, tools.arguments
    position = tools.call_id.position
    escaped = {char for char, _ in args.name_escapes}
    if escaped and request is not None:
        for tool in request.tools:
            for key in tool.properties:
                if escaped & set(key):
                    raise ExportError(
                        f"the template escapes argument names ({key!r} of {tool.name!r} "
                        "is written with entities), which a response template reads back "
                        "undecoded"
                    )
    name = _name_pattern(request, fn.name_suffix.strip() or args.start.strip())
    marked = fn.name_suffix or args.start or position == CallIdPosition.BETWEEN_FUNC_AND_ARGS
    if name == _NAME and not marked:
        raise ExportError(
            "nothing marks the end of the function name, and the request names no tools to "
            "read it as"
        )
    opener = (
        _opener(analysis, fmt.per_call_start, fn.name_prefix)
        + _call_id(analysis, CallIdPosition.PRE_FUNC_NAME)
        + name
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
    closer = f"(?:{closer}){_GAP}"
    field: dict[str, object] = {
        "open_pattern": opener,
        "repeats": True,
        "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
    }
    if fmt.mode == ToolFormat.TAG_WITH_JSON:
        field["close_pattern"] = _after_json(closer)
        field["content"] = "json"
        return field
    if args.values_as_python and (where := _structured_parameter(request)):
        raise ExportError(
            f"the template writes object and array argument values as Python literals "
            f"({{'a': 1}}, [True, None]), which a response template (tag values decoded as "
            f"JSON by the tool's schema) cannot read back; {where} takes one"
        )
    if args.value_item_name and (where := _structured_parameter(request)):
        raise ExportError(
            f"the template writes object and array argument values as nested elements "
            f"(<{args.value_item_name}>...), which a response template (tag values decoded as "
            f"JSON by the tool's schema) cannot read back; {where} takes one"
        )
    if where := _untyped_parameter(request):
        raise ExportError(
            f"{where} declares no type: a response template decodes a tag value only by the "
            "parameter's type (else it stays text), where autoparser reads a JSON value"
        )
    tag = _argument_tag(analysis, "close_key", named=False)
    field["close_pattern"] = _after_tags(analysis, tag, closer)
    field["content"] = "xml-inline"
    field["content_args"] = {"tag_pattern": _argument_tag(analysis, "key", named=True)}
    return field


def _argument_tag(analysis: TemplateAnalysis, key: str, *, named: bool) -> str:
    """Pattern of one tagged argument: its name in group ``key`` (and, ``named``, its value
    in group ``value``, as transformers' xml-inline parser reads them)."""
    args = analysis.tools.arguments
    if not args.name_suffix.strip():
        raise ExportError("nothing marks the end of an argument's name")
    suffixes = [args.name_suffix, args.name_suffix_json, *(s for _, s in args.name_suffix_by_type)]
    value_end = re.escape(args.value_suffix.strip())
    if args.value_suffix_after_name:
        value_end += f"(?P={key})" + re.escape(args.value_suffix_after_name.strip())
    if not value_end:
        raise ExportError("nothing marks the end of an argument's value")
    return (
        re.escape(args.name_prefix.strip())
        + f"(?P<{key}>[^\\s<>=\"']+?)"
        + _alternatives(suffixes)
        + _GAP
        + (re.escape(args.value_prefix.strip()) if args.value_prefix.strip() else "")
        + ("(?P<value>.*?)" if named else ".*?")
        + _GAP
        + value_end
    )


def _after_tags(analysis: TemplateAnalysis, tag: str, close: str) -> str:
    """``close`` only where it follows whole argument tags: a closing marker written inside
    a value (before the value's own end) does not close the call (see ``_JSON_BODY``)."""
    sep = analysis.tools.arguments.separator.strip()
    lead = _GAP + (f"(?:{re.escape(sep)}{_GAP})?" if sep else "")
    return f"\\G(?:{lead}{tag})*?{_GAP}\\K(?:{close})"


def _structured_parameter(request: Request | None) -> str:
    """``tool.parameter`` of the first parameter of the request's tools that takes an object
    or an array (also through anyOf/oneOf or a $ref), else ""."""
    for tool in request.tools if request is not None else ():
        for name, schema in tool.properties.items():
            if _may_be_structured(schema):
                return f"{tool.name}.{name}"
    return ""


def _untyped_parameter(request: Request | None) -> str:
    """``tool.parameter`` of the first parameter whose value transformers cannot type: no
    ``type`` (a bare ``$ref`` to a definition included: it does not follow it), else ""."""
    for tool in request.tools if request is not None else ():
        for name, schema in tool.properties.items():
            if not _declares_type(schema):
                return f"{tool.name}.{name}"
    return ""


def _declares_type(schema: object) -> bool:
    if not isinstance(schema, Mapping):
        return False
    if any(key in schema for key in ("type", "enum", "const")):
        return True
    return any(
        all(_declares_type(choice) for choice in schema.get(key) or ())
        for key in ("anyOf", "oneOf")
        if schema.get(key)
    )


def _may_be_structured(schema: object) -> bool:
    if not isinstance(schema, Mapping):
        return False
    if "$ref" in schema:
        return True  # a definition: Pydantic models are objects
    declared = schema.get("type")
    types = declared if isinstance(declared, list) else [declared]
    if "object" in types or "array" in types:
        return True
    return any(
        _may_be_structured(choice)
        for key in ("anyOf", "oneOf", "allOf")
        for choice in schema.get(key) or ()
    )
