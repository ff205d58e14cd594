"""Round-trip cases: the scenarios, the outputs a template renders for them, the views compared
(tests/corpus/test_roundtrip.py and the suites that reuse its cases).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from autoparser import ChatTemplate
from autoparser.errors import AutoparserError, TemplateError
from autoparser.verify import content_as_reasoning, end_of_same_text
from helpers.paths import corpus_templates, own_templates

NOT_COMPILED = "jinja2 cannot compile the template (nor can transformers)"
REFUSES_TOOLS = "the template raises on the request's tools (so does transformers)"
USER = {"role": "user", "content": "What is the weather like in Paris today?"}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {
                    "type": "string",
                    "enum": ["celsius", "fahrenheit"],
                    "description": "Temperature unit",
                },
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_records",
        "description": "Search records with filters.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Free text"},
                "filters": {
                    "type": "object",
                    "additionalProperties": True,
                    "description": "Nested filters",
                },
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
                "limit": {"type": "integer", "description": "Most results"},
                "ratio": {"type": "number", "description": "Score cut-off"},
                "exact": {"type": "boolean", "description": "Exact match"},
            },
            "required": ["query"],
        },
    },
}
PING = {
    "type": "function",
    "function": {
        "name": "ping_server",
        "description": "Check the server is up.",
        "parameters": {"type": "object", "properties": {}},
    },
}


class OrderItem(pydantic.BaseModel):
    name: str
    quantity: int = 1


class Order(pydantic.BaseModel):
    """A tool schema as Pydantic writes it: `$defs` + `$ref`, `anyOf` with null, `default`,
    `title`, no descriptions on parameters."""

    customer: str
    items: list[OrderItem]
    note: str | None = None


ORDER = {
    "type": "function",
    "function": {
        "name": "place_order",
        "description": "Place an order.",
        "parameters": Order.model_json_schema(),
    },
}
TOOLS = [WEATHER, SEARCH, PING, ORDER]

CONTENT = "The weather in Paris is sunny, 21 degrees."
PRELUDE = "Let me look that up for you."
REASONING = "The user wants the weather in Paris. I should check it."
# Ids of 9 alphanumerics fit every id shape a template demands (Mistral's included).
IDS = ("Ab3dE5gH7", "Xy9kL2mN4")
# An id as OpenAI's API writes it; templates that demand another shape get it reshaped.
OPENAI_ID = "call_Qw7Er9Ty1Ui3Op5As8Df2Gh"

SCENARIOS = (
    "content",
    "reasoning_content",
    "one_call",
    "content_call",
    "parallel_calls",
    "reasoning_call",
    "complex_args",
    "no_params",
    "pydantic_call",
    "openai_ids",
)
CALL_SCENARIOS = frozenset(SCENARIOS[2:])
REASONING_SCENARIOS = frozenset({"reasoning_content", "reasoning_call"})


def complex_arguments(end_marker: str) -> dict[str, Any]:
    """Nested objects, arrays, numbers, booleans, null, unicode, newlines, quotes, braces."""
    return {
        "query": f'Line one says "hi" {{braces}} [x]\nline two: ünïcødé 東京 🌧 {end_marker} done',
        "filters": {"range": {"min": 1.5, "max": -10}, "flags": [True, False, None], "note": "a}b"},
        "tags": ["α", 'say "q"', "new\nline"],
        "limit": 42,
        "ratio": 0.25,
        "exact": False,
    }


def _call(index: int, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": IDS[index],
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def end_marker_of(analysis: Any) -> str:
    """The marker that ends a tool call in this format (per call, function, section)."""
    t = analysis.tools
    for marker in (
        t.format.per_call_end,
        t.function.close,
        t.format.section_end,
        t.arguments.end,
    ):
        if str(marker).strip():
            return str(marker).strip()
    return ""


def scenario_message(scenario: str, analysis: Any) -> dict[str, Any]:
    """The assistant message of a scenario (OpenAI shape, JSON-text arguments)."""
    weather = {"city": "Paris", "unit": "celsius"}
    if scenario == "content":
        return {"role": "assistant", "content": CONTENT}
    if scenario == "reasoning_content":
        return {"role": "assistant", "content": CONTENT, "reasoning_content": REASONING}
    calls: list[dict[str, Any]]
    content: str | None = None
    reasoning: str | None = None
    if scenario == "one_call":
        calls = [_call(0, "get_weather", weather)]
    elif scenario == "content_call":
        content = PRELUDE
        calls = [_call(0, "get_weather", weather)]
    elif scenario == "parallel_calls":
        calls = [
            _call(0, "get_weather", weather),
            _call(1, "get_weather", {"city": "Tokyo", "unit": "fahrenheit"}),
        ]
    elif scenario == "reasoning_call":
        reasoning = REASONING
        calls = [_call(0, "get_weather", weather)]
    elif scenario == "complex_args":
        calls = [_call(0, "search_records", complex_arguments(end_marker_of(analysis)))]
    elif scenario == "no_params":
        calls = [_call(0, "ping_server", {})]
    elif scenario == "pydantic_call":
        order = {
            "customer": "Ada",
            "items": [{"name": "tea", "quantity": 2}, {"name": "cake"}],
            "note": "ring twice",
        }
        calls = [_call(0, "place_order", order)]
    elif scenario == "openai_ids":
        calls = [{**_call(0, "get_weather", weather), "id": OPENAI_ID}]
    else:  # pragma: no cover - the list above is closed
        raise ValueError(scenario)
    message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": calls}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message


@dataclass
class Case:
    """One template x scenario: n/a with a reason, or the output text and its parameters."""

    template: str
    scenario: str
    na: str = ""
    text: str = ""
    params: Any = None
    message: dict[str, Any] = field(default_factory=dict)
    compare_ids: bool = False
    end_of_turn: tuple[str, ...] = ()
    # The request the params were built for (the vLLM plugin test sends it to vLLM).
    tools: Any = None
    render_kwargs: dict[str, Any] = field(default_factory=dict)


def template_paths() -> list[Path]:
    return corpus_templates() + own_templates()


@functools.cache
def load_template(path: Path) -> ChatTemplate:
    """Corpus .jinja files carry no special tokens: use the usual Llama/Mistral ones."""
    return ChatTemplate(
        path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>", name=path.stem
    )


def strip_end_of_turn(text: str, markers: tuple[str, ...], opener: str) -> str:
    """Remove the end of turn: trailing end-of-turn markers / eos and what the template adds.

    After the last marker the template may add whitespace or, for templates that always
    append a generation prompt, the opener of the next assistant turn (a prefix or suffix
    of ``opener``, the generation prompt): both go. Whitespace before a removed marker is the
    model's own and stays; with no marker at the end, trailing whitespace is the template's.
    """
    ends = tuple(m.strip() for m in markers if m.strip())
    opener = opener.strip()
    result = text
    while True:
        cut = -1
        for marker in ends:
            at = result.rfind(marker)
            tail = result[at + len(marker) :].strip() if at >= 0 else ""
            next_turn = tail and (opener.startswith(tail) or opener.endswith(tail))
            if at >= 0 and (not tail or next_turn) and at > cut:
                cut = at
        if cut < 0:
            break
        result = result[:cut]
    return text.rstrip() if result is text else result


def _markers_at_end(text: str, markers: tuple[str, ...]) -> tuple[list[str], str]:
    """The markers (whitespace between them allowed) that end `text`, in order; the rest."""
    found: list[str] = []
    while True:
        stripped = text.rstrip()
        marker = next((m for m in markers if stripped.endswith(m)), None)
        if marker is None:
            return found[::-1], text
        found.append(marker)
        text = stripped[: -len(marker)]


def _markers_at_start(text: str, markers: tuple[str, ...]) -> list[tuple[str, int]]:
    """The markers that open `text` (whitespace between them allowed), with end offsets."""
    found: list[tuple[str, int]] = []
    pos = 0
    while True:
        skipped = len(text) - len(text[pos:].lstrip()) if pos < len(text) else pos
        marker = next((m for m in markers if text.startswith(m, skipped)), None)
        if marker is None:
            return found
        pos = skipped + len(marker)
        found.append((marker, pos))


def cut_turn(prompt: str, full: str, markers: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """What follows `prompt` in `full`: (the turn text, reasoning markers still open) or None.

    Some templates end the generation prompt with reasoning markers (``<think>\n``, an
    empty ``<think></think>``) that their history render writes differently or drops. Then
    the turn is the render after the prompt without those markers, minus the markers the
    turn repeats at its start (the longest tail of the prompt's markers it begins with).
    """
    if full.startswith(prompt):
        return full[len(prompt) :], []
    removed, shorter = _markers_at_end(prompt, markers)
    if not removed or not full.startswith(shorter.rstrip()):
        # A history render that writes the prompt with other whitespace (as verify does).
        at = end_of_same_text(prompt, full)
        return None if at is None else (full[at:].lstrip(), [])
    turn = full[len(shorter.rstrip()) :]
    leading = _markers_at_start(turn, markers)
    for k in range(min(len(removed), len(leading)), 0, -1):
        if removed[-k:] == [m for m, _ in leading[:k]]:
            turn = turn[leading[k - 1][1] :]
            break
    return turn, removed


def _render(
    template: ChatTemplate, messages: list[dict[str, Any]], tools: Any, gen: bool, kwargs: Any
) -> str:
    """Render as ``apply`` does: ``enable_thinking`` also becomes the template's own switch
    (its variable, or its directive in the system message: /think, /no_think)."""
    switch = template.analyze().reasoning.switch
    variables = dict(kwargs)
    if switch is not None and "enable_thinking" in kwargs:
        switched = switch.switch(messages, variables, bool(kwargs["enable_thinking"]))
        messages = [dict(m) for m in switched]
    return template.render(messages, tools=tools, add_generation_prompt=gen, **variables)


def _witness(call: Mapping[str, Any]) -> str:
    """A piece of a call's arguments that any rendering of them shows verbatim."""
    args = json.loads(call["function"]["arguments"])
    for value in args.values():
        if isinstance(value, str):
            return value.split('"', 1)[0].strip()  # unescaped prefix: raw or in JSON
    return ""


def _glued_values(call: Mapping[str, Any], turn: str) -> bool:
    """Does the turn write some argument's value with text glued to its end (``Parisr``)?"""
    arguments = json.loads(call["function"]["arguments"])
    # Text glued to a value, other than the next argument's name (a template that writes
    # no separator between arguments glues that: a different, parseable flaw).
    names = "|".join(re.escape(name) for name in arguments)
    for value in arguments.values():
        if isinstance(value, bool) or not isinstance(value, str | int):
            continue
        tail = str(value).rsplit("\n", 1)[-1].rsplit('"', 1)[-1].strip()
        clean = re.escape(tail) + rf"(?![A-Za-z0-9])|{re.escape(tail)}(?={names})"
        if tail and tail in turn and not re.search(clean, turn):
            return True
    return False


def _missing_part(message: dict[str, Any], turn: str) -> str:
    """Why the template cannot express the message: a part missing from the rendered turn."""
    if message.get("reasoning_content") and REASONING not in turn:
        return "template drops reasoning_content of the last assistant turn from the render"
    content = message.get("content")
    if content and content not in turn:
        if message.get("tool_calls"):
            return "template drops content of an assistant turn that has tool calls"
        return "template drops assistant content from the render"
    for index, call in enumerate(message.get("tool_calls", [])):
        if call["function"]["name"] not in turn:
            return "template does not render the assistant's tool calls"
        witness = _witness(call)
        if witness not in turn:
            what = "the arguments" if index == 0 else "a second tool call"
            return f"template drops {what} of the assistant's tool calls from the render"
        if _glued_values(call, turn):
            # toolace writes '"%sr" | format(v)': city=Parisr, a value that is not the data.
            return "template alters the argument values (text glued to each value)"
    return ""


def _second_turn(text: str, ends: tuple[str, ...], opener: str) -> bool:
    """Does an end-of-turn marker in `text` start another assistant turn (`opener`...)?"""
    for marker in (m.strip() for m in ends if m.strip()):
        at = text.find(marker)
        while at >= 0:
            after = text[at + len(marker) :].lstrip()
            if opener and after.startswith(opener[: min(len(opener), 8)]):
                return True
            at = text.find(marker, at + 1)
    return False


def model_output(
    template: ChatTemplate,
    analysis: Any,
    message: dict[str, Any],
    tools: Any,
    kwargs: dict[str, Any],
) -> tuple[str, str]:
    """(text the model generates for `message`, "") or ("", why it cannot be derived)."""
    try:
        full = _render(template, [USER, message], tools, False, kwargs)
        prompt = _render(template, [USER], tools, True, kwargs)
        bare = _render(template, [USER], tools, False, kwargs)
    except AutoparserError as exc:
        return "", f"template refuses the conversation: {exc}"
    r = analysis.reasoning
    markers = [r.start.strip(), r.end.strip()]
    if r.mode.value == "delimiter":
        # The generation prompt may end with a preamble the model continues with reasoning
        # (Apriel: "Here are my reasoning steps:"), which the history render drops.
        markers.append(analysis.generation_prompt.strip().rsplit("\n", 1)[-1])
    cut = cut_turn(prompt, full, tuple(m for m in markers if m))
    if cut is None:
        return "", "the rendered assistant turn does not extend the generation prompt"
    text, _removed = cut
    if prompt == bare and "assistant" in text.lstrip()[:20].lower():
        return "", "template has no generation prompt: the turn's role header would be output"
    opener = prompt[len(bare) :] if prompt.startswith(bare) else ""
    ends = (*analysis.end_of_turn, template.eos_token)
    text = strip_end_of_turn(text, ends, opener or prompt)
    if _second_turn(text, ends, (opener or analysis.generation_prompt).strip()):
        return "", "the template renders part of the turn as a second assistant turn"
    missing = _missing_part(message, text)
    if missing:
        return "", missing
    content = message.get("content")
    if content and message.get("tool_calls") and content_as_reasoning(text, content, r.start):
        return "", "template writes the content of a turn with tool calls as reasoning"
    opens = bool(r.start.strip()) and prompt.rstrip().endswith(r.start.strip())
    if opens and r.end.strip() not in text:
        return "", "the generation prompt opens a reasoning block the rendered turn never closes"
    return text, ""


def _variants(scenario: str, tools: Any) -> list[tuple[dict[str, Any], Any]]:
    """Render options to try in order: enable_thinking, then (if needed) without tools.

    The tools-less render is for templates that print the tools only when the conversation
    ends with a user turn; the parameters are still built with the tools.
    """
    thinking: list[bool | None] = [True, None] if scenario in REASONING_SCENARIOS else [None, False]
    tool_options = [tools, None] if tools else [None]
    return [
        ({} if value is None else {"enable_thinking": value}, t)
        for t in tool_options
        for value in thinking
    ]


@functools.cache
def prepare(path: Path, scenario: str) -> Case:
    """Render, cut and build params once per template and scenario."""
    case = Case(path.stem, scenario)
    try:
        template = load_template(path)
    except TemplateError as exc:
        # Asserted to fail in transformers too: test_uncompilable_templates_fail_everywhere.
        case.na = f"{NOT_COMPILED}: {exc}"
        return case
    try:
        caps = template.caps
        analysis = template.analyze()
    except AutoparserError as exc:
        case.na = f"template cannot be analysed: {exc}"
        return case
    if scenario in CALL_SCENARIOS and not caps.supports_tool_calls:
        case.na = "template does not render tool calls"
        return case
    if scenario == "no_params":
        # Without arguments nothing shows that a template drops them: ask the one-call case.
        single = prepare(path, "one_call")
        if "arguments" in single.na:
            case.na = single.na
            return case
    if scenario == "parallel_calls" and not caps.supports_parallel_tool_calls:
        case.na = "template renders only one tool call per turn"
        return case
    message = scenario_message(scenario, analysis)
    tools = TOOLS if caps.supports_tool_calls else None
    reasons: list[str] = []
    for kwargs, render_tools in _variants(scenario, tools):
        text, why = model_output(template, analysis, message, render_tools, kwargs)
        if not why:
            break
        reasons.append(why)
    else:
        # The most telling reason: a part the template never renders, else the first.
        telling = [r for r in reasons if r.startswith(("template drops", "template does not"))]
        case.na = (telling or reasons)[0]
        return case
    try:
        case.params = template.apply(
            [USER],
            tools=tools,
            parallel_tool_calls=True if scenario == "parallel_calls" else None,
            call_id_seed=1234,
            **kwargs,
        )
    except TemplateError as exc:
        # Asserted to fail in transformers too: test_refused_tools_fail_everywhere.
        case.na = f"{REFUSES_TOOLS}: {exc}"
        return case
    case.text = text
    case.message = message
    case.compare_ids = any(call["id"] in text for call in message.get("tool_calls", []))
    case.end_of_turn = tuple(m for m in analysis.end_of_turn if m.strip())
    case.tools = tools
    case.render_kwargs = dict(kwargs)
    return case


def canonical_args(arguments: str | Mapping[str, Any]) -> str:
    value = json.loads(arguments) if isinstance(arguments, str) else arguments
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def ours_view(parsed: Any) -> dict[str, Any]:
    """A parsed message as the response-template export tests compare it (text stripped,
    calls as name and canonical arguments)."""
    return {
        "content": _text(parsed.content),
        "reasoning": _text(parsed.reasoning_content),
        "calls": [(c.name, canonical_args(c.arguments)) for c in parsed.tool_calls],
    }


def transformers_view(message: dict[str, Any]) -> dict[str, Any]:
    """What transformers' ``parse_response`` returned, in ``ours_view``'s shape."""
    reasoning = message.get("reasoning_content", message.get("thinking"))
    calls = [
        (c["function"]["name"], canonical_args(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    return {"content": _text(message.get("content")), "reasoning": _text(reasoning), "calls": calls}


def expected_view(message: Mapping[str, Any], compare_ids: bool) -> dict[str, Any]:
    calls = [
        {
            "id": c["id"] if compare_ids else None,
            "name": c["function"]["name"],
            "arguments": canonical_args(c["function"]["arguments"]),
        }
        for c in message.get("tool_calls", [])
    ]
    return {
        "content": message.get("content") or None,
        "reasoning_content": message.get("reasoning_content"),
        "tool_calls": calls,
    }


def call_view(call_id: str | None, name: str, arguments: str, compare_ids: bool) -> dict[str, Any]:
    """One parsed or streamed call as comparable data (arguments canonical JSON, or marked)."""
    try:
        canonical = canonical_args(arguments)
    except ValueError:
        canonical = f"<invalid JSON> {arguments}"
    return {"id": call_id if compare_ids else None, "name": name, "arguments": canonical}


def parsed_view(parsed: Any, compare_ids: bool) -> dict[str, Any]:
    calls = [call_view(c.id, c.name, c.arguments, compare_ids) for c in parsed.tool_calls]
    return {
        "content": parsed.content,
        "reasoning_content": parsed.reasoning_content,
        "tool_calls": calls,
    }
