"""Tool-call analysis (T1-T7): format, section and per-call markers, names, arguments, ids.

T1 diffs a text turn against a one-call turn to get the tool section and classifies it:
the function name inside JSON means JSON-native; otherwise arguments inside JSON mean
tag + JSON arguments; otherwise tag + tagged arguments. T2 adds a second call: what
repeats around each call (per-call markers) and what separates calls falls out of aligning
the text between the two calls with the text before and after the single call. The
argument markers come from aligning the text around two arguments (and, before a
non-string value, from a render whose second argument is a number), the call id from
renders that differ only in the id.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from autoparser.analysis.diff import (
    MARKER_RE,
    attribute_start,
    common_prefix_len,
    common_suffix_len,
    diff_split,
    ends_with_element,
    last_marker_end,
    markers_in,
    safe_common_prefix,
    safe_common_suffix,
    segmentize,
    split_after_first_close,
)
from autoparser.analysis.model import (
    TOOL_MARKER_FIELDS,
    ArgumentsAnalysis,
    CallIdAnalysis,
    CallIdPosition,
    FunctionAnalysis,
    ReasoningAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolsAnalysis,
)
from autoparser.analysis.reasoning import generation_prompt, without_role_header
from autoparser.template.messages import with_call_turn_text
from autoparser.template.probe import (
    ARG_FIRST,
    ARG_SECOND,
    ASSISTANT_MSG,
    CALL_1,
    CALL_2,
    CALL_ID,
    CALL_ID_ALT,
    CALL_ID_SECOND,
    CALL_TYPED,
    FUN_FIRST,
    FUN_SECOND,
    TOOL_RESULT,
    USER_MSG,
    VALUE_FIRST,
    VALUE_NUMBER,
    VALUE_SECOND,
    CallSpec,
    Probe,
    needle_in,
    tool_call,
)

_DECODER = json.JSONDecoder()


@dataclasses.dataclass(frozen=True)
class ToolFindings:
    """The tool analysis plus what the orchestrator needs besides it."""

    tools: ToolsAnalysis
    end_of_turn: str = ""  # marker ending a tool-call turn when it differs from a text turn


def _json_quote(needle: str, text: str) -> str:
    """The quote character around ``needle`` where it sits in JSON context, else ""."""
    m = re.search(r"[{:]\s*(['\"])" + re.escape(needle) + r"\1", text)
    return m.group(1) if m else ""


def _decode_at(text: str, pos: int) -> tuple[object, int] | None:
    try:
        return _DECODER.raw_decode(text, pos)
    except ValueError:
        return None


def _json_span(text: str, needle_at: int) -> tuple[int, int, object] | None:
    """The outermost JSON value in ``text`` that starts before and spans ``needle_at``."""
    for m in re.finditer(r"[\[{]", text[:needle_at]):
        got = _decode_at(text, m.start())
        if got is not None and got[1] > needle_at:
            return m.start(), got[1], got[0]
    return None


# Stands for the argument's name in a closer that repeats it.
_ARG_NAME = "\x01"
# Stands for a call id (the first call's and the second's alike).
_ID = "\x02"
# Where an XML-style tag starts ("<tool_call>", "</invoke>", "<AA_ARG>").
_TAG_START = re.compile(r"<[A-Za-z/_]")


def fence_of(section: str) -> str:
    """The token written before every tag of a tool section, or "".

    MiniMax-M3 writes ``]<]minimax[>[`` before each element (``]<]minimax[>[<invoke ...>``,
    ``]<]minimax[>[</invoke>``); the analysis reads the section without it and puts it back
    before the tags of the markers it found (``put_fence_back``).
    """
    starts = [m.start() for m in _TAG_START.finditer(section)]
    if len(starts) < 2:
        return ""
    n = min(starts)
    for at in starts:
        n = min(n, common_suffix_len(section[: starts[0]], section[:at], n))
    fence = section[starts[0] - n : starts[0]].lstrip()
    if len(fence) < 2 or fence.isalnum() or needle_in(fence) or not fence.strip():
        return ""
    return fence


def _section(probe: Probe, calls: tuple[CallSpec, ...]) -> tuple[str, str] | None:
    """``_fenced_section`` read without its fence token (``fence_of``)."""
    found = _fenced_section(probe, calls)
    if found is None:
        return None
    fence = fence_of(found[0])
    if not fence:
        return found
    return re.sub(re.escape(fence) + r"(?=<)", "", found[0]), found[1]


def put_fence_back(marker: str, fence: str) -> str:
    """A marker as the template writes it: the fence token before each tag start."""
    if not fence:
        return marker
    return re.sub(r"<(?=[A-Za-z/_]|$)", lambda m: fence + m.group(), marker)


def _fenced_section(probe: Probe, calls: tuple[CallSpec, ...]) -> tuple[str, str] | None:
    """The tool section of a turn with ``calls`` (diffed against a text turn), and the
    end-of-turn marker that replaces the text turn's one, if it differs."""
    base = probe.turn(ASSISTANT_MSG, tools=True)
    with_calls = probe.calls(calls)
    if base is None or with_calls is None:
        return None
    d = diff_split(base, with_calls)
    # A recipient attribute whose value differs (to=user / to=NAME) belongs to the section.
    key = len(d.prefix) - attribute_start(d.prefix, len(d.prefix))
    if key:
        d = dataclasses.replace(
            d,
            prefix=d.prefix[:-key],
            left=d.prefix[-key:] + d.left,
            right=d.prefix[-key:] + d.right,
        )
    section, left = d.right, d.left.replace(ASSISTANT_MSG, "", 1).strip()
    # What the text turn writes before its content only (a role header the call turn
    # leaves out) closes nothing: the call turn's last marker is then the section's.
    before, found, after = d.left.partition(ASSISTANT_MSG)
    header_only = bool(found) and bool(before.strip()) and not after.strip()
    eot = ""
    if left and section.lstrip().startswith(left):
        # The content's closer, rendered after the empty content of the call turn too.
        section = section.lstrip()[len(left) :]
    elif left and MARKER_RE.fullmatch(left) and not header_only:
        # The text turn's closing marker is replaced by another one (e.g. <|eom_id|>),
        # or sits in the section only because whitespace kept the suffixes apart.
        segs = segmentize(section.rstrip())
        if len(segs) > 1 and segs[-1].is_marker:
            eot = segs[-1].value if segs[-1].value != left else ""
            section = section.rstrip()[: -len(segs[-1].value)]
    return section, eot


def _strip_reasoning(section: str, reasoning: ReasoningAnalysis) -> str:
    """Drop an (empty) reasoning block the template writes before the calls."""
    if reasoning.end:
        head = section.lstrip()
        if reasoning.start and head.startswith(reasoning.start):
            head = head[len(reasoning.start) :].lstrip()
        if head.startswith(reasoning.end):
            return head[len(reasoning.end) :]
    return section


def _align(pre: str, between: str, post: str) -> tuple[str, str, str, str, str]:
    """Split around repeated calls: (section_start, head, separator, tail, section_end).

    ``pre``/``post`` surround the single call's anchor; ``between`` lies between the
    anchors of two calls, i.e. tail + separator + head. Whitespace at the joins goes to
    the separator (and to the section markers).
    """
    head = safe_common_suffix(between, pre).lstrip()
    tail = safe_common_prefix(between, post).rstrip()
    if len(head) + len(tail) > len(between):
        tail = tail[: max(0, len(between) - len(head))]
    sep = between[len(tail) : len(between) - len(head)]
    return pre[: len(pre) - len(head)], head, sep, tail, post[len(tail) :]


def _split_head(head: str) -> tuple[str, str]:
    """Split the text before a function name into (per-call opener, name prefix)."""
    k = last_marker_end(head)
    rest = head[k:].lstrip()
    return head[: len(head) - len(rest)], rest


def _split_tail(tail: str, has_opener: bool) -> tuple[str, str]:
    """Split the text after a call's body into (body, per-call closer)."""
    if not has_opener:
        return tail, ""
    stripped = tail.rstrip()
    segs = segmentize(stripped)
    if len(segs) >= 2 and segs[-1].is_marker:
        return stripped[: -len(segs[-1].value)], segs[-1].value
    return tail, ""


def _id_split(region: str, id_at: int, id_len: int) -> tuple[str, str, str]:
    """Split a region holding a call id into (text before, id prefix, id suffix)."""
    before = region[:id_at]
    k = 0
    for m in MARKER_RE.finditer(before):
        k = m.start()
    return before[:k], before[k:], region[id_at + id_len :]


def _index_id_at(after_first: str, after_second: str) -> int:
    """Offset of a call index the template writes itself (``:0`` then ``:1``, or
    ``index="1"`` then ``index="2"``), or -1."""
    k = common_prefix_len(after_first, after_second)
    while k > 0 and after_first[k - 1].isdigit():
        k -= 1
    digits = re.match(r"\d+", after_first[k:])
    other = re.match(r"\d+", after_second[k:])
    if (
        digits
        and other
        and digits.group() in ("0", "1")
        and int(other.group()) == int(digits.group()) + 1
    ):
        return k
    return -1


def _analyze_json_native(
    probe: Probe, s1: str, s2: str | None, quote: str, name_at: int
) -> ToolsAnalysis | None:
    text1 = s1.replace("'", '"') if quote == "'" else s1
    span = _json_span(text1, name_at)
    if span is None:
        return None
    j_start, j_end, value = span
    wrapped = isinstance(value, list)
    call = value[0] if isinstance(value, list) and value else value
    if not isinstance(call, dict):
        return None

    fields: dict[str, Any] = {"field_order": []}
    constants: list[tuple[str, str]] = []

    def register(obj: dict[str, Any], prefix: str) -> None:
        for key, val in obj.items():
            path = prefix + key
            if key == FUN_FIRST:
                fields["fun_name_is_key"] = True  # no named fields: {"f": {args}}
            elif val == FUN_FIRST:
                fields["name_field"] = key
                fields["field_order"].append(path)
            elif isinstance(val, dict) and ARG_FIRST in val:
                fields["args_field"] = key
                fields["field_order"].append(path)
            elif isinstance(val, str) and ARG_FIRST in val:
                fields["args_field"] = key
                fields["arguments_as_string"] = True
                fields["field_order"].append(path)
            elif isinstance(val, dict) and FUN_FIRST in json.dumps(val):
                fields["function_field"] = key
                register(val, path + ".")
            elif val == CALL_ID:
                fields["id_field"] = key
                fields["field_order"].append(path)
            else:
                fields["field_order"].append(path)
                constants.append((path, json.dumps(val, ensure_ascii=False)))

    register(call, "")
    fmt: dict[str, Any] = {
        "mode": ToolFormat.JSON_NATIVE,
        "uses_python_dicts": quote == "'",
        "tools_array_wrapped": wrapped,
        "section_start": s1[:j_start],
        "section_end": s1[j_end:],
    }
    call_text = s1[j_start:j_end]
    if wrapped:
        first = re.search(r"\{", s1[j_start:])
        got = _decode_at(text1, j_start + first.start()) if first else None
        if got is not None:
            e_start, e_end = j_start + first.start(), got[1]  # type: ignore[union-attr]
            call_text = s1[e_start:e_end]
            fmt["array_open"] = s1[j_start:e_start]
            fmt["array_close"] = s1[e_end:j_end]
    fmt["json_style"] = _json_style(call, call_text, quote)
    if fmt["json_style"] == "pretty":
        fmt["json_indent"] = _json_indent(value, s1[j_start:j_end], quote)

    separator = ""
    parallel = False
    if s2 is not None and FUN_SECOND in s2:
        text2 = s2.replace("'", '"') if quote == "'" else s2
        span2 = _json_span(text2, text2.find(FUN_FIRST))
        if span2 is not None:
            second: object = None
            if wrapped and isinstance(span2[2], list) and len(span2[2]) == 2:
                parallel = True
                inner = s2[span2[0] : span2[1]]
                e1 = _decode_at(text2, span2[0] + inner.find("{"))
                e2_at = text2.find("{", e1[1]) if e1 else -1
                if e1 is not None and e2_at >= 0:
                    separator = s2[e1[1] : e2_at]
                second = span2[2][1]
            elif not wrapped:
                second_at = text2.find(FUN_SECOND, span2[1])
                span_b = _json_span(text2[span2[1] :], second_at - span2[1])
                if span_b is not None:
                    parallel = True
                    between = s2[span2[1] : span2[1] + span_b[0]]
                    start, head, separator, tail, end = _align(s1[:j_start], between, s1[j_end:])
                    fmt.update(
                        section_start=start,
                        per_call_start=head,
                        per_call_end=tail,
                        section_end=end,
                    )
                    second = span_b[2]
            if isinstance(second, dict) and isinstance(call, dict):
                _generated_id(call, second, fields, constants)
    fmt.update({k: v for k, v in fields.items() if k != "field_order"})
    fmt["field_order"] = tuple(fields["field_order"])
    fmt["constant_fields"] = tuple(constants)
    return ToolsAnalysis(
        format=ToolFormatAnalysis(**fmt), call_separator=separator, parallel_calls=parallel
    )


def _generated_id(
    first: dict[str, Any],
    second: dict[str, Any],
    fields: dict[str, Any],
    constants: list[tuple[str, str]],
) -> None:
    """A field the template fills with the call's position ("0", "1") is a generated id."""
    for key, val in first.items():
        if key in second and str(val) == "0" and str(second[key]) == "1":
            fields["gen_id_field"] = key
            constants[:] = [c for c in constants if c[0] != key]


def _json_indent(value: object, text: str, quote: str) -> int:
    """The ``indent`` that json.dumps needs to write the whole value as the template does."""
    if quote == "'":
        text = text.replace("'", '"')
    for indent in range(1, 9):
        if json.dumps(value, ensure_ascii=False, indent=indent) == text:
            return indent
    return 0


def _json_style(call: object, text: str, quote: str) -> str:
    if quote == "'":
        text = text.replace("'", '"')
    if json.dumps(call, ensure_ascii=False) == text:
        return "spaced"
    if json.dumps(call, ensure_ascii=False, separators=(",", ":")) == text:
        return "compact"
    return "pretty"


def _analyze_tagged(
    probe: Probe, s1: str, s2: str | None, mode: ToolFormat, quote: str
) -> ToolsAnalysis | None:
    # The call ids are a variable: one placeholder for both calls' ids, so that the text
    # around them aligns as markers (<|tool_call:begin|>ID<|tool_call:name|>NAME).
    rendered = s1
    id_shown = CALL_ID in s1
    if id_shown:
        s1 = s1.replace(CALL_ID, _ID)
        if s2 is not None:
            s2 = s2.replace(CALL_ID, _ID).replace(CALL_ID_SECOND, _ID)
    n1 = s1.find(FUN_FIRST)
    pre, post = s1[:n1], s1[n1 + len(FUN_FIRST) :]
    separator = ""
    parallel = False
    head, tail, sec_start, sec_end = pre, post, "", ""
    after_second = ""
    if s2 is not None and FUN_SECOND in s2:
        m1, m2 = s2.find(FUN_FIRST), s2.find(FUN_SECOND)
        if 0 <= m1 < m2:
            parallel = True
            between = s2[m1 + len(FUN_FIRST) : m2]
            sec_start, head, separator, tail, sec_end = _align(pre, between, post)
            after_second = s2[m2 + len(FUN_SECOND) :]
    per_call_start, name_prefix = _split_head(head)
    if parallel:
        body, per_call_end = _split_tail(tail, bool(per_call_start))
    else:
        # Without a second call nothing tells a per-call opener from a section opener.
        sec_start, per_call_start, per_call_end = per_call_start, "", ""
        body, sec_end = _split_tail(tail, bool(sec_start))

    function = FunctionAnalysis(name_prefix=name_prefix)
    arguments = ArgumentsAnalysis()
    call_id = CallIdAnalysis()

    # Call ids: renders differing only in the id, or an index the template writes.
    id_value, id_generated = "", False
    alt = _section(probe, ((FUN_FIRST, CALL_1[1], CALL_ID_ALT),))
    if alt is not None and alt[0] != rendered and id_shown:
        id_value = CALL_ID
    elif after_second:
        k = _index_id_at(tail, after_second)
        if k >= 0 and k < len(body):
            id_value, id_generated = body[k], True
            body = body[:k] + "\x00" + body[k + 1 :]
    id_token = "\x00" if id_generated else (_ID if id_value else "")

    if mode is ToolFormat.TAG_WITH_JSON:
        text = body.replace("'", '"') if quote == "'" else body
        args_span = None
        for m in re.finditer(r"\{", text):
            got = _decode_at(text, m.start())
            if got is not None and isinstance(got[0], dict) and ARG_FIRST in got[0]:
                args_span = (m.start(), got[1])
                break
        if args_span is None:
            return None
        name_suffix, close = body[: args_span[0]], body[args_span[1] :]
    else:
        parts = _tagged_arguments(body)
        if parts is None:
            return None
        name_suffix, arguments, close = parts
        arguments = _value_wrapper(probe, arguments)
        typed = _section(probe, (CALL_TYPED,))
        if typed is not None:
            json_suffix = _json_name_suffix(typed[0], arguments)
            arguments = dataclasses.replace(arguments, name_suffix_json=json_suffix)
            by_type = _name_suffix_by_type(probe, arguments)
            arguments = dataclasses.replace(
                arguments, name_suffix_by_type=by_type, values_as_python=_values_as_python(probe)
            )
        arguments = dataclasses.replace(arguments, name_escapes=_name_escapes(probe))

    if id_token and id_token in name_suffix:
        before, prefix, suffix = _id_split(name_suffix, name_suffix.find(id_token), len(id_token))
        name_suffix = before
        call_id = CallIdAnalysis(CallIdPosition.BETWEEN_FUNC_AND_ARGS, prefix, suffix)
    elif id_token and id_token in close:
        before, prefix, suffix = _id_split(close, close.find(id_token), len(id_token))
        close = before
        call_id = CallIdAnalysis(CallIdPosition.POST_ARGS, prefix, suffix)
    elif id_value and _ID in name_prefix:
        before, prefix, suffix = _id_split(name_prefix, name_prefix.find(_ID), len(_ID))
        name_prefix = suffix
        call_id = CallIdAnalysis(CallIdPosition.PRE_FUNC_NAME, before + prefix, "")
    elif id_value and _ID in per_call_start + sec_start:
        # The id opens the call, before the name: the opener up to it stays the opener,
        # the text after it ends the id.
        if _ID in per_call_start:
            per_call_start, suffix = per_call_start.split(_ID, 1)
        else:
            sec_start, suffix = sec_start.split(_ID, 1)
        call_id = CallIdAnalysis(CallIdPosition.PRE_FUNC_NAME, "", suffix)
    if id_generated:
        call_id = dataclasses.replace(call_id, generated=True, index_base=int(id_value))
    # A header naming the function and markup naming it again (to=NAME<|message|>
    # <invoke name="NAME">): the second name is a repeat, not marker text.
    name_suffix, _, after_name = name_suffix.partition(FUN_FIRST)
    function = FunctionAnalysis(
        name_prefix=name_prefix,
        name_suffix=name_suffix,
        close=close,
        name_suffix_after_name=after_name,
    )
    fmt = ToolFormatAnalysis(
        mode=mode,
        section_start=sec_start,
        section_end=sec_end,
        per_call_start=per_call_start,
        per_call_end=per_call_end,
        uses_python_dicts=quote == "'",
    )
    found = ToolsAnalysis(
        format=fmt,
        function=function,
        arguments=arguments,
        call_id=call_id,
        call_separator=separator,
        parallel_calls=parallel,
    )
    if any(_ID in text for text in _marker_texts(found)):
        return None  # an id where the markers cannot say
    return found


def _tagged_arguments(body: str) -> tuple[str, ArgumentsAnalysis, str] | None:
    """Split a tagged call body into (function name suffix, argument markers, close)."""
    a1 = body.find(ARG_FIRST)
    v1 = body.find(VALUE_FIRST, a1 + len(ARG_FIRST))
    a2 = body.find(ARG_SECOND, v1 + len(VALUE_FIRST))
    v2 = body.find(VALUE_SECOND, a2 + len(ARG_SECOND))
    if min(a1, v1, a2, v2) < 0:
        return None
    h = body[:a1]
    m1 = body[a1 + len(ARG_FIRST) : v1]
    g = body[v1 + len(VALUE_FIRST) : a2]
    m2 = body[a2 + len(ARG_SECOND) : v2]
    t = body[v2 + len(VALUE_SECOND) :]
    if m1 != m2:
        return None
    # XML-style closers repeat the argument's name ("</AA_ARG>"): read them with the name
    # replaced by a placeholder, then record what comes after it (value_suffix_after_name).
    if ARG_FIRST in g and ARG_SECOND in t and ARG_FIRST not in h:
        g, t = g.replace(ARG_FIRST, _ARG_NAME, 1), t.replace(ARG_SECOND, _ARG_NAME, 1)
    name_prefix = safe_common_suffix(g, h).lstrip()
    value_suffix = safe_common_prefix(g, t)
    overlap = len(value_suffix) + len(name_prefix) - len(g)
    if overlap > 0 and ends_with_element(value_suffix):
        # Both claim the text where they meet: an element closer ("<|close|>arg<|sep|>")
        # keeps its last token, the name prefix starts after it.
        name_prefix = name_prefix[overlap:].lstrip()
    value_suffix = value_suffix[: max(0, len(g) - len(name_prefix))]
    separator = g[len(value_suffix) : len(g) - len(name_prefix)]
    name_suffix, value_prefix = split_after_first_close(m1)
    head, close = h[: len(h) - len(name_prefix)], t[len(value_suffix) :]
    value_suffix, _, after_name = value_suffix.partition(_ARG_NAME)
    if _ARG_NAME in separator + close:
        return None  # the name is repeated somewhere the markers cannot say
    # An opening bracket right before the first argument and its mirror after the last
    # one contain the arguments (f(a='v'), f{a:v}); markers stay with the function.
    opener = re.search(r"[{(\[]\s*$", head)
    start = end = ""
    if opener is not None:
        closer = re.match(r"\s*[})\]]", close)
        if closer is not None:
            start, end = opener.group(), closer.group()
            head, close = head[: opener.start()], close[closer.end() :]
    args = ArgumentsAnalysis(
        start=start,
        end=end,
        name_prefix=name_prefix,
        name_suffix=name_suffix,
        value_prefix=value_prefix,
        value_suffix=value_suffix,
        value_suffix_after_name=after_name,
        separator=separator,
    )
    return head, args, close


# A string value holding markup, an ampersand and a newline: what templates wrap or escape.
_MARKUP_VALUE = "<b>MARKUP_VAL & co\nEND_MARKUP</b>"


def _value_wrapper(probe: Probe, arguments: ArgumentsAnalysis) -> ArgumentsAnalysis:
    """The wrapper the template writes around a string value holding markup, if any.

    Renders a call whose first argument is such a value: text between the argument's
    header and the value, and between the value and the value suffix, that a plain value
    does not get is the wrapper (``<![CDATA[`` and ``]]>``). A value the template escapes
    (``&lt;b&gt;``) is not found verbatim and gives no wrapper.
    """
    if not arguments.value_suffix.strip():
        return arguments
    spec: CallSpec = (FUN_FIRST, ((ARG_FIRST, _MARKUP_VALUE), (ARG_SECOND, VALUE_SECOND)), CALL_ID)
    section = _section(probe, (spec,))
    if section is None:
        return arguments
    text = section[0]
    header = ARG_FIRST + arguments.name_suffix + arguments.value_prefix
    at = text.find(header)
    value_at = text.find(_MARKUP_VALUE, at) if at >= 0 else -1
    if value_at < 0:
        return arguments
    opener = text[at + len(header) : value_at]
    rest = text[value_at + len(_MARKUP_VALUE) :]
    end = rest.find(arguments.value_suffix)
    closer = rest[:end] if end >= 0 else ""
    if not opener.strip() or not closer.strip() or needle_in(opener + closer):
        return arguments
    if "MARKUP_VAL" in opener + closer:
        return arguments
    return dataclasses.replace(arguments, value_wrapper_open=opener, value_wrapper_close=closer)


def _json_name_suffix(section: str, arguments: ArgumentsAnalysis) -> str:
    """The argument name suffix before a non-string value, where it differs ("" = same).

    ``section`` renders a call whose second argument is a number: the text between that
    argument's name and the number, less the value prefix, is the suffix (DeepSeek's
    ``string="false"`` attribute; the bare ``=`` of ``f(a='v', n=1)``). When the value
    prefix itself differs there is nothing to record in this field.
    """
    a2 = section.find(ARG_SECOND)
    number = str(VALUE_NUMBER)
    v2 = section.find(number, a2 + len(ARG_SECOND)) if a2 >= 0 else -1
    if v2 < 0:
        return ""
    between = section[a2 + len(ARG_SECOND) : v2]
    prefix = arguments.value_prefix
    if prefix and not between.endswith(prefix):
        return ""
    suffix = between[: len(between) - len(prefix)]
    quote = arguments.value_suffix
    if suffix == arguments.name_suffix and not (
        quote in ("'", '"') and suffix.endswith(quote) and not prefix
    ):
        return ""
    # A number in the quotes that close string values (f(n="42")): the template quotes
    # every value. Recorded as the suffix itself, which tells it from the bare "=" that an
    # analysis without this field implies.
    return suffix


class _FrozenDict(dict[str, object]):
    """A dict the probe can memoise renders by (its key must be hashable)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


class _FrozenList(list[object]):
    """A list the probe can memoise renders by."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))


# A value of each JSON type for the second argument, with the ways templates write it.
_TYPED_VALUES: tuple[tuple[str, object, tuple[str, ...]], ...] = (
    ("integer", VALUE_NUMBER, (str(VALUE_NUMBER),)),
    ("number", 9182.5, ("9182.5",)),
    ("boolean", True, ("true", "True")),
    ("null", None, ("null", "None")),
    ("object", _FrozenDict(n=7), ('{"n": 7}', '{"n":7}', "{'n': 7}")),
    ("array", _FrozenList([7, 8]), ("[7, 8]", "[7,8]")),
)


# The characters markup escaping encodes, each followed by a separator no escaping touches.
_ESCAPABLE = "&<>\"'"
_ESCAPE_SEP = "|"


def _name_escapes(probe: Probe) -> tuple[tuple[str, str], ...]:
    """How the template encodes the characters of an argument's name (an escaped XML
    attribute, ``key="q&amp;a"``), as (character, entity) pairs; () when it writes them
    as they are. Read from a render of the probe call whose first argument's name ends in
    each escapable character, each followed by a separator."""
    if probe.args_as_string:
        return ()  # the arguments are JSON text: names are JSON's
    probe_name = ARG_FIRST + "".join(c + _ESCAPE_SEP for c in _ESCAPABLE)
    spec: CallSpec = (FUN_FIRST, ((probe_name, VALUE_FIRST), (ARG_SECOND, VALUE_SECOND)), CALL_ID)
    # Rendered as it is (``Probe.calls`` would take the entities for str + Markup escaping).
    turn = probe.turn("", None, (spec,), tools=True)
    at = turn.find(ARG_FIRST) if turn is not None else -1
    while turn is not None and at >= 0:
        # The name also appears where the template lists the tools: the call's is the one
        # followed by the five characters, each as itself or as an entity.
        pieces = turn[at + len(ARG_FIRST) :].split(_ESCAPE_SEP)[: len(_ESCAPABLE)]
        if len(pieces) == len(_ESCAPABLE) and all(
            p == c or (p.startswith("&") and p.endswith(";") and 3 <= len(p) <= 8)
            for c, p in zip(_ESCAPABLE, pieces, strict=True)
        ):
            return tuple((c, p) for c, p in zip(_ESCAPABLE, pieces, strict=True) if p != c)
        at = turn.find(ARG_FIRST, at + 1)
    return ()


def _values_as_python(probe: Probe) -> bool:
    """Whether the template writes an object or array value as Python's str() does
    ({'n': 7}, ['n']): a template may print mappings as JSON and lists with str()."""
    for value, spelling in ((_FrozenDict(n=7), "{'n': 7}"), (_FrozenList(["n"]), "['n']")):
        spec: CallSpec = (FUN_FIRST, ((ARG_FIRST, VALUE_FIRST), (ARG_SECOND, value)), CALL_ID)
        section = _section(probe, (spec,))
        if section is not None and spelling in section[0]:
            return True
    return False


def _name_suffix_by_type(probe: Probe, arguments: ArgumentsAnalysis) -> tuple[tuple[str, str], ...]:
    """The name suffix before a value of each JSON type, when they differ by type.

    A template that names the value's type in the argument's header (Kimi-K3's
    ``type="boolean"``) writes one suffix per type; one non-string suffix for all of them
    is what ``name_suffix_json`` already says, and gives ().
    """
    found: list[tuple[str, str]] = []
    for kind, value, spellings in _TYPED_VALUES:
        spec: CallSpec = (FUN_FIRST, ((ARG_FIRST, VALUE_FIRST), (ARG_SECOND, value)), CALL_ID)
        section = _section(probe, (spec,))
        if section is None:
            continue
        text = section[0]
        a2 = text.find(ARG_SECOND)
        if a2 < 0:
            continue
        a2 += len(ARG_SECOND)
        # The value ends where the value suffix starts (the type name may be the value's
        # own spelling, type="null" then null).
        v_end = text.find(arguments.value_suffix, a2) if arguments.value_suffix.strip() else -1
        head = text[a2:v_end].rstrip() if v_end >= 0 else ""
        hits = [len(head) - len(w) for w in spellings if head and head.endswith(w)]
        if not head:
            hits = [h - a2 for h in (text.find(w, a2) for w in spellings) if h >= 0]
        if not hits:
            continue
        between = text[a2 : a2 + min(hits)]
        prefix = arguments.value_prefix
        if prefix and not between.endswith(prefix):
            continue
        found.append((kind, between[: len(between) - len(prefix)]))
    suffixes = {suffix for _, suffix in found}
    if len(suffixes) < 2 or any(needle_in(suffix) for suffix in suffixes):
        return ()
    return tuple(found)


def element_closer(a: ArgumentsAnalysis, name: str) -> str:
    """What closes an argument's value: the value suffix, with the name repeated in it
    where the template does (``</NAME>``)."""
    if not a.value_suffix_after_name:
        return a.value_suffix
    return a.value_suffix + name + a.value_suffix_after_name


def _as_elements(value: dict[str, object] | list[object], a: ArgumentsAnalysis, item: str) -> str:
    """An object or array value written in the argument markup itself: members as
    arguments named by their keys, items as arguments named ``item``."""
    pairs = value.items() if isinstance(value, dict) else ((item, v) for v in value)
    return a.separator.join(
        a.name_prefix + key + a.name_suffix + a.value_prefix + str(v) + element_closer(a, key)
        for key, v in pairs
    )


def _value_item_name(probe: Probe, a: ArgumentsAnalysis) -> str:
    """The element name of array items when the template writes object and array values
    as nested elements in its argument markup (MiniMax-M3: ``<range><min>1.5</min></range>``,
    ``<tags><item>a</item></tags>``), else "".

    Renders a call whose second argument is ``{"n": 7}``, then ``[7, 8]``: the object must
    come back exactly as its members written as arguments; the array's first element names
    the item, and the whole must be its items written so. Without markers around both the
    name and the value (``f(a=1)``) nothing can nest.
    """
    if not (a.name_prefix.strip() and a.value_suffix.strip()):
        return ""
    header = ARG_SECOND + a.name_suffix + a.value_prefix

    def written(value: object) -> str | None:
        spec: CallSpec = (FUN_FIRST, ((ARG_FIRST, VALUE_FIRST), (ARG_SECOND, value)), CALL_ID)
        section = _fenced_section(probe, (spec,))
        at = section[0].find(header) if section is not None else -1
        if section is None or at < 0:
            return None
        start = at + len(header)
        end = section[0].find(element_closer(a, ARG_SECOND), start)
        return section[0][start:end] if end >= 0 else None

    if written(_FrozenDict(n=7)) != _as_elements({"n": 7}, a, ""):
        return ""
    items = written(_FrozenList([7, 8]))
    if items is None or not items.startswith(a.name_prefix):
        return ""
    cut = items.find(a.name_suffix, len(a.name_prefix))
    item = items[len(a.name_prefix) : cut] if cut > 0 else ""
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", item) or needle_in(item):
        return ""
    return item if items == _as_elements([7, 8], a, item) else ""


def _next_turn_after_calls(probe: Probe, section: str) -> str:
    """When a tool-call turn has no closing marker of its own, the marker that opens the
    tool result's turn ends it (e.g. GLM's <|observation|>)."""
    text_turn = probe.turn(ASSISTANT_MSG, tools=True)
    if text_turn is None or not text_turn.rstrip().endswith(ASSISTANT_MSG):
        return ""  # turns have closing markers of their own
    alone = probe.calls((CALL_1,))
    followed = probe.render(assistant=("", None, (CALL_1,)), tools=True, follow_up="tool")
    if alone is None or followed is None or not alone.rstrip().endswith(section.rstrip()):
        return ""
    added = diff_split(alone, followed).right
    cut = added.find(TOOL_RESULT)
    segs = segmentize(added[:cut] if cut >= 0 else added)
    first = next((seg for seg in segs if seg.value.strip()), None)
    return first.value if first is not None and first.is_marker else ""


# A special token written right before a call's name (Llama 3.x's ``<|python_tag|>``).
_PREFIX_TOKEN_RE = re.compile(r"(?:<\|[^\s<>|]{1,40}\|>|<[A-Za-z_][\w.-]{0,40}>)\Z")


def call_prefix_token(probe: Probe) -> str:
    """The special token the template writes before calls to its built-in tools, "" if none.

    Templates of the Llama 3.x family take a ``builtin_tools`` list and write a call to one
    of those as ``<|python_tag|>name...``; models also put the token before ordinary calls.
    Read from a render of the probe call with its function declared built in: the marker
    right before the name, absent from the ordinary render. Any doubt gives "".
    """
    call: dict[str, Any] = {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call(CALL_1, not probe.args_as_string)],
    }
    if probe.call_turn_text:
        call = with_call_turn_text(call)
    context: dict[str, object] = {
        "messages": [{"role": "user", "content": USER_MSG}, call],
        "tools": probe.tools,
        "add_generation_prompt": False,
    }
    plain = probe.raw(context)
    builtin = probe.raw({**context, "builtin_tools": [FUN_FIRST]})
    if plain is None or builtin is None or builtin == plain:
        return ""
    # The name also appears where the template lists the tools: the call is the place
    # right after such a token.
    at = builtin.find(FUN_FIRST)
    while at > 0:
        found = _PREFIX_TOKEN_RE.search(builtin, 0, at)
        if found is not None:
            token = found.group()
            return "" if token in plain or needle_in(token) else token
        at = builtin.find(FUN_FIRST, at + 1)
    return ""


# Two special tokens back to back, nothing but layout around them.
_TOKEN_PAIR_RE = re.compile(
    r"\s*(<\|[^\s<>|]{1,40}\|>|\[[A-Z_]{2,40}\])\s*(<\|[^\s<>|]{1,40}\|>|\[/?[A-Z_]{2,40}\])\s*"
)


def _content_wrapper(probe: Probe, section_start: str) -> tuple[str, str] | None:
    """The markers a call turn writes around its content, where the section start found
    with the probe's empty content is two tokens that enclose that content.

    Llama 4 writes ``<|python_start|>`` CONTENT ``<|python_end|>`` and then the calls: with
    no content the pair looks like a section opener, but a call turn with content shows
    the content between the two. None for any other section start.
    """
    pair = _TOKEN_PAIR_RE.fullmatch(section_start)
    if pair is None:
        return None
    turn = probe.calls((CALL_1,), content=ASSISTANT_MSG)
    opened, closed = pair.group(1), pair.group(2)
    if turn is None or f"{opened}{ASSISTANT_MSG}{closed}" not in turn:
        return None
    return opened, closed


def _opener_in_separator(tools: ToolsAnalysis, probe: Probe) -> ToolsAnalysis:
    """Each call's opener, where the generation prompt ends with it (functionary v2, v3).

    Functionary v2 writes every message as ``\n<|from|>ROLE\n<|recipient|>TO\n<|content|>``
    and its generation prompt is ``\n<|from|>assistant\n<|recipient|>``: the first call's
    opener is in the prompt, so the diffs see it only between calls, as the separator. That
    separator is the per-call opener (its leading whitespace the separator): a call after
    content opens with it too, and the prompt opened the first call (``call_opened``).
    """
    fmt, sep = tools.format, tools.call_separator
    opener = sep.lstrip()
    markers = markers_in(opener)
    markup = bool(markers) and opener.startswith(markers[0])
    # Or punctuation alone, functionary v3's '>>>' (a word or a comma is no opener).
    arrows = len(opener.strip()) >= 2 and not any(ch.isalnum() or ch in ",;" for ch in opener)
    if fmt.section_start or fmt.per_call_start or not (markup or arrows):
        return tools
    if not generation_prompt(probe, None).rstrip().endswith(opener.rstrip()):
        return tools
    return dataclasses.replace(
        tools,
        format=dataclasses.replace(fmt, per_call_start=opener),
        call_separator=sep[: len(sep) - len(opener)],
    )


# The opener of a described call list: a word and its bracket (``functools[``) or a special
# token (``<|calls|>``, ``<calls>``, optionally with the bracket), right before a call object.
_DESCRIBED_OPENER = (
    r"(?:(?<![\w\[])[A-Za-z_][\w-]{0,40}\[|<\|[^\s<>|]{1,40}\|>\[?|<[A-Za-z_][\w.-]{0,40}>\[?)"
)


def _described_close(opener: str, after: str) -> str:
    """The closer the description writes for ``opener``: ``]`` for a bracket, the closing
    tag of a tag (``</x>``, ``<|/x|>``) if the text after the call shows it, "" if none."""
    bracket = "]" if opener.endswith("[") else ""
    tag = opener[:-1] if bracket and opener.startswith("<") else opener
    if not tag.startswith("<"):
        return bracket
    closer = "<|/" + tag[2:] if tag.startswith("<|") else "</" + tag[1:]
    return bracket + closer if closer in after else bracket


def described_wrapper(probe: Probe, tools: ToolsAnalysis) -> tuple[str, str]:
    """The wrapper the tool instructions describe around the calls, when renders write none.

    Phi-4-mini's template tells the model to write ``functools[{"name": ..., "arguments":
    ...}, ...]`` but renders a call turn as the bare objects: the rendered format has no
    opener at all. Read from the render with tools (the instructions): an opener right
    before an object whose first key is the call's name key. ("", "") when the rendered
    format has an opener of its own or the instructions show none.
    """
    fmt = tools.format
    if fmt.section_start or fmt.per_call_start or fmt.tools_array_wrapped:
        return "", ""
    if fmt.mode == ToolFormat.TAG_WITH_JSON:
        key = re.match(r'\s*\{\s*"([^"]{1,40})"', tools.function.name_prefix)
        field = key.group(1) if key else ""
    elif fmt.mode == ToolFormat.JSON_NATIVE and not fmt.function_field:
        field = fmt.field_order[0] if fmt.field_order else ""
    else:
        field = ""
    described = probe.render(tools=True) if field else None
    if not described:
        return "", ""
    pattern = _DESCRIBED_OPENER + r'(?=\s*\{\s*"' + re.escape(field) + r'"\s*:)'
    found = re.search(pattern, described)
    if found is None or needle_in(found.group()):
        return "", ""
    opener = found.group()
    return opener, _described_close(opener, described[found.end() :])


# A call example in the tool instructions: a tag (``<tool_call>``, ``<|tool_call|>``), a JSON
# object whose first two keys name the function and its arguments (their values may be
# placeholders, ``<function-name>``), the tag's closer.
_TAUGHT_TAG = r"(?P<open><(?P<bar>\|?)(?P<tag>[A-Za-z_][\w.-]{0,40})(?P=bar)>)"
_TAUGHT_BODY = (
    r'(?P<lead>\s*)\{\s*"(?P<name>[A-Za-z_]\w{0,40})"\s*:\s*[^,\n]{1,80},'
    r'\s*"(?P<args>[A-Za-z_]\w{0,40})"\s*:\s*[^\n]{1,120}?\}(?P<trail>\s*)'
)
_TAUGHT_CALL = re.compile(_TAUGHT_TAG + _TAUGHT_BODY + r"(?P<close></?(?P=bar)/?(?P=tag)(?P=bar)>)")


def taught_format(probe: Probe) -> ToolsAnalysis | None:
    """The call format a template teaches only in its tool instructions, when no call turn
    renders one: SmolLM3's "... within <tool_call></tool_call> XML tags:\n<tool_call>\n
    {"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>". Read from the
    text the template adds when tools are given: a tag, a JSON object naming the function
    and its arguments, the tag's closer (``</tool_call>``, ``<|/tool_call|>``). None when
    the instructions show no such example."""
    plain, with_tools = probe.render(), probe.render(tools=True)
    if plain is None or with_tools is None or plain == with_tools:
        return None
    added = diff_split(plain, with_tools).right
    for found in _TAUGHT_CALL.finditer(added):
        bar, tag = found.group("bar"), found.group("tag")
        if found.group("close") != f"<{bar}/{tag}{bar}>" or needle_in(found.group()):
            continue
        name, args = found.group("name"), found.group("args")
        if name == args:
            continue
        fmt = ToolFormatAnalysis(
            mode=ToolFormat.JSON_NATIVE,
            per_call_start=found.group("open") + found.group("lead"),
            per_call_end=found.group("trail") + found.group("close"),
            name_field=name,
            args_field=args,
            field_order=(name, args),
            json_style="spaced",
        )
        return ToolsAnalysis(format=fmt, call_separator="\n", parallel_calls=True)
    return None


def analyze_tools(probe: Probe, reasoning: ReasoningAnalysis, text_eot: str = "") -> ToolFindings:
    """T1-T7 on a template; ToolFormat.NONE when it renders no tool calls.

    ``text_eot`` is the end-of-turn marker of a text answer: a tool section never
    extends past it (templates may write more after it, e.g. the next role header).
    """
    one = _section(probe, (CALL_1,))
    if one is None or FUN_FIRST not in one[0]:
        return ToolFindings(ToolsAnalysis())
    s1, eot = one
    s1 = _strip_reasoning(s1, reasoning)
    two = _section(probe, (CALL_1, CALL_2))
    s2 = _strip_reasoning(two[0], reasoning) if two is not None else None

    fun_quote = _json_quote(FUN_FIRST, s1)
    arg_quote = _json_quote(ARG_FIRST, s1)
    result: ToolsAnalysis | None = None
    if fun_quote:
        result = _analyze_json_native(probe, s1, s2, fun_quote, s1.find(FUN_FIRST))
    if result is None:
        mode = ToolFormat.TAG_WITH_JSON if arg_quote else ToolFormat.TAG_WITH_TAGGED
        result = _analyze_tagged(probe, s1, s2, mode, arg_quote)
    if result is None:
        return ToolFindings(ToolsAnalysis())
    fmt = result.format
    sec_end = fmt.section_end
    if text_eot and text_eot in sec_end:
        sec_end = sec_end[: sec_end.find(text_eot)]
        eot = eot or text_eot
    # Whitespace alone is layout, not a section marker (it would make a useless trigger).
    sec_start = without_role_header(fmt.section_start.lstrip(), generation_prompt(probe, None))
    sec_end = sec_end if sec_end.strip() else ""
    wrap = _content_wrapper(probe, sec_start)
    fmt = dataclasses.replace(
        fmt,
        section_start="" if wrap else sec_start,
        section_end=sec_end,
        call_prefix_token=call_prefix_token(probe),
        content_wrap_start=wrap[0] if wrap else "",
        content_wrap_end=wrap[1] if wrap else "",
    )
    result = _opener_in_separator(dataclasses.replace(result, format=fmt), probe)
    fmt = result.format
    start, end = described_wrapper(probe, dataclasses.replace(result, format=fmt))
    fmt = dataclasses.replace(fmt, described_start=start, described_end=end)
    result = dataclasses.replace(result, format=fmt)
    raw = _fenced_section(probe, (CALL_1,))
    result = _with_fence(result, fence_of(raw[0]) if raw is not None else "")
    if result.format.mode == ToolFormat.TAG_WITH_TAGGED:
        item = _value_item_name(probe, result.arguments)
        if item:
            arguments = dataclasses.replace(result.arguments, value_item_name=item)
            result = dataclasses.replace(result, arguments=arguments)
    if not eot:
        eot = _next_turn_after_calls(probe, s1)
    if _leaks_needle(result):
        # A placeholder in a marker means the diffs were misread: no format beats a wrong one.
        return ToolFindings(ToolsAnalysis(), eot)
    return ToolFindings(result, eot)


def _marker_texts(tools: ToolsAnalysis) -> list[str]:
    texts = [tools.call_separator]
    for part, names in TOOL_MARKER_FIELDS.items():
        texts.extend(getattr(getattr(tools, part), name) for name in names)
    texts.extend(suffix for _, suffix in tools.arguments.name_suffix_by_type)
    return texts


def _leaks_needle(tools: ToolsAnalysis) -> bool:
    return any(needle_in(text) for text in _marker_texts(tools))


def _with_fence(tools: ToolsAnalysis, fence: str) -> ToolsAnalysis:
    """Every marker with the fence token put back before its tags (``fence_of``)."""
    if not fence:
        return tools
    changes: dict[str, Any] = {"call_separator": put_fence_back(tools.call_separator, fence)}
    for part, names in TOOL_MARKER_FIELDS.items():
        obj = getattr(tools, part)
        fields: dict[str, Any] = {n: put_fence_back(getattr(obj, n), fence) for n in names}
        if part == "arguments":
            fields["name_suffix_by_type"] = tuple(
                (k, put_fence_back(v, fence)) for k, v in obj.name_suffix_by_type
            )
        changes[part] = dataclasses.replace(obj, **fields)
    return dataclasses.replace(tools, **changes)
