"""Required arguments of formats that write arguments one by one (tagged, pythonic).

Such a format has no other way than order to make an argument mandatory: the grammar
writes each required one exactly once, in schema order, optional ones around them; the
parser reads any subset and reports a required one left out (``missing_required``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autoparser.generate.context import choice_of, seq_of
from autoparser.generate.request import ToolSpec
from autoparser.peg import Parser, zero_or_more


def required_names(tool: ToolSpec) -> list[str]:
    """The tool's required parameters that it also describes, in schema order."""
    required = tool.parameters.get("required")
    if not isinstance(required, list):
        return []
    return [n for n in tool.properties if n in required]


def required_by_tool(tools: Sequence[ToolSpec]) -> dict[str, tuple[str, ...]]:
    """Each tool's required parameters, for the tools that have any: what a call read
    argument by argument is checked against."""
    return {tool.name: tuple(names) for tool in tools if (names := required_names(tool))}


def required_sequence(
    tool: ToolSpec, required: list[str], sep: Parser, argument: Callable[[str], Parser]
) -> Parser:
    """The grammar's arguments when some are required: each required parameter exactly
    once, in schema order, and optional parameters anywhere around them (``sep`` between
    two; ``argument(name)``: one argument)."""
    optional_names = [n for n in tool.properties if n not in required]
    extra: Parser | None = None
    if optional_names:
        extra = choice_of([argument(n) for n in optional_names])
    parts: list[Parser | None] = [zero_or_more(extra + sep) if extra else None]
    for index, name in enumerate(required):
        parts.append(sep if index else None)
        parts.append(argument(name))
        parts.append(zero_or_more(sep + extra) if extra else None)
    return seq_of(*parts)
