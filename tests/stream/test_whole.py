"""The message of a whole output, read once from its final tree, is the stream's own."""

from __future__ import annotations

import pytest
from helpers.formats import TOOLS, USER, model_output, own_template, scenarios

from autoparser.errors import TemplateError
from autoparser.params import ChatParams

TEMPLATES = [
    "formats/chatml_hermes.jinja",
    "formats/qwen3coder_like.jinja",
    "formats/pythonic_like.jinja",
    "formats/llama_like.jinja",
    "reasoning/think_tag.jinja",
]


def _whole_and_streamed(params: ChatParams, text: str) -> tuple[object, object]:
    stream = params.stream()
    for k in range(0, len(text), 3):
        stream.feed(text[k : k + 3])
    stream.finish()
    return params.parse(text), stream.message


@pytest.mark.parametrize("name", TEMPLATES)
def test_parse_equals_the_final_message_of_a_stream(name: str) -> None:
    template = own_template(name)
    params = template.apply(USER, tools=TOOLS)
    ends = template.analyze().end_of_turn
    checked = 0
    for scenario, message in scenarios("x").items():
        try:
            text = model_output(template, message, TOOLS, ends)
        except (AssertionError, TemplateError):  # a scenario the template does not render
            continue
        whole, streamed = _whole_and_streamed(params, text)
        assert whole == streamed, scenario
        # and at cuts of it: the output so far reads as a stream fed that much has it
        for cut in range(1, len(text), max(1, len(text) // 7)):
            stream = params.stream()
            stream.feed(text[:cut])
            assert params.parse(text[:cut], partial=True) == stream.message, (scenario, cut)
        checked += 1
    assert checked >= 3
