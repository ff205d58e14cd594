"""Every byte accounted for (issue 34 §3): a word inserted anywhere in a model's output
ends in exactly one place of the message, whole and streamed.

For every template (the project's own in tests/templates, and the corpus in
../shared/templates when present; a skip with the reason when absent), the outputs the
template itself writes for a turn with calls, and a plain answer, with garbage around them
(marker punctuation), get a needle (a word of
letters no marker holds) inserted at any position: inside a marker, a tool name, an
argument's name or value, the JSON punctuation, reasoning or content. The text may then be
cut anywhere after the needle (the output stopped there). Whatever that breaks, the needle
is never lost and never doubled: it is found exactly once across content, reasoning, each
call's id, name and arguments, the cut call's tail (``truncated_call``), and the text a
``dropped`` finding keeps (a token the model wrote around its calls, left out of every field
as markup, e.g. ``<|python_tag|>``: one the needle lands in is such a token); or, inside a
returned call's own syntax (what the tree labels ``tool``: markers and members around the
name and arguments, such as a JSON call object's extra members or harmony's header after
the channel), it is consumed with that syntax, as the format's markers are. A call it breaks
becomes content (with an ``invalid_arguments`` finding), an argument name it changes is an
undeclared argument (kept, with a finding), a value it lands in holds it. Streaming the text
in random splits gives the same message, findings included.

Few examples per template, derandomized: the suite stays within CI's budget.
"""

from __future__ import annotations

import os
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers.generate_cases import TOOLS
from helpers.paths import corpus_templates, own_templates
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import ChatMessage, ChatParams, ChatTemplate
from autoparser.errors import AutoparserError
from autoparser.params import build_params

PROPS = settings(
    max_examples=6,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NEEDLE = "Qzxjv"  # letters only: valid inside names and values, no marker holds it
USER = [{"role": "user", "content": "Hi"}]
CALLS = [
    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
    {
        "type": "function",
        "function": {"name": "search", "arguments": {"query": "a <b> </c>", "limit": 3}},
    },
]


def _paths() -> list[Any]:
    own = [pytest.param(p, id=f"own-{p.stem}") for p in own_templates()]
    corpus = [pytest.param(p, id=p.stem) for p in corpus_templates()]
    if not corpus:
        reason = "template corpus not found: set AUTOPARSER_TEMPLATES or ../shared/templates"
        corpus = [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    return own + corpus


@cache
def _case(path: Path) -> tuple[ChatParams, tuple[str, ...]] | None:
    """The request's params and the outputs the template writes (render minus prompt, cut
    at the end of turn), or None for a template that cannot be used with tools."""
    try:
        tpl = ChatTemplate(path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>")
        analysis = tpl.analyze()
        prompt = tpl.render(USER, tools=TOOLS, add_generation_prompt=True)
    except AutoparserError:
        return None
    params = build_params(analysis, prompt=prompt, tools=TOOLS, call_id_seed=5)
    ends = [m.strip() for m in analysis.end_of_turn if m.strip()]
    outputs = ["The answer is 42."]
    for calls in (CALLS[:1], CALLS):
        message = {"role": "assistant", "content": "Sure.", "tool_calls": calls}
        try:
            full = tpl.render([*USER, message], tools=TOOLS, add_generation_prompt=False)
        except AutoparserError:
            continue
        text = full[len(os.path.commonprefix([full, prompt])) :]  # noqa: RUF071 (a string prefix)
        cuts = [text.find(m) for m in ends if m in text]
        text = text[: min(cuts)] if cuts else text
        if text and NEEDLE not in text:
            outputs.append(text)
    return params, tuple(outputs)


def _places(message: ChatMessage) -> list[str]:
    """Every field of the message a character of the output may end in, and the text of
    markup dropped with a finding that keeps it (a ``wrapper_token``: a special token the
    model wrote around its calls)."""
    fields = [message.content, message.reasoning_content, message.truncated_call]
    for call in message.tool_calls:
        fields += [call.id, call.name, call.arguments]
    fields += [f.detail for f in message.findings if f.outcome == "dropped"]
    return [f for f in fields if f]


def _in_call_syntax(params: ChatParams, text: str, at: int) -> bool:
    """Whether ``text[at : at + len(NEEDLE)]`` lies in a returned call's own syntax (what
    the parse tree labels ``tool``: the markers and members around its name and arguments,
    a harmony header's content type, a JSON call object's ``"type": "function"``), which
    the format consumes as it turns the text into the call."""
    end = at + len(NEEDLE)
    return any(
        s.kind == "tool" and s.start <= at and end <= s.end for s in params.labelled_spans(text)
    )


def _check_stream(params: ChatParams, text: str, whole: ChatMessage, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 8))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        stream = params.stream()
        for piece in pieces:
            stream.feed(piece)
        stream.finish()
        assert stream.message == whole, pieces


@pytest.mark.parametrize("path", _paths())
@PROPS
@given(data=st.data())
def test_an_inserted_word_ends_in_exactly_one_place(path: Path, data: st.DataObject) -> None:
    case = _case(path)
    if case is None:
        pytest.skip("the template cannot render a request with tools")
    params, outputs = case
    base = data.draw(st.sampled_from(outputs), label="output")
    # Garbage around it: marker punctuation and words, never the needle's letters.
    noise = st.text(alphabet="ab <>/{}[]\"'|=:\n", max_size=12)
    base = data.draw(noise, label="before") + base + data.draw(noise, label="after")
    at = data.draw(st.integers(0, len(base)), label="at")
    text = base[:at] + NEEDLE + base[at:]
    end = data.draw(st.integers(at + len(NEEDLE), len(text)), label="cut")
    text = text[:end]
    whole = params.parse(text)
    found = sum(place.count(NEEDLE) for place in _places(whole))
    consumed = found == 0 and bool(whole.tool_calls) and _in_call_syntax(params, text, at)
    assert found == 1 or consumed, (text, whole)
    _check_stream(params, text, whole, seed=at * 31 + end)
