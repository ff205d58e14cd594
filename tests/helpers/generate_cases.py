"""Hand-written analyses of the project's own templates, and model outputs rendered by them.

The generator tests use these analyses (what the differential analysis should find) so
that they test parser generation on its own; the outputs are rendered by the templates
themselves (the assistant turn minus the generation prompt minus the end of turn), so no
test hard-codes the text a format produces.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from autoparser import ChatTemplate
from autoparser.analysis.model import (
    ArgumentsAnalysis,
    CallIdAnalysis,
    CallIdPosition,
    FunctionAnalysis,
    ReasoningAnalysis,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolsAnalysis,
)
from autoparser.message import ChatMessage
from autoparser.params import ChatParams, build_params

TEMPLATES = Path(__file__).parent.parent / "templates"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {"type": "object"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "integer"},
                "exact": {"type": "boolean"},
                "cursor": {"type": ["string", "null"]},
            },
            "required": ["query"],
        },
    },
}
PING = {"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}
TOOLS = [WEATHER, SEARCH, PING]


@dataclasses.dataclass(frozen=True)
class Case:
    """One format family: template file, its analysis, what it can express."""

    name: str
    template: str
    analysis: TemplateAnalysis
    reasoning: bool = False  # the template renders reasoning of the last turn
    content_with_calls: bool = True
    parallel: bool = True
    calls: bool = True
    ids: bool = False  # the format writes call ids
    kwargs: tuple[tuple[str, Any], ...] = ()
    eos: str = ""
    tools_in_output: bool = True  # False: the template renders tools only before the last turn
    content_only: bool = True  # False: a turn without reasoning cannot follow the prompt

    @property
    def request_tools(self) -> list[dict[str, Any]] | None:
        """The tools of a request to this case: none for a format without calls."""
        return TOOLS if self.calls else None

    def load(self) -> ChatTemplate:
        source = (TEMPLATES / self.template).read_text(encoding="utf-8")
        return ChatTemplate(source, bos_token="<s>", eos_token=self.eos, name=self.template)

    def params(self, tools: list[dict[str, Any]] | None = None, **options: Any) -> ChatParams:
        tpl = self.load()
        user = [{"role": "user", "content": "Hi"}]
        kwargs = dict(self.kwargs)
        if "enable_thinking" in options and options["enable_thinking"] is not None:
            kwargs["enable_thinking"] = options["enable_thinking"]
        prompt = tpl.render(user, tools=tools, add_generation_prompt=True, **kwargs)
        options.setdefault("call_id_seed", 7)
        return build_params(self.analysis, prompt=prompt, tools=tools, **options)

    def output(self, message: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> str:
        """What the model generates for `message`: render minus prompt minus end of turn."""
        tpl = self.load()
        user = [{"role": "user", "content": "Hi"}]
        kwargs = dict(self.kwargs)
        render_tools = tools if self.tools_in_output else None
        prompt = tpl.render(user, tools=render_tools, add_generation_prompt=True, **kwargs)
        full = tpl.render(
            [*user, message], tools=render_tools, add_generation_prompt=False, **kwargs
        )
        if not full.startswith(prompt):
            raise AssertionError(f"{self.name}: render does not extend the prompt")
        text = full[len(prompt) :]
        for marker in self.analysis.end_of_turn:
            at = text.rfind(marker)
            if at >= 0 and not text[at + len(marker) :].strip():
                text = text[:at]
                break
        return text


def _tools(fmt: ToolFormatAnalysis, **kw: Any) -> ToolsAnalysis:
    return ToolsAnalysis(format=fmt, parallel_calls=kw.pop("parallel_calls", True), **kw)


IM_END = ("<|im_end|>",)
THINK = ReasoningAnalysis(mode=ReasoningMode.TAG_BASED, start="<think>", end="</think>")

CASES: list[Case] = [
    Case(
        "hermes",
        "formats/chatml_hermes.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.JSON_NATIVE,
                    per_call_start="<tool_call>",
                    per_call_end="</tool_call>",
                    name_field="name",
                    args_field="arguments",
                    field_order=("name", "arguments"),
                )
            ),
            end_of_turn=IM_END,
        ),
    ),
    Case(
        "qwen3coder",
        "formats/qwen3coder_like.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.TAG_WITH_TAGGED,
                    per_call_start="<tool_call>",
                    per_call_end="</tool_call>",
                ),
                function=FunctionAnalysis(
                    name_prefix="<function=", name_suffix=">", close="</function>"
                ),
                arguments=ArgumentsAnalysis(
                    name_prefix="<parameter=", name_suffix=">", value_suffix="</parameter>"
                ),
            ),
            end_of_turn=IM_END,
        ),
    ),
    Case(
        "functionary",
        "formats/functionary_v3_1_like.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(mode=ToolFormat.TAG_WITH_JSON),
                function=FunctionAnalysis(
                    name_prefix="<function=", name_suffix=">", close="</function>"
                ),
            ),
            end_of_turn=("<|eot_id|>",),
        ),
    ),
    Case(
        "mistral",
        "formats/mistral_like.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.JSON_NATIVE,
                    section_start="[TOOL_CALLS]",
                    name_field="name",
                    args_field="arguments",
                    id_field="id",
                    field_order=("name", "arguments", "id"),
                    tools_array_wrapped=True,
                )
            ),
            end_of_turn=("</s>",),
        ),
        content_with_calls=False,
        ids=True,
        eos="</s>",
        tools_in_output=False,
    ),
    Case(
        "llama",
        "formats/llama_like.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.JSON_NATIVE,
                    name_field="name",
                    args_field="parameters",
                    field_order=("name", "parameters"),
                    call_prefix_token="<|python_tag|>",
                ),
                parallel_calls=False,
            ),
            end_of_turn=("<|eot_id|>",),
        ),
        content_with_calls=False,
        parallel=False,
    ),
    Case(
        "name_as_key",
        "formats/name_as_key.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.JSON_NATIVE,
                    section_start="<|tools_prefix|>",
                    section_end="<|tools_suffix|>",
                    fun_name_is_key=True,
                    tools_array_wrapped=True,
                )
            ),
            end_of_turn=("<|assistant_end|>",),
        ),
    ),
    Case(
        "nested",
        "formats/nested_function.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.JSON_NATIVE,
                    section_start="<tool_calls>",
                    section_end="</tool_calls>",
                    function_field="function",
                    name_field="name",
                    args_field="arguments",
                    id_field="id",
                    field_order=("id", "type", "function", "name", "arguments"),
                    tools_array_wrapped=True,
                    arguments_as_string=True,
                )
            ),
            end_of_turn=IM_END,
        ),
        ids=True,
    ),
    Case(
        "bracket_callid",
        "formats/bracket_callid.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(mode=ToolFormat.TAG_WITH_JSON, per_call_start="[TOOL_CALLS]"),
                call_id=CallIdAnalysis(
                    position=CallIdPosition.BETWEEN_FUNC_AND_ARGS,
                    prefix="[CALL_ID]",
                    suffix="[ARGS]",
                ),
            ),
            end_of_turn=("</s>",),
        ),
        ids=True,
        eos="</s>",
    ),
    Case(
        "glm",
        "formats/glm_like.jinja",
        TemplateAnalysis(
            reasoning=THINK,
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.TAG_WITH_TAGGED,
                    per_call_start="<tool_call>",
                    per_call_end="</tool_call>",
                ),
                function=FunctionAnalysis(name_suffix="\n"),
                arguments=ArgumentsAnalysis(
                    name_prefix="<arg_key>",
                    name_suffix="</arg_key>",
                    value_prefix="\n<arg_value>",
                    value_suffix="</arg_value>",
                ),
            ),
            end_of_turn=("<|user|>", "<|observation|>"),
        ),
        reasoning=True,
    ),
    Case(
        "typed_suffix",
        "formats/typed_suffix.jinja",
        TemplateAnalysis(
            tools=_tools(
                ToolFormatAnalysis(
                    mode=ToolFormat.TAG_WITH_TAGGED, section_start="<calls>", section_end="</calls>"
                ),
                function=FunctionAnalysis(
                    name_prefix='<call name="', name_suffix='">', close="</call>"
                ),
                arguments=ArgumentsAnalysis(
                    name_prefix='<param name="',
                    name_suffix='" json="no">',
                    name_suffix_json='" json="yes">',
                    value_suffix="</param>",
                ),
            ),
            end_of_turn=("<|end|>",),
        ),
    ),
    Case(
        "forced_open",
        "reasoning/forced_open.jinja",
        TemplateAnalysis(
            reasoning=ReasoningAnalysis(
                mode=ReasoningMode.FORCED_OPEN, start="<think>", end="</think>"
            ),
            end_of_turn=IM_END,
        ),
        reasoning=True,
        calls=False,
        content_only=False,
    ),
    Case(
        "think_tag",
        "reasoning/think_tag.jinja",
        TemplateAnalysis(reasoning=THINK, end_of_turn=IM_END),
        reasoning=True,
        calls=False,
    ),
    Case(
        "delimiter",
        "reasoning/delimiter.jinja",
        TemplateAnalysis(
            reasoning=ReasoningAnalysis(mode=ReasoningMode.DELIMITER, end="[BEGIN FINAL RESPONSE]"),
            end_of_turn=("<|end|>",),
        ),
        reasoning=True,
        calls=False,
    ),
    Case(
        "plain",
        "formats/plain.jinja",
        TemplateAnalysis(end_of_turn=("<end_of_turn>",)),
        calls=False,
    ),
]

CASE_BY_NAME = {c.name: c for c in CASES}


def call(name: str, arguments: dict[str, Any], call_id: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    if call_id:
        out["id"] = call_id
    return out


COMPLEX_ARGS = {
    "query": 'a "quoted" {brace} </tool_call> ünïcödé ✓',
    "filters": {"nested": {"list": [1, 2.5, None, True, False]}, "empty": {}},
    "tags": ["x", "y\nz"],
    "limit": 10,
    "exact": False,
    "cursor": None,
}


def scenarios(case: Case) -> dict[str, dict[str, Any]]:
    """Assistant messages this case can express, by scenario name."""
    out: dict[str, dict[str, Any]] = {}
    if case.content_only:
        out["content"] = {"role": "assistant", "content": "The answer is 42."}
    if case.reasoning:
        out["reasoning_content"] = {
            "role": "assistant",
            "reasoning_content": "Let me think.\nStep 1.",
            "content": "Done: 42.",
        }
    if not case.calls:
        return out
    cid = "abcdefghi" if case.ids else ""
    weather = call("get_weather", {"city": "Paris", "unit": "celsius"}, cid)
    out["one_call"] = {"role": "assistant", "content": None, "tool_calls": [weather]}
    if case.content_with_calls:
        out["content_call"] = {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [weather],
        }
    if case.parallel:
        out["two_calls"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                weather,
                call("search", {"query": "news", "limit": 3}, "bcdefghij" if cid else ""),
            ],
        }
    if case.reasoning:
        out["reasoning_call"] = {
            "role": "assistant",
            "reasoning_content": "I need the weather.",
            "content": None,
            "tool_calls": [weather],
        }
    out["complex_args"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("search", COMPLEX_ARGS, cid)],
    }
    out["no_params"] = {"role": "assistant", "content": None, "tool_calls": [call("ping", {}, cid)]}
    return out


# Every (case, scenario, message) the cases can express, as pytest parameters.
SCENARIOS = [
    pytest.param(case, name, msg, id=f"{case.name}-{name}")
    for case in CASES
    for name, msg in scenarios(case).items()
]


def normalized(message: ChatMessage, *, ids: bool) -> dict[str, Any]:
    """A message as comparable data: arguments parsed, ids kept only when the model wrote them."""
    calls = []
    for c in message.tool_calls:
        entry: dict[str, Any] = {"name": c.name, "arguments": json.loads(c.arguments)}
        if ids:
            entry["id"] = c.id
        calls.append(entry)
    return {
        "content": message.content,
        "reasoning_content": message.reasoning_content,
        "tool_calls": calls,
    }


def expected(message: Mapping[str, Any], *, ids: bool) -> dict[str, Any]:
    calls = []
    for c in message.get("tool_calls") or []:
        entry: dict[str, Any] = {
            "name": c["function"]["name"],
            "arguments": c["function"]["arguments"],
        }
        if ids:
            entry["id"] = c["id"]
        calls.append(entry)
    content = message.get("content")
    reasoning = message.get("reasoning_content")
    return {
        "content": content.strip() if content else None,
        "reasoning_content": reasoning.strip() if reasoning else None,
        "tool_calls": calls,
    }


def accumulate(deltas: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Fold OpenAI deltas into a message dict the way a client does; asserts the shape of
    tool-call deltas."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        if "content" in delta:
            content.append(delta["content"])
        if "reasoning_content" in delta:
            reasoning.append(delta["reasoning_content"])
        for tc in delta.get("tool_calls", []):
            entry = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
            if "id" in tc:
                assert entry["id"] is None, "a call was announced twice"
                assert tc["type"] == "function" and tc["function"]["name"]
                entry["id"] = tc["id"]
                entry["name"] = tc["function"]["name"]
            else:
                assert entry["name"] is not None, "arguments before the call was announced"
                assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
            entry["arguments"] += tc["function"].get("arguments", "")
    return {
        "content": "".join(content) if content else None,
        "reasoning_content": "".join(reasoning) if reasoning else None,
        "tool_calls": [calls[i] for i in sorted(calls)],
    }


def message_dict(message: ChatMessage) -> dict[str, Any]:
    return {
        "content": message.content,
        "reasoning_content": message.reasoning_content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ],
    }
