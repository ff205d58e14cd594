"""The tag vocabulary shared by parser builders and the tree-to-message mapper.

A parser (generated or hand-written) only has to tag its nodes with these names for the
stream parser to turn its parse trees into OpenAI messages and deltas. See docs/streaming.md.
What each tag means to the message (the field it fills, how its text is decoded) is said
here once, by the groups and specs at the end; the stream modules and the span viewer read
them instead of tabling tags of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

# Top-level nodes (direct children of the root, in document order).
REASONING = "reasoning"  # reasoning text (several nodes are concatenated)
REASONING_CLOSE = "reasoning-close"  # the end marker of a reasoning block (absent = unclosed)
CONTENT = "content"  # visible answer text (several nodes are concatenated)
TOOL = "tool"  # one tool call; its children below
# The marker closing a section of calls: content when the call before it was not a call
# (its text is content, and so is what closes it), dropped otherwise.
TOOL_SECTION_END = "tool-section-end"
# Markup the output ended inside (a message header cut off): neither content nor a call;
# its presence makes the message truncated.
CUT = "cut"
# A special token a model added around its calls that the template never prints (Llama 3.2's
# ``<|python_tag|>``): markup, dropped, and reported with its text (a ``wrapper_token``
# finding), so that not one character of the output goes unaccounted for.
WRAPPER_TOKEN = "wrapper-token"

# Children of a TOOL node.
TOOL_NAME = "tool-name"  # the function name (tag it inside atomic() so it appears complete)
TOOL_ID = "tool-id"  # the model's own call id, when the format has one
TOOL_ARGS = "tool-args"  # raw JSON object text, streamed as written
TOOL_ARGS_PY = "tool-args-py"  # python-literal dict text, converted to JSON once complete
TOOL_ARGS_STR = "tool-args-str"  # a JSON string whose value is the arguments' JSON text
TOOL_ARG = "tool-arg"  # one tagged argument; children below

# Children of a TOOL_ARG node.
TOOL_ARG_NAME = "tool-arg-name"  # the argument name (inside atomic())
# Inside a TOOL_ARG_NAME: a name the tool's schema does not declare, read by the format's
# markers alone (lenient parsers only, after every declared name failed); the call is kept
# with an ``undeclared_argument`` finding, or refused under the "reject" tolerance.
TOOL_ARG_UNDECLARED = "tool-arg-undeclared"
TOOL_ARG_STRING = "tool-arg-string"  # raw text value -> JSON string
TOOL_ARG_TEXT = "tool-arg-text"  # raw text value -> JSON string, exactly (no newline trimmed)
# Raw text values whose template pads one side only: that side's one newline dropped.
TOOL_ARG_STRING_LEAD = "tool-arg-string-lead"  # the leading newline only
TOOL_ARG_STRING_TRAIL = "tool-arg-string-trail"  # the trailing newline only
TOOL_ARG_JSON = "tool-arg-json"  # JSON value text -> copied as is
TOOL_ARG_PY = (
    "tool-arg-py"  # Python-literal value text (True, None, {'a': 1}) -> JSON, once complete
)
TOOL_ARG_PYTHON = "tool-arg-python"  # a Python literal (pythonic calls) -> JSON, once complete

ALL = (
    REASONING,
    REASONING_CLOSE,
    CONTENT,
    TOOL,
    TOOL_SECTION_END,
    CUT,
    WRAPPER_TOKEN,
    TOOL_NAME,
    TOOL_ID,
    TOOL_ARGS,
    TOOL_ARGS_PY,
    TOOL_ARGS_STR,
    TOOL_ARG,
    TOOL_ARG_NAME,
    TOOL_ARG_UNDECLARED,
    TOOL_ARG_STRING,
    TOOL_ARG_TEXT,
    TOOL_ARG_STRING_LEAD,
    TOOL_ARG_STRING_TRAIL,
    TOOL_ARG_JSON,
    TOOL_ARG_PY,
    TOOL_ARG_PYTHON,
)


# --------------------------------------------------------------------------- what tags mean
TEXT_FIELDS: Mapping[str, str] = MappingProxyType(
    {REASONING: "reasoning_content", CONTENT: "content"}
)
"""Top-level text tags -> the message field their text is appended to."""

ArgumentsEncoding = Literal["json", "encoded", "python"]
WHOLE_ARGUMENTS: Mapping[str, ArgumentsEncoding] = MappingProxyType(
    {TOOL_ARGS: "json", TOOL_ARGS_STR: "encoded", TOOL_ARGS_PY: "python"}
)
"""Tags of a call's child holding all its arguments -> how that text encodes the object:
a JSON object as written, a JSON string holding the object's text, a Python-literal dict."""

ARGUMENTS = frozenset({*WHOLE_ARGUMENTS, TOOL_ARG})
"""Tags of a call's children that carry its arguments, in any encoding."""


@dataclasses.dataclass(frozen=True)
class ValueSpec:
    """How the text of one tagged argument value (a ``TOOL_ARG``'s child) becomes JSON:
    ``string`` (raw text, JSON-escaped), ``json`` (copied as is) or ``python`` (a Python
    literal, converted once complete); ``trims_lead``/``trims_trail``: the template pads
    that side of a raw string with one newline, which is not the value's."""

    decoder: Literal["string", "json", "python"]
    trims_lead: bool = False
    trims_trail: bool = False


VALUE_SPECS: Mapping[str, ValueSpec] = MappingProxyType(
    {
        TOOL_ARG_STRING: ValueSpec("string", trims_lead=True, trims_trail=True),
        TOOL_ARG_TEXT: ValueSpec("string"),
        TOOL_ARG_STRING_LEAD: ValueSpec("string", trims_lead=True),
        TOOL_ARG_STRING_TRAIL: ValueSpec("string", trims_trail=True),
        TOOL_ARG_JSON: ValueSpec("json"),
        TOOL_ARG_PY: ValueSpec("python"),
    }
)
"""Value tags the stream decodes itself; a format's own (``TOOL_ARG_PYTHON``) come with
their decoder in its ``ParserDefinition.value_converters``."""

# The same facts as sets, for the per-node tests on the hot path.
STRING_VALUES = frozenset(tag for tag, spec in VALUE_SPECS.items() if spec.decoder == "string")
TRIMS_LEAD = frozenset(tag for tag, spec in VALUE_SPECS.items() if spec.trims_lead)
TRIMS_TRAIL = frozenset(tag for tag, spec in VALUE_SPECS.items() if spec.trims_trail)

SPAN_LABELS: Mapping[str, str] = MappingProxyType(
    {
        REASONING: "reasoning",
        CONTENT: "content",
        TOOL: "tool",
        TOOL_NAME: "tool-name",
        TOOL_ID: "tool-id",
        **{tag: "tool-args" for tag in ARGUMENTS},
    }
)
"""What a viewer calls the text of a tagged node (``stream/spans.py``): a top-level field,
a call's own markup, or a part of a call (all argument encodings alike)."""
