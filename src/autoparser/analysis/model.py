"""Plain data describing what the differential analysis found in a template.

These frozen dataclasses are the contract between ``autoparser.analysis`` (which fills
them by diffing renders) and ``autoparser.generate`` (which builds parsers and grammars
from them). Field names are stable: they are serialised with ``to_dict``/``to_json``.
An empty string always means "no such marker".

Markers keep the template's exact whitespace (e.g. ``per_call_start == "<tool_call>\n"``),
so writing calls with them reproduces the template's render; a parser should accept
whitespace around markers loosely. Reasoning ``start``/``end`` and end-of-turn markers are
whitespace-trimmed.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from typing import Any

from autoparser.template.switches import SYSTEM_DIRECTIVE, ThinkingSwitch


class ReasoningMode(str, Enum):
    """How the model marks reasoning."""

    NONE = "none"  # no reasoning markers detected
    TAG_BASED = "tag_based"  # optional <think>...</think> the model writes itself
    DELIMITER = "delimiter"  # no start marker: reasoning runs until an end delimiter
    FORCED_OPEN = "forced_open"  # the generation prompt opens the reasoning block
    # Thinking on: the prompt opens the block; thinking off: the prompt closes it
    # (start+end, or only end), see ReasoningAnalysis.disabled_prompt_suffix.
    FORCED_CLOSED = "forced_closed"
    TOOLS_ONLY = "tools_only"  # reasoning is rendered only in tool-call turns


class ContentMode(str, Enum):
    """How the model wraps its visible answer."""

    PLAIN = "plain"
    ALWAYS_WRAPPED = "always_wrapped"
    WRAPPED_WITH_REASONING = "wrapped_with_reasoning"


class ToolFormat(str, Enum):
    """How the model writes tool calls."""

    NONE = "none"
    JSON_NATIVE = "json_native"  # {"name": "f", "arguments": {...}}
    TAG_WITH_JSON = "tag_with_json"  # <function=f>{...}</function>
    TAG_WITH_TAGGED = "tag_with_tagged"  # <function=f><parameter=a>v</parameter></function>


class CallIdPosition(str, Enum):
    """Where a tag-based format writes the call id."""

    NONE = "none"
    PRE_FUNC_NAME = "pre_func_name"
    BETWEEN_FUNC_AND_ARGS = "between_func_and_args"
    POST_ARGS = "post_args"


@dataclasses.dataclass(frozen=True)
class ReasoningAnalysis:
    mode: ReasoningMode = ReasoningMode.NONE
    start: str = ""
    end: str = ""
    # What enable_thinking=False appends to the generation prompt (e.g. "<think>\n\n</think>\n\n").
    disabled_prompt_suffix: str = ""
    # What enable_thinking=True appends (e.g. "<think>\n" for FORCED_OPEN).
    enabled_prompt_suffix: str = ""
    # Whether the last assistant turn's reasoning appears in the render (passed as
    # reasoning_content, or as the history_field below when the template reads another key).
    renders_last_reasoning: bool = False
    # Added by the analyser: how the template takes an assistant turn's reasoning:
    # "reasoning_content", "reasoning" or "thinking" (message key), "thinking_block"
    # (a {"type": "thinking", "thinking": ...} content block), or "" (never rendered).
    history_field: str = ""
    # Added by the analyser: the template variable that switches reasoning on and off
    # (``enable_thinking``, ``thinking``, ``thinking_mode``, ``reasoning_effort``...), with
    # the values for on and off; "" when the template has none. The request's
    # ``enable_thinking`` is mapped onto it, and the prompt suffixes above are rendered with it.
    switch_variable: str = ""
    switch_on: bool | int | str | None = None
    switch_off: bool | int | str | None = None
    # "system_directive" when the switch is a directive in the system message (``/think`` /
    # ``/no_think`` as switch_on / switch_off, no variable); "" otherwise (left out of
    # ``to_dict`` then).
    switch_kind: str = ""

    @property
    def switch(self) -> ThinkingSwitch | None:
        """The switch fields above as the template's ThinkingSwitch (None without one)."""
        if self.switch_on is None or self.switch_off is None:
            return None  # the analyser records both values with every switch
        if self.switch_kind == SYSTEM_DIRECTIVE:
            return ThinkingSwitch("", self.switch_on, self.switch_off, SYSTEM_DIRECTIVE)
        if self.switch_variable:
            return ThinkingSwitch(self.switch_variable, self.switch_on, self.switch_off)
        return None


@dataclasses.dataclass(frozen=True)
class ContentAnalysis:
    mode: ContentMode = ContentMode.PLAIN
    start: str = ""
    end: str = ""
    requires_non_null_content: bool = False


@dataclasses.dataclass(frozen=True)
class ToolFormatAnalysis:
    mode: ToolFormat = ToolFormat.NONE
    section_start: str = ""
    section_end: str = ""
    per_call_start: str = ""
    per_call_end: str = ""
    # JSON_NATIVE field names ("" = field absent). function_field is the nesting key,
    # e.g. "function" for {"function": {"name": ..., "arguments": ...}}.
    function_field: str = ""
    name_field: str = ""
    args_field: str = ""
    id_field: str = ""
    gen_id_field: str = ""
    # Order in which the JSON object's fields are written (e.g. ("name", "arguments")).
    field_order: tuple[str, ...] = ()
    fun_name_is_key: bool = False  # {"get_weather": {...}}
    tools_array_wrapped: bool = False  # [{...}, {...}]
    uses_python_dicts: bool = False  # {'key': 'value'}
    arguments_as_string: bool = False  # "arguments": "{\"a\": 1}"
    # Added by the analyser (additive, all defaulted):
    # Fields written with the same value in every call, as (dotted path, JSON-encoded value),
    # e.g. (("type", '"function"'),) for {"type": "function", "function": {...}}.
    constant_fields: tuple[tuple[str, str], ...] = ()
    # With tools_array_wrapped: the array's opening bracket plus the whitespace before the
    # first call (e.g. "[\n    "), and the whitespace plus closing bracket after the last.
    array_open: str = ""
    array_close: str = ""
    # How each JSON call object is laid out: "spaced" (json.dumps defaults: ", " and ": "),
    # "compact" ("," and ":"), or "pretty" (indented / anything else).
    json_style: str = ""
    # With json_style "pretty": the indent that json.dumps(..., indent=n) needs to write the
    # whole JSON value (the array, when wrapped) exactly as the template does; 0 = other.
    json_indent: int = 0
    # A special token the template writes before calls (Llama 3.x's ``<|python_tag|>`` for
    # its built-in tools): models may put it before any call, so the parser accepts it
    # there (optional) and it starts a call. "" = none declared.
    call_prefix_token: str = ""
    # Added by the analyser: two markers a call turn writes around its content before the
    # calls (Llama 4's ``<|python_start|>`` CONTENT ``<|python_end|>`` then the calls), ""
    # when none. Markup, never content: the parser drops them where models write them,
    # around the content or around the calls (left out of ``to_dict`` when empty).
    content_wrap_start: str = ""
    content_wrap_end: str = ""
    # A wrapper around the calls that the template's tool instructions describe but its
    # renders never write (Phi-4-mini: ``functools[{"name": ..., "arguments": ...}, ...]``
    # while a call turn renders the bare objects): models write it, so the parser accepts
    # the calls inside it too and its opener starts a call. "" = none described.
    described_start: str = ""
    described_end: str = ""


@dataclasses.dataclass(frozen=True)
class FunctionAnalysis:
    name_prefix: str = ""
    name_suffix: str = ""
    close: str = ""
    # Added by the analyser: non-empty when the call repeats the function's name after the
    # name suffix (a recipient header then markup naming it again, muse-glimmer's
    # ``to=NAME<|message|><atem:invoke name="NAME">``): the text is name_prefix + NAME +
    # name_suffix + NAME + this.
    name_suffix_after_name: str = ""


@dataclasses.dataclass(frozen=True)
class ArgumentsAnalysis:
    start: str = ""
    end: str = ""
    name_prefix: str = ""
    name_suffix: str = ""
    value_prefix: str = ""
    value_suffix: str = ""
    separator: str = ""
    # Added by the analyser: the name suffix before a non-string (JSON) value when the
    # template writes it differently from the one before a string value, e.g. DeepSeek's
    # '" string="false">' versus '" string="true">', or "=" versus "='" for f(a='v', n=1);
    # "" = the same as name_suffix.
    name_suffix_json: str = ""
    # Added by the analyser: the name suffix per JSON type of the value, as (type, suffix)
    # for "integer", "number", "boolean", "null", "object" and "array", when the template
    # names the value's type in it (Kimi-K3's ``" type="boolean"<|sep|>``); () when every
    # non-string value takes name_suffix_json.
    name_suffix_by_type: tuple[tuple[str, str], ...] = ()
    # Added by the analyser: non-empty when the value's closer repeats the argument name,
    # XML-style: the closer is value_suffix + NAME + this (MiniMax-M3's "</" NAME ">").
    value_suffix_after_name: str = ""
    # Added by the analyser: the template prints non-string values with Python's str()
    # ({'n': 7}, [True, None]) rather than as JSON, so a model trained on it writes them so.
    values_as_python: bool = False
    # Added by the analyser: what the template writes around a string value that holds
    # markup or a newline (MiniCPM5's ``<![CDATA[`` ... ``]]>``), inside the value prefix and
    # suffix; "" when such a value is written like any other.
    value_wrapper_open: str = ""
    value_wrapper_close: str = ""
    # Added by the analyser: non-empty when the template writes object and array values as
    # nested elements in its own argument markup (object members as arguments named by their
    # keys, array items as arguments named this; MiniMax-M3's ``<range><min>1.5</min>
    # </range>`` and ``<item>``), "" when such values are JSON (or Python literals).
    value_item_name: str = ""
    # Added by the analyser: how the template encodes characters of an argument's name, as
    # (character, entity) pairs (Kimi-K3 writes the name as an escaped attribute,
    # ``key="q&amp;a"``: (("&", "&amp;"), ('"', "&quot;"))); () when names are written as
    # they are (left out of ``to_dict`` then).
    name_escapes: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class CallIdAnalysis:
    position: CallIdPosition = CallIdPosition.NONE
    prefix: str = ""
    suffix: str = ""
    # Added by the analyser: the template writes the call's position in the turn
    # (0, 1, ...) here rather than the request's call id (e.g. Kimi-K2 "functions.f:0").
    generated: bool = False
    # With ``generated``: the index of the first call (0, or 1 for Kimi-K3's index="1").
    index_base: int = 0


# The fields of a ToolsAnalysis' parts that hold marker text, by part: the one list for
# the passes that treat every marker alike (needle guard, fence, whitespace normalisation).
TOOL_MARKER_FIELDS: dict[str, tuple[str, ...]] = {
    "format": (
        "section_start",
        "section_end",
        "per_call_start",
        "per_call_end",
        "array_open",
        "array_close",
        "content_wrap_start",
        "content_wrap_end",
    ),
    "function": ("name_prefix", "name_suffix", "close", "name_suffix_after_name"),
    "arguments": (
        "start",
        "end",
        "name_prefix",
        "name_suffix",
        "name_suffix_json",
        "value_prefix",
        "value_suffix",
        "value_suffix_after_name",
        "separator",
    ),
    "call_id": ("prefix", "suffix"),
}


@dataclasses.dataclass(frozen=True)
class ToolsAnalysis:
    format: ToolFormatAnalysis = dataclasses.field(default_factory=ToolFormatAnalysis)
    function: FunctionAnalysis = dataclasses.field(default_factory=FunctionAnalysis)
    arguments: ArgumentsAnalysis = dataclasses.field(default_factory=ArgumentsAnalysis)
    call_id: CallIdAnalysis = dataclasses.field(default_factory=CallIdAnalysis)
    call_separator: str = ""  # between two parallel calls
    parallel_calls: bool = False  # whether two calls in one turn are rendered


@dataclasses.dataclass(frozen=True)
class VerificationFailure:
    """One self-check the analysis failed, with a short reason naming what came back wrong."""

    check: str
    reason: str


@dataclasses.dataclass(frozen=True)
class AnalysisVerification:
    """Whether the parser built from an analysis reads back the template's own renders.

    ``checks`` names every check that ran; ``failures`` those that failed, with a reason;
    ``skipped`` the probe conversations the template cannot express, with why (n/a, not a
    failure). Filled by :mod:`autoparser.verify`, above the analysis and the generators.
    """

    checks: tuple[str, ...] = ()
    failures: tuple[VerificationFailure, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def verified(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        """One line per failure, ``check: reason``."""
        return "; ".join(f"{f.check}: {f.reason}" for f in self.failures)


@dataclasses.dataclass(frozen=True)
class TemplateAnalysis:
    reasoning: ReasoningAnalysis = dataclasses.field(default_factory=ReasoningAnalysis)
    content: ContentAnalysis = dataclasses.field(default_factory=ContentAnalysis)
    tools: ToolsAnalysis = dataclasses.field(default_factory=ToolsAnalysis)
    generation_prompt: str = ""  # what add_generation_prompt=True appends
    end_of_turn: tuple[str, ...] = ()  # markers that end an assistant turn (stops)
    preserved_tokens: tuple[str, ...] = ()  # every non-empty marker
    workarounds: tuple[str, ...] = ()  # names of the fingerprinted workarounds applied
    handler: str = ""  # name of a hand-written format in autoparser.formats, if any
    # The self-check of this analysis (None = not verified: the analysis stage alone never
    # verifies; ChatTemplate.analyze() does). Left out of to_dict while None.
    verification: AnalysisVerification | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (enums as their values); ``from_dict`` reads it back."""
        data: dict[str, Any] = _to_plain(self)
        if self.verification is None:
            del data["verification"]
        if not self.reasoning.switch_kind:
            del data["reasoning"]["switch_kind"]
        if not self.tools.arguments.name_escapes:
            del data["tools"]["arguments"]["name_escapes"]
        fmt = data["tools"]["format"]
        for name in ("content_wrap_start", "content_wrap_end"):
            if not fmt[name]:
                del fmt[name]
        if not fmt["described_start"] and not fmt["described_end"]:
            del fmt["described_start"], fmt["described_end"]
        return data

    def to_json(self, **kwargs: Any) -> str:
        """``to_dict`` as JSON text; ``kwargs`` go to ``json.dumps`` (e.g. ``indent``)."""
        return json.dumps(self.to_dict(), **kwargs)

    def prompt_opens_reasoning(self, prompt: str, enable_thinking: bool | None) -> bool:
        """Does the output of ``prompt`` start inside a reasoning block?

        True when the prompt ends with the reasoning start marker (the template opened the
        block), or for a DELIMITER template (no start marker) when thinking is explicitly
        on. The one rule ``ChatParams.thinking_forced_open`` and engine plug-ins share.
        """
        r = self.reasoning
        if r.mode == ReasoningMode.NONE or not r.end:
            return False
        if r.start and r.start.strip():
            return prompt.rstrip().endswith(r.start.strip())
        return r.mode == ReasoningMode.DELIMITER and enable_thinking is True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TemplateAnalysis:
        """An analysis from ``to_dict`` output (missing fields take their defaults)."""
        plain = {k: v for k, v in data.items() if k != "verification"}
        result: TemplateAnalysis = _from_plain(cls, plain)
        checked = data.get("verification")
        if checked is not None:
            verification = AnalysisVerification(
                checks=tuple(checked.get("checks", ())),
                failures=tuple(VerificationFailure(**f) for f in checked.get("failures", ())),
                skipped=tuple((str(c), str(r)) for c, r in checked.get("skipped", ())),
            )
            result = dataclasses.replace(result, verification=verification)
        return result


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_to_plain(v) for v in value]
    return value


def _from_plain(cls: Any, data: dict[str, Any]) -> Any:
    import typing

    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        raw = data[f.name]
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            kwargs[f.name] = _from_plain(hint, raw)
        elif isinstance(hint, type) and issubclass(hint, Enum):
            kwargs[f.name] = hint(raw)
        elif typing.get_origin(hint) is tuple:
            kwargs[f.name] = tuple(tuple(v) if isinstance(v, list) else v for v in raw)
        else:
            kwargs[f.name] = raw
    return cls(**kwargs)
