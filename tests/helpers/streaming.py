"""Feeding a parser chunk by chunk: random splits and the stream driver."""

from __future__ import annotations

import random
from typing import Any

from autoparser.params import ChatParams
from helpers.generate_cases import (
    accumulate,
    message_dict,
)


def splits(text: str, rng: random.Random) -> list[str]:
    """A random split of text into chunks of 1..12 characters."""
    chunks = []
    i = 0
    while i < len(text):
        n = rng.randint(1, 12)
        chunks.append(text[i : i + n])
        i += n
    return chunks


def _is_prefix_state(part: dict[str, Any], full: dict[str, Any]) -> bool:
    for key in ("content", "reasoning_content"):
        if part[key] is not None and not (full[key] or "").startswith(part[key]):
            return False
    if len(part["tool_calls"]) > len(full["tool_calls"]):
        return False
    for a, b in zip(part["tool_calls"], full["tool_calls"], strict=False):
        if a["id"] != b["id"] or a["name"] != b["name"]:
            return False
        if not b["arguments"].startswith(a["arguments"]):
            return False
    return True


def run_stream(params: ChatParams, chunks: list[str]) -> list[dict[str, Any]]:
    """Feed the chunks; check every intermediate state against the final parse."""
    full = message_dict(params.parse("".join(chunks)))
    stream = params.stream()
    deltas: list[dict[str, Any]] = []
    announced: set[int] = set()
    for chunk in chunks:
        new = stream.feed(chunk)
        for delta in new:
            assert delta, "empty delta"
            for tc in delta.get("tool_calls", []):
                if tc["index"] in announced:
                    assert set(tc) == {"index", "function"}, tc
                    assert set(tc["function"]) == {"arguments"}, tc
                else:
                    assert tc["index"] == len(announced), "calls announced out of order"
                    assert tc["type"] == "function" and tc["id"] and tc["function"]["name"]
                    announced.add(tc["index"])
        deltas.extend(new)
        state = accumulate(deltas)
        assert _is_prefix_state(state, full), (state, full)
        assert message_dict(stream.message) == state
    deltas.extend(stream.finish())
    final = accumulate(deltas)
    assert final == message_dict(stream.message) == full
    assert stream.finish() == []
    return deltas
