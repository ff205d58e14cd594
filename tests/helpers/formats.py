"""Helpers shared by the hand-written format tests, and tests of the format registry itself.

The helpers render what a model would generate for a message (the template's own render of
the assistant turn, minus the prompt, minus the end of turn), fold streaming deltas the way a
client does, and check that streaming however split gives what ``parse`` gives.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import strategies as st

from autoparser import ChatTemplate
from autoparser.message import ChatMessage
from autoparser.params import ChatParams
from helpers import generate_cases
from helpers.generate_cases import accumulate
from helpers.generate_cases import message_dict as as_dict
from helpers.paths import OWN_TEMPLATES, corpus_dir

USER = [{"role": "user", "content": "Hi"}]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
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
PING = {
    "type": "function",
    "function": {"name": "ping", "description": "Check the connection", "parameters": {}},
}
TOOLS = [WEATHER, SEARCH, PING]


def call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": dict(arguments)}}


def complex_args(marker: str) -> dict[str, Any]:
    """Arguments with every JSON kind, unicode, newlines, quotes, braces and a marker inside."""
    return {
        "query": f'a "quoted" {{brace}} {marker} ünïcödé ✓',
        "filters": {"nested": {"list": [1, 2.5, None, True, False]}, "empty": {}},
        "tags": ["x", "y\nz"],
        "limit": 10,
        "exact": False,
        "cursor": None,
    }


def scenarios(marker: str, *, parallel: bool = True) -> dict[str, dict[str, Any]]:
    """The assistant messages of the round-trip scenarios, by name."""
    weather = call("get_weather", {"city": "Paris", "unit": "celsius"})
    out: dict[str, dict[str, Any]] = {
        "content": {"role": "assistant", "content": "The answer is 42."},
        "reasoning_content": {
            "role": "assistant",
            "reasoning_content": "Let me think.\nStep 1.",
            "content": "Done: 42.",
        },
        "one_call": {"role": "assistant", "content": None, "tool_calls": [weather]},
        "content_call": {"role": "assistant", "content": "Let me check.", "tool_calls": [weather]},
        "reasoning_call": {
            "role": "assistant",
            "reasoning_content": "I need the weather.",
            "content": None,
            "tool_calls": [weather],
        },
        "complex_args": {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("search", complex_args(marker))],
        },
        "no_params": {"role": "assistant", "content": None, "tool_calls": [call("ping", {})]},
    }
    if parallel:
        out["two_calls"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [weather, call("search", {"query": "news", "limit": 3})],
        }
    return out


def own_template(name: str) -> ChatTemplate:
    path = OWN_TEMPLATES / name
    return ChatTemplate(path.read_text(encoding="utf-8"), bos_token="<s>", name=name)


def model_output(
    template: ChatTemplate,
    message: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None,
    end_markers: Iterable[str],
) -> str:
    """What the model generates for ``message``: render minus prompt minus the end of turn."""
    prompt = template.render(USER, tools=tools, add_generation_prompt=True)
    full = template.render([*USER, message], tools=tools, add_generation_prompt=False)
    assert full.startswith(prompt), "the render of the turn does not extend the prompt"
    text = full[len(prompt) :]
    for marker in end_markers:
        if marker and text.endswith(marker):
            return text[: -len(marker)]
    return text


def expected(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message dict as comparable data (text stripped, arguments as JSON values)."""
    return generate_cases.expected(message, ids=False)


def normalized(message: ChatMessage) -> dict[str, Any]:
    return generate_cases.normalized(message, ids=False)


def splits(text: str, count: int, seed: int) -> list[list[str]]:
    """1-character chunks, then ``count`` random splittings of ``text``."""
    out = [list(text)]
    rng = random.Random(seed)
    for _ in range(count):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 12))))
        bounds = [0, *cuts, len(text)]
        out.append([text[a:b] for a, b in itertools.pairwise(bounds)])
    return out


def stream(params: ChatParams, pieces: Iterable[str]) -> tuple[list[dict[str, Any]], ChatMessage]:
    parser = params.stream()
    deltas: list[dict[str, Any]] = []
    for piece in pieces:
        deltas += parser.feed(piece)
    deltas += parser.finish()
    return deltas, parser.message


def check_streaming(params: ChatParams, text: str, *, count: int = 20, seed: int = 0) -> None:
    """However ``text`` is split, the deltas fold into ``parse(text)`` (ids included)."""
    whole = as_dict(params.parse(text))
    for pieces in splits(text, count, seed):
        deltas, message = stream(params, pieces)
        assert accumulate(deltas) == whole, pieces
        assert as_dict(message) == whole


def trigger_start(params: ChatParams, text: str) -> int:
    """Where the lazy grammar switches on in ``text`` (``ChatParams.trigger_start``)."""
    return params.trigger_start(text)


def lazy_start(params: ChatParams, text: str) -> int:
    """Where the lazy grammar starts in ``text``; fails the test when no trigger fires."""
    start = trigger_start(params, text)
    assert start >= 0, f"no trigger of {params.grammar_triggers} fires in {text!r}"
    return start


def corpus_template(filename: str, what: str) -> ChatTemplate:
    """A corpus template by file name; skips (naming ``what``) when it is not there."""
    root = corpus_dir()
    if root is None or not (root / filename).is_file():
        pytest.skip(f"{what} template not in the corpus (../shared/templates)")
    return ChatTemplate.from_file(root / filename)


# Where a fuzzed output may end: nowhere special, or inside a call's arguments.
ARGUMENT_CUTS = st.sampled_from(["", '{"city": "Pa', '{"city": '])


def check_fragment_mix(params: ChatParams, parts: Sequence[str], cut: str, seed: int) -> None:
    """Any mix of a format's fragments, arguments cut anywhere: parse never raises and
    streaming folds into the parse."""
    text = "".join(parts) + cut
    if not text:
        return
    params.parse(text)  # never raises
    check_streaming(params, text, count=2, seed=seed)


def check_arguments_turning_invalid(params: ChatParams, text: str) -> None:
    """``text`` starts a get_weather call whose arguments break off at ``{"city": ``
    before the content ``ok``: parse() has no call (never a repaired one), the broken text
    is content; the default stream never announces it, an incremental one drops it."""
    message = params.parse(text)
    assert message.tool_calls == [] and not message.truncated
    assert message.content is not None and '{"city": ' in message.content
    assert message.content.endswith("ok")
    check_streaming(params, text, seed=3)
    incremental = params.stream(tool_call_deltas="incremental")
    for piece in text:
        incremental.feed(piece)
    incremental.finish()
    assert incremental.dropped_calls == (0,) and incremental.message == message


def needle_text_grows(params: ChatParams, text: str, needles: Sequence[str]) -> None:
    """Streaming char by char: needles appear in order across fields and never go away."""
    parser = params.stream()
    seen: list[str] = []
    folded = ""
    for ch in [*text, None]:
        deltas = parser.feed(ch) if ch is not None else parser.finish()
        for delta in deltas:
            folded += delta.get("reasoning_content", "") + delta.get("content", "")
            for tc in delta.get("tool_calls", []):
                folded += tc["function"].get("arguments", "")
        now = [n for n in needles if n in folded]
        assert now[: len(seen)] == seen, "a needle disappeared"
        seen = now
    assert seen == list(needles)
    positions = [folded.index(n) for n in needles]
    assert positions == sorted(positions), "needles out of order"


# --------------------------------------------------------------------------- registry tests


# A tool whose every argument is an enum: a tiny random model constrained by its grammar can
# only write valid calls (the real-engine tests check them with jsonschema).
ENUM_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "enum": ["Paris", "Rome"]},
                "days": {"type": "integer", "enum": [1, 2, 3]},
            },
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
# ChatML whose model opens <think> itself; thinking off writes an empty, closed block.
THINK_CHATML = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}<|im_start|>assistant\n"
    "{%- if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
    "{%- endif %}{{ message.content or '' }}"
    "{%- for tc in message.tool_calls or [] %}"
    '<tool_call>\n{"name": "{{ tc.function.name }}", "arguments": '
    "{{ tc.function.arguments | tojson }}}\n</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}"
    "{%- if tools %}<|im_start|>system\ntools: {{ tools | tojson }}<|im_end|>\n{%- endif %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{%- if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{%- endif %}{%- endif %}"
)
