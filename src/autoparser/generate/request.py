"""Validation and normalisation of the request options given to ``template.apply``.

Everything the generator needs from a request is checked here once, so that the parser
builders can trust their inputs; every problem is a ``RequestError`` naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from autoparser.errors import RequestError
from autoparser.generate.schema_check import Known, check_schema

# What happens to reasoning text, as llama.cpp's ``reasoning_format`` means it: "auto"
# extracts it into ``reasoning_content``; "none" leaves it in ``content``. "deepseek" is
# llama.cpp's name for extraction and accepted here as an alias of "auto" (normalised to
# it below, the only place it is mentioned).
REASONING_FORMATS = ("auto", "deepseek", "none")
_REASONING_ALIASES = {"deepseek": "auto"}
TOOL_CHOICES = ("none", "auto", "required")


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    """One function the model may call, with its parameter schema (always an object schema)."""

    name: str
    parameters: Mapping[str, object]
    description: str = ""

    @property
    def properties(self) -> Mapping[str, object]:
        props = self.parameters.get("properties")
        return props if isinstance(props, Mapping) else {}


@dataclasses.dataclass(frozen=True)
class Request:
    """A validated request: what to parse and what the grammar must allow."""

    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str = "auto"  # "none" | "auto" | "required" (a named function -> "required")
    forced_tool: str | None = None  # the only tool the grammar allows, if tool_choice names one
    parallel_tool_calls: bool = True
    response_schema: Mapping[str, object] | None = None  # constrains content when set
    enable_thinking: bool | None = None
    reasoning_format: str = "auto"
    calls_in_reasoning: bool = False  # read calls written inside reasoning as calls
    # The most reasoning the grammar lets the model write, in characters (a partial end
    # marker counting as one; see generate.reasoning.bounded_text); None = unbounded, 0 =
    # no reasoning block unless the prompt opened one (then it must close at once).
    reasoning_budget: int | None = None

    @property
    def calls_enabled(self) -> bool:
        return bool(self.tools) and self.tool_choice != "none"

    @property
    def grammar_tools(self) -> tuple[ToolSpec, ...]:
        """The tools the grammar allows (only the forced one when tool_choice names it)."""
        if self.forced_tool is None:
            return self.tools
        return tuple(t for t in self.tools if t.name == self.forced_tool)


def _described(value: object) -> str:
    """A bad option's value for an error: a number as it is, anything else by its type."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return type(value).__name__


def check_messages(messages: object) -> None:
    """RequestError naming ``messages[i]`` unless ``messages`` is a list of message objects."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise RequestError(
            f"messages: must be a list of message objects, got {type(messages).__name__}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise RequestError(f"messages[{i}]: must be an object, got {type(message).__name__}")


def normalize_tools(tools: Sequence[Mapping[str, object]] | None) -> tuple[ToolSpec, ...]:
    """OpenAI-style tools -> ToolSpecs; RequestError naming ``tools[i]...`` when malformed."""
    if tools is None:
        return ()
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise RequestError("tools: must be a list of tool objects")
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    known: Known = {}  # the schema shapes this request found valid
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise RequestError(f"{where}: must be an object")
        kind = tool.get("type", "function")
        if kind != "function":
            raise RequestError(f"{where}.type: only 'function' tools are supported, got {kind!r}")
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping):
            raise RequestError(f"{where}.function: must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"{where}.function.name: must be a non-empty string")
        if name in seen:
            raise RequestError(f"{where}.function.name: duplicate tool name {name!r}")
        seen.add(name)
        params = fn.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        params = check_schema(params, f"{where}.function.parameters", known)
        declared = params.get("type", "object")
        if declared != "object" and not (isinstance(declared, list) and "object" in declared):
            raise RequestError(
                f"{where}.function.parameters: must describe an object, got type {declared!r}"
            )
        props = params.get("properties", {})
        if not isinstance(props, Mapping):
            raise RequestError(f"{where}.function.parameters.properties: must be an object")
        description = fn.get("description", "")
        specs.append(ToolSpec(name, params, description if isinstance(description, str) else ""))
    return tuple(specs)


def normalize_request(
    *,
    tools: Sequence[Mapping[str, object]] | None,
    tool_choice: object,
    parallel_tool_calls: bool | None,
    response_format: Mapping[str, object] | None,
    enable_thinking: bool | None,
    reasoning_format: str,
    template_supports_parallel: bool,
    calls_in_reasoning: bool = False,
    reasoning_budget: int | None = None,
) -> Request:
    """Check the request options against each other; RequestError names the bad field."""
    specs = normalize_tools(tools)

    forced: str | None = None
    if tool_choice is None:
        choice = "auto"
    elif isinstance(tool_choice, str):
        if tool_choice not in TOOL_CHOICES:
            raise RequestError(
                f"tool_choice: must be one of {', '.join(TOOL_CHOICES)} or a function, "
                f"got {tool_choice!r}"
            )
        choice = tool_choice
    elif isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if tool_choice.get("type", "function") != "function" or not isinstance(name, str):
            raise RequestError(
                'tool_choice: expected {"type": "function", "function": {"name": ...}}'
            )
        if name not in {t.name for t in specs}:
            raise RequestError(f"tool_choice.function.name: unknown tool {name!r}")
        choice, forced = "required", name
    else:
        raise RequestError(f"tool_choice: unsupported value of type {type(tool_choice).__name__}")
    if choice == "required" and not specs:
        raise RequestError("tool_choice: 'required' (or a named function) needs tools")

    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise RequestError("parallel_tool_calls: must be a boolean")
    parallel = template_supports_parallel if parallel_tool_calls is None else parallel_tool_calls

    schema: Mapping[str, object] | None = None
    if response_format is not None:
        if not isinstance(response_format, Mapping):
            raise RequestError("response_format: must be an object")
        kind = response_format.get("type", "text")
        if kind == "json_object":
            given = response_format.get("schema")
            schema = check_schema(given, "response_format.schema") if given else {"type": "object"}
        elif kind == "json_schema":
            spec = response_format.get("json_schema")
            raw = spec.get("schema") if isinstance(spec, Mapping) else response_format.get("schema")
            if raw is None:
                raise RequestError("response_format.json_schema.schema: missing")
            schema = check_schema(raw, "response_format.json_schema.schema")
        elif kind != "text":
            raise RequestError(f"response_format.type: unsupported {kind!r}")

    if enable_thinking is not None and not isinstance(enable_thinking, bool):
        raise RequestError("enable_thinking: must be a boolean or None")
    if reasoning_format not in REASONING_FORMATS:
        raise RequestError(
            f"reasoning_format: must be one of {', '.join(REASONING_FORMATS)}, "
            f"got {reasoning_format!r}"
        )
    if not isinstance(calls_in_reasoning, bool):
        raise RequestError(
            f"calls_in_reasoning: must be a boolean, got {type(calls_in_reasoning).__name__}"
        )
    if reasoning_budget is not None and (
        isinstance(reasoning_budget, bool)
        or not isinstance(reasoning_budget, int)
        or reasoning_budget < 0
    ):
        raise RequestError(
            "reasoning_budget: must be a non-negative integer (characters) or None, "
            f"got {_described(reasoning_budget)}"
        )
    return Request(
        calls_in_reasoning=calls_in_reasoning,
        reasoning_budget=reasoning_budget,
        tools=specs,
        tool_choice=choice,
        forced_tool=forced,
        parallel_tool_calls=parallel,
        response_schema=schema,
        enable_thinking=enable_thinking,
        reasoning_format=_REASONING_ALIASES.get(reasoning_format, reasoning_format),
    )
