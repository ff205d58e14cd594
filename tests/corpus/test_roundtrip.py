"""Round trip over every template: render an assistant turn, parse it back, stream it, match it.

For each template (the corpus in ../shared/templates and the project's own templates) and
each scenario the template can express, the model's output is what the template itself
renders for the assistant turn: the full render minus the render ending with the generation
prompt, minus the end of turn. Then:

1. ``params.parse(text)`` equals the assistant message, with or without the end-of-turn
   marker appended (engines differ in whether they leave the stop marker in the output);
2. streaming the text in 1-character chunks and in 20 seeded random splits gives deltas
   whose accumulation equals the message and ``parse(text)``;
3. the grammar accepts the text in llguidance (for a lazy grammar, from the first trigger
   on, as an engine applies it); without calls, no trigger fires.

Normalisations (each one because the format or the template imposes it):
- content and reasoning are compared as given: the scenarios' texts have no leading or
  trailing whitespace, which the parser strips at field boundaries and templates often trim;
- arguments are compared as JSON values (canonical dumps, so ``true`` never equals ``1``);
- call ids are compared only when the generated text carries them (the format writes ids);
- ``content`` absent in the message means ``None``; a template that renders a call turn's
  ``None`` content as nothing gives the same output.

A scenario the template cannot express (no tool calls, a part of the message dropped from
the render, no parallel calls) is n/a (skipped with the reason); a known failure is a strict
xfail listed in tests/data/roundtrip_xfail.json. The summary table is printed by
tests/helpers/roundtrip_report.py.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers.formats import trigger_start
from helpers.gbnf_oracle import accepts
from helpers.paths import TESTS_DIR, corpus_params, corpus_templates
from helpers.roundtrip import (
    CALL_SCENARIOS,
    NOT_COMPILED,
    REFUSES_TOOLS,
    SCENARIOS,
    TOOLS,
    USER,
    call_view,
    expected_view,
    load_template,
    parsed_view,
    prepare,
    template_paths,
)

from autoparser.errors import TemplateError

XFAIL_FILE = TESTS_DIR / "data" / "roundtrip_xfail.json"
RANDOM_SPLITS = 20


# ------------------------------------------------------------------ case preparation


# ------------------------------------------------------------------ comparison helpers


class DeltaAccumulator:
    """Accumulates OpenAI deltas and checks the shape of each tool-call delta."""

    def __init__(self) -> None:
        self.content: str | None = None
        self.reasoning: str | None = None
        self.calls: list[dict[str, str]] = []

    def add(self, delta: Mapping[str, Any]) -> None:
        if delta.get("content") is not None:
            self.content = (self.content or "") + delta["content"]
        if delta.get("reasoning_content") is not None:
            self.reasoning = (self.reasoning or "") + delta["reasoning_content"]
        for call in delta.get("tool_calls") or []:
            index = call["index"]
            function = call.get("function", {})
            if index == len(self.calls):
                assert call.get("id") and call.get("type") == "function", call
                assert function.get("name"), call
                self.calls.append({"id": call["id"], "name": function["name"], "arguments": ""})
            else:
                assert index == len(self.calls) - 1, f"delta for call {index} out of order"
                assert "id" not in call and "name" not in function, f"repeated header: {call}"
            self.calls[index]["arguments"] += function.get("arguments", "")

    def view(self, compare_ids: bool) -> dict[str, Any]:
        calls = [call_view(c["id"], c["name"], c["arguments"], compare_ids) for c in self.calls]
        return {"content": self.content, "reasoning_content": self.reasoning, "tool_calls": calls}

    def raw(self) -> tuple[str | None, str | None, list[tuple[str, str, str]]]:
        return (
            self.content,
            self.reasoning,
            [(c["id"], c["name"], c["arguments"]) for c in self.calls],
        )


def message_raw(message: Any) -> tuple[str | None, str | None, list[tuple[str, str, str]]]:
    calls = [(c.id, c.name, c.arguments) for c in message.tool_calls]
    return message.content, message.reasoning_content, calls


def split_points(text: str, rng: random.Random) -> list[str]:
    """A random split of text into chunks (1 to 2*k+1 characters, k random per split)."""
    chunks: list[str] = []
    pos = 0
    scale = rng.choice((1, 3, 8, 20))
    while pos < len(text):
        step = rng.randint(1, 2 * scale + 1)
        chunks.append(text[pos : pos + step])
        pos += step
    return chunks


def stream_chunks(params: Any, chunks: list[str]) -> tuple[DeltaAccumulator, Any]:
    stream = params.stream()
    acc = DeltaAccumulator()
    for chunk in chunks:
        for delta in stream.feed(chunk):
            acc.add(delta)
    for delta in stream.finish():
        acc.add(delta)
    return acc, stream.message


# ------------------------------------------------------------------ the test


def _xfails() -> dict[tuple[str, str], str]:
    if not XFAIL_FILE.is_file():
        return {}
    entries = json.loads(XFAIL_FILE.read_text(encoding="utf-8"))
    return {(e["template"], e["scenario"]): e["reason"] for e in entries}


def _params() -> list[Any]:
    xfails = _xfails()
    params: list[Any] = []
    paths = template_paths()
    if not corpus_templates():
        from helpers.paths import CORPUS_SKIP_REASON

        params.append(
            pytest.param(
                None, "content", marks=pytest.mark.skip(reason=CORPUS_SKIP_REASON), id="no-corpus"
            )
        )
    for path in paths:
        for scenario in SCENARIOS:
            reason = xfails.get((path.stem, scenario))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(path, scenario, marks=marks, id=f"{path.stem}-{scenario}"))
    return params


@pytest.mark.parametrize(("path", "scenario"), _params())
def test_roundtrip(path: Path, scenario: str, record_property: Any) -> None:
    record_property("roundtrip", (path.stem, scenario))
    case = prepare(path, scenario)
    if case.na:
        pytest.skip(f"n/a: {case.na}")
    params, text = case.params, case.text
    expected = expected_view(case.message, case.compare_ids)

    # (1) parse equals the message
    parsed = params.parse(text)
    assert parsed_view(parsed, case.compare_ids) == expected, f"parse of {text!r}"
    assert not parsed.truncated, f"parse of {text!r} reported truncation"
    # ... and the same with the end-of-turn marker the engine may leave in the output
    for marker in case.end_of_turn[:1]:
        with_stop = params.parse(text + marker)
        assert message_raw(with_stop) == message_raw(parsed), f"{marker!r} changes the parse"

    # (2) streaming: 1-char chunks and seeded random splits
    rng = random.Random(zlib.crc32(f"{path.stem}/{scenario}".encode()))
    splits = [list(text)] + [split_points(text, rng) for _ in range(RANDOM_SPLITS)]
    for chunks in splits:
        acc, final = stream_chunks(params, chunks)
        assert acc.raw() == message_raw(final), f"deltas != stream.message for {chunks!r}"
        assert message_raw(final) == message_raw(parsed), f"stream != parse for {chunks!r}"

    # (3) grammar
    if params.grammar is None:
        assert scenario not in CALL_SCENARIOS, "no grammar for a request with tools"
        return
    start = trigger_start(params, text) if params.grammar_lazy else 0
    if scenario not in CALL_SCENARIOS:
        assert start < 0, f"a lazy trigger fires in output without calls at {start}: {text!r}"
        return
    assert start >= 0, f"no trigger of {params.grammar_triggers} fires in {text!r}"
    assert accepts(params.grammar, text[start:]), f"grammar rejects {text[start:]!r}"


# ------------------------------------------------------------------ the errors behind n/a


def _transformers_render(source: str, tools: Any) -> None:
    """Render the prompt of a request with transformers (raises what the template raises)."""
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    utils.render_jinja_template(
        conversations=[[USER]],
        tools=tools,
        chat_template=source,
        add_generation_prompt=True,
        bos_token="<s>",
        eos_token="</s>",
    )


@pytest.mark.parametrize("path", corpus_params())
def test_uncompilable_templates_fail_everywhere(path: Path) -> None:
    """A template jinja2 cannot compile is a TemplateError naming the line, and transformers
    cannot render it either: its round-trip cases are n/a, not our failures."""
    if prepare(path, "content").na.startswith(NOT_COMPILED):
        with pytest.raises(TemplateError, match=r"syntax error at line \d+"):
            load_template(path)
        with pytest.raises(Exception, match=r"(?i)tag|token|unexpected|expected"):
            _transformers_render(path.read_text(encoding="utf-8"), None)


@pytest.mark.parametrize("path", corpus_params())
@pytest.mark.parametrize("scenario", ["content", "one_call"])
def test_refused_tools_fail_everywhere(path: Path, scenario: str) -> None:
    """When apply() raises because the template itself raises on the request's tools, the
    error names the template line and transformers raises on the same tools: such cases
    are n/a (the request cannot be served by the template), not our failures."""
    case = prepare(path, scenario)
    if not case.na.startswith(REFUSES_TOOLS):
        return
    assert re.search(r"render failed at line \d+", case.na), case.na
    with pytest.raises(Exception, match=r"line|attribute|undefined"):
        _transformers_render(path.read_text(encoding="utf-8"), TOOLS)
