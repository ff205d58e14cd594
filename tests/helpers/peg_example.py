"""A chat-shaped parser like the one in docs/peg.md: a realistic workload for tests and benchmarks.

Reasoning in `<think>` tags, then content up to the first tool call, then tool calls whose
arguments are JSON objects: the shape most chat formats share. Kept in one place so the
incremental-parsing tests and the benchmark exercise exactly the same parser.
"""

from __future__ import annotations

from autoparser.peg.core import (
    Parser,
    end,
    json_object,
    optional,
    space,
    tag,
    token,
    until,
    zero_or_more,
)


def chat_parser() -> Parser:
    """`<think>reasoning</think>content<tool_call>{...}</tool_call>...`, tags for each part."""
    reasoning = "<think>" + tag("reasoning", until("</think>")) + "</think>"
    call = tag(
        "call",
        token("<tool_call>") + space() + tag("args", json_object()) + space() + "</tool_call>",
    )
    return (
        optional(reasoning)
        + tag("content", until("<tool_call>"))
        + zero_or_more(space() + call)
        + space()
        + end()
    )
