"""What every parser builder shares: the build context, sequence/choice helpers, the
marker normalisation and the naming of grammar rules.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from autoparser.analysis.model import TOOL_MARKER_FIELDS, TemplateAnalysis, ToolsAnalysis
from autoparser.generate.request import Request, ToolSpec
from autoparser.peg import Parser, literal, optional, seq
from autoparser.peg import choice as peg_choice

Part = Parser | str | None


@dataclasses.dataclass(frozen=True)
class BuildContext:
    """What a parser builder needs: the analysis, the validated request, the prompt facts."""

    analysis: TemplateAnalysis
    request: Request
    thinking_forced_open: bool  # the output starts inside a reasoning block
    extract_reasoning: bool  # reasoning goes to reasoning_content (else stays content)
    # The prompt ends with the call opener (call_opener()): the output starts inside the
    # first call, whose opener is already written; later calls carry their own.
    call_opened: bool = False
    # Thinking is off: the request said so (``enable_thinking=False``), or the prompt ends
    # with the reasoning block closed (the template's thinking-off prompt). The grammar
    # then writes no reasoning block (``generate.reasoning``).
    thinking_off: bool = False
    # Where a call can start in the output (the lenient parser's content stops there).
    call_openers: tuple[str, ...] = ()
    # Whether the template pads a raw string value (a newline before / after it, as
    # ``<parameter=x>\n{{ v }}\n</parameter>``): the parser drops one newline only on a
    # padded side; elsewhere whitespace is part of the value. See ``string_padding``.
    string_padding: tuple[bool, bool] = (True, True)
    # ``call_openers`` lists every place a call can start (the format's own answer,
    # ``Format.call_openers_listed``: a hand-written format has markers of its own).
    call_openers_listed: bool = True

    @property
    def end_markers(self) -> tuple[str, ...]:
        return tuple(m for m in self.analysis.end_of_turn if m)


def string_padding(analysis: TemplateAnalysis) -> tuple[bool, bool]:
    """Whether the template writes whitespace before / after a raw string value (read from
    the markers as rendered, before ``normalize_markers`` strips them). Without a value
    suffix a value ends at the next marker: both sides count as padded, as before."""
    a = analysis.tools.arguments
    if not a.value_suffix:
        return (True, True)
    before = a.value_prefix or a.name_suffix
    return (before[-1:].isspace(), a.value_suffix[:1].isspace())


def seq_of(*parts: Part) -> Parser:
    """A sequence of the non-empty parts (strings are literals); at least one must remain."""
    items: list[Parser] = []
    for part in parts:
        if part is None or part == "":
            continue
        items.append(literal(part) if isinstance(part, str) else part)
    if not items:
        raise ValueError("seq_of: nothing to sequence")
    return items[0] if len(items) == 1 else seq(*items)


def closing(marker: str, strict: bool) -> Parser | None:
    """An end marker: required in the strict parser, optional in the lenient one."""
    if not marker:
        return None
    return literal(marker) if strict else optional(literal(marker))


def choice_of(parsers: Sequence[Parser]) -> Parser:
    if not parsers:
        raise ValueError("choice_of: no alternatives")
    return parsers[0] if len(parsers) == 1 else peg_choice(*parsers)


def _strip_fields(obj: Any, names: Sequence[str]) -> Any:
    return dataclasses.replace(obj, **{n: getattr(obj, n).strip() for n in names})


def _strip_typed_suffixes(tools: ToolsAnalysis) -> ToolsAnalysis:
    """``normalize_markers`` for the per-type argument name suffixes."""
    a = tools.arguments
    if not a.name_suffix_by_type:
        return tools
    by_type = tuple((kind, suffix.strip()) for kind, suffix in a.name_suffix_by_type)
    return dataclasses.replace(tools, arguments=dataclasses.replace(a, name_suffix_by_type=by_type))


def normalize_markers(analysis: TemplateAnalysis) -> TemplateAnalysis:
    """The analysis with whitespace stripped from every marker.

    Renders put newlines around markers ("<tool_call>\n", "\n</parameter>\n"); the
    builders allow any whitespace around markers instead (``space()``), so a model that
    writes the marker without the newline, or with two, still parses. Whitespace-only
    markers become absent.
    """
    t = analysis.tools
    # value_suffix_after_name stays as written: it is joined to value_suffix and the
    # argument name into one closer ("</" NAME ">"), not matched as a marker of its own.
    parts = {
        part: _strip_fields(getattr(t, part), [n for n in names if n != "value_suffix_after_name"])
        for part, names in TOOL_MARKER_FIELDS.items()
    }
    tools = dataclasses.replace(
        t,
        **parts,
        call_separator=t.call_separator.strip(),
    )
    tools = _strip_typed_suffixes(tools)
    return dataclasses.replace(
        analysis,
        reasoning=_strip_fields(analysis.reasoning, ("start", "end")),
        content=_strip_fields(analysis.content, ("start", "end")),
        tools=tools,
        end_of_turn=tuple(m.strip() for m in analysis.end_of_turn if m.strip()),
    )


@dataclasses.dataclass(frozen=True)
class ToolGroup(ToolSpec):
    """Any of several tools, for a call parser in which only the name tells calls apart
    (the lenient parser of a format whose arguments are one JSON value, read as any JSON):
    its name is any of ``names``, longest first."""

    names: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class TwinTool(ToolSpec):
    """The tool a family's representative is built for (``generate.families``): its name
    and its parameters' names are placeholders, and its parts (the arguments of a tagged
    call, the arguments' schema of a JSON one) are the stand-ins ``slots``, in order."""

    slots: tuple[Parser, ...] = ()


def tool_name(tool: ToolSpec) -> Parser:
    """The tool's name as its call writes it; for a group, any of its names."""
    if isinstance(tool, ToolGroup):
        return peg_choice(*(literal(n) for n in tool.names))
    return literal(tool.name)


def longest_name_first(tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    """Longest names first, so a name that prefixes another cannot shadow it."""
    return sorted(tools, key=lambda t: len(t.name), reverse=True)


_NOT_RULE_CHAR = re.compile(r"[^A-Za-z0-9]")


@functools.lru_cache(maxsize=8192)
def rule_part(text: str) -> str:
    """A GBNF-safe rule name part: ASCII letters and digits, everything else ``-``."""
    return _NOT_RULE_CHAR.sub("-", text).strip("-") or "x"


# (id(owner), what) -> (owner, how many names sanitise to each rule part): counted once per
# request's tools (or tool's properties), not once per name, which was quadratic.
_PART_COUNTS: dict[tuple[int, str], tuple[object, Counter[str]]] = {}


def part_counts(owner: object, what: str, names: Iterable[str]) -> Counter[str]:
    """How many of ``names`` (belonging to ``owner``) sanitise to each rule part."""
    key = (id(owner), what)
    hit = _PART_COUNTS.get(key)
    if hit is not None and hit[0] is owner:
        return hit[1]
    if len(_PART_COUNTS) > 512:
        _PART_COUNTS.clear()
    counts = Counter(rule_part(name) for name in names)
    _PART_COUNTS[key] = (owner, counts)
    return counts


def tool_rule(ctx: BuildContext, tool: ToolSpec) -> str:
    """The rule name prefix of a tool; distinct even when two names sanitise alike."""
    part = rule_part(tool.name)
    tools = ctx.request.tools
    if part_counts(tools, "tools", (t.name for t in tools))[part] > 1:
        part += f"-{zlib.crc32(tool.name.encode('utf-8')):08x}"
    return part


def argument_rule(ctx: BuildContext, tool: ToolSpec, name: str | None) -> str:
    """The rule name prefix of one of a tool's arguments (``None``: any argument of a tool
    that declares none); distinct even when two of its names sanitise alike."""
    part = rule_part(name or "any")
    if name and part_counts(tool, "properties", tool.properties)[part] > 1:
        part += f"-{zlib.crc32(name.encode('utf-8')):08x}"
    return f"{tool_rule(ctx, tool)}-{part}"


def effective_markers(ctx: BuildContext) -> tuple[str, str, str, str]:
    """(section_start, section_end, per_call_start, per_call_end), without double wrapping."""
    f = ctx.analysis.tools.format
    prefix = ctx.analysis.tools.function.name_prefix
    section_start, section_end = f.section_start, f.section_end
    call_start, call_end = f.per_call_start, f.per_call_end
    if prefix and call_start == prefix:
        call_start = ""
    if prefix and section_start == prefix and not call_start:
        section_start = ""
    return section_start, section_end, call_start, call_end
